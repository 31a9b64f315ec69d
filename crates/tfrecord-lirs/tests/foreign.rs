//! Files from other tools: padded files written by the LIRS reference implementation
//! (read with `trust_table`), GZIP/ZLIB TFRecords (converted by `pad`), and the
//! missing-table error.

use std::io::Write;
use std::path::{Path, PathBuf};

use tfrecord_lirs::format::{encode_record, Padding};
use tfrecord_lirs::{
    default_table_path, inspect_with, pad_file, pad_file_with, write_table, Compression, ErrorKind,
    PadOptions, Reader, ReaderOptions, Remedy,
};

/// Writes `payloads` the way the reference implementation's
/// `OffsetTableBuilder(padding=True).calc_offset` + `TFRecordWriter.write` do (read
/// from winiel559/tfrecord-lirs-implementation, OffsetTableBuilder.py): before each
/// record, with `size` the file size so far, if `size + len + 16 + 16` falls in a
/// later page than `size`, a padding record of `pad_len - 16` ASCII '0' bytes is
/// written, `pad_len` = (that page's start) - `size`, so the pad ends on that page
/// boundary (only when `pad_len > 16`; else it prints "error" and writes none); the
/// table entry is then the file size, taken after the writes. Returns the offsets and
/// how many pads were written.
fn write_reference_style(path: &Path, payloads: &[Vec<u8>], page: u64) -> (Vec<u64>, usize) {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let mut pads = 0;
    for p in payloads {
        let size = out.len() as u64;
        let new_page = (size + p.len() as u64 + 32) / page;
        if new_page > size / page {
            let pad_len = new_page * page - size;
            assert!(
                pad_len > 16,
                "the reference's 'error' case: choose other sizes"
            );
            encode_record(&vec![b'0'; (pad_len - 16) as usize], &mut out);
            pads += 1;
        }
        offsets.push(out.len() as u64);
        encode_record(p, &mut out);
    }
    std::fs::write(path, &out).unwrap();
    write_table(&default_table_path(path), &offsets, false).unwrap();
    (offsets, pads)
}

/// Deterministic payloads: a large first one (so instance 0 follows a pad), then
/// varied small ones and an occasional large one that ends well inside a page.
fn payloads(page: u64, n: usize) -> Vec<Vec<u8>> {
    let mut x = 0x2545f4914f6cdd1du64;
    let mut out = vec![vec![0xa5; page as usize + 300]];
    for i in 1..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = if i % 97 == 0 {
            page as usize * 2 + 100
        } else {
            20 + (x % (page / 3)) as usize
        };
        out.push((0..len).map(|k| (k as u64 ^ i as u64 ^ x) as u8).collect());
    }
    out
}

/// `verify`'s full inspection of `data` with its default table `offsets`.
fn inspect_as(
    data: &Path,
    offsets: &[u64],
    padding: Padding,
) -> tfrecord_lirs::Result<tfrecord_lirs::Inspection> {
    let table = default_table_path(data);
    inspect_with(data, Some((&table, offsets)), None, padding, |_| {})
}

fn trusting() -> ReaderOptions {
    ReaderOptions {
        trust_table: true,
        ..Default::default()
    }
}

#[test]
fn reference_padded_files_read_exactly_their_instances_when_the_table_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    for page in [512u64, 4096, 65536] {
        let data = dir.path().join(format!("ref{page}.tfrecords"));
        let records = payloads(page, 400);
        let (offsets, pads) = write_reference_style(&data, &records, page);
        assert!(
            offsets[0] >= page,
            "instance 0 follows a pad: {}",
            offsets[0]
        );
        assert!(pads > 2, "{pads}");

        // Strict (the default) refuses, naming the way out.
        let err = Reader::open_one(&data, None, &Default::default())
            .err()
            .expect("strict open refuses a table starting past byte 0");
        assert_eq!(err.remedy(), Some(&Remedy::TrustTable), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("trusting its table"), "{msg}");

        for backend in [tfrecord_lirs::Backend::Pread, tfrecord_lirs::Backend::Mmap] {
            let options = ReaderOptions {
                page_size: page,
                backend,
                // SAFETY: the test's own temporary files, unchanged while mapped.
                mmap_opt_in: Some(unsafe { tfrecord_lirs::MmapOptIn::new() }),
                ..trusting()
            };
            let reader = Reader::open_one(&data, None, &options).unwrap();
            assert_eq!(reader.len(), records.len() as u64);
            for (i, r) in records.iter().enumerate() {
                assert_eq!(
                    &reader.read(i as u64).unwrap(),
                    r,
                    "page {page} instance {i}"
                );
            }
            // Batches (runs of consecutive ids read together) too.
            let ids: Vec<u64> = (0..records.len() as u64).rev().collect();
            let mut batch = tfrecord_lirs::Batch::default();
            reader.read_batch(&ids, &mut batch).unwrap();
            for (k, &id) in ids.iter().enumerate() {
                assert_eq!(batch.payload(k), records[id as usize].as_slice());
            }
        }

        // verify/info's inspection: instances are the table's records, the pads are
        // padding (CRC-checked), and the page size is inferred from the pads.
        let found = inspect_as(&data, &offsets, Padding::Opaque).unwrap();
        assert_eq!(found.instances, records.len() as u64);
        assert_eq!(found.fillers, pads as u64);
        assert_eq!(found.check_padded(&data).unwrap(), Some(page));
        // The strict inspection refuses the pads as unindexed instances, naming the mode.
        let err = inspect_as(&data, &offsets, Padding::Fillers)
            .unwrap_err()
            .to_string();
        assert!(err.contains("trusting its table"), "{err}");
    }
}

#[test]
fn strict_reads_of_a_span_holding_another_record_name_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("small.tfrecords");
    // Small records, so instance 0 is at byte 0 and only the spans hold pads.
    let records: Vec<Vec<u8>> = (0..200u32)
        .map(|i| vec![i as u8; 100 + i as usize % 50])
        .collect();
    let (offsets, pads) = write_reference_style(&data, &records, 512);
    assert_eq!(offsets[0], 0);
    assert!(pads > 10);
    // The pad after the last instance would be caught at open; pick a middle span.
    let strict = Reader::open_one(&data, None, &Default::default());
    let id = (1..offsets.len())
        .find(|&i| offsets[i] - offsets[i - 1] > records[i - 1].len() as u64 + 16)
        .unwrap() as u64
        - 1;
    let msg = match strict {
        Ok(reader) => reader.read(id).unwrap_err().to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        msg.contains("not a filler") && msg.contains("trusting its table"),
        "{msg}"
    );
    let reader = Reader::open_one(&data, None, &trusting()).unwrap();
    assert_eq!(reader.read(id).unwrap(), records[id as usize]);
}

#[test]
fn trusted_tables_still_check_the_padding_framing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("r.tfrecords");
    let records = payloads(512, 60);
    let (offsets, _) = write_reference_style(&data, &records, 512);
    let pristine = std::fs::read(&data).unwrap();
    // A damaged length CRC in the pad before instance 0: refused at open.
    let mut bytes = pristine.clone();
    bytes[9] ^= 0x40;
    std::fs::write(&data, &bytes).unwrap();
    let err = Reader::open_one(&data, None, &trusting())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("before instance 0") && err.contains("byte 0"),
        "{err}"
    );
    // A pad's damaged payload: reads do not look at it, verify does.
    let mut bytes = pristine.clone();
    bytes[20] ^= 1; // inside the first pad's '0' payload
    std::fs::write(&data, &bytes).unwrap();
    let reader = Reader::open_one(&data, None, &trusting()).unwrap();
    assert_eq!(reader.read(0).unwrap(), records[0]);
    let err = inspect_as(&data, &offsets, Padding::Opaque).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert!(
        err.to_string().contains("payload CRC") && !err.to_string().contains("instance"),
        "{err}"
    );
    // A damaged pad header in a middle span: the read of that instance fails.
    let mut bytes = pristine.clone();
    let id = (1..offsets.len())
        .find(|&i| offsets[i] - offsets[i - 1] > records[i - 1].len() as u64 + 16)
        .unwrap()
        - 1;
    let pad_at = offsets[id] as usize + records[id].len() + 16;
    bytes[pad_at + 3] ^= 1;
    std::fs::write(&data, &bytes).unwrap();
    let reader = Reader::open_one(&data, None, &trusting()).unwrap();
    let err = reader.read(id as u64).unwrap_err().to_string();
    assert!(err.contains(&format!("byte {pad_at}")), "{err}");
}

#[test]
fn a_missing_table_says_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.tfrecord");
    let mut bytes = Vec::new();
    encode_record(b"x", &mut bytes);
    std::fs::write(&data, &bytes).unwrap();
    let d = data.display().to_string();
    // Without index_missing (the default builds the table on open).
    let refuse = ReaderOptions {
        index_missing: false,
        ..ReaderOptions::default()
    };
    let err = Reader::open_one(&data, None, &refuse).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // The remedy (each front end words it) builds the table where it was looked for.
    let build = |table: &Path| Remedy::BuildTable {
        data: data.clone(),
        table: table.to_path_buf(),
    };
    assert_eq!(err.remedy(), Some(&build(&default_table_path(&data))));
    assert!(
        err.to_string()
            .contains(&format!("build the offset table of {d}")),
        "{err}"
    );
    // A table given elsewhere: the remedy names it.
    let other = dir.path().join("t.idx");
    let err = Reader::open_one(&data, Some(&other), &refuse)
        .err()
        .unwrap();
    assert_eq!(err.remedy(), Some(&build(&other)), "{err}");
    let err = tfrecord_lirs::read_table(&default_table_path(&data)).unwrap_err();
    assert_eq!(
        err.remedy(),
        Some(&build(&default_table_path(&data))),
        "{err}"
    );
}

fn tf_style_plain(path: &Path, n: usize) -> Vec<Vec<u8>> {
    let records: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("record {i} ").repeat(1 + i % 40).into_bytes())
        .collect();
    let mut out = Vec::new();
    for r in &records {
        encode_record(r, &mut out);
    }
    std::fs::write(path, &out).unwrap();
    records
}

fn compress(plain: &Path, gzip: bool) -> PathBuf {
    let bytes = std::fs::read(plain).unwrap();
    let out = plain.with_extension(if gzip { "gz" } else { "zz" });
    let compressed = if gzip {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap()
    } else {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&bytes).unwrap();
        e.finish().unwrap()
    };
    std::fs::write(&out, compressed).unwrap();
    out
}

#[test]
fn pad_converts_gzip_and_zlib_input_to_the_same_padded_file() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.tfrecord");
    // Enough records for several read-ahead chunks of decompressed bytes.
    let records = tf_style_plain(&plain, 9000);
    let expected_out = dir.path().join("expected.padded");
    pad_file(&plain, &expected_out, &PadOptions::default()).unwrap();
    let expected = std::fs::read(&expected_out).unwrap();
    for gzip in [true, false] {
        let src = compress(&plain, gzip);
        for compression in [
            Compression::Auto,
            if gzip {
                Compression::Gzip
            } else {
                Compression::Zlib
            },
        ] {
            let out = dir.path().join(format!("out-{gzip}-{compression:?}"));
            let summary =
                pad_file_with(&src, &out, &PadOptions::default(), compression, |_| {}).unwrap();
            assert_eq!(summary.instances, records.len() as u64);
            assert_eq!(std::fs::read(&out).unwrap(), expected, "{compression:?}");
            assert_eq!(
                std::fs::read(default_table_path(&out)).unwrap(),
                std::fs::read(default_table_path(&expected_out)).unwrap()
            );
        }
        // Told the wrong compression: a clean error naming the file.
        let err = pad_file_with(
            &src,
            &dir.path().join("x"),
            &PadOptions::default(),
            Compression::None,
            |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(&src.display().to_string()), "{err}");
        // Truncated: an error naming the file and the decompressed offset, no output.
        let bytes = std::fs::read(&src).unwrap();
        let cut = dir.path().join(if gzip { "cut.gz" } else { "cut.zz" });
        std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
        let out = dir.path().join("cut.padded");
        let err = pad_file_with(
            &cut,
            &out,
            &PadOptions::default(),
            Compression::Auto,
            |_| {},
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&cut.display().to_string()) && msg.contains("decompressed byte"),
            "{msg}"
        );
        assert!(!out.exists() && !default_table_path(&out).exists());
    }
    // A damaged record inside a valid stream: named by its decompressed offset.
    let mut bytes = std::fs::read(&plain).unwrap();
    bytes[5000] ^= 1;
    let damaged = dir.path().join("damaged.tfrecord");
    std::fs::write(&damaged, &bytes).unwrap();
    let gz = compress(&damaged, true);
    let err = pad_file_with(
        &gz,
        &dir.path().join("d.padded"),
        &PadOptions::default(),
        Compression::Auto,
        |_| {},
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    assert!(
        err.to_string().contains("decompressed byte") && err.to_string().contains("GZIP stream"),
        "{err}"
    );
}

#[test]
fn index_refuses_compressed_files_naming_pad_and_gunzip() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("p.tfrecord");
    tf_style_plain(&plain, 10);
    let gz = compress(&plain, true);
    let err = tfrecord_lirs::build_offset_table(&gz, &default_table_path(&gz)).unwrap_err();
    assert_eq!(
        err.remedy(),
        Some(&Remedy::Pad {
            data: gz.clone(),
            compression: "GZIP"
        })
    );
    let err = err.to_string();
    assert!(err.contains("padded copy") && err.contains("GZIP"), "{err}");
}

#[test]
fn pad_from_a_trusted_table_converts_a_reference_padded_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ref.tfrecords");
    let records = payloads(4096, 300);
    let (_, pads) = write_reference_style(&data, &records, 4096);
    let out = dir.path().join("ours.padded");
    let summary =
        tfrecord_lirs::pad_file_from_table(&data, &out, &PadOptions::default(), |_| {}).unwrap();
    assert_eq!(summary.instances, records.len() as u64);
    let reader = Reader::open_one(&out, None, &Default::default()).unwrap();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(&reader.read(i as u64).unwrap(), r);
    }
    // A scan cannot tell the reference's pads from instances: that is why.
    let scanned = pad_file(&data, &dir.path().join("scanned"), &PadOptions::default()).unwrap();
    assert_eq!(scanned.instances, (records.len() + pads) as u64);
}
