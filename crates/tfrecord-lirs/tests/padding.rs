//! The padded writer: invariants (a)-(c) over page sizes and both placement policies.

mod common;

use common::{kdd_sizes, payload, write_padded};
use proptest::prelude::*;
use tfrecord_lirs::format::{self, PageSize};
use tfrecord_lirs::{inspect, read_table, Fit, Reader, ReaderOptions, RecordScanner};

/// Checks everything a padded file promises, independently of the writer's own logic.
fn check_padded(payloads: &[Vec<u8>], page_size: u64, fit: Fit) {
    let dir = tempfile::tempdir().unwrap();
    let (path, summary) = write_padded(dir.path(), "d.tfrecord", payloads, page_size, fit);
    let page = PageSize::new(page_size).unwrap();
    let table = read_table(&tfrecord_lirs::default_table_path(&path)).unwrap();
    assert_eq!(table.len(), payloads.len());
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(summary.data_bytes, size);

    // (a) A plain sequential scan reads every byte as CRC-valid records; the instances
    // come in id order at the table's offsets, fillers between them.
    let mut scanner = RecordScanner::open(&path).unwrap();
    let (mut ids, mut filler_bytes, mut end) = (0usize, 0u64, 0u64);
    let mut instances = Vec::new();
    while let Some(r) = scanner.next_record().unwrap() {
        assert_eq!(r.offset, end);
        end += r.framed_len;
        if r.is_filler() {
            filler_bytes += r.framed_len;
        } else {
            assert_eq!(r.offset, table[ids], "instance {ids}");
            instances.push((r.offset, r.framed_len, r.payload.to_vec()));
            ids += 1;
        }
    }
    assert_eq!(end, size);
    assert_eq!(ids, payloads.len());
    assert_eq!(filler_bytes, summary.filler_bytes);

    // (b) and (c), from the table and the framing.
    for (i, (offset, framed, _)) in instances.iter().enumerate() {
        let span_end = table.get(i + 1).copied().unwrap_or(size);
        if *framed <= page_size - 24 {
            assert_eq!(
                page.page_of(*offset),
                page.page_of(span_end - 1),
                "instance {i} ({framed} B) span [{offset}, {span_end}) crosses a {page_size} B page"
            );
        } else {
            assert_eq!(offset % page_size, 0, "large instance {i} not page-aligned");
        }
    }

    // Every input comes back exactly once; next-fit keeps the order.
    let mapping: Vec<u64> = (0..payloads.len() as u64)
        .map(|input| summary.instance_of(input).unwrap())
        .collect();
    assert_eq!(summary.instance_of_input.is_none(), fit == Fit::Next);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    for (input, p) in payloads.iter().enumerate() {
        let id = mapping[input];
        assert_eq!(
            &instances[id as usize].2, p,
            "input {input} -> instance {id}"
        );
        assert_eq!(&reader.read(id).unwrap(), p);
    }

    // `verify` agrees, with the page size given or inferred from the fillers (which
    // may find a larger one the file also keeps, never a failure or a smaller one).
    let table_path = tfrecord_lirs::default_table_path(&path);
    inspect(&path, Some((&table_path, &table)), Some(page)).unwrap();
    let found = inspect(&path, Some((&table_path, &table)), None).unwrap();
    match found.check_padded(&path).unwrap() {
        Some(p) => assert!(p >= page_size, "inferred {p} < {page_size}"),
        None => assert!(found.fillers == 0 || payloads.is_empty()),
    }
}

fn sizes_strategy(page: u64) -> impl Strategy<Value = Vec<usize>> {
    let p = page as usize;
    let edge = prop_oneof![
        Just(0usize),
        Just(p - 40),
        Just(p - 41),
        Just(p - 39),
        Just(p - 16),
        Just(p - 17),
        Just(p - 1),
        Just(p),
        Just(p + 1),
        Just(2 * p - 30),
        Just(2 * p - 16),
    ];
    let size = prop_oneof![6 => 0usize..(p / 3), 2 => 0usize..p, 1 => edge, 1 => 0usize..(3 * p)];
    prop::collection::vec(size, 0..120)
}

fn run_prop(page: u64, sizes: &[usize], lookahead: usize) {
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    check_padded(&payloads, page, Fit::Next);
    check_padded(&payloads, page, Fit::Best { lookahead });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_at_512(sizes in sizes_strategy(512), window in 1usize..40) {
        run_prop(512, &sizes, window);
    }

    #[test]
    fn invariants_hold_at_4096(sizes in sizes_strategy(4096), window in 1usize..40) {
        run_prop(4096, &sizes, window);
    }

    #[test]
    fn invariants_hold_at_65536(sizes in sizes_strategy(65536), window in 1usize..40) {
        run_prop(65536, &sizes, window);
    }
}

#[test]
fn extreme_page_sizes() {
    let payloads: Vec<Vec<u8>> = [
        0usize, 1, 100, 488, 489, 490, 495, 496, 497, 600, 2000, 70_000,
    ]
    .iter()
    .enumerate()
    .map(|(i, &n)| payload(i, n))
    .collect();
    for page in [format::MIN_PAGE_SIZE, format::MAX_PAGE_SIZE] {
        check_padded(&payloads, page, Fit::Next);
        check_padded(&payloads, page, Fit::Best { lookahead: 4 });
    }
}

#[test]
fn filler_overhead_on_kdd_like_mix() {
    let payloads: Vec<Vec<u8>> = kdd_sizes(20_000, 7)
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (_, next) = write_padded(dir.path(), "n", &payloads, 4096, Fit::Next);
    let (_, best) = write_padded(dir.path(), "b", &payloads, 4096, Fit::BEST);
    eprintln!(
        "kdd-like mix, 20000 records, P=4096: next-fit {:.2}%, best-fit {:.2}%",
        next.overhead_percent(),
        best.overhead_percent()
    );
    assert!(
        next.overhead_percent() <= 6.0,
        "next-fit {:.2}%",
        next.overhead_percent()
    );
    assert!(
        best.overhead_percent() <= 1.0,
        "best-fit {:.2}%",
        best.overhead_percent()
    );
}

#[test]
fn writer_refuses_filler_magic_and_bad_page_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    for bad in [0u64, 256, 4095, 32 << 20] {
        let opts = tfrecord_lirs::PadOptions {
            page_size: bad,
            ..Default::default()
        };
        let err = tfrecord_lirs::PaddedWriter::create(&path, &opts)
            .err()
            .unwrap();
        assert_eq!(err.kind(), tfrecord_lirs::ErrorKind::InvalidArgument);
    }
    let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default()).unwrap();
    let err = w.write(b"\x00LIRSPAD and more").unwrap_err();
    assert!(err.to_string().contains("filler magic"), "{err}");
    w.write(b"\x00LIRSPA").unwrap(); // a prefix of the magic is fine
    assert_eq!(w.finish().unwrap().instances, 1);
    let mut plain = tfrecord_lirs::TFRecordWriter::new(Vec::new(), "mem");
    assert!(plain.write_instance(b"\x00LIRSPAD").is_err());
    assert!(plain.write_padding(23).is_err());
}

#[test]
fn dropped_writer_leaves_nothing_and_old_table_never_outlives_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    {
        let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default()).unwrap();
        w.write(b"abc").unwrap();
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let first: Vec<Vec<u8>> = (0..10).map(|i| payload(i, 50)).collect();
    write_padded(dir.path(), "d", &first, 4096, Fit::Next);
    let second: Vec<Vec<u8>> = (0..3).map(|i| payload(i, 5000)).collect();
    write_padded(dir.path(), "d", &second, 4096, Fit::Next);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    assert_eq!(reader.len(), 3);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// `data` rewritten without its filler number `which` (0-based): the bytes after it
/// move up, so every later instance sits off its page grid.
fn drop_filler(data: &std::path::Path, which: usize) -> (std::path::PathBuf, u64) {
    let bytes = std::fs::read(data).unwrap();
    let mut scanner = RecordScanner::open(data).unwrap();
    let (mut out, mut seen, mut dropped_at) = (Vec::new(), 0, None);
    while let Some(r) = scanner.next_record().unwrap() {
        let range = r.offset as usize..(r.offset + r.framed_len) as usize;
        if r.is_filler() {
            seen += 1;
            if seen == which + 1 {
                dropped_at = Some(r.offset);
                continue;
            }
        }
        out.extend_from_slice(&bytes[range]);
    }
    let damaged = data.with_extension("damaged");
    std::fs::write(&damaged, out).unwrap();
    (damaged, dropped_at.expect("enough fillers"))
}

#[test]
fn the_page_size_is_inferred_from_the_fillers() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = kdd_sizes(600, 7)
        .into_iter()
        .enumerate()
        .map(|(i, n)| payload(i, n))
        .collect();
    for page_size in [512u64, 4096, 65536] {
        for fit in [Fit::Next, Fit::BEST] {
            let (path, _) = write_padded(dir.path(), "d", &payloads, page_size, fit);
            let table_path = tfrecord_lirs::default_table_path(&path);
            let table = read_table(&table_path).unwrap();
            let found = inspect(&path, Some((&table_path, &table)), None).unwrap();
            assert!(found.fillers > 0);
            assert_eq!(found.padded_for(), Some(page_size), "{page_size} {fit:?}");
            assert_eq!(found.check_padded(&path).unwrap(), Some(page_size));
        }
    }
    // Without fillers: not padded, nothing to check.
    let plain = common::write_plain(dir.path(), "plain", &payloads);
    let found = inspect(&plain, None, None).unwrap();
    assert_eq!(found.filler_page_size, None);
    assert_eq!(found.check_padded(&plain).unwrap(), None);
}

#[test]
fn a_padded_file_missing_a_filler_fails_at_the_inferred_page_size() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = kdd_sizes(600, 3)
        .into_iter()
        .enumerate()
        .map(|(i, n)| payload(i, n))
        .collect();
    let (path, _) = write_padded(dir.path(), "d", &payloads, 4096, Fit::Next);
    let (damaged, dropped_at) = drop_filler(&path, 0);
    let n = tfrecord_lirs::build_offset_table(&damaged, &damaged.with_extension("t")).unwrap();
    assert_eq!(n, 600);
    let table = read_table(&damaged.with_extension("t")).unwrap();
    let found = inspect(&damaged, Some((&damaged.with_extension("t"), &table)), None).unwrap();
    // Expected independently: the first instance whose span crosses a 4096 boundary
    // is the one that moved into the dropped filler's place.
    let size = std::fs::metadata(&damaged).unwrap().len();
    let id = (0..table.len())
        .find(|&i| {
            let end = table.get(i + 1).copied().unwrap_or(size);
            table[i] / 4096 != (end - 1) / 4096
        })
        .unwrap();
    assert_eq!(table[id], dropped_at);
    assert_eq!(found.padded_for(), None, "{found:?}");
    let err = found.check_padded(&damaged).unwrap_err().to_string();
    assert!(
        err.contains("invariant (b)")
            && err.contains("page size 4096")
            && err.contains(&format!("instance {id} at byte {dropped_at}")),
        "{err}"
    );
}

#[test]
fn a_filler_off_every_page_grid_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut bytes = Vec::new();
    format::encode_record(&payload(0, 100), &mut bytes);
    format::encode_filler(100, &mut bytes); // ends at byte 316
    format::encode_record(&payload(1, 100), &mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let found = inspect(&path, None, None).unwrap();
    assert_eq!(found.padded_for(), None);
    let err = found.check_padded(&path).unwrap_err().to_string();
    assert!(
        err.contains("at byte 116") && err.contains("512-byte boundary"),
        "{err}"
    );
}

#[test]
fn index_refuses_a_file_that_starts_with_a_filler() {
    let dir = tempfile::tempdir().unwrap();
    for (name, instances) in [("lead", 2usize), ("only", 0)] {
        let path = dir.path().join(name);
        let mut bytes = Vec::new();
        format::encode_filler(40, &mut bytes);
        for i in 0..instances {
            format::encode_record(&payload(i, 30), &mut bytes);
        }
        format::encode_filler(24, &mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let err = tfrecord_lirs::scan_offsets(&path, |_| {}).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&path.display().to_string())
                && msg.contains("at byte 0")
                && msg.contains("instance 0 at byte 0")
                && msg.contains("tfrecord-lirs pad"),
            "{msg}"
        );
        let table = tfrecord_lirs::default_table_path(&path);
        assert!(tfrecord_lirs::build_offset_table(&path, &table).is_err());
        assert!(!table.exists(), "no table may be written");
        // `pad` is the way out: it drops the fillers.
        let out = dir.path().join(format!("{name}.padded"));
        let summary =
            tfrecord_lirs::pad_file(&path, &out, &tfrecord_lirs::PadOptions::default()).unwrap();
        assert_eq!(summary.instances, instances as u64);
    }
}

#[test]
fn pad_and_index_refuse_to_overwrite_their_input() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..20).map(|i| payload(i, 100)).collect();
    let data = common::write_plain(dir.path(), "m.tfrecord", &payloads);
    let before = std::fs::read(&data).unwrap();
    let opts = tfrecord_lirs::PadOptions::default();
    let dotted = dir.path().join(".").join("m.tfrecord");
    let link = dir.path().join("link.tfrecord");
    std::fs::hard_link(&data, &link).unwrap();
    let table = tfrecord_lirs::default_table_path(&data);
    let stem = dir.path().join("m");
    for dst in [&data, &dotted, &link, &table, &stem] {
        // `m` would get the table `m.offsets`... which is not the input: only the
        // clashing ones must fail.
        if dst == &stem {
            continue;
        }
        let err = tfrecord_lirs::pad_file(&data, dst, &opts).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&data.display().to_string()) || msg.contains(&table.display().to_string()),
            "{msg}"
        );
        assert!(
            msg.contains(&dst.display().to_string()) || dst == &table,
            "{msg}"
        );
    }
    // The output's table would be the input.
    let src = dir.path().join("x.offsets");
    std::fs::copy(&data, &src).unwrap();
    let err = tfrecord_lirs::pad_file(&src, &dir.path().join("x"), &opts).unwrap_err();
    assert!(err.to_string().contains("x.offsets"), "{err}");
    // index: the table must not be the data file.
    for t in [&data, &dotted, &link] {
        let err = tfrecord_lirs::build_offset_table(&data, t).unwrap_err();
        assert!(err.to_string().contains("replace the data"), "{err}");
    }
    assert_eq!(
        std::fs::read(&data).unwrap(),
        before,
        "the input is untouched"
    );
    assert!(!dir.path().join("m.tfrecord.offsets.offsets").exists());
}
