//! Regression tests for bugs found by the corruption matrix and the fuzz targets
//! (`fuzz/`). Each test names the bug it pins down.

mod common;

use common::{payload, write_plain};
use tfrecord_lirs::{default_table_path, encode_table, read_table, Reader, ReaderOptions};

/// A table missing its first entries used to open fine and silently shift every id:
/// `read(0)` returned the payload of record 1. Spans tile the file from byte 0, so the
/// reader now refuses a table that does not start at 0.
#[test]
fn table_not_starting_at_byte_0_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..5).map(|i| payload(i, 20 + i)).collect();
    let path = write_plain(dir.path(), "d.tfrecord", &payloads);
    let table_path = default_table_path(&path);
    let table = read_table(&table_path).unwrap();
    std::fs::write(&table_path, encode_table(&table[1..])).unwrap();
    let err = Reader::open_one(&path, None, &ReaderOptions::default())
        .err()
        .expect("a table that skips record 0 must not open");
    let msg = err.to_string();
    assert!(msg.contains("d.tfrecord.offsets"), "{msg}");
    assert!(msg.contains(&format!("byte {}", table[1])), "{msg}");
    assert!(msg.contains("must start at byte 0"), "{msg}");
}

/// The empty-table error named no byte offset; it now names the unindexed record's.
#[test]
fn empty_table_error_names_a_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_plain(dir.path(), "d.tfrecord", &[payload(0, 10)]);
    std::fs::write(default_table_path(&path), b"").unwrap();
    let err = Reader::open_one(&path, None, &ReaderOptions::default())
        .err()
        .unwrap();
    assert!(err.to_string().contains("at byte 0"), "{err}");
}

/// A span is bounded only by the table. With a damaged table (here: one entry for a
/// 6 GiB file), `read` used to allocate and read the whole span, 6 GiB, for a 116-byte
/// record; on a larger file that aborts the process. It now reads the record only.
#[test]
fn a_huge_span_does_not_allocate_the_span() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.tfrecord");
    let file = std::fs::File::create(&path).unwrap();
    let mut bytes = Vec::new();
    tfrecord_lirs::format::encode_record(&payload(0, 100), &mut bytes);
    file.write_all_at(&bytes, 0).unwrap();
    file.set_len(6 << 30).unwrap(); // sparse
    std::fs::write(default_table_path(&path), encode_table(&[0])).unwrap();
    for backend in [tfrecord_lirs::Backend::Pread, tfrecord_lirs::Backend::Mmap] {
        let options = ReaderOptions {
            backend,
            ..ReaderOptions::default()
        };
        let reader = Reader::open_one(&path, None, &options).unwrap();
        assert_eq!(reader.read(0).unwrap(), payload(0, 100));
        let read = reader.io_stats().bytes_read;
        assert!(
            read <= 1 << 20,
            "{backend:?}: read {read} bytes for a 116-byte record"
        );
        // The batched path (Fetcher, TensorFlow op) keeps the same bound.
        reader.reset_io_stats();
        let mut batch = tfrecord_lirs::Batch::default();
        reader.read_batch(&[0, 0], &mut batch).unwrap();
        assert_eq!(batch.payload(0), payload(0, 100).as_slice());
        assert_eq!(batch.payload(1), payload(0, 100).as_slice());
        let read = reader.io_stats().bytes_read;
        assert!(read <= 1 << 20, "{backend:?}: read_batch read {read} bytes");
    }
    // A long span whose record is longer than the first read is read up to its end.
    let big = payload(1, 3 << 20);
    let mut bytes = Vec::new();
    tfrecord_lirs::format::encode_record(&big, &mut bytes);
    file.write_all_at(&bytes, 0).unwrap();
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    assert_eq!(reader.read(0).unwrap(), big);
    assert_eq!(reader.io_stats().bytes_read, bytes.len() as u64);
    // A damaged header in a long span is still reported, at the record's offset.
    file.write_all_at(&[0xff], 3).unwrap();
    let err = reader.read(0).unwrap_err().to_string();
    assert!(
        err.contains("length CRC") && err.contains("byte 0"),
        "{err}"
    );
    drop(file);
    std::fs::remove_file(&path).unwrap();
}
