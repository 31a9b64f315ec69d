//! Object storage read by requests in flight on the storage's runtime (no thread
//! each): through object_store's `http://` client against this test's own server
//! (tests/http_server), one per test, so the GETs each test counts are its own. The
//! same payloads as the local file in every order and delivery; neighbouring records
//! one GET; a dropped fetch cancels its requests; a failing server retried, then the
//! error names the object, the instance and the byte. Nothing waits on a clock: reads
//! in flight are held at the server's gate.
#![cfg(feature = "object-store")]

mod common;
mod http_server;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{kdd_sizes, payload};
use http_server::Server;
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::{Batch, ErrorKind, FetchOptions, Fetcher, OrderParams, Reader};

/// A padded file of `n` kdd-sized records, locally and on `server` as `name` (with
/// its table); the local reader and the URL's.
fn dataset(
    server: &Server,
    fs: ObjectStoreFileSystem,
    n: usize,
) -> (PathBuf, Arc<Reader>, Arc<Reader>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Vec<u8>> = kdd_sizes(n, 7)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    let path = server.put_padded(dir.path(), "d.tfrecord", &all);
    let local = Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap());
    let remote = server.open_reader("d.tfrecord", fs);
    (path, local, remote, dir)
}

/// The (id, payload) pairs of one epoch, in delivery order.
fn epoch(
    reader: &Arc<Reader>,
    params: &OrderParams,
    options: FetchOptions,
    unordered: bool,
) -> Vec<(u64, Vec<u8>)> {
    let order = reader.epoch_order(params).unwrap();
    let mut fetcher = Fetcher::new(Arc::clone(reader), order, options).unwrap();
    if unordered {
        fetcher = fetcher.unordered();
    }
    let mut out = Vec::new();
    while let Some(w) = fetcher.next_window() {
        let p = w.result.unwrap();
        for (k, &id) in w.ids.iter().enumerate() {
            out.push((id, p.get(k).unwrap().unwrap().to_vec()));
        }
    }
    out
}

fn data_gets(server: &Server) -> Vec<std::ops::Range<u64>> {
    server
        .gets()
        .into_iter()
        .filter(|(name, _)| name == "d.tfrecord")
        .map(|(_, r)| r)
        .collect()
}

#[test]
fn epochs_read_by_requests_equal_the_local_file() {
    let server = Server::start();
    let (_, local, remote, _dir) = dataset(&server, ObjectStoreFileSystem::new(), 1500);
    assert!(remote.is_remote());
    for page_aware in [false, true] {
        let params = OrderParams {
            seed: 4,
            epoch: 1,
            page_aware,
            ..Default::default()
        };
        let options = FetchOptions {
            threads: 100,
            window: 64,
            depth: 2,
        };
        let want = epoch(
            &local,
            &params,
            FetchOptions {
                threads: 0,
                ..options
            },
            false,
        );
        assert_eq!(
            epoch(&remote, &params, options, false),
            want,
            "ordered, {params:?}"
        );
        // Unordered: the same (id, payload) pairs, each once.
        let mut got = epoch(&remote, &params, options, true);
        got.sort();
        let mut sorted = want.clone();
        sorted.sort();
        assert_eq!(got, sorted, "unordered, {params:?}");
        // The default: the adaptive limit of requests in flight.
        let auto = FetchOptions {
            threads: FetchOptions::auto_threads(&remote),
            ..options
        };
        assert_eq!(auto.threads, tfrecord_lirs::ADAPTIVE_IN_FLIGHT);
        assert_eq!(epoch(&remote, &params, auto, false), want, "adaptive");
        let mut got = epoch(&remote, &params, auto, true);
        got.sort();
        assert_eq!(got, sorted, "adaptive, unordered");
    }
    // A batch of ids in any order, repeats too, through the requests in flight.
    let ids = [1400, 3, 3, 700, 4, 5, 1499, 0];
    let mut batch = Batch::default();
    remote.read_batch_concurrent(&ids, &mut batch).unwrap();
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(batch.payload(k), local.read(id).unwrap(), "id {id}");
    }
}

#[test]
fn neighbouring_records_are_one_get() {
    let server = Server::start();
    let (_, local, remote, _dir) = dataset(&server, ObjectStoreFileSystem::new(), 2000);
    // A page-aware epoch: each unit (the records that start in one page) is one run,
    // and runs of one window less than a page apart share a GET.
    server.clear_gets();
    let params = OrderParams {
        seed: 2,
        page_aware: true,
        ..Default::default()
    };
    let options = FetchOptions {
        threads: 64,
        window: 256,
        depth: 2,
    };
    let got = epoch(&remote, &params, options, false);
    assert_eq!(got.len(), 2000);
    let gets = data_gets(&server);
    let pages = local.io_stats().data_pages.max(1);
    let pages = pages.max(
        std::fs::metadata(local.location(0).unwrap().0)
            .unwrap()
            .len()
            .div_ceil(4096),
    );
    assert!(
        gets.len() as u64 <= pages,
        "{} GETs for {} records in {pages} pages",
        gets.len(),
        got.len()
    );
    assert!(
        gets.len() * 5 <= got.len(),
        "{} GETs for {} records",
        gets.len(),
        got.len()
    );

    // Two records with one between them (less than the merge gap apart): one GET.
    server.clear_gets();
    let (_, a) = local.location(10).unwrap();
    let (_, c) = local.location(12).unwrap();
    assert!(c - a < 4096, "records 10 and 12 are {} bytes apart", c - a);
    let mut batch = Batch::default();
    remote.read_batch_concurrent(&[12, 10], &mut batch).unwrap();
    assert_eq!(batch.payload(0), local.read(12).unwrap());
    assert_eq!(batch.payload(1), local.read(10).unwrap());
    assert_eq!(data_gets(&server).len(), 1, "{:?}", data_gets(&server));
    // Far apart (more than the gap): a GET each.
    server.clear_gets();
    remote
        .read_batch_concurrent(&[0, 1999], &mut batch)
        .unwrap();
    assert_eq!(data_gets(&server).len(), 2, "{:?}", data_gets(&server));
}

#[test]
fn dropping_a_fetch_cancels_its_requests() {
    let server = Server::start();
    let (_, local, remote, _dir) = dataset(&server, ObjectStoreFileSystem::new(), 1200);
    let params = OrderParams {
        seed: 8,
        ..Default::default()
    };
    let options = FetchOptions {
        threads: 200,
        window: 16,
        depth: 2,
    };
    let order = remote.epoch_order(&params).unwrap();
    let mut fetcher = Fetcher::new(Arc::clone(&remote), order, options).unwrap();
    // The first window's GETs go through, every later one is held.
    let first: Vec<u64> = epoch(
        &local,
        &params,
        FetchOptions {
            threads: 0,
            ..options
        },
        false,
    )
    .into_iter()
    .take(16)
    .map(|(id, _)| id)
    .collect();
    let offsets: BTreeSet<u64> = first
        .iter()
        .map(|&id| local.location(id).unwrap().1)
        .collect();
    server.hold_except(offsets.into_iter().collect());
    let w = fetcher.next_window().unwrap();
    assert_eq!(w.ids, first);
    drop(w);
    server.wait_until("requests of later windows held", |held, _| held >= 100);
    let in_flight = fetcher.requests_in_flight();
    assert!(in_flight >= 100, "{in_flight} requests in flight");
    let held = server.held();
    drop(fetcher);
    // Every held request is given up by the client (its connection closed), none
    // answered: the server sees each one cancelled.
    server.wait_until("held requests cancelled", |now, cancelled| {
        now == 0 && cancelled >= held
    });
}

#[test]
fn failing_requests_are_retried_then_the_error_names_the_object() {
    let server = Server::start();
    let fs = ObjectStoreFileSystem::new().with_retries(
        3,
        Duration::from_millis(1),
        Duration::from_secs(60),
    );
    let (_, local, remote, _dir) = dataset(&server, fs, 300);
    // Two 503s, then the server answers: the retries make the read whole.
    server.clear_gets();
    server.fail(Some(2));
    let ids: Vec<u64> = (0..300).step_by(7).collect();
    let mut batch = Batch::default();
    remote.read_batch_concurrent(&ids, &mut batch).unwrap();
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(batch.payload(k), local.read(id).unwrap());
    }
    // Every GET answered 503 from now on: a window's slots fail, each with the error
    // naming the object, as a positioned read's does.
    server.fail(None);
    let params = OrderParams::default();
    let order = remote.epoch_order(&params).unwrap();
    let options = FetchOptions {
        threads: 16,
        window: 8,
        depth: 1,
    };
    let mut fetcher = Fetcher::new(Arc::clone(&remote), order, options).unwrap();
    let w = fetcher.next_window().unwrap();
    let payloads = w.result.unwrap();
    assert_eq!(payloads.failures().len(), w.ids.len());
    for (slot, e) in payloads.failures() {
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
        let text = e.to_string();
        assert!(text.contains(&server.url("d.tfrecord")), "{text}");
        let _ = slot;
    }
}

#[test]
fn an_adaptive_scope_halves_its_limit_when_the_storage_throttles() {
    use tfrecord_lirs::ranged::ReadScope;
    use tfrecord_lirs::remote::FileSystem;
    let server = Server::start();
    server.put("o", (0..=255u8).cycle().take(1 << 20).collect());
    let fs = ObjectStoreFileSystem::new().with_retries(
        3,
        Duration::from_millis(1),
        Duration::from_secs(60),
    );
    let object = fs.open_read(&server.url("o")).unwrap();
    let ranged = object.ranged().unwrap();
    // Ranges far apart: one GET each, fewer than a round of the limit (64), so the limit
    // moves only for the storage's refusals.
    let ranges: Vec<std::ops::Range<u64>> =
        (0..10u64).map(|k| k * 65536..k * 65536 + 100).collect();
    let read = |scope: &ReadScope| {
        let (sent, got) = std::sync::mpsc::channel();
        ranged.read_ranges(
            &ranges,
            scope,
            Box::new(move |r| {
                let _ = sent.send(r.map(|s| s.iter().map(|b| b.to_vec()).collect::<Vec<_>>()));
            }),
        );
        let bytes = got.recv().unwrap().unwrap();
        for (r, b) in ranges.iter().zip(bytes) {
            let want: Vec<u8> = (r.start..r.end).map(|i| (i % 256) as u8).collect();
            assert_eq!(b, want);
        }
    };
    let calm = ReadScope::adaptive(64, 8, 2048);
    read(&calm);
    assert_eq!(calm.limit(), 64);
    // Two 503s (S3's SlowDown), retried by the client: the limit is halved once.
    server.fail(Some(2));
    let throttled = ReadScope::adaptive(64, 8, 2048);
    read(&throttled);
    assert_eq!(throttled.limit(), 32);
    // A scope started after those refusals does not count them.
    let later = ReadScope::adaptive(64, 8, 2048);
    read(&later);
    assert_eq!(later.limit(), 64);
    // A pinned limit does not move.
    server.fail(Some(2));
    let pinned = ReadScope::new(64);
    read(&pinned);
    assert_eq!(pinned.limit(), 64);
}

/// The adaptive limit's rule raises it after its first round (as many answers as the
/// limit) whatever the throughput (there is no best round yet to fall below), so the
/// limit an epoch ends at follows from its GET count alone: 256 → 512 after 256
/// answers, then 512 → 1,024 after 512 more. An epoch after the first starts where the
/// last one ended, so the second epoch's first round is 512 answers long and ends at
/// 1,024 (starting from 256 again, it would end at 512).
#[test]
fn the_adaptive_limit_carries_from_one_epoch_to_the_next() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    // 700 records of 5,000 bytes: only neighbours in one window share a GET.
    let all: Vec<Vec<u8>> = (0..700).map(|i| payload(i, 5000)).collect();
    server.put_padded(dir.path(), "d.tfrecord", &all);
    let remote = server.open_reader("d.tfrecord", ObjectStoreFileSystem::new());
    let auto = FetchOptions {
        threads: tfrecord_lirs::ADAPTIVE_IN_FLIGHT,
        window: 64,
        depth: 2,
    };
    assert_eq!(remote.learned_in_flight(), None);
    let mut learned = Vec::new();
    for e in 0..2 {
        server.clear_gets();
        let params = OrderParams {
            seed: 9,
            epoch: e,
            ..Default::default()
        };
        assert_eq!(epoch(&remote, &params, auto, false).len(), all.len());
        let gets = data_gets(&server).len();
        // Within the rounds the expectation counts on (the first round of each epoch
        // complete, the next one not).
        assert!((512..768).contains(&gets), "{gets} GETs in epoch {e}");
        learned.push(remote.learned_in_flight());
    }
    assert_eq!(learned, [Some(512), Some(1024)]);
}
