//! Offset tables that are not loaded whole: a large table is mapped (or read on
//! demand) and its entries are checked as instances are read, not at open. A bad entry
//! must still never give a wrong payload, a panic or a silent skip: the read that uses
//! it fails with an error naming the table, the instance and the byte.

mod common;

use std::path::{Path, PathBuf};

use common::{payload, write_plain};
use tfrecord_lirs::local::TABLE_IN_MEMORY_MAX_BYTES;
use tfrecord_lirs::{
    default_table_path, encode_table, read_table, Backend, Batch, ErrorKind, Reader, ReaderOptions,
};

/// Instances of the test file: a table larger than those held in memory (and checked
/// whole) at open.
const N: usize = (TABLE_IN_MEMORY_MAX_BYTES / 8) as usize * 2 + 123;

fn payloads() -> Vec<Vec<u8>> {
    (0..N).map(|i| payload(i, 1 + i % 7)).collect()
}

fn setup() -> (tempfile::TempDir, PathBuf, Vec<u64>, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads();
    let path = write_plain(dir.path(), "d.tfrecord", &payloads);
    let table = read_table(&default_table_path(&path)).unwrap();
    (dir, path, table, payloads)
}

fn options(backend: Backend) -> ReaderOptions {
    ReaderOptions {
        backend,
        ..Default::default()
    }
}

fn write_table(path: &Path, entries: &[u64]) {
    std::fs::write(default_table_path(path), encode_table(entries)).unwrap();
}

/// The ids whose single reads fail, and the first error of each.
fn failing_reads(reader: &Reader) -> Vec<(u64, String)> {
    (0..reader.len())
        .filter_map(|id| reader.read(id).err().map(|e| (id, e.to_string())))
        .collect()
}

#[test]
fn a_large_table_reads_every_payload_through_both_batch_paths() {
    let (_dir, path, good, payloads) = setup();
    for backend in [Backend::Auto, Backend::Pread] {
        let reader = Reader::open_one(&path, None, &options(backend)).unwrap();
        assert_eq!(reader.len(), N as u64);
        for id in [0, 1, N as u64 / 2, N as u64 - 1] {
            assert_eq!(reader.read(id).unwrap(), payloads[id as usize]);
        }
        // Runs and scattered ids, repeated ids, across the whole table.
        let ids: Vec<u64> = (0..N as u64)
            .map(|i| (i * 7919) % N as u64)
            .chain([5, 5, 6, 7, 8])
            .collect();
        let mut batch = Batch::default();
        reader.read_batch(&ids, &mut batch).unwrap();
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(
                batch.payload(k),
                &payloads[id as usize][..],
                "{backend:?} {id}"
            );
        }
        let (file, at) = reader.location(N as u64 - 1).unwrap();
        assert_eq!((file, at), (path.as_path(), good[N - 1]));
    }
}

/// Swapped neighbours in the middle of a large table: the table opens (its middle is not
/// read at open), every other instance reads, and the three instances whose spans the
/// swap breaks fail, each naming the table, the instance and a byte.
#[test]
fn entries_out_of_order_are_an_error_of_the_reads_that_use_them() {
    let (_dir, path, good, payloads) = setup();
    let k = N / 2;
    let mut swapped = good.clone();
    swapped.swap(k, k + 1);
    write_table(&path, &swapped);
    for backend in [Backend::Auto, Backend::Pread] {
        let reader = Reader::open_one(&path, None, &options(backend)).unwrap();
        let failing = failing_reads(&reader);
        let ids: Vec<u64> = failing.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [k as u64 - 1, k as u64, k as u64 + 1], "{backend:?}");
        for (_, e) in &failing {
            assert!(e.contains("d.tfrecord.offsets"), "names the table: {e}");
        }
        // The entry that goes backwards: instance k+1's entry is before instance k's.
        let (_, backwards) = &failing[1];
        assert!(
            backwards.contains("strictly increase")
                && backwards.contains(&format!("instance {}", k + 1))
                && backwards.contains(&format!("byte {}", good[k])),
            "{backwards}"
        );
        // A batch holding a broken span fails (no half-filled batch, no wrong payload);
        // one without it reads.
        let mut batch = Batch::default();
        let err = reader
            .read_batch(&[3, k as u64, 4], &mut batch)
            .unwrap_err();
        // Entries out of order: a damaged table.
        assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
        assert!(err.to_string().contains("strictly increase"), "{err}");
        assert_eq!(batch.len(), 0);
        let run: Vec<u64> = (k as u64 - 30..k as u64 - 1).collect();
        reader.read_batch(&run, &mut batch).unwrap();
        for (j, &id) in run.iter().enumerate() {
            assert_eq!(batch.payload(j), &payloads[id as usize][..]);
        }
        // A run that reaches the broken spans is cut before them, and the lowest
        // failing id is the one reported.
        let run: Vec<u64> = (k as u64 - 5..k as u64 + 3).collect();
        let err = reader.read_batch(&run, &mut batch).unwrap_err();
        assert!(
            err.to_string().contains(&format!("instance {}", k - 1)),
            "{backend:?}: {err}"
        );
    }
}

/// An entry past the end of the data file in the middle of the table: the span before it
/// and its own are errors that say so, naming the entry's instance and byte.
#[test]
fn an_entry_past_the_end_of_the_file_is_an_error_of_the_reads_that_use_it() {
    let (_dir, path, good, _) = setup();
    let size = std::fs::metadata(&path).unwrap().len();
    let k = N / 3;
    let mut past = good.clone();
    past[k] = size + 100;
    write_table(&path, &past);
    let reader = Reader::open_one(&path, None, &Default::default()).unwrap();
    let failing = failing_reads(&reader);
    let ids: Vec<u64> = failing.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [k as u64 - 1, k as u64]);
    let (_, before) = &failing[0];
    assert!(
        before.contains("past the end")
            && before.contains(&format!("instance {k}"))
            && before.contains(&format!("byte {}", size + 100)),
        "{before}"
    );
    let (_, own) = &failing[1];
    assert!(own.contains("strictly increase"), "{own}");
}

/// What open still checks in O(1) of a large table: whole entries, the first entry at
/// byte 0, the last below the end of the file (the first entry past it found by
/// bisection and named), and the first and last records.
#[test]
fn a_large_table_is_still_checked_at_open_where_it_costs_nothing() {
    let (_dir, path, good, _) = setup();
    let size = std::fs::metadata(&path).unwrap().len();
    let open = || Reader::open_one(&path, None, &Default::default());
    let table_path = default_table_path(&path);

    let mut partial = encode_table(&good);
    partial.extend_from_slice(&[1, 2, 3]);
    std::fs::write(&table_path, &partial).unwrap();
    let err = open().err().expect("a partial entry");
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert!(err.to_string().contains("multiple of 8"), "{err}");

    let k = N - 500;
    let mut tail_past: Vec<u64> = good.clone();
    for (j, entry) in tail_past.iter_mut().enumerate().skip(k) {
        *entry = size + j as u64;
    }
    write_table(&path, &tail_past);
    let err = open().err().expect("entries past the end");
    assert!(
        err.to_string().contains("past the end")
            && err.to_string().contains(&format!("instance {k}"))
            && err
                .to_string()
                .contains(&format!("byte {}", size + k as u64)),
        "{err}"
    );

    let mut shifted = good.clone();
    shifted[0] = 3;
    write_table(&path, &shifted);
    let err = open().err().expect("first entry not 0");
    assert!(err.to_string().contains("must start at byte 0"), "{err}");
}

/// A table truncated while a reader has it mapped: the truncation waits for the map to
/// be revoked (no `SIGBUS`), entries still there read, and an instance whose entry is
/// gone is an error naming the table and the instance that says what happened.
#[test]
fn a_table_truncated_under_an_open_reader_is_an_error_not_a_crash() {
    let (_dir, path, _, payloads) = setup();
    let reader = Reader::open_one(&path, None, &Default::default()).unwrap();
    assert_eq!(reader.read(N as u64 - 10).unwrap(), payloads[N - 10]);
    std::fs::OpenOptions::new()
        .write(true)
        .open(default_table_path(&path))
        .unwrap()
        .set_len(8 * 1000)
        .unwrap();
    assert_eq!(reader.read(10).unwrap(), payloads[10]);
    let gone = N as u64 - 10;
    // The table cut short while it was read: changed data.
    let err = reader.read(gone).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("d.tfrecord.offsets")
            && text.contains(&format!("instance {gone}"))
            && text.contains("truncated or replaced"),
        "{text}"
    );
    let mut batch = Batch::default();
    let err = reader.read_batch(&[1, 2, gone], &mut batch).unwrap_err();
    assert!(
        err.to_string().contains(&format!("instance {gone}")),
        "{err}"
    );
}

/// `trust_table` keeps its meaning with a large table: the first instance may follow
/// padding records, and every instance reads.
#[test]
fn a_large_trusted_table_reads_after_leading_padding() {
    let dir = tempfile::tempdir().unwrap();
    let payloads = payloads();
    let mut bytes = Vec::new();
    tfrecord_lirs::format::encode_record(b"0", &mut bytes);
    let lead = bytes.len() as u64;
    let mut entries = Vec::with_capacity(N);
    for p in &payloads {
        entries.push(bytes.len() as u64);
        tfrecord_lirs::format::encode_record(p, &mut bytes);
    }
    let path = dir.path().join("t.tfrecord");
    std::fs::write(&path, bytes).unwrap();
    write_table(&path, &entries);
    assert_eq!(entries[0], lead);
    let strict = Reader::open_one(&path, None, &Default::default());
    assert!(strict.is_err(), "strict tables start at byte 0");
    let reader = Reader::open_one(
        &path,
        None,
        &ReaderOptions {
            trust_table: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(failing_reads(&reader).is_empty());
    assert_eq!(reader.read(N as u64 - 1).unwrap(), payloads[N - 1]);
}

/// With every table mapped (the bound for tables held in memory at 0, as the fuzz
/// target also runs), a small table whose entries are out of order opens and the
/// instances it gets wrong fail when read, as a large one's do; those it gets right read.
/// (Every other test of this binary uses tables over the default bound, so the bound
/// changed for the whole process changes nothing for them.)
#[test]
fn with_every_table_mapped_a_small_bad_table_fails_at_the_reads_it_gets_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| payload(i, 10 + i)).collect();
    let path = write_plain(dir.path(), "s.tfrecord", &payloads);
    let mut entries = read_table(&default_table_path(&path)).unwrap();
    entries.swap(20, 21);
    write_table(&path, &entries);
    let before = tfrecord_lirs::local::set_table_in_memory_max_bytes(0);
    let opened = Reader::open_one(&path, None, &Default::default());
    tfrecord_lirs::local::set_table_in_memory_max_bytes(before);
    let reader = opened.unwrap();
    let failing = failing_reads(&reader);
    let ids: Vec<u64> = failing.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [19, 20, 21]);
    assert!(
        failing[1].1.contains("strictly increase"),
        "{}",
        failing[1].1
    );
    assert_eq!(reader.read(22).unwrap(), payloads[22]);
    // Held in memory (the default), the same table is refused at open.
    let err = Reader::open_one(&path, None, &Default::default())
        .err()
        .expect("checked whole at open");
    assert!(err.to_string().contains("strictly increase"), "{err}");
}
