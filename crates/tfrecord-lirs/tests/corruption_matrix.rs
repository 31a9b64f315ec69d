//! The corruption matrix: damaged inputs generated systematically per category, for a
//! plain (TensorFlow-framed) file and for a padded file. Every case must end in an error
//! (from `Reader::open`, `Reader::read` of every id, the memory-mapped `read_batch` of
//! every id, or `inspect` with the table) whose
//! message names the file and a byte offset; nothing may panic, and an `Ok` read must
//! return the original payload of that id.
//!
//! `cargo test -p tfrecord-lirs --test corruption_matrix -- --nocapture` prints
//! "category: tried N, caught cleanly M" per category.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use common::payload;
use tfrecord_lirs::format::{self, HEADER_LEN};
use tfrecord_lirs::{
    encode_table, inspect, parse_table, Backend, Batch, Fit, PadOptions, PaddedWriter, Reader,
    ReaderOptions,
};

/// One good file: its bytes, its table, and the payload of every id.
struct Base {
    name: &'static str,
    data: Vec<u8>,
    offsets: Vec<u64>,
    payloads: Vec<Vec<u8>>,
}

fn sizes() -> Vec<usize> {
    // Small and large (for the 512-byte pages of the padded file), and empty.
    [
        40, 0, 120, 7, 300, 900, 33, 64, 470, 1, 200, 1500, 90, 5, 260,
    ]
    .to_vec()
}

fn plain_base() -> Base {
    let payloads: Vec<Vec<u8>> = sizes()
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    let mut data = Vec::new();
    let mut offsets = Vec::new();
    for p in &payloads {
        offsets.push(data.len() as u64);
        format::encode_record(p, &mut data);
    }
    Base {
        name: "plain",
        data,
        offsets,
        payloads,
    }
}

fn padded_base(dir: &Path) -> Base {
    let payloads: Vec<Vec<u8>> = sizes()
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    let path = dir.join("padded-base.tfrecord");
    let mut w = PaddedWriter::create(
        &path,
        &PadOptions {
            page_size: 512,
            fit: Fit::Next,
            sync: false,
        },
    )
    .unwrap();
    for p in &payloads {
        w.write(p).unwrap();
    }
    let summary = w.finish().unwrap();
    assert!(
        summary.filler_bytes > 0,
        "the padded base must hold fillers"
    );
    let offsets = tfrecord_lirs::read_table(&tfrecord_lirs::default_table_path(&path)).unwrap();
    Base {
        name: "padded",
        data: std::fs::read(&path).unwrap(),
        offsets,
        payloads,
    }
}

/// How one damaged case ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// At least one error, every error names the file and a byte offset.
    Caught,
    /// No stage reported anything.
    Missed,
    /// An error that does not name the file or a byte offset.
    Unclear(String),
    /// An `Ok` read returned something other than that id's original payload.
    WrongPayload(u64),
    /// Something panicked.
    Panicked(String),
}

fn names_file_and_offset(msg: &str) -> bool {
    let names_file = msg.contains("d.tfrecord");
    let names_offset = msg.match_indices("byte ").any(|(i, m)| {
        msg[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    });
    names_file && names_offset
}

/// Writes the case, runs every stage, classifies the result.
fn run_case(dir: &Path, data: &[u8], table: &[u8], original: &[Vec<u8>]) -> Outcome {
    let data_path = dir.join("d.tfrecord");
    let table_path = dir.join("d.tfrecord.offsets");
    std::fs::write(&data_path, data).unwrap();
    std::fs::write(&table_path, table).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut errors = Vec::new();
        match Reader::open_one(&data_path, Some(&table_path), &ReaderOptions::default()) {
            Err(e) => errors.push(e.to_string()),
            Ok(reader) => {
                for id in 0..reader.len() {
                    match reader.read(id) {
                        Err(e) => errors.push(e.to_string()),
                        Ok(p) => {
                            if original.get(id as usize) != Some(&p) {
                                return Err(Outcome::WrongPayload(id));
                            }
                        }
                    }
                }
            }
        }
        // The memory-mapped batch path decodes in place: it must agree, id by id.
        let mapped = ReaderOptions {
            backend: Backend::Mmap,
            ..ReaderOptions::default()
        };
        match Reader::open_one(&data_path, Some(&table_path), &mapped) {
            Err(e) => errors.push(e.to_string()),
            Ok(reader) => {
                let mut batch = Batch::default();
                for id in 0..reader.len() {
                    match reader.read_batch(&[id], &mut batch) {
                        Err(e) => errors.push(e.to_string()),
                        Ok(()) => {
                            if original.get(id as usize).map(Vec::as_slice)
                                != Some(batch.payload(0))
                            {
                                return Err(Outcome::WrongPayload(id));
                            }
                        }
                    }
                }
            }
        }
        match parse_table(&table_path, table) {
            Err(e) => errors.push(e.to_string()),
            Ok(offsets) => {
                if let Err(e) = inspect(&data_path, Some((&table_path, &offsets)), None) {
                    errors.push(e.to_string());
                }
            }
        }
        Ok(errors)
    }));
    match result {
        Err(panic) => Outcome::Panicked(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
        Ok(Err(outcome)) => outcome,
        Ok(Ok(errors)) if errors.is_empty() => Outcome::Missed,
        Ok(Ok(errors)) => match errors.into_iter().find(|m| !names_file_and_offset(m)) {
            Some(unclear) => Outcome::Unclear(unclear),
            None => Outcome::Caught,
        },
    }
}

/// Tallies per category; keeps the first few failures for the report.
#[derive(Default)]
struct Matrix {
    rows: BTreeMap<String, (usize, usize)>,
    failures: Vec<String>,
}

impl Matrix {
    fn case(&mut self, dir: &Path, category: &str, data: &[u8], table: &[u8], base: &Base) {
        let outcome = run_case(dir, data, table, &base.payloads);
        let key = format!("{}: {category}", base.name);
        let row = self.rows.entry(key.clone()).or_default();
        row.0 += 1;
        if outcome == Outcome::Caught {
            row.1 += 1;
        } else if self.failures.len() < 20 {
            self.failures.push(format!("{key}: {outcome:?}"));
        }
    }
}

/// Byte ranges of the four framing fields of the record at `offset` with `len` payload bytes.
fn fields(offset: u64, len: usize) -> [(&'static str, std::ops::Range<usize>); 4] {
    let o = offset as usize;
    [
        ("flip length", o..o + 8),
        ("flip length CRC", o + 8..o + HEADER_LEN),
        ("flip payload", o + HEADER_LEN..o + HEADER_LEN + len),
        (
            "flip payload CRC",
            o + HEADER_LEN + len..o + HEADER_LEN + len + 4,
        ),
    ]
}

fn damage(m: &mut Matrix, dir: &Path, base: &Base, other_table: &[u8]) {
    let good_table = encode_table(&base.offsets);
    let n = base.offsets.len();

    // Framing fields of several records: first, a middle one, an empty one, the last.
    for id in [0usize, 1, 6, n - 2, n - 1] {
        let len = base.payloads[id].len();
        for (category, range) in fields(base.offsets[id], len) {
            // Every byte of small payloads; a sample of long ones.
            let step = if range.len() > 64 {
                range.len() / 16
            } else {
                1
            };
            for at in range.step_by(step) {
                for xor in [0x01u8, 0x80, 0xff] {
                    let mut data = base.data.clone();
                    data[at] ^= xor;
                    m.case(dir, category, &data, &good_table, base);
                }
            }
        }
    }
    // A filler's bytes (padded file only): a stock reader would choke on it.
    let mut pos = 0usize;
    let mut fillers = 0;
    while pos < base.data.len() && fillers < 3 {
        let frame = format::decode_record(&base.data[pos..], true).unwrap();
        let framed = frame.framed_len as usize;
        if format::is_filler(frame.payload) {
            fillers += 1;
            for at in (pos..pos + framed).step_by(3) {
                let mut data = base.data.clone();
                data[at] ^= 0x10;
                m.case(dir, "flip filler byte", &data, &good_table, base);
            }
        }
        pos += framed;
    }

    // Truncation: every byte position within the last two records, and many others.
    let end = base.data.len();
    let last_two = base.offsets[n - 2] as usize;
    for cut in last_two..end {
        m.case(
            dir,
            "truncate in last two records",
            &base.data[..cut],
            &good_table,
            base,
        );
    }
    for cut in (0..last_two).step_by(7) {
        m.case(
            dir,
            "truncate elsewhere",
            &base.data[..cut],
            &good_table,
            base,
        );
    }

    // Damaged tables.
    for keep in 0..n {
        if keep == 0 {
            continue; // empty table: its own category below
        }
        let table = encode_table(&base.offsets[..keep]);
        m.case(dir, "table shortened", &base.data, &table, base);
    }
    for drop in 1..n {
        // Entries missing at the front: every id would silently shift.
        let table = encode_table(&base.offsets[drop..]);
        m.case(dir, "table first entries dropped", &base.data, &table, base);
    }
    for cut in 1..8 {
        let table = &good_table[..good_table.len() - cut];
        m.case(dir, "table partial last entry", &base.data, table, base);
    }
    for beyond in [0u64, 1, 100, u64::MAX / 2] {
        let mut offsets = base.offsets.clone();
        offsets.push(end as u64 + beyond);
        m.case(
            dir,
            "table extended past file",
            &base.data,
            &encode_table(&offsets),
            base,
        );
    }
    for i in 0..n - 1 {
        let mut offsets = base.offsets.clone();
        offsets.swap(i, i + 1);
        m.case(
            dir,
            "table entries swapped",
            &base.data,
            &encode_table(&offsets),
            base,
        );
    }
    for i in 0..n {
        for delta in (-7i64..=7).filter(|&d| d != 0) {
            let mut offsets = base.offsets.clone();
            offsets[i] = offsets[i].wrapping_add_signed(delta);
            m.case(
                dir,
                "table offset moved ±1..7",
                &base.data,
                &encode_table(&offsets),
                base,
            );
        }
    }
    m.case(dir, "table of another file", &base.data, other_table, base);
    m.case(dir, "empty table, non-empty file", &base.data, &[], base);

    // Whole-file damage.
    m.case(dir, "empty data file", &[], &good_table, base);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for len in [1usize, 11, 12, 13, 100, base.data.len()] {
        let garbage: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        m.case(dir, "random garbage data", &garbage, &good_table, base);
        m.case(
            dir,
            "random garbage data",
            &garbage,
            &encode_table(&[0]),
            base,
        );
    }
    let gzip = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    let zlib = [0x78, 0x9c];
    for (category, head) in [("gzip header", &gzip[..]), ("zlib header", &zlib[..])] {
        let mut data = head.to_vec();
        data.extend_from_slice(&base.data[..base.data.len() / 2]);
        m.case(dir, category, &data, &good_table, base);
        m.case(dir, category, &data, &encode_table(&[0]), base);
    }
}

#[test]
fn corruption_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let plain = plain_base();
    let padded = padded_base(dir.path());
    let mut m = Matrix::default();
    let plain_table = encode_table(&plain.offsets);
    let padded_table = encode_table(&padded.offsets);
    damage(&mut m, dir.path(), &plain, &padded_table);
    damage(&mut m, dir.path(), &padded, &plain_table);

    println!("corruption matrix (category: tried N, caught cleanly M)");
    for (category, (tried, caught)) in &m.rows {
        println!("  {category}: tried {tried}, caught cleanly {caught}");
    }
    let (tried, caught) = m
        .rows
        .values()
        .fold((0, 0), |(t, c), (rt, rc)| (t + rt, c + rc));
    println!("  total: tried {tried}, caught cleanly {caught}");
    assert!(
        m.failures.is_empty(),
        "cases not caught cleanly:\n{}",
        m.failures.join("\n")
    );
}
