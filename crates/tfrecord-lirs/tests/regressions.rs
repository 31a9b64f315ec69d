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
