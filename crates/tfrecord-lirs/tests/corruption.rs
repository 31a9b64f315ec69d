//! One test per way a file or table can break: every case is a clear error naming the
//! file, instance and byte offset; never a panic or a wrong payload.

mod common;

use std::path::{Path, PathBuf};

use common::{payload, write_padded, write_plain};
use tfrecord_lirs::{
    default_table_path, encode_table, inspect, read_table, ErrorKind, Fit, Reader, ReaderOptions,
};

fn setup(padded: bool) -> (tempfile::TempDir, PathBuf, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| payload(i, 30 + i * 37)).collect();
    let path = if padded {
        write_padded(dir.path(), "d.tfrecord", &payloads, 4096, Fit::Next).0
    } else {
        write_plain(dir.path(), "d.tfrecord", &payloads)
    };
    (dir, path, payloads)
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

fn open(path: &Path) -> tfrecord_lirs::Result<Reader> {
    Reader::open_one(path, None, &ReaderOptions::default())
}

/// Reading every instance fails at `id` with `kind`, message naming file, id and offset.
fn assert_read_fails(path: &Path, id: u64, offset: u64, kind: ErrorKind, what: &str) {
    let reader = open(path).unwrap();
    let err = reader.read(id).unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.kind(), kind, "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains(&format!("instance {id}")), "{msg}");
    assert!(msg.contains(&format!("byte {offset}")), "{msg}");
    assert!(msg.contains(what), "{msg}");
}

#[test]
fn every_framing_field_is_checked() {
    for padded in [false, true] {
        for (field, delta, what) in [
            ("length", 2u64, "length CRC"),
            ("length crc", 9, "length CRC"),
            ("payload", 12 + 5, "payload CRC"),
            ("payload crc", u64::MAX, "payload CRC"),
        ] {
            let (_dir, path, payloads) = setup(padded);
            let table = read_table(&default_table_path(&path)).unwrap();
            let id = 17u64;
            let off = table[id as usize];
            let at = if delta == u64::MAX {
                off + 12 + payloads[id as usize].len() as u64 + 1
            } else {
                off + delta
            };
            flip(&path, at);
            assert_read_fails(&path, id, off, ErrorKind::DataLoss, what);
            // Neighbours still read correctly.
            let reader = open(&path).unwrap();
            assert_eq!(
                reader.read(id + 1).unwrap(),
                payloads[id as usize + 1],
                "{field}"
            );
            // The full scan finds it too.
            let table_path = default_table_path(&path);
            let err = inspect(&path, Some((&table_path, &table)), None).unwrap_err();
            assert!(
                err.to_string().contains(&format!("byte {off}")),
                "{field}: {err}"
            );
        }
    }
}

#[test]
fn payload_crc_check_can_be_skipped() {
    let (_dir, path, payloads) = setup(false);
    let off = read_table(&default_table_path(&path)).unwrap()[3];
    flip(&path, off + 12);
    let opts = ReaderOptions {
        verify_payload_crc: false,
        ..Default::default()
    };
    let reader = Reader::open_one(&path, None, &opts).unwrap();
    let got = reader.read(3).unwrap();
    assert_ne!(got, payloads[3]);
    assert_eq!(got.len(), payloads[3].len());
}

#[test]
fn truncation_at_many_points() {
    for padded in [false, true] {
        let (_dir, path, _) = setup(padded);
        let full = std::fs::read(&path).unwrap();
        let table = read_table(&default_table_path(&path)).unwrap();
        let last = *table.last().unwrap();
        for cut in [
            full.len() - 1,
            full.len() - 4,
            last as usize + 13,
            last as usize + 5,
            last as usize + 1,
        ] {
            std::fs::write(&path, &full[..cut]).unwrap();
            // The table's last span no longer holds a whole record: caught at open.
            let err = open(&path).err().expect("open must fail");
            assert!(
                err.to_string().contains(&format!("byte {last}")),
                "cut {cut}: {err}"
            );
            let table_path = default_table_path(&path);
            assert!(inspect(&path, Some((&table_path, &table)), None).is_err());
        }
        // Cut inside an earlier record: the table points past the end. The file was
        // truncated after its table was written: changed data (DataLoss), not a
        // mistake in what was passed.
        std::fs::write(&path, &full[..table[20] as usize + 3]).unwrap();
        let err = open(&path).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
        assert!(err.to_string().contains("past the end"), "{err}");
        assert!(
            err.to_string()
                .contains("was truncated after its table was written"),
            "{err}"
        );
    }
}

#[test]
fn file_truncated_while_open_is_an_error_not_a_crash() {
    let (_dir, path, _) = setup(false);
    let reader = open(&path).unwrap();
    let table = read_table(&default_table_path(&path)).unwrap();
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..table[30] as usize]).unwrap();
    let err = reader.read(35).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert!(err.to_string().contains("instance 35"), "{err}");
}

#[test]
fn damaged_tables() {
    let (dir, path, _) = setup(true);
    let table_path = default_table_path(&path);
    let good = read_table(&table_path).unwrap();
    // A damaged table (a partial entry, entries out of order) and entries past the end
    // of the file (the file truncated since) are damaged or changed data; an empty
    // table beside a file with records shows neither (a table for another file).
    let check = |offsets_bytes: Vec<u8>, needle: &str| {
        std::fs::write(&table_path, &offsets_bytes).unwrap();
        let err = open(&path)
            .err()
            .unwrap_or_else(|| panic!("expected an error for {needle}"));
        let kind = if needle == "table is empty" {
            ErrorKind::InvalidArgument
        } else {
            ErrorKind::DataLoss
        };
        assert_eq!(err.kind(), kind, "{err}");
        assert!(err.to_string().contains(needle), "{needle}: {err}");
        assert!(
            err.to_string().contains("offsets"),
            "names the table: {err}"
        );
    };
    let mut partial = encode_table(&good);
    partial.truncate(partial.len() - 4);
    check(partial, "multiple of 8");
    let mut swapped = good.clone();
    swapped.swap(5, 6);
    check(encode_table(&swapped), "strictly increase");
    let mut past = good.clone();
    past.push(std::fs::metadata(&path).unwrap().len() + 10);
    check(encode_table(&past), "past the end");
    check(Vec::new(), "table is empty");

    // An offset moved by a few bytes: not a record start. Caught when that instance is
    // read (and by verify), with the instance and offset named.
    for (i, delta) in [(0usize, 3i64), (7, 3), (7, -2), (good.len() - 1, 5)] {
        let mut moved = good.clone();
        moved[i] = (moved[i] as i64 + delta) as u64;
        std::fs::write(&table_path, encode_table(&moved)).unwrap();
        let at = format!("byte {}", moved[i]);
        match open(&path) {
            Err(e) => assert!(e.to_string().contains(&at), "{e}"),
            Ok(reader) => {
                let err = reader.read(i as u64).unwrap_err();
                assert!(
                    err.to_string().contains(&at)
                        && err.to_string().contains(&format!("instance {i}")),
                    "{err}"
                );
            }
        }
        let err = inspect(&path, Some((&table_path, &moved)), None).unwrap_err();
        assert!(err.to_string().contains(&format!("instance {i}")), "{err}");
    }

    // A table of another file paired with this data file.
    let other: Vec<Vec<u8>> = (0..40).map(|i| payload(i, 100 + i)).collect();
    let other_path = write_plain(dir.path(), "other.tfrecord", &other);
    let other_table = std::fs::read(default_table_path(&other_path)).unwrap();
    std::fs::write(&table_path, &other_table).unwrap();
    let failed = match open(&path) {
        Err(_) => true,
        Ok(reader) => (0..reader.len()).any(|id| reader.read(id).is_err()),
    };
    assert!(failed, "another file's table must not read silently");
    let other_offsets = read_table(&table_path).unwrap();
    assert!(inspect(&path, Some((&table_path, &other_offsets)), None).is_err());
}

#[test]
fn empty_garbage_and_compressed_files() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    tfrecord_lirs::build_offset_table(&empty, &default_table_path(&empty)).unwrap();
    assert!(open(&empty).unwrap().is_empty());
    assert!(open(&empty).unwrap().read(0).is_err());

    let garbage = dir.path().join("garbage");
    std::fs::write(
        &garbage,
        (0..5000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let err =
        tfrecord_lirs::build_offset_table(&garbage, &default_table_path(&garbage)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert!(err.to_string().contains("byte 0"), "{err}");
    assert!(
        !default_table_path(&garbage).exists(),
        "no table for a failed scan"
    );

    let zlib = dir.path().join("z");
    std::fs::write(&zlib, [0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]).unwrap();
    let err = tfrecord_lirs::build_offset_table(&zlib, &default_table_path(&zlib)).unwrap_err();
    assert!(err.to_string().contains("ZLIB"), "{err}");
}

#[test]
fn filler_where_an_instance_should_be() {
    let (_dir, path, _) = setup(true);
    let table_path = default_table_path(&path);
    // Find a filler's offset by scanning, and point instance 0's successor at it.
    let mut scanner = tfrecord_lirs::RecordScanner::open(&path).unwrap();
    let mut filler_at = None;
    while let Some(r) = scanner.next_record().unwrap() {
        if r.is_filler() {
            filler_at = Some(r.offset);
            break;
        }
    }
    let filler_at = filler_at.expect("a padded file of these sizes has fillers");
    let mut table = read_table(&table_path).unwrap();
    let i = table.iter().position(|&o| o > filler_at).unwrap() - 1;
    table[i + 1] = filler_at.max(table[i] + 1);
    if table[i + 1] == filler_at && (i + 2 >= table.len() || table[i + 1] < table[i + 2]) {
        std::fs::write(&table_path, encode_table(&table)).unwrap();
        let reader = open(&path).unwrap();
        let err = reader.read(i as u64 + 1).unwrap_err();
        assert!(err.to_string().contains("filler"), "{err}");
    }
}

#[test]
fn table_missing_whole_entries_is_an_error_not_a_silent_skip() {
    for padded in [false, true] {
        let (_dir, path, _) = setup(padded);
        let table_path = default_table_path(&path);
        let good = read_table(&table_path).unwrap();
        let n = good.len();
        let data = path.display().to_string();
        // Entries missing at the end: their records follow the last indexed instance,
        // where only filler may be. Caught at open, naming the first unindexed record.
        for drop in [1usize, 2, 20, n - 1] {
            std::fs::write(&table_path, encode_table(&good[..n - drop])).unwrap();
            let err = open(&path).err().expect("a shortened table must not open");
            let msg = err.to_string();
            assert!(msg.contains(&format!("instance {}", n - drop - 1)), "{msg}");
            assert!(msg.contains(&format!("byte {}", good[n - drop])), "{msg}");
            assert!(
                msg.contains(&format!("{data} ")),
                "names the data file: {msg}"
            );
        }
        // An entry missing in the middle: instance j-1's span holds record j too.
        for j in [1usize, 17, n - 2] {
            let offsets: Vec<u64> = (0..n).filter(|&i| i != j).map(|i| good[i]).collect();
            std::fs::write(&table_path, encode_table(&offsets)).unwrap();
            let reader = open(&path).unwrap();
            let err = reader.read(j as u64 - 1).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&format!("instance {}", j - 1)), "{msg}");
            assert!(msg.contains(&format!("byte {}", good[j])), "{msg}");
            let mut batch = tfrecord_lirs::Batch::default();
            assert!(reader.read_batch(&[j as u64 - 1], &mut batch).is_err());
            assert!(inspect(&path, Some((&table_path, &offsets)), None).is_err());
        }
    }
}

/// Records long enough to be read in pieces, each piece's share of the payload CRC
/// computed right after its read: a flip anywhere (first piece, across a piece
/// boundary, the last byte, the footer, the length) is the same error as where the
/// payload is checked whole (the memory-mapped batch path checks it in its copy), and
/// a file cut inside a later piece is a clean error.
#[test]
fn large_records_read_in_pieces_are_checked_like_any_other() {
    const PIECE: u64 = 128 * 1024;
    // Below the piece-by-piece size, just above it, more than 1 MiB (read as far as its
    // record goes), between small first and last ones (which open checks).
    let sizes = [40usize, 200_000, 300_000, 1_300_000, 262_200, 7];
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    for padded in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = if padded {
            write_padded(dir.path(), "d.tfrecord", &payloads, 4096, Fit::Next).0
        } else {
            write_plain(dir.path(), "d.tfrecord", &payloads)
        };
        let good = std::fs::read(&path).unwrap();
        let table = read_table(&default_table_path(&path)).unwrap();
        // Intact, every path returns every payload.
        let reader = open(&path).unwrap();
        for (id, want) in payloads.iter().enumerate() {
            assert_eq!(&reader.read(id as u64).unwrap(), want, "instance {id}");
        }
        let ids: Vec<u64> = (0..payloads.len() as u64).rev().collect();
        let mut batch = tfrecord_lirs::Batch::default();
        reader.read_batch(&ids, &mut batch).unwrap();
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(
                batch.payload(k),
                &payloads[id as usize][..],
                "batch slot {k}"
            );
        }
        drop(reader);
        for id in [1usize, 2, 3, 4] {
            let off = table[id];
            let len = payloads[id].len() as u64;
            let payload_at = off + 12;
            for (at, what) in [
                (off + 3, "length CRC"),
                (payload_at, "payload CRC"),
                (payload_at + PIECE - 13, "payload CRC"),
                (off + PIECE, "payload CRC"),
                (payload_at + len / 2, "payload CRC"),
                (payload_at + len - 1, "payload CRC"),
                (payload_at + len + 2, "payload CRC"),
            ] {
                std::fs::write(&path, &good).unwrap();
                flip(&path, at);
                assert_read_fails(&path, id as u64, off, ErrorKind::DataLoss, what);
                let by_read = open(&path)
                    .unwrap()
                    .read(id as u64)
                    .unwrap_err()
                    .to_string();
                // The default backend's batch (pread) and the mapped batch, which
                // checks each payload in its copy, give the same error.
                let mut batch = tfrecord_lirs::Batch::default();
                let by_batch = open(&path)
                    .unwrap()
                    .read_batch(&[0, id as u64], &mut batch)
                    .unwrap_err()
                    .to_string();
                let mapped = ReaderOptions {
                    backend: tfrecord_lirs::Backend::Mmap,
                    mmap_opt_in: common::mmap_opt_in(),
                    ..Default::default()
                };
                let by_map = Reader::open_one(&path, None, &mapped)
                    .unwrap()
                    .read_batch(&[0, id as u64], &mut batch)
                    .unwrap_err()
                    .to_string();
                assert_eq!(by_read, by_batch, "flip at {at}");
                assert_eq!(by_read, by_map, "flip at {at}");
                // The others still read.
                let reader = open(&path).unwrap();
                assert_eq!(reader.read(0).unwrap(), payloads[0]);
            }
        }
        // Cut inside a later piece of the 1.3 MB record while the reader is open.
        std::fs::write(&path, &good).unwrap();
        let reader = open(&path).unwrap();
        std::fs::write(&path, &good[..(table[3] + 3 * PIECE + 17) as usize]).unwrap();
        for result in [
            reader.read(3).map(|_| ()),
            reader.read_batch(&[3], &mut batch),
        ] {
            let err = result.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
            assert!(err.to_string().contains("instance 3"), "{err}");
        }
    }
}

/// The kind of an error is its cause: a shard truncated after its table was written is
/// changed data (DataLoss); a compressed file or another file's table is a mistake in
/// what was passed (InvalidArgument), and the advice never says to write over another
/// file's table.
#[test]
fn error_kinds_follow_their_cause() {
    let (dir, f0, _) = setup(false);
    let f1 = write_plain(
        dir.path(),
        "f1.tfrecord",
        &(0..25).map(|i| payload(i, 100 + i)).collect::<Vec<_>>(),
    );
    let f1_table = default_table_path(&f1);
    let f1_table_bytes = std::fs::read(&f1_table).unwrap();
    let pair =
        |table: &Path| Reader::open(&[(f0.clone(), table.to_path_buf())], &Default::default());

    // F1's table given for F0 (F1 exists): a mistake, F0's own table advised.
    let err = pair(&f1_table).err().expect("another file's table");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{text}");
    let own = default_table_path(&f0).display().to_string();
    assert!(text.contains("is the table of another data file"), "{text}");
    assert!(text.contains(&own), "{text}");
    assert!(
        !text.contains(&format!("--out {}", f1_table.display())),
        "{text}"
    );
    // The remedy (each front end words it) builds F0's table at F0's own path only.
    let own_remedy = Some(tfrecord_lirs::Remedy::OwnTable {
        data: f0.clone(),
        own: default_table_path(&f0),
    });
    assert_eq!(err.remedy(), own_remedy.as_ref(), "{text}");
    assert_eq!(std::fs::read(&f1_table).unwrap(), f1_table_bytes);
    // Named for a file that does not exist: still not F0's.
    let junk = dir.path().join("junk.offsets");
    std::fs::write(&junk, [1, 2, 3]).unwrap();
    let err = pair(&junk).err().expect("a damaged table");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{text}");
    assert!(
        text.contains("is named as the table of another data file"),
        "{text}"
    );
    assert!(text.contains(&own) && !text.contains("--out"), "{text}");
    assert_eq!(err.remedy(), own_remedy.as_ref(), "{text}");
    // Missing at the table path of F2, which exists: NotFound, and never
    // `index F0 --out F2.offsets` (F2's table would be F0's).
    let f2 = dir.path().join("f2.tfrecord");
    std::fs::write(&f2, b"").unwrap();
    let missing = default_table_path(&f2);
    let err = pair(&missing).err().expect("a missing table");
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{text}");
    assert!(text.contains(&own) && !text.contains("--out"), "{text}");
    assert_eq!(err.remedy(), own_remedy.as_ref(), "{text}");
    // Named by F0's stem (`d.offsets` for `d.tfrecord`, no file `d`): F0's own.
    let stem = dir.path().join("d.offsets");
    std::fs::write(&stem, [1, 2, 3]).unwrap();
    let err = pair(&stem).err().expect("a damaged table");
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
    // A table elsewhere, named for F0: no other file owns it; a missing one is
    // built there by default, and without index_missing NotFound with `--out` that
    // path, as before.
    let elsewhere = dir.path().join("tables");
    std::fs::create_dir(&elsewhere).unwrap();
    let mine = elsewhere.join("d.tfrecord.offsets");
    let kept = ReaderOptions {
        index_missing: false,
        ..Default::default()
    };
    let err = Reader::open(&[(f0.clone(), mine.clone())], &kept)
        .err()
        .expect("a missing table");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert_eq!(
        err.remedy(),
        Some(&tfrecord_lirs::Remedy::BuildTable {
            data: f0.clone(),
            table: mine.clone()
        }),
        "{err}"
    );
    assert!(pair(&mine).is_ok() && mine.exists());
    // The missing table of F2 (which exists) is never built for F0, by default too.
    assert!(!missing.exists());

    // F0 truncated after its table was written: DataLoss, at open.
    let full = std::fs::read(&f0).unwrap();
    let table = read_table(&default_table_path(&f0)).unwrap();
    for cut in [table[10] as usize + 5, table[30] as usize, full.len() - 3] {
        std::fs::write(&f0, &full[..cut]).unwrap();
        let err = open(&f0).err().expect("a truncated file");
        assert_eq!(err.kind(), ErrorKind::DataLoss, "cut {cut}: {err}");
        assert!(
            err.to_string().contains("was truncated after its table"),
            "{err}"
        );
    }

    // A GZIP file given as data: InvalidArgument naming the magic bytes and `pad`.
    let gz = dir.path().join("c.tfrecord.gz");
    let mut bytes = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    bytes.extend_from_slice(&[7; 40]);
    std::fs::write(&gz, &bytes).unwrap();
    std::fs::write(default_table_path(&gz), encode_table(&[0])).unwrap();
    for err in [
        open(&gz).err().expect("gzip with a table"),
        Reader::open(
            &[(gz.clone(), dir.path().join("none.offsets"))],
            &Default::default(),
        )
        .err()
        .expect("gzip without a table"),
    ] {
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{text}");
        assert!(
            text.contains("GZIP-compressed (it starts with the GZIP magic bytes 1f 8b)"),
            "{text}"
        );
        assert!(
            matches!(
                err.remedy(),
                Some(tfrecord_lirs::Remedy::Pad {
                    compression: "GZIP",
                    ..
                })
            ),
            "{text}"
        );
    }
}
