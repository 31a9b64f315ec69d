//! One `Reader` shared by many threads: N threads × M epochs, for the pread and the
//! mmap backend, each thread reading through its own `Fetcher` over the shared
//! `Arc<Reader>`, through single `read`s, or through `read_batch`. Every epoch of every
//! thread must yield exactly the multiset of payloads of the files (compared in full,
//! not counted), and every payload must be the one of the id it was returned for.
//!
//! Also run under ThreadSanitizer by `make tsan` (see fuzz/README.md).

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use common::{kdd_sizes, payload, write_padded, write_plain};
use tfrecord_lirs::{
    Backend, Batch, FetchOptions, Fetcher, Fit, OrderParams, Reader, ReaderOptions,
};

const THREADS: usize = 6;
const EPOCHS: u64 = 3;

/// Two files (one padded, one plain) and the payload of every global id.
fn files(dir: &std::path::Path) -> (Vec<(PathBuf, PathBuf)>, Vec<Vec<u8>>) {
    let mut all: Vec<Vec<u8>> = kdd_sizes(1500, 5)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    for i in (3..all.len()).step_by(211) {
        all[i] = payload(i, 9000); // spans more than one page
    }
    all[700] = Vec::new();
    let (padded, _) = write_padded(dir, "a.tfrecord", &all[..900], 4096, Fit::Next);
    let plain = write_plain(dir, "b.tfrecord", &all[900..]);
    let pairs = [padded, plain]
        .into_iter()
        .map(|p| {
            let t = tfrecord_lirs::default_table_path(&p);
            (p, t)
        })
        .collect();
    (pairs, all)
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort_unstable();
    v
}

/// How a thread reads its epochs.
#[derive(Clone, Copy, Debug)]
enum Path {
    Fetcher,
    Read,
    ReadBatch,
}

/// One epoch of `order` read by `how`; checks every payload against its id.
fn read_epoch(
    reader: &Arc<Reader>,
    params: &OrderParams,
    how: Path,
    all: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let order = reader.epoch_order(params).unwrap();
    let mut got = Vec::with_capacity(order.len() as usize);
    let mut check = |id: u64, p: &[u8]| {
        assert_eq!(
            p,
            all[id as usize].as_slice(),
            "{how:?}: payload of id {id}"
        );
        got.push(p.to_vec());
    };
    match how {
        Path::Fetcher => {
            let options = FetchOptions {
                threads: 2,
                window: 64,
                depth: 2,
            };
            let mut fetcher = Fetcher::new(Arc::clone(reader), order, options).unwrap();
            while let Some(window) = fetcher.next_window() {
                let payloads = window.result.unwrap();
                assert_eq!(payloads.len(), window.ids.len());
                for (i, &id) in window.ids.iter().enumerate() {
                    check(id, payloads.get(i).unwrap().unwrap());
                }
            }
        }
        Path::Read => {
            for id in order {
                check(id, &reader.read(id).unwrap());
            }
        }
        Path::ReadBatch => {
            let ids: Vec<u64> = order.collect();
            let mut batch = Batch::default();
            for chunk in ids.chunks(37) {
                reader.read_batch(chunk, &mut batch).unwrap();
                assert_eq!(batch.ids, chunk);
                for (i, &id) in chunk.iter().enumerate() {
                    check(id, batch.payload(i));
                }
            }
        }
    }
    got
}

fn shared_reader(backend: Backend) -> (tempfile::TempDir, Arc<Reader>, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let (pairs, all) = files(dir.path());
    let options = ReaderOptions {
        backend,
        mmap_opt_in: common::mmap_opt_in(),
        ..ReaderOptions::default()
    };
    let reader = Arc::new(Reader::open(&pairs, &options).unwrap());
    assert_eq!(reader.len(), all.len() as u64);
    (dir, reader, all)
}

/// Every thread reads whole epochs (its own seed, instance-based or page-aware) through
/// the shared reader; each epoch is the full multiset.
#[test]
fn threads_reading_whole_epochs_through_one_reader() {
    for backend in [Backend::Auto, Backend::Pread, Backend::Mmap] {
        let (_dir, reader, all) = shared_reader(backend);
        let expected = sorted(all.clone());
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (reader, all, expected, start) = (&reader, &all, &expected, &start);
                s.spawn(move || {
                    let how = [Path::Fetcher, Path::Read, Path::ReadBatch][t % 3];
                    start.wait();
                    for epoch in 0..EPOCHS {
                        let params = OrderParams {
                            seed: 100 + t as u64,
                            epoch,
                            page_aware: t % 2 == 1,
                            ..OrderParams::default()
                        };
                        let got = read_epoch(reader, &params, how, all);
                        assert!(
                            sorted(got) == *expected,
                            "{backend:?} thread {t} ({how:?}) epoch {epoch}: not the full multiset"
                        );
                    }
                });
            }
        });
    }
}

/// The threads are the shards of one epoch: together they read every instance exactly
/// once, epoch after epoch.
#[test]
fn threads_as_shards_cover_each_epoch_exactly_once() {
    for backend in [Backend::Auto, Backend::Pread, Backend::Mmap] {
        for page_aware in [false, true] {
            let (_dir, reader, all) = shared_reader(backend);
            let expected = sorted(all.clone());
            let start = Barrier::new(THREADS);
            let per_thread: Vec<Vec<Vec<Vec<u8>>>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (reader, all, start) = (&reader, &all, &start);
                        s.spawn(move || {
                            let how = [Path::Fetcher, Path::Read, Path::ReadBatch][t % 3];
                            start.wait();
                            (0..EPOCHS)
                                .map(|epoch| {
                                    let params = OrderParams {
                                        seed: 9,
                                        epoch,
                                        page_aware,
                                        num_shards: THREADS as u64,
                                        shard_index: t as u64,
                                    };
                                    read_epoch(reader, &params, how, all)
                                })
                                .collect()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for epoch in 0..EPOCHS as usize {
                let union: Vec<Vec<u8>> = per_thread
                    .iter()
                    .flat_map(|epochs| epochs[epoch].iter().cloned())
                    .collect();
                assert!(
                    sorted(union) == expected,
                    "{backend:?} page_aware={page_aware} epoch {epoch}: shards do not cover the epoch exactly once"
                );
            }
        }
    }
}
