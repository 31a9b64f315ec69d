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
    let mapping: Vec<u64> = match fit {
        Fit::Next => (0..payloads.len() as u64).collect(),
        Fit::Best { .. } => summary.instance_of_input.clone(),
    };
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    for (input, p) in payloads.iter().enumerate() {
        let id = mapping[input];
        assert_eq!(
            &instances[id as usize].2, p,
            "input {input} -> instance {id}"
        );
        assert_eq!(&reader.read(id).unwrap(), p);
    }

    // `verify` agrees.
    let table_path = tfrecord_lirs::default_table_path(&path);
    inspect(&path, Some((&table_path, &table)), Some(page)).unwrap();
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

fn run_prop(page: u64, sizes: &[usize], window: usize) {
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    check_padded(&payloads, page, Fit::Next);
    check_padded(&payloads, page, Fit::Best { window });
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
        check_padded(&payloads, page, Fit::Best { window: 4 });
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
