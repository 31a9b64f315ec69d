//! The corruption matrix: damaged inputs generated systematically per category, for a
//! plain file written by stock TensorFlow (testdata/mixed.tfrecord) and for a padded
//! file. Every case must end in an error whose message names the file and a byte
//! offset; nothing may panic.
//!
//! The reader path is judged on its own: when `Reader::open` succeeds and every read
//! succeeds (pread `read` and the memory-mapped `read_batch`), the reader must hold
//! exactly the original instances with exactly their payloads; anything less (a shorter
//! reader, a wrong payload) is a silent skip and fails the test even when `inspect`
//! would have caught the damage. A failed read must name the instance that was read.
//!
//! `cargo test -p tfrecord-lirs --test corruption_matrix -- --nocapture` prints
//! "category: tried N, caught cleanly M" per category, so a
//! change in what is caught shows as a changed count, not only as a pass or a fail.

mod common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use common::{manifest, manifest_payloads, payload, testdata};
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

/// testdata/mixed.tfrecord, written by tf.io.TFRecordWriter; its offsets and payloads
/// come from testdata/manifest.json (the payload rule regenerates every byte).
fn plain_base() -> Base {
    let entry = manifest()
        .into_iter()
        .find(|e| e["filename"] == "mixed.tfrecord")
        .expect("mixed.tfrecord in the manifest");
    let payloads = manifest_payloads(&entry);
    let offsets: Vec<u64> = entry["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_u64().unwrap())
        .collect();
    let data = std::fs::read(testdata().join("mixed.tfrecord")).unwrap();
    assert_eq!(data.len() as u64, entry["file_size"].as_u64().unwrap());
    assert_eq!(offsets.len(), payloads.len());
    Base {
        name: "plain (TF-written)",
        data,
        offsets,
        payloads,
    }
}

fn padded_base(dir: &Path) -> Base {
    // Small and large (for the 512-byte pages of the padded file), and empty.
    let sizes = [
        40usize, 0, 120, 7, 300, 900, 33, 64, 470, 1, 200, 1500, 90, 5, 260,
    ];
    let payloads: Vec<Vec<u8>> = sizes
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
            ..Default::default()
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
    /// At least one error, every error names the file and a byte offset, and every
    /// reader that read everything read exactly the original.
    Caught,
    /// No stage reported anything.
    Missed,
    /// A reader opened and read every id without error but does not hold exactly the
    /// original instances: a silent skip.
    ReaderMissed(String),
    /// An error that does not name the file, the instance read, or a byte offset.
    Unclear(String),
    /// An `Ok` read returned something other than that id's original payload.
    WrongPayload(String),
    /// Something panicked.
    Panicked(String),
}

/// Whether `msg` names `path` itself, not only as the prefix of a longer name (the data
/// file `d.tfrecord` is a prefix of its table `d.tfrecord.offsets`).
fn names_path(msg: &str, path: &Path) -> bool {
    let p = path.display().to_string();
    msg.match_indices(&p).any(|(i, _)| {
        !msg[i + p.len()..]
            .chars()
            .next()
            .is_some_and(|c| c == '.' || c.is_alphanumeric() || c == '_' || c == '-')
    })
}

fn names_offset(msg: &str) -> bool {
    msg.match_indices("byte ").any(|(i, m)| {
        msg[i + m.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// Whether `msg` names `instance {id}` (and not e.g. `instance {id}0`).
fn names_instance(msg: &str, id: u64) -> bool {
    let needle = format!("instance {id}");
    msg.match_indices(&needle).any(|(i, _)| {
        !msg[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// The files of one case, and which of them an error may name.
struct Case<'a> {
    data_path: &'a Path,
    table_path: &'a Path,
    /// Only the table is damaged: an error about the table's own bytes (not a multiple
    /// of 8, not increasing) may name just the table.
    table_damage: bool,
}

impl Case<'_> {
    /// `None` when `msg` is clear; otherwise why not.
    fn unclear(&self, msg: &str, instance: Option<u64>) -> Option<String> {
        let file = names_path(msg, self.data_path)
            || (self.table_damage && names_path(msg, self.table_path));
        if !file {
            return Some(format!("file not named: {msg}"));
        }
        if !names_offset(msg) {
            return Some(format!("no `byte N`: {msg}"));
        }
        if let Some(id) = instance {
            if !names_instance(msg, id) {
                return Some(format!("read of instance {id} does not name it: {msg}"));
            }
        }
        None
    }
}

/// Opens a reader with `options` and reads every id with `read`; errors go to
/// `errors`. When everything reads, the reader must hold exactly `original`.
fn reader_path(
    case: &Case,
    options: &ReaderOptions,
    original: &[Vec<u8>],
    label: &str,
    mut read: impl FnMut(&Reader, u64) -> tfrecord_lirs::Result<Vec<u8>>,
    errors: &mut Vec<(String, Option<u64>)>,
) -> Result<(), Outcome> {
    let reader = match Reader::open_one(case.data_path, Some(case.table_path), options) {
        Err(e) => {
            errors.push((e.to_string(), None));
            return Ok(());
        }
        Ok(reader) => reader,
    };
    let same_ids = reader.len() == original.len() as u64;
    let mut failed = false;
    for id in 0..reader.len() {
        match read(&reader, id) {
            Err(e) => {
                failed = true;
                errors.push((e.to_string(), Some(id)));
            }
            // With as many entries as records, id `i` must be record `i`. A table with
            // entries dropped shifts the ids after the gap (the reader cannot know), but
            // whatever it returns must still be one of the file's records.
            Ok(p) if same_ids && original[id as usize] != p => {
                return Err(Outcome::WrongPayload(format!("{label}: id {id}")));
            }
            Ok(p) if !original.contains(&p) => {
                return Err(Outcome::WrongPayload(format!(
                    "{label}: id {id} is no record of the file"
                )));
            }
            Ok(_) => {}
        }
    }
    if !failed && !same_ids {
        return Err(Outcome::ReaderMissed(format!(
            "{label}: opened and read {} instances without error, the file holds {}",
            reader.len(),
            original.len()
        )));
    }
    Ok(())
}

/// Writes the case, runs every stage, classifies the result.
fn run_case(
    dir: &Path,
    table_damage: bool,
    data: &[u8],
    table: &[u8],
    original: &[Vec<u8>],
) -> Outcome {
    let data_path = dir.join("d.tfrecord");
    let table_path = dir.join("d.tfrecord.offsets");
    std::fs::write(&data_path, data).unwrap();
    std::fs::write(&table_path, table).unwrap();
    let case = Case {
        data_path: &data_path,
        table_path: &table_path,
        table_damage,
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut errors = Vec::new();
        reader_path(
            &case,
            &ReaderOptions::default(),
            original,
            "pread read",
            |r, id| r.read(id),
            &mut errors,
        )?;
        // The memory-mapped batch path decodes in place: it must agree, id by id.
        let mapped = ReaderOptions {
            backend: Backend::Mmap,
            mmap_opt_in: common::mmap_opt_in(),
            ..ReaderOptions::default()
        };
        let mut batch = Batch::default();
        reader_path(
            &case,
            &mapped,
            original,
            "mmap read_batch",
            |r, id| {
                r.read_batch(&[id], &mut batch)?;
                Ok(batch.payload(0).to_vec())
            },
            &mut errors,
        )?;
        match parse_table(&table_path, table) {
            Err(e) => errors.push((e.to_string(), None)),
            Ok(offsets) => {
                if let Err(e) = inspect(&data_path, Some((&table_path, &offsets)), None) {
                    errors.push((e.to_string(), None));
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
        Ok(Ok(errors)) => match errors.iter().find_map(|(msg, id)| case.unclear(msg, *id)) {
            Some(why) => Outcome::Unclear(why),
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
    /// Runs one case. Categories starting with "table" damage only the table.
    fn case(&mut self, dir: &Path, category: &str, data: &[u8], table: &[u8], base: &Base) {
        let table_damage = category.starts_with("table");
        let outcome = run_case(dir, table_damage, data, table, &base.payloads);
        let key = format!("{}: {category}", base.name);
        let row = self.rows.entry(key.clone()).or_default();
        row.0 += 1;
        if outcome == Outcome::Caught {
            row.1 += 1;
        } else if self.failures.len() < 30 {
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

/// Ids worth damaging: the ends, the middle, the shortest and a long payload.
fn sample_ids(base: &Base) -> Vec<usize> {
    let n = base.offsets.len();
    let mut ids = vec![0, 1, n / 2, n - 2, n - 1];
    // The shortest payload (empty in the padded base), and one long one.
    ids.extend((0..n).min_by_key(|&i| base.payloads[i].len()));
    ids.extend((0..n).filter(|&i| base.payloads[i].len() > 4096).take(1));
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn damage(m: &mut Matrix, dir: &Path, base: &Base, other_tables: &[Vec<u8>]) {
    let good_table = encode_table(&base.offsets);
    let n = base.offsets.len();
    let ids = sample_ids(base);

    // Framing fields of several records.
    for &id in &ids {
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
        // A length of 2^62 with a valid length CRC: must not allocate.
        let mut data = base.data.clone();
        let o = base.offsets[id] as usize;
        data[o..o + HEADER_LEN].copy_from_slice(&format::encode_header(1 << 62));
        m.case(dir, "length 2^62, valid CRC", &data, &good_table, base);
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

    // Truncation: inside each of the last two records (every byte of their framing, a
    // sample of their payloads), and many other places.
    let end = base.data.len();
    let last_two = base.offsets[n - 2] as usize;
    for id in [n - 2, n - 1] {
        let start = base.offsets[id] as usize;
        let stop = if id + 1 < n {
            base.offsets[id + 1] as usize
        } else {
            end
        };
        let payload = start + HEADER_LEN..stop.saturating_sub(24);
        let cuts = (start..stop).filter(|c| !payload.contains(c) || (c - payload.start) % 13 == 0);
        for cut in cuts {
            m.case(
                dir,
                "truncate in last two records",
                &base.data[..cut],
                &good_table,
                base,
            );
        }
    }
    for cut in (0..last_two).step_by((last_two / 150).max(7)) {
        m.case(
            dir,
            "truncate elsewhere",
            &base.data[..cut],
            &good_table,
            base,
        );
    }

    // Tables shortened by whole entries: trailing entries, and entries in the middle.
    // The records they indexed are still in the data file, so a reader that opens and
    // reads without error has silently skipped them.
    let mut drops: Vec<usize> = vec![1, 2, 3, n / 2, n - 1];
    drops.extend((4..n - 1).step_by((n / 20).max(1)));
    drops.sort_unstable();
    drops.dedup();
    for drop in drops {
        let table = encode_table(&base.offsets[..n - drop]);
        m.case(
            dir,
            "table shortened by whole entries (trailing)",
            &base.data,
            &table,
            base,
        );
    }
    let middles: Vec<Vec<usize>> = vec![
        vec![1],
        vec![n / 2],
        vec![n - 2],
        vec![n / 3, n / 3 + 1],
        vec![2, n / 2, n - 3],
        (1..n - 1).step_by(2).collect(),
    ];
    for dropped in middles.iter().chain(
        ids.iter()
            .filter(|&&i| i > 0)
            .map(|i| vec![*i])
            .collect::<Vec<_>>()
            .iter(),
    ) {
        let offsets: Vec<u64> = (0..n)
            .filter(|i| !dropped.contains(i))
            .map(|i| base.offsets[i])
            .collect();
        m.case(
            dir,
            "table middle entries dropped",
            &base.data,
            &encode_table(&offsets),
            base,
        );
    }
    for drop in (1..n).step_by((n / 30).max(1)) {
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
    for i in (0..n - 1).step_by((n / 40).max(1)).chain([n - 2]) {
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
    let mut moved_ids: Vec<usize> = (0..n).step_by((n / 15).max(1)).collect();
    moved_ids.extend(&ids);
    moved_ids.sort_unstable();
    moved_ids.dedup();
    for i in moved_ids {
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
    for other in other_tables {
        m.case(dir, "table of another file", &base.data, other, base);
    }
    m.case(dir, "table empty, non-empty file", &base.data, &[], base);

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

/// Tables of other files: each other base's, and TF-written testdata/sizes.tfrecord's.
fn foreign_tables(dir: &Path, other: &Base) -> Vec<Vec<u8>> {
    let sizes = testdata().join("sizes.tfrecord");
    let sizes_table = dir.join("sizes.offsets");
    tfrecord_lirs::build_offset_table(&sizes, &sizes_table).unwrap();
    vec![
        encode_table(&other.offsets),
        std::fs::read(&sizes_table).unwrap(),
        encode_table(&[0]),
    ]
}

#[test]
fn corruption_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let plain = plain_base();
    let padded = padded_base(dir.path());
    let mut m = Matrix::default();
    damage(
        &mut m,
        dir.path(),
        &plain,
        &foreign_tables(dir.path(), &padded),
    );
    damage(
        &mut m,
        dir.path(),
        &padded,
        &foreign_tables(dir.path(), &plain),
    );

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
