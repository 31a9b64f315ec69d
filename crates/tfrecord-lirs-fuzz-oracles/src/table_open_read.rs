//! An offset table and a data file, either arbitrary bytes or a valid padded/plain file
//! with damage, through `Reader::open` + `read` of every id and through `inspect`.
//!
//! Oracles: nothing panics; every error names the data or table file; an `Ok` read
//! returns exactly the CRC-valid, non-filler record that starts at the instance's
//! offset; and when `inspect` accepts the pair, the reader must open it and read every
//! instance (the full check never passes something the reader rejects); `read_batch`
//! succeeds exactly when every single read of its ids does, with the same payloads.

use crate::common;
use arbitrary::Arbitrary;
use tfrecord_lirs::format;
use tfrecord_lirs::{
    encode_table, inspect_with, parse_table, Backend, Batch, PageSize, Reader, ReaderOptions,
};

#[derive(Arbitrary, Debug)]
pub enum Piece {
    Instance { len: u16, fill: u8 },
    Filler { len: u16 },
    Garbage(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
pub enum Data {
    Raw(Vec<u8>),
    Built {
        pieces: Vec<Piece>,
        flips: Vec<(u16, u8)>,
        truncate: Option<u16>,
    },
}

#[derive(Arbitrary, Debug)]
pub enum Table {
    Raw(Vec<u8>),
    /// The offsets of the built file's instances, then edited.
    Derived {
        drop: Option<u8>,
        moves: Vec<(u8, i16)>,
        extra: Option<u64>,
        cut_bytes: u8,
    },
}

#[derive(Arbitrary, Debug)]
pub struct Input {
    pub data: Data,
    pub table: Table,
    pub mmap: bool,
    pub page_shift: u8,
    pub verify_payload_crc: bool,
    /// Read with the table trusted (other tools' padding between instances).
    pub trust_table: bool,
    /// Ids for `read_batch` (taken modulo the instance count + 1, so some are out of range).
    pub batch: Vec<u16>,
}

fn build(pieces: &[Piece], out: &mut Vec<u8>, offsets: &mut Vec<u64>) {
    for piece in pieces {
        match piece {
            Piece::Instance { len, fill } => {
                let len = usize::from(*len % 2048);
                let mut payload = vec![*fill | 1; len];
                if let Some(b) = payload.first_mut() {
                    *b = 1 + (offsets.len() % 200) as u8;
                }
                offsets.push(out.len() as u64);
                format::encode_record(&payload, out);
            }
            Piece::Filler { len } => {
                format::encode_filler(format::MIN_FILLER_LEN + u64::from(*len % 4096), out)
            }
            Piece::Garbage(bytes) => out.extend_from_slice(bytes),
        }
    }
}

/// The oracles above, for one input.
pub fn check(input: &Input) {
    let mut data = Vec::new();
    let mut offsets = Vec::new();
    match &input.data {
        Data::Raw(bytes) => data.extend_from_slice(bytes),
        Data::Built {
            pieces,
            flips,
            truncate,
        } => {
            build(pieces, &mut data, &mut offsets);
            for &(at, xor) in flips {
                if !data.is_empty() {
                    let i = usize::from(at) % data.len();
                    data[i] ^= xor;
                }
            }
            if let Some(t) = truncate {
                data.truncate(usize::from(*t));
            }
        }
    }
    let table = match &input.table {
        Table::Raw(bytes) => bytes.clone(),
        Table::Derived {
            drop,
            moves,
            extra,
            cut_bytes,
        } => {
            if let Some(d) = drop {
                if !offsets.is_empty() {
                    offsets.remove(usize::from(*d) % offsets.len());
                }
            }
            for &(i, delta) in moves {
                if !offsets.is_empty() {
                    let i = usize::from(i) % offsets.len();
                    offsets[i] = offsets[i].wrapping_add_signed(i64::from(delta));
                }
            }
            offsets.extend(extra);
            let mut t = encode_table(&offsets);
            t.truncate(t.len().saturating_sub(usize::from(*cut_bytes % 9)));
            t
        }
    };

    let data_path = common::scratch_file("d.tfrecord");
    let table_path = common::scratch_file("d.tfrecord.offsets");
    std::fs::write(&data_path, &data).unwrap();
    std::fs::write(&table_path, &table).unwrap();

    let page = common::page_size(input.page_shift);
    assert!(PageSize::new(page).is_some());
    let options = ReaderOptions {
        page_size: page,
        verify_payload_crc: input.verify_payload_crc,
        backend: if input.mmap {
            Backend::Mmap
        } else {
            Backend::Pread
        },
        trust_table: input.trust_table,
        // SAFETY: the target's own scratch files, written above and unchanged while mapped.
        mmap_opt_in: Some(unsafe { tfrecord_lirs::MmapOptIn::new() }),
        ..Default::default()
    };

    // The full check.
    let parsed = parse_table(&table_path, &table);
    let verdict = match &parsed {
        Ok(t) => match inspect_with(
            &data_path,
            Some((&table_path, t)),
            None,
            options.padding(),
            |_| {},
        ) {
            Ok(found) => Some(found),
            Err(e) => {
                common::assert_names(&e, &data_path);
                None
            }
        },
        Err(e) => {
            common::assert_names(e, &table_path);
            None
        }
    };

    // Random access, with small tables held in memory and checked whole at open (the
    // default), then with every table mapped and its entries checked as they are read.
    let default = tfrecord_lirs::local::table_in_memory_max_bytes();
    for in_memory_max in [default, 0] {
        tfrecord_lirs::local::set_table_in_memory_max_bytes(in_memory_max);
        read_all_ways(
            input,
            &options,
            (&data_path, &table_path),
            (&data, &table),
            &parsed,
            &verdict,
        );
    }
    tfrecord_lirs::local::set_table_in_memory_max_bytes(default);
}

/// The random-access oracles of [`check`] for one way of holding tables: single reads
/// are right or fail naming the file, batches agree with single reads.
fn read_all_ways(
    input: &Input,
    options: &ReaderOptions,
    (data_path, table_path): (&std::path::Path, &std::path::Path),
    (data, table): (&[u8], &[u8]),
    parsed: &tfrecord_lirs::Result<Vec<u64>>,
    verdict: &Option<tfrecord_lirs::Inspection>,
) {
    let reader = match Reader::open_one(data_path, Some(table_path), options) {
        Ok(r) => r,
        Err(e) => {
            common::assert_names(&e, data_path);
            assert!(
                verdict.is_none(),
                "inspect accepts what Reader::open rejects: {e}"
            );
            return;
        }
    };
    // A large table is not checked whole at open (its entries are checked as they are
    // read): one that does not parse may open, but then some read must fail, and every
    // read that succeeds must be right by the table's raw entries.
    let t: Vec<u64> = match parsed {
        Ok(t) => t.clone(),
        Err(_) => {
            assert!(
                table.len() as u64 > tfrecord_lirs::local::table_in_memory_max_bytes(),
                "the reader opened a small table that does not parse"
            );
            assert!(table.len() % 8 == 0, "the reader opened a partial entry");
            table
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .collect()
        }
    };
    assert_eq!(reader.len(), t.len() as u64);
    let mut any_failed = false;
    for id in 0..reader.len() {
        let read = reader.read(id);
        any_failed |= read.is_err();
        match read {
            Ok(payload) => {
                let off = t[id as usize];
                let rest = &data[off as usize..];
                let frame = format::decode_record(rest, input.verify_payload_crc)
                    .expect("Ok read of a record that does not decode");
                assert_eq!(frame.payload, payload.as_slice(), "wrong payload for {id}");
                assert!(
                    !format::is_filler(&payload),
                    "a filler was returned as instance {id}"
                );
                let end = t.get(id as usize + 1).copied().unwrap_or(data.len() as u64);
                assert!(
                    off + frame.framed_len <= end,
                    "record of {id} overruns its span"
                );
            }
            Err(e) => {
                common::assert_names(&e, data_path);
                assert!(
                    verdict.is_none(),
                    "inspect accepts what read({id}) rejects: {e}"
                );
            }
        }
    }
    assert!(
        parsed.is_ok() || any_failed,
        "every instance of a table that does not parse was read"
    );
    // Batched reads agree with single reads.
    let ids: Vec<u64> = input
        .batch
        .iter()
        .map(|&i| u64::from(i) % (reader.len() + 1))
        .collect();
    let singles: Vec<_> = ids.iter().map(|&id| reader.read(id)).collect();
    let mut batch = Batch::default();
    match reader.read_batch(&ids, &mut batch) {
        Ok(()) => {
            assert_eq!(batch.len(), ids.len());
            assert_eq!(batch.ids, ids);
            for (pos, single) in singles.iter().enumerate() {
                let single = single
                    .as_ref()
                    .expect("read_batch Ok but a single read fails");
                assert_eq!(
                    batch.payload(pos),
                    single.as_slice(),
                    "batch position {pos}"
                );
            }
        }
        Err(e) => {
            common::assert_names(&e, data_path);
            assert!(
                singles.iter().any(|r| r.is_err()),
                "read_batch fails where every single read succeeds: {e}"
            );
        }
    }
    if let Some(found) = verdict {
        assert_eq!(found.instances, reader.len());
    }
}
