//! Regression tests for bugs found by the corruption matrix and the fuzz targets
//! (`fuzz/`). Each test names the bug it pins down.

mod common;

use common::{payload, write_padded, write_plain, write_sparse_filler};
use tfrecord_lirs::format;
use tfrecord_lirs::{
    default_table_path, encode_table, read_table, Backend, ErrorKind, Fit, Reader, ReaderOptions,
};

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
    const SIZE: u64 = 6 << 30;
    file.set_len(SIZE).unwrap(); // sparse
    std::fs::write(default_table_path(&path), encode_table(&[0])).unwrap();
    // Zeros after the record are not records: the table hides nothing there only if
    // the rest of the span is filler, so the reader refuses the pair, naming the byte.
    let err = Reader::open_one(&path, None, &ReaderOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("byte 116"), "{err}");
    write_sparse_filler(&file, bytes.len() as u64, SIZE);
    for backend in [tfrecord_lirs::Backend::Pread, tfrecord_lirs::Backend::Mmap] {
        let options = ReaderOptions {
            backend,
            mmap_opt_in: common::mmap_opt_in(),
            ..ReaderOptions::default()
        };
        let reader = Reader::open_one(&path, None, &options).unwrap();
        assert_eq!(reader.read(0).unwrap(), payload(0, 100));
        // The first 1 MiB of the span, and one probe of the filler after the record.
        let read = reader.io_stats().bytes_read;
        let bound = (1 << 20) + tfrecord_lirs::format::FILLER_PROBE_LEN as u64;
        assert!(
            read <= bound,
            "{backend:?}: read {read} bytes for a 116-byte record"
        );
        // The batched path (Fetcher, TensorFlow op) keeps the same bound.
        reader.reset_io_stats();
        let mut batch = tfrecord_lirs::Batch::default();
        reader.read_batch(&[0, 0], &mut batch).unwrap();
        assert_eq!(batch.payload(0), payload(0, 100).as_slice());
        assert_eq!(batch.payload(1), payload(0, 100).as_slice());
        let read = reader.io_stats().bytes_read;
        assert!(read <= bound, "{backend:?}: read_batch read {read} bytes");
    }
    // A long span whose record is longer than the first read is read up to its end.
    let big = payload(1, 3 << 20);
    let mut bytes = Vec::new();
    tfrecord_lirs::format::encode_record(&big, &mut bytes);
    file.write_all_at(&bytes, 0).unwrap();
    write_sparse_filler(&file, bytes.len() as u64, SIZE);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    assert_eq!(reader.read(0).unwrap(), big);
    let probe = tfrecord_lirs::format::FILLER_PROBE_LEN as u64;
    assert_eq!(reader.io_stats().bytes_read, bytes.len() as u64 + probe);
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

/// A table missing an entry in the middle used to read fine: instance i's span then
/// held two records, `read(i)` returned the first, and the second instance was never
/// delivered by any id (a silent skip). Every byte after an instance's record in its
/// span must be filler; the reader now checks the span it read, on every read path.
#[test]
fn a_table_missing_an_entry_is_an_error_not_a_silent_skip() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| payload(i, 30 + 17 * i)).collect();
    let plain = write_plain(dir.path(), "plain.tfrecord", &payloads);
    let (padded, _) = write_padded(dir.path(), "padded.tfrecord", &payloads, 512, Fit::Next);
    for path in [plain, padded] {
        let table_path = default_table_path(&path);
        let good = read_table(&table_path).unwrap();
        let dropped = 7;
        let mut table = good.clone();
        table.remove(dropped);
        std::fs::write(&table_path, encode_table(&table)).unwrap();
        for backend in [Backend::Pread, Backend::Mmap] {
            let options = ReaderOptions {
                backend,
                mmap_opt_in: common::mmap_opt_in(),
                ..ReaderOptions::default()
            };
            let reader = Reader::open_one(&path, None, &options).unwrap();
            let id = dropped as u64 - 1; // its span now holds the dropped instance too
            let want = format!("byte {}", good[dropped]);
            let err = reader.read(id).unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains(&want),
                "{backend:?} {}: {text}",
                path.display()
            );
            assert!(text.contains(&format!("instance {id}")), "{text}");
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{text}");
            let mut batch = tfrecord_lirs::Batch::default();
            let text = reader
                .read_batch(&[0, id, id + 1], &mut batch)
                .unwrap_err()
                .to_string();
            assert!(text.contains(&want), "{backend:?} read_batch: {text}");
            // The other instances still read.
            assert_eq!(reader.read(id + 1).unwrap(), payloads[dropped + 1]);
        }
        std::fs::write(&table_path, encode_table(&good)).unwrap();
    }
}

/// A table missing its last entries (or a file with records appended after it was
/// indexed) used to open fine and silently leave the tail out of every epoch. The last
/// span runs to the end of the file, so the reader checks it at open.
#[test]
fn unindexed_records_at_the_end_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..30).map(|i| payload(i, 100 + i)).collect();
    let plain = write_plain(dir.path(), "plain.tfrecord", &payloads);
    let (padded, _) = write_padded(dir.path(), "padded.tfrecord", &payloads, 4096, Fit::BEST);
    for path in [plain, padded] {
        let table_path = default_table_path(&path);
        let good = read_table(&table_path).unwrap();
        for kept in [good.len() - 1, good.len() - 3] {
            std::fs::write(&table_path, encode_table(&good[..kept])).unwrap();
            let text = Reader::open_one(&path, None, &ReaderOptions::default())
                .err()
                .unwrap()
                .to_string();
            assert!(text.contains(&format!("byte {}", good[kept])), "{text}");
            assert!(text.contains("not a filler"), "{text}");
        }
        std::fs::write(&table_path, encode_table(&good)).unwrap();
        // Appended after indexing.
        let end = std::fs::metadata(&path).unwrap().len();
        let mut more = Vec::new();
        format::encode_record(b"appended later", &mut more);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, &more).unwrap();
        drop(f);
        let text = Reader::open_one(&path, None, &ReaderOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(text.contains(&format!("byte {end}")), "{text}");
        // The remedy (each front end words it) rebuilds the table.
        assert!(text.contains("rebuild"), "{text}");
    }
}

/// A damaged filler header inside a span is reported as data damage at its offset
/// (TensorFlow's own reader would stop there too), not skipped.
#[test]
fn a_damaged_filler_header_is_data_loss() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..20).map(|i| payload(i, 300 + i)).collect();
    let (path, _) = write_padded(dir.path(), "padded.tfrecord", &payloads, 512, Fit::Next);
    let table = read_table(&default_table_path(&path)).unwrap();
    let mut data = std::fs::read(&path).unwrap();
    // The first span that holds a filler after its record.
    let (id, filler_at) = (0..table.len() - 1)
        .find_map(|i| {
            let start = table[i] as usize;
            let frame = format::decode_record(&data[start..], true).unwrap();
            let after = start + frame.framed_len as usize;
            (after < table[i + 1] as usize).then_some((i as u64, after))
        })
        .expect("a padded file at 512 B holds fillers");
    data[filler_at + 2] ^= 0x40; // the filler's length field
    std::fs::write(&path, &data).unwrap();
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    let err = reader.read(id).unwrap_err();
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{text}");
    assert!(text.contains(&format!("byte {filler_at}")), "{text}");
    assert!(text.contains(&format!("instance {id}")), "{text}");
}

/// With the table trusted, an empty table beside a file holding one valid record was
/// accepted by `inspect` (so `verify --trust-table`) as zero instances and padding, and
/// refused by `Reader::open` (so `LIRSDataset(trust_table=True)`). Both now apply one
/// rule: an empty table describes only an empty file, in either mode, with one message.
#[test]
fn empty_table_beside_records_is_refused_by_open_and_inspect_alike() {
    use tfrecord_lirs::{format::Padding, inspect_with};
    let dir = tempfile::tempdir().unwrap();
    let path = write_plain(dir.path(), "d.tfrecord", &[payload(0, 4)]);
    let table_path = default_table_path(&path);
    std::fs::write(&table_path, b"").unwrap();
    for trust_table in [false, true] {
        let options = ReaderOptions {
            trust_table,
            ..ReaderOptions::default()
        };
        let opened = Reader::open_one(&path, None, &options)
            .err()
            .expect("an empty table beside a record must not open");
        let inspected = inspect_with(
            &path,
            Some((&table_path, &[])),
            None,
            options.padding(),
            |_| {},
        )
        .expect_err("an empty table beside a record must not pass the full check");
        assert_eq!(
            opened.to_string(),
            inspected.to_string(),
            "trust_table {trust_table}"
        );
        assert_eq!(opened.kind(), inspected.kind());
        assert!(opened.to_string().contains("table is empty"), "{opened}");
        assert!(opened.to_string().contains("d.tfrecord"), "{opened}");
        assert_eq!(
            inspect_with(&path, None, None, options.padding(), |_| {})
                .unwrap()
                .instances,
            1,
            "without a table the file is one instance"
        );
    }
    // An empty table beside an empty file is zero instances, in both.
    std::fs::write(&path, b"").unwrap();
    for padding in [Padding::Fillers, Padding::Opaque] {
        let found = inspect_with(&path, Some((&table_path, &[])), None, padding, |_| {}).unwrap();
        assert_eq!(found.instances, 0);
        let options = ReaderOptions {
            trust_table: padding == Padding::Opaque,
            ..ReaderOptions::default()
        };
        assert!(Reader::open_one(&path, None, &options).unwrap().is_empty());
    }
}
