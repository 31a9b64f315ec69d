//! Reads in flight through the local tier (`cache_dir`) over object storage: the
//! blocks missing from the cache are fetched as requests on the storage's runtime, as
//! without the cache, not by a thread each; once every block is local (the object
//! mapped from them), a few fetch threads read it, not one per read asked for. The
//! process's threads (`/proc/self/task`) are counted while the server holds a GET for
//! every block at its gate (tests/http_server), and after each window of a warm read.
//! Alone in its test binary, so no other test's threads are counted.
#![cfg(feature = "object-store")]

mod common;
mod http_server;

use std::path::Path;
use std::sync::Arc;

use common::payload;
use http_server::Server;
use tfrecord_lirs::block_cache::{BlockCache, BLOCK_SIZE};
use tfrecord_lirs::cached_fs::CachedFileSystem;
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::remote::FileSystem;
use tfrecord_lirs::{FetchOptions, Fetcher, OrderParams, Reader, ReaderOptions, Storage};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

const SIZE: usize = 20_000;

/// Every (id, payload) of one epoch, in the order read, 512 reads in flight.
fn epoch(reader: Arc<Reader>) -> Vec<(u64, Vec<u8>)> {
    epoch_counting_threads(reader).0
}

/// [`epoch`], and the most threads the process had after a window came in.
fn epoch_counting_threads(reader: Arc<Reader>) -> (Vec<(u64, Vec<u8>)>, usize) {
    let order = reader
        .epoch_order(&OrderParams {
            seed: 11,
            ..Default::default()
        })
        .unwrap();
    let fetch = FetchOptions {
        threads: 512,
        window: 64,
        depth: 2,
    };
    let mut fetcher = Fetcher::new(reader, order, fetch).unwrap();
    let mut got = Vec::new();
    let mut most = 0;
    while let Some(w) = fetcher.next_window() {
        most = most.max(threads());
        let p = w.result.unwrap();
        for (k, &id) in w.ids.iter().enumerate() {
            got.push((id, p.get(k).unwrap().unwrap().to_vec()));
        }
    }
    (got, most)
}

#[test]
fn cold_reads_through_cache_dir_are_requests_not_a_thread_each() {
    let server = Server::start();
    server.send_etags();
    let dir = tempfile::tempdir().unwrap();
    // 800 records of 20,000 bytes: 4 blocks of the cache.
    let n = 800;
    let all: Vec<Vec<u8>> = (0..n).map(|i| payload(i, SIZE)).collect();
    let path = server.put_padded(dir.path(), "d.tfrecord", &all);
    let blocks = std::fs::metadata(&path).unwrap().len().div_ceil(BLOCK_SIZE) as usize;
    let cache_dir = dir.path().join("cache");
    let open = |cached: bool| {
        let mut fs: Arc<dyn FileSystem> = Arc::new(ObjectStoreFileSystem::new());
        if cached {
            let cache = BlockCache::open(&cache_dir, 1 << 40).unwrap();
            fs = Arc::new(CachedFileSystem::new(fs, cache));
        }
        let options = ReaderOptions {
            storage: Storage::with_file_system(fs),
            ..Default::default()
        };
        let url = server.url("d.tfrecord");
        Arc::new(Reader::open_one(Path::new(&url), None, &options).unwrap())
    };

    let plain = epoch(open(false));
    assert_eq!(plain.len(), n);

    // Cold: every block missing; the threads counted while GETs are held.
    server.clear_gets();
    let cold = open(true);
    server.hold();
    let reading = Arc::clone(&cold);
    let consumer = std::thread::spawn(move || epoch(reading));
    server.wait_until("a GET held", |held, _| held >= 1);
    let during = threads();
    server.open();
    let cached = consumer.join().unwrap();
    assert_eq!(cached, plain, "read through cache_dir");
    let data_gets = |gets: Vec<(String, std::ops::Range<u64>)>| {
        gets.into_iter()
            .filter(|(name, _)| name.ends_with("d.tfrecord"))
            .count()
    };
    assert!(
        during < 24,
        "{during} threads with 512 reads in flight through cache_dir"
    );
    // Each block fetched once (opening the reader included), by whichever read wanted
    // it first.
    assert_eq!(data_gets(server.gets()), blocks);

    // Warm: the same reader's next epoch, and a reader opened afresh (every block
    // local: mapped from them), make no request, and take no thread per read in flight.
    server.clear_gets();
    let (again, again_threads) = epoch_counting_threads(Arc::clone(&cold));
    assert_eq!(again, plain);
    let warm = open(true);
    assert!(warm.is_mapped(), "every block local: the object is mapped");
    let (fresh, fresh_threads) = epoch_counting_threads(warm);
    assert_eq!(fresh, plain);
    assert_eq!(server.gets(), []);
    for (read, most) in [("again", again_threads), ("opened warm", fresh_threads)] {
        assert!(
            most < 24,
            "{most} threads with 512 reads in flight through cache_dir, all local ({read})"
        );
    }
}
