//! Batched and parallel fetching yields exactly what one-by-one reads yield, and
//! page-aware fetching of a padded file reads every page exactly once per epoch.

mod common;

use std::sync::Arc;

use common::{kdd_sizes, payload, write_padded, write_plain};
use tfrecord_lirs::{
    read_table, Backend, Batch, FetchOptions, Fetcher, Fit, OrderParams, OrderVersion, Reader,
    ReaderOptions,
};

fn payloads(n: usize) -> Vec<Vec<u8>> {
    let mut p: Vec<Vec<u8>> = kdd_sizes(n, 11)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    for i in (5..n).step_by(173) {
        p[i] = payload(i, 6000); // larger than a page
    }
    p
}

#[test]
fn read_batch_matches_single_reads_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let all = payloads(800);
    let path = write_plain(dir.path(), "d", &all);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    let ids: Vec<u64> = vec![5, 6, 7, 3, 799, 0, 1, 2, 7, 400, 401, 100];
    let mut batch = Batch::default();
    reader.read_batch(&ids, &mut batch).unwrap();
    assert_eq!(batch.ids, ids);
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(batch.payload(i), all[id as usize].as_slice());
    }
    assert!(reader.read_batch(&[1, 800], &mut batch).is_err());
}

#[test]
fn batches_of_records_longer_than_one_whole_read_are_read_once_and_checked() {
    // Spans over 1 MiB are read only as far as their record goes, straight into the
    // batch: mixed with short records, repeated, on every backend.
    let dir = tempfile::tempdir().unwrap();
    let sizes = [1 << 20, 10, 3 << 20, (1 << 20) + 5, 700];
    let all: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let path = write_plain(dir.path(), "long", &all);
    let file_bytes = std::fs::metadata(&path).unwrap().len();
    let ids = [2, 0, 1, 0, 3, 4, 2];
    for backend in [Backend::Pread, Backend::Mmap, Backend::Auto] {
        let options = ReaderOptions {
            backend,
            mmap_opt_in: common::mmap_opt_in(),
            ..ReaderOptions::default()
        };
        let reader = Reader::open_one(&path, None, &options).unwrap();
        let mut batch = Batch::default();
        for _ in 0..2 {
            // The second time into the buffer the first left.
            reader.reset_io_stats();
            reader.read_batch(&ids, &mut batch).unwrap();
            assert_eq!(batch.ids, ids);
            for (k, &id) in ids.iter().enumerate() {
                assert_eq!(
                    batch.payload(k),
                    all[id as usize].as_slice(),
                    "{backend:?} {id}"
                );
            }
            // Positioned reads read each record once (a map copies a repeated one twice).
            let read = reader.io_stats().bytes_read;
            assert!(
                reader.is_mapped() || read <= file_bytes,
                "{backend:?}: read {read} of {file_bytes} bytes"
            );
        }
    }
    // A damaged payload of a long record: the error names its file, instance and byte.
    let at = read_table(&tfrecord_lirs::default_table_path(&path)).unwrap()[2];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at as usize + 12 + 5000] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    let mut batch = Batch::default();
    let err = reader.read_batch(&[0, 2], &mut batch).unwrap_err();
    assert_eq!(err.kind(), tfrecord_lirs::ErrorKind::DataLoss);
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string())
            && text.contains(&format!("instance 2 at byte {at}")),
        "{text}"
    );
    assert!(batch.is_empty());
}

#[test]
fn fetcher_yields_the_order_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let all = payloads(3000);
    let (path, _) = write_padded(dir.path(), "p", &all, 4096, Fit::Next);
    let reader = Arc::new(Reader::open_one(&path, None, &ReaderOptions::default()).unwrap());
    // Version 2 with one thread: the thread computes each window's ids.
    let cases = [false, true].into_iter().flat_map(|page_aware| {
        [OrderVersion::V1, OrderVersion::V2]
            .into_iter()
            .map(move |version| (page_aware, version))
    });
    for (page_aware, version) in cases {
        for (threads, window, depth) in [
            (1, 1, 1),
            (1, 100, 3),
            (4, 64, 4),
            (8, 256, 2),
            (3, 5000, 1),
        ] {
            let params = OrderParams {
                seed: 4,
                epoch: 1,
                page_aware,
                num_shards: 3,
                shard_index: 2,
            };
            let order = || reader.epoch_order_with_version(&params, version).unwrap();
            let expected: Vec<u64> = order().collect();
            let mut fetcher = Fetcher::new(
                Arc::clone(&reader),
                order(),
                FetchOptions {
                    threads,
                    window,
                    depth,
                },
            )
            .unwrap();
            let mut got_ids = Vec::new();
            while let Some(batch) = fetcher.next_batch() {
                let batch = batch.unwrap();
                assert!(batch.len() >= window.min(expected.len() - got_ids.len()));
                for i in 0..batch.len() {
                    assert_eq!(batch.payload(i), all[batch.ids[i] as usize].as_slice());
                }
                got_ids.extend_from_slice(&batch.ids);
                assert_eq!(fetcher.position(), got_ids.len() as u64);
            }
            assert_eq!(
                got_ids, expected,
                "page_aware={page_aware} threads={threads} {version:?}"
            );
        }
    }
}

#[test]
fn fetcher_resumes_from_a_seeked_order() {
    let dir = tempfile::tempdir().unwrap();
    let all = payloads(1000);
    let (path, _) = write_padded(dir.path(), "p", &all, 4096, Fit::Next);
    let reader = Arc::new(Reader::open_one(&path, None, &ReaderOptions::default()).unwrap());
    let params = OrderParams {
        seed: 9,
        page_aware: true,
        ..Default::default()
    };
    for version in [OrderVersion::V1, OrderVersion::V2] {
        let expected: Vec<u64> = reader
            .epoch_order_with_version(&params, version)
            .unwrap()
            .collect();
        for threads in [1, 4] {
            let options = FetchOptions {
                threads,
                ..Default::default()
            };
            let mut order = reader.epoch_order_with_version(&params, version).unwrap();
            order.seek(333).unwrap();
            let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options).unwrap();
            assert_eq!(fetcher.position(), 333);
            let mut got = Vec::new();
            while let Some(b) = fetcher.next_batch() {
                got.extend(b.unwrap().ids);
            }
            assert_eq!(got, expected[333..], "{version:?} threads={threads}");
            // Positions already delivered past the resume point are left out (and
            // the windows that hold nothing else passed over).
            let mut order = reader.epoch_order_with_version(&params, version).unwrap();
            order.seek(333).unwrap();
            let skipped: Vec<u64> = (340..400).chain(500..1000).chain([410, 412]).collect();
            let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options)
                .unwrap()
                .skip(skipped.iter().copied());
            let mut got = Vec::new();
            let mut positions = Vec::new();
            while let Some(w) = fetcher.next_window() {
                let payloads = w.result.unwrap();
                for (i, &id) in w.ids.iter().enumerate() {
                    assert_eq!(
                        payloads.get(i).unwrap().unwrap(),
                        all[id as usize].as_slice()
                    );
                }
                got.extend(w.ids);
                positions.extend(w.positions);
            }
            let kept: Vec<u64> = (333..1000).filter(|p| !skipped.contains(p)).collect();
            assert_eq!(positions, kept, "{version:?} threads={threads}");
            let kept_ids: Vec<u64> = kept.iter().map(|&p| expected[p as usize]).collect();
            assert_eq!(got, kept_ids, "{version:?} threads={threads}");
        }
    }
}

#[test]
fn fetch_errors_arrive_in_order_and_nothing_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let all = payloads(500);
    let path = write_plain(dir.path(), "d", &all);
    let reader = Arc::new(Reader::open_one(&path, None, &ReaderOptions::default()).unwrap());
    // Damage one payload: the window holding it fails, earlier windows succeed.
    let (_, off) = reader.location(250).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[off as usize + 14] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let params = OrderParams::default();
    let position_of_250 = reader.epoch_order(&params).unwrap().position_of(250);
    let mut fetcher = Fetcher::new(
        Arc::clone(&reader),
        reader.epoch_order(&params).unwrap(),
        FetchOptions {
            threads: 4,
            window: 50,
            depth: 3,
        },
    )
    .unwrap();
    let mut ok_ids = 0;
    loop {
        match fetcher.next_batch() {
            Some(Ok(b)) => ok_ids += b.len(),
            Some(Err(e)) => {
                assert!(e.to_string().contains("instance 250"), "{e}");
                break;
            }
            None => panic!("the damaged instance was never reported"),
        }
    }
    assert_eq!(ok_ids as u64, position_of_250 / 50 * 50);
    // The failed read is retried per id inside the fetcher: the window delivers every
    // other payload, and only the slot of instance 250 holds an error, naming it.
    let params = OrderParams::default();
    for threads in [0, 2] {
        let mut fetcher = Fetcher::new(
            Arc::clone(&reader),
            reader.epoch_order(&params).unwrap(),
            FetchOptions {
                threads,
                window: 50,
                depth: 2,
            },
        )
        .unwrap();
        let mut failed_slots = 0;
        while let Some(w) = fetcher.next_window() {
            let p = w.result.unwrap();
            assert_eq!(p.len(), w.ids.len());
            for (i, &id) in w.ids.iter().enumerate() {
                match p.get(i).unwrap() {
                    Ok(payload) => assert_eq!(payload, all[id as usize].as_slice()),
                    Err(e) => {
                        assert_eq!(id, 250);
                        assert_eq!(e.kind(), tfrecord_lirs::ErrorKind::DataLoss, "{e}");
                        assert!(e.to_string().contains("instance 250"), "{e}");
                        failed_slots += 1;
                    }
                }
            }
            assert_eq!(p.failures().len(), usize::from(w.ids.contains(&250)));
            assert!(p.get(w.ids.len()).is_none());
        }
        assert_eq!(failed_slots, 1, "{threads} threads");
    }
}

fn page_reads_per_epoch(reader: &Arc<Reader>, params: OrderParams) -> tfrecord_lirs::IoStats {
    reader.reset_io_stats();
    let order = reader.epoch_order(&params).unwrap();
    let mut fetcher = Fetcher::new(Arc::clone(reader), order, FetchOptions::default()).unwrap();
    while let Some(b) = fetcher.next_batch() {
        b.unwrap();
    }
    reader.io_stats()
}

#[test]
fn page_aware_fetch_reads_each_padded_page_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // Small records only (the kdd-like mix): every page is one unit, read once.
    let small: Vec<Vec<u8>> = kdd_sizes(4000, 5)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    for (fit, page_size) in [
        (Fit::Next, 4096),
        (Fit::BEST, 4096),
        (Fit::Next, 512),
        (Fit::BEST, 65536),
    ] {
        // At 512 B pages the kdd mix is mostly "large"; scale it to the page.
        let scaled: Vec<Vec<u8>> = small
            .iter()
            .enumerate()
            .map(|(i, p)| payload(i, p.len() / 8))
            .collect();
        let data = if page_size == 512 { &scaled } else { &small };
        let (path, _) = write_padded(dir.path(), "p", data, page_size, fit);
        // Positioned reads (the default backend maps small records, and a mapped read
        // counts each record it decodes).
        let opts = ReaderOptions {
            page_size,
            backend: tfrecord_lirs::Backend::Pread,
            ..Default::default()
        };
        let reader = Arc::new(Reader::open_one(&path, None, &opts).unwrap());
        for epoch in 0..2 {
            let params = OrderParams {
                seed: 1,
                epoch,
                page_aware: true,
                ..Default::default()
            };
            let stats = page_reads_per_epoch(&reader, params);
            assert_eq!(
                stats.page_reads, stats.data_pages,
                "{fit:?} P={page_size}: {stats:?}"
            );
            assert_eq!(stats.distinct_pages, stats.data_pages);
        }
        // Instance-based on the same file: many reads per page.
        let stats = page_reads_per_epoch(&reader, OrderParams::default());
        if page_size == 4096 {
            assert!(stats.page_reads > 5 * stats.data_pages, "{stats:?}");
        }
    }
    // With records larger than a page, a large record's last page is shared with the
    // unit that follows it: at most one extra page read per large record.
    let mixed = payloads(4000);
    let larges = mixed.iter().filter(|p| p.len() + 16 > 4096 - 24).count() as u64;
    let (path, _) = write_padded(dir.path(), "m", &mixed, 4096, Fit::BEST);
    let opts = ReaderOptions {
        backend: tfrecord_lirs::Backend::Pread,
        ..Default::default()
    };
    let reader = Arc::new(Reader::open_one(&path, None, &opts).unwrap());
    let stats = page_reads_per_epoch(
        &reader,
        OrderParams {
            seed: 3,
            page_aware: true,
            ..Default::default()
        },
    );
    assert!(
        stats.page_reads <= stats.data_pages + larges,
        "{stats:?}, {larges} large"
    );
    assert_eq!(stats.distinct_pages, stats.data_pages);
}

/// Needs the panic point of the `fault-injection` feature (`make cargo-test` runs it).
#[cfg(feature = "fault-injection")]
#[test]
fn panic_in_a_fetch_thread_is_an_internal_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let all = Arc::new(payloads(600));
    let path = write_plain(dir.path(), "d", &all);
    let reader = Arc::new(Reader::open_one(&path, None, &ReaderOptions::default()).unwrap());
    let cases = [1, 4].into_iter().flat_map(|threads| {
        [OrderVersion::V1, OrderVersion::V2]
            .into_iter()
            .map(move |version| (threads, version))
    });
    for (threads, version) in cases {
        let reader = Arc::clone(&reader);
        let all = Arc::clone(&all);
        let (tx, rx) = std::sync::mpsc::channel();
        // On a thread of its own, so a hang fails the test instead of stalling it.
        // Version 2 with one thread: the failed windows' ids were the thread's to
        // compute.
        std::thread::spawn(move || {
            let params = OrderParams::default();
            let order = || reader.epoch_order_with_version(&params, version).unwrap();
            let expected: Vec<u64> = order().collect();
            let options = FetchOptions {
                threads,
                window: 50,
                depth: 2,
            };
            let mut fetcher = Fetcher::new(Arc::clone(&reader), order(), options).unwrap();
            fetcher.set_test_panic(true);
            let failed = fetcher.next_window().unwrap();
            let err = failed.result.unwrap_err();
            assert_eq!(err.kind(), tfrecord_lirs::ErrorKind::Internal, "{err}");
            assert!(err.to_string().contains("panic"), "{err}");
            assert_eq!(failed.ids, expected[..50]);
            // The threads survived: once the fault is gone, the rest of the epoch
            // is read (the windows already in flight fail too, in order).
            fetcher.set_test_panic(false);
            let mut got = failed.ids;
            while let Some(w) = fetcher.next_window() {
                if let Ok(p) = &w.result {
                    for (i, &id) in w.ids.iter().enumerate() {
                        assert_eq!(p.get(i).unwrap().unwrap(), all[id as usize].as_slice());
                    }
                }
                got.extend(w.ids);
            }
            assert_eq!(got, expected);
            tx.send(()).unwrap();
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| {
                panic!("fetcher with {threads} threads, {version:?}, hung (or its test failed)")
            });
    }
}
