//! A file that changes under an open reader: the error says so (truncated, grown or
//! rewritten), with the bytes the file holds now, not those it held when opened; an
//! unchanged file with damaged bytes keeps the plain framing error.

mod common;

use std::time::{Duration, SystemTime};

use tfrecord_lirs::{Backend, ErrorKind, Reader, ReaderOptions};

fn pread() -> ReaderOptions {
    ReaderOptions {
        backend: Backend::Pread,
        ..Default::default()
    }
}

fn set_mtime(path: &std::path::Path, t: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn truncation_under_a_reader_reports_the_bytes_there_are_now() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..200).map(|i| common::payload(i, 5000)).collect();
    let path = common::write_plain(dir.path(), "d.tfrecord", &payloads);
    let size = std::fs::metadata(&path).unwrap().len();
    let reader = Reader::open_one(&path, None, &pread()).unwrap();
    assert_eq!(reader.read(3).unwrap(), payloads[3]);

    // Cut the file in the middle of a record: the record needs its whole framing, the
    // file has what is left from its offset, not 2 * size - offset.
    let half = size / 2 + 100;
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(half)
        .unwrap();
    let framed = 5000 + 16;
    let id = half / framed; // the record the cut falls in
    let (_, offset) = reader.location(id).unwrap();
    assert!(offset < half && half < offset + framed);
    let err = reader.read(id).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert_eq!((err.instance(), err.offset()), (Some(id), Some(offset)));
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "the file changed underneath: it was {size} bytes when opened and is {half} bytes now (truncated"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "needs {framed} bytes, only {} available",
            half - offset
        )),
        "{text}"
    );
    assert!(text.contains("rebuild its table"), "{text}");
    // Records before the cut are still read.
    assert_eq!(reader.read(0).unwrap(), payloads[0]);
}

#[test]
fn a_rewrite_at_the_same_size_is_not_called_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..50).map(|i| common::payload(i, 300)).collect();
    let path = common::write_plain(dir.path(), "d.tfrecord", &payloads);
    set_mtime(&path, SystemTime::now() - Duration::from_secs(60));
    let reader = Reader::open_one(&path, None, &pread()).unwrap();

    // The same size, other bytes (a record's payload changed in place), a new mtime.
    let mut bytes = std::fs::read(&path).unwrap();
    let (_, offset) = reader.location(7).unwrap();
    bytes[offset as usize + 20] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let err = reader.read(7).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("the file changed underneath"), "{text}");
    assert!(text.contains("(rewritten, modified since)"), "{text}");
    assert!(!text.contains("truncated"), "{text}");

    // Damage without a change of size or mtime is damage: the framing error alone.
    let reader = Reader::open_one(&path, None, &pread()).unwrap();
    let stamp = std::fs::metadata(&path).unwrap().modified().unwrap();
    bytes[offset as usize + 20] ^= 0x0f;
    std::fs::write(&path, &bytes).unwrap();
    set_mtime(&path, stamp);
    let err = reader.read(7).unwrap_err();
    assert!(!err.to_string().contains("changed underneath"), "{err}");
    assert!(err.to_string().contains("CRC"), "{err}");
}
