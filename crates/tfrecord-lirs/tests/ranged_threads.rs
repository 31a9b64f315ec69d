//! A thousand and more reads in flight on object storage, on a handful of threads: the
//! process's threads (`/proc/self/task`) are counted while the server holds that many
//! GETs at its gate (tests/http_server). Alone in its test binary, so no other test's
//! threads are counted.
#![cfg(feature = "object-store")]

mod common;
mod http_server;

use common::payload;
use http_server::Server;
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::{FetchOptions, Fetcher, OrderParams};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn a_thousand_reads_in_flight_on_fewer_than_16_threads() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    // Records of 5000 bytes: each its own GET in instance order (more than the merge
    // gap apart).
    let n = 1600;
    let all: Vec<Vec<u8>> = (0..n).map(|i| payload(i, 5000)).collect();
    server.put_padded(dir.path(), "d.tfrecord", &all);
    let reader = server.open_reader("d.tfrecord", ObjectStoreFileSystem::new());
    let order = reader
        .epoch_order(&OrderParams {
            seed: 5,
            ..Default::default()
        })
        .unwrap();
    let fetch = FetchOptions {
        threads: 1500,
        window: 64,
        depth: 2,
    };
    server.hold();
    let consumer = std::thread::spawn(move || {
        let mut fetcher = Fetcher::new(reader, order, fetch).unwrap();
        let mut ids = Vec::new();
        while let Some(w) = fetcher.next_window() {
            let p = w.result.unwrap();
            for (k, &id) in w.ids.iter().enumerate() {
                assert_eq!(p.get(k).unwrap().unwrap(), &payload(id as usize, 5000)[..]);
                ids.push(id);
            }
        }
        ids
    });
    server.wait_until("1,000 GETs held", |held, _| held >= 1000);
    let during = threads();
    server.open();
    let mut ids = consumer.join().unwrap();
    ids.sort_unstable();
    assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
    assert!(during < 16, "{during} threads with 1,000 GETs in flight");
}
