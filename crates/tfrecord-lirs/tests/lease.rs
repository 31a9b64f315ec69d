//! The default backend (`Backend::Auto`): `pread` plus a memory map held under a read
//! lease. Its mapped batches (with prefetch) and the inline fetcher must give exactly
//! what `pread` gives, and a writer or a truncation underneath must revoke the map
//! first: a clean error afterwards, never `SIGBUS`, and the writer is not held up.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{kdd_sizes, payload, write_padded, write_plain};
use tfrecord_lirs::{
    Backend, Batch, ErrorKind, FetchOptions, Fetcher, Fit, OrderParams, Reader, ReaderOptions,
};

fn open(files: &[PathBuf], backend: Backend) -> Reader {
    let pairs: Vec<_> = files
        .iter()
        .map(|p| (p.clone(), tfrecord_lirs::default_table_path(p)))
        .collect();
    let options = ReaderOptions {
        backend,
        mmap_opt_in: common::mmap_opt_in(),
        ..ReaderOptions::default()
    };
    Reader::open(&pairs, &options).unwrap()
}

fn small_records(n: usize, seed: u64) -> Vec<Vec<u8>> {
    kdd_sizes(n, seed)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect()
}

/// Every payload of `ids`, read in batches of `batch` by `reader`.
fn batches(reader: &Reader, ids: &[u64], batch: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut b = Batch::default();
    for chunk in ids.chunks(batch) {
        reader.read_batch(chunk, &mut b).unwrap();
        assert_eq!(b.ids, chunk);
        out.extend(b.payloads().map(<[u8]>::to_vec));
    }
    out
}

/// One epoch through a `Fetcher` with `threads` threads (0: inline).
fn fetched(reader: &Arc<Reader>, params: &OrderParams, threads: usize) -> Vec<(u64, Vec<u8>)> {
    let order = reader.epoch_order(params).unwrap();
    let options = FetchOptions {
        threads,
        window: 100,
        depth: 3,
    };
    let mut fetcher = Fetcher::new(Arc::clone(reader), order, options).unwrap();
    let mut out = Vec::new();
    while let Some(w) = fetcher.next_window() {
        let p = w.result.unwrap();
        assert_eq!(p.len(), w.ids.len());
        for (i, &id) in w.ids.iter().enumerate() {
            out.push((id, p.get(i).unwrap().unwrap().to_vec()));
        }
    }
    out
}

#[test]
fn auto_maps_small_records_and_reads_exactly_what_pread_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut all = small_records(3000, 1);
    all[17] = Vec::new();
    all[1000] = payload(1000, 20_000); // longer than a page
    let (padded, _) = write_padded(dir.path(), "a.tfrecord", &all[..1700], 4096, Fit::Next);
    let plain = write_plain(dir.path(), "b.tfrecord", &all[1700..]);
    let files = [padded, plain];
    let auto = Arc::new(open(&files, Backend::Auto));
    let pread = Arc::new(open(&files, Backend::Pread));
    let mmap = Arc::new(open(&files, Backend::Mmap));
    assert!(
        auto.is_mapped(),
        "the default backend did not map small records"
    );
    assert!(!pread.is_mapped());
    for page_aware in [false, true] {
        let params = OrderParams {
            seed: 5,
            page_aware,
            ..OrderParams::default()
        };
        let ids: Vec<u64> = auto.epoch_order(&params).unwrap().collect();
        // Batches shorter and longer than the prefetch distances, and a repeated id.
        let mut with_repeat = ids.clone();
        with_repeat.insert(10, ids[3]);
        for batch in [1, 7, 16, 64, 256, 5000] {
            let want = batches(&pread, &with_repeat, batch);
            assert_eq!(want.len(), with_repeat.len());
            for (k, &id) in with_repeat.iter().enumerate() {
                assert_eq!(want[k], all[id as usize], "pread id {id}");
            }
            assert!(
                batches(&auto, &with_repeat, batch) == want,
                "auto, batch {batch}"
            );
            assert!(
                batches(&mmap, &with_repeat, batch) == want,
                "mmap, batch {batch}"
            );
        }
        // The fetcher: inline (0 threads) and pooled give one sequence, on every backend.
        let want = fetched(&pread, &params, 2);
        for reader in [&auto, &pread, &mmap] {
            for threads in [0, 1, 3] {
                assert!(
                    fetched(reader, &params, threads) == want,
                    "threads {threads}"
                );
            }
        }
        assert_eq!(
            FetchOptions::auto_threads(&auto),
            0,
            "mapped readers read inline"
        );
        assert_eq!(FetchOptions::auto_threads(&pread), 2);
    }
}

#[test]
fn auto_does_not_map_large_records() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Vec<u8>> = (0..20).map(|i| payload(i, 40_000)).collect();
    let f = write_plain(dir.path(), "big.tfrecord", &all);
    let auto = open(std::slice::from_ref(&f), Backend::Auto);
    assert!(!auto.is_mapped());
    assert_eq!(
        batches(&auto, &[3, 1, 19], 2),
        vec![all[3].clone(), all[1].clone(), all[19].clone()]
    );
    // 800 KB fit in any memory: read through the page cache, two threads.
    assert!(!auto.reads_cold());
    assert_eq!(FetchOptions::auto_threads(&auto), 2);
    // O_DIRECT reads wait on the device: more reads in flight.
    let direct = Arc::new(open(&[f], Backend::Direct));
    assert!(direct.reads_cold());
    assert_eq!(
        FetchOptions::auto_threads(&direct),
        tfrecord_lirs::COLD_AUTO_THREADS
    );
    let params = OrderParams::default();
    assert!(
        fetched(&direct, &params, tfrecord_lirs::COLD_AUTO_THREADS) == fetched(&direct, &params, 0)
    );
}

#[test]
fn auto_without_a_lease_falls_back_to_pread() {
    let dir = tempfile::tempdir().unwrap();
    let all = small_records(500, 2);
    let f = write_plain(dir.path(), "w.tfrecord", &all);
    // Someone holds the file open for writing: no read lease can be had.
    let writer = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
    let auto = open(std::slice::from_ref(&f), Backend::Auto);
    assert!(!auto.is_mapped());
    assert_eq!(
        batches(&auto, &[4, 2], 8),
        vec![all[4].clone(), all[2].clone()]
    );
    drop(writer);
}

/// Whether this process maps (a part of) the file `path` (`/proc/self/maps`).
fn mapped_here(path: &Path) -> bool {
    let path = std::fs::canonicalize(path).unwrap();
    let path = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(path))
}

/// Truncates `path` to `len` on another thread; returns whether this process still
/// mapped the file when the truncation returned.
fn truncate_elsewhere(path: &Path, len: u64) -> bool {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        mapped_here(&path)
    })
    .join()
    .unwrap()
}

#[test]
fn truncation_underneath_revokes_the_map_and_reads_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let all = small_records(4000, 3);
    let f = write_plain(dir.path(), "t.tfrecord", &all);
    let reader = Arc::new(open(std::slice::from_ref(&f), Backend::Auto));
    assert!(reader.is_mapped());
    let ids: Vec<u64> = (0..all.len() as u64).rev().collect();
    assert_eq!(batches(&reader, &ids, 256).len(), all.len());

    // Readers keep reading (mapped) on other threads while the file is truncated: each
    // has read the whole file once (all clean) before the truncation, and reads on until
    // it sees the truncation (records past the new end fail), which it must in the first
    // pass it starts once the truncation is done.
    let truncated = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(std::sync::Barrier::new(3));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (reader, started) = (Arc::clone(&reader), Arc::clone(&started));
            let truncated = Arc::clone(&truncated);
            std::thread::spawn(move || {
                let mut batch = Batch::default();
                let ids: Vec<u64> = (0..4000u64).map(|i| (i * 7919 + t) % 4000).collect();
                let pass = |batch: &mut Batch| -> usize {
                    let mut errors = 0;
                    for chunk in ids.chunks(128) {
                        if let Err(e) = reader.read_batch(chunk, batch) {
                            assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
                            errors += 1;
                        }
                    }
                    errors
                };
                let before = pass(&mut batch);
                started.wait();
                assert_eq!(before, 0, "an error before the truncation");
                loop {
                    let after_truncation = truncated.load(std::sync::atomic::Ordering::Acquire);
                    let errors = pass(&mut batch);
                    if errors > 0 || after_truncation {
                        return errors;
                    }
                }
            })
        })
        .collect();
    started.wait();
    let size = std::fs::metadata(&f).unwrap().len();
    assert!(
        mapped_here(&f),
        "the file is not mapped before the truncation"
    );
    // The truncation went through only once the watcher had unmapped the file (and then
    // released the lease), not when the kernel broke the lease after lease-break-time
    // with the map still in place: no page of it can be touched past the new end.
    let still_mapped = truncate_elsewhere(&f, size / 2);
    truncated.store(true, std::sync::atomic::Ordering::Release);
    assert!(
        !still_mapped,
        "the truncation went through while the file was still mapped"
    );
    assert!(!reader.is_mapped(), "the map survived a truncation");
    for (t, errors) in readers.into_iter().map(|h| h.join().unwrap()).enumerate() {
        assert!(errors > 0, "reader {t} never saw the truncation");
    }

    // Records past the new end are a clean error naming the file and a byte offset;
    // those before it still read (through pread now).
    let mut batch = Batch::default();
    let err = reader.read_batch(&[3999], &mut batch).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss);
    let text = err.to_string();
    assert!(
        text.contains("t.tfrecord") && text.contains("byte"),
        "{text}"
    );
    reader.read_batch(&[0, 1], &mut batch).unwrap();
    assert_eq!(batch.payload(1), all[1].as_slice());
}

#[test]
fn opening_for_write_revokes_the_map_and_changed_bytes_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let all = small_records(1000, 4);
    let f = write_plain(dir.path(), "m.tfrecord", &all);
    let reader = open(std::slice::from_ref(&f), Backend::Auto);
    assert!(reader.is_mapped());
    // Overwrite one byte of record 500's payload, in place.
    let (_, at) = reader.location(500).unwrap();
    {
        use std::os::unix::fs::FileExt;
        let w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        assert!(
            !reader.is_mapped(),
            "opening for write did not revoke the map"
        );
        w.write_all_at(&[0xEE], at + 20).unwrap();
    }
    let mut batch = Batch::default();
    let err = reader.read_batch(&[499, 500], &mut batch).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DataLoss, "{err}");
    assert!(err.to_string().contains("instance 500"), "{err}");
    reader.read_batch(&[499], &mut batch).unwrap();
    assert_eq!(batch.payload(0), all[499].as_slice());
}

#[test]
fn a_reader_told_its_order_is_page_aware_reads_what_any_other_reads() {
    // The order given at open only steers the default backend's choice for files
    // beyond the memory (the unit tests of `choose_auto_read`; tests/test_memory_limit.py
    // in a real cgroup): these fit, so both map, and every order reads the same records.
    let dir = tempfile::tempdir().unwrap();
    let all = small_records(2000, 5);
    let (f, _) = write_padded(dir.path(), "p.tfrecord", &all, 4096, Fit::Next);
    let pairs = [(f.clone(), tfrecord_lirs::default_table_path(&f))];
    let open = |page_aware| {
        let options = ReaderOptions {
            page_aware,
            ..ReaderOptions::default()
        };
        Arc::new(Reader::open(&pairs, &options).unwrap())
    };
    let (told, untold) = (open(true), open(false));
    assert!(told.is_mapped() && untold.is_mapped());
    assert!(!told.reads_cold() && !untold.reads_cold());
    for page_aware in [true, false] {
        let params = OrderParams {
            page_aware,
            ..OrderParams::default()
        };
        assert!(fetched(&told, &params, 2) == fetched(&untold, &params, 2));
    }
}
