//! Epoch orders: permutations, page-aware contiguity, shards, determinism, seeking,
//! several files, and one reader shared by many threads.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use common::{kdd_sizes, payload, write_padded, write_plain};
use tfrecord_lirs::{default_table_path, Fit, OrderParams, Reader, ReaderOptions, TFRecordLIRS};

fn padded_reader(n: usize) -> (tempfile::TempDir, Reader) {
    let dir = tempfile::tempdir().unwrap();
    let mut payloads: Vec<Vec<u8>> = kdd_sizes(n, 3)
        .iter()
        .enumerate()
        .map(|(i, &s)| payload(i, s))
        .collect();
    for i in (0..n).step_by(97) {
        payloads[i] = payload(i, 9000); // larger than a page: units of their own
    }
    let (path, _) = write_padded(dir.path(), "p", &payloads, 4096, Fit::Next);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    (dir, reader)
}

fn params(seed: u64, epoch: u64, page_aware: bool, k: u64, i: u64) -> OrderParams {
    OrderParams {
        seed,
        epoch,
        page_aware,
        num_shards: k,
        shard_index: i,
    }
}

#[test]
fn orders_are_permutations_and_deterministic() {
    let (_d, reader) = padded_reader(3000);
    for page_aware in [false, true] {
        let a: Vec<u64> = reader
            .epoch_order(&params(5, 0, page_aware, 1, 0))
            .unwrap()
            .collect();
        let b: Vec<u64> = reader
            .epoch_order(&params(5, 0, page_aware, 1, 0))
            .unwrap()
            .collect();
        let c: Vec<u64> = reader
            .epoch_order(&params(5, 1, page_aware, 1, 0))
            .unwrap()
            .collect();
        let d: Vec<u64> = reader
            .epoch_order(&params(6, 0, page_aware, 1, 0))
            .unwrap()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..3000).collect::<Vec<_>>());
        // A real shuffle: far from the identity.
        let fixed = a
            .iter()
            .enumerate()
            .filter(|(i, &id)| *i as u64 == id)
            .count();
        assert!(fixed < 50, "{fixed} fixed points");
    }
}

#[test]
fn page_aware_keeps_each_page_together() {
    let (_d, reader) = padded_reader(3000);
    let page = |id: u64| reader.location(id).unwrap().1 / 4096;
    let order: Vec<u64> = reader
        .epoch_order(&params(1, 0, true, 1, 0))
        .unwrap()
        .collect();
    // Each page's instances form one contiguous run of the order.
    let mut seen_pages = BTreeSet::new();
    let mut runs = 0;
    for (i, &id) in order.iter().enumerate() {
        if i == 0 || page(order[i - 1]) != page(id) {
            assert!(
                seen_pages.insert(page(id)),
                "page {} appears in two runs",
                page(id)
            );
            runs += 1;
        }
    }
    assert!(runs > 200);
    // Instances inside a unit are shuffled too (not always ascending).
    let ascending = order
        .windows(2)
        .filter(|w| page(w[0]) == page(w[1]) && w[0] < w[1])
        .count();
    let same_page = order
        .windows(2)
        .filter(|w| page(w[0]) == page(w[1]))
        .count();
    assert!(ascending < same_page * 3 / 4, "{ascending} of {same_page}");
}

/// Positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)`.
fn shard_range(n: usize, k: u64, i: u64) -> std::ops::Range<usize> {
    let bound = |j: u64| (n as u64 * j / k) as usize;
    bound(i)..bound(i + 1)
}

#[test]
fn shards_are_disjoint_complete_and_sized_exactly() {
    let (_d, reader) = padded_reader(2500);
    for page_aware in [false, true] {
        for k in [1u64, 2, 3, 7] {
            for epoch in 0..3 {
                let whole: Vec<u64> = reader
                    .epoch_order(&params(11, epoch, page_aware, 1, 0))
                    .unwrap()
                    .collect();
                let mut parts = Vec::new();
                for i in 0..k {
                    let order = reader
                        .epoch_order(&params(11, epoch, page_aware, k, i))
                        .unwrap();
                    assert_eq!(order.len(), reader.shard_len(k, i).unwrap());
                    let ids: Vec<u64> = order.collect();
                    assert_eq!(ids.len() as u64, reader.shard_len(k, i).unwrap());
                    // Each shard is its slice of the one epoch order...
                    assert_eq!(
                        ids,
                        whole[shard_range(2500, k, i)],
                        "k={k} i={i} page_aware={page_aware}"
                    );
                    parts.extend(ids);
                }
                // ...so together they are that order: disjoint and complete.
                assert_eq!(parts, whole);
                let mut sorted = parts;
                sorted.sort_unstable();
                assert_eq!(sorted, (0..2500).collect::<Vec<_>>());
            }
        }
    }
    assert!(reader.epoch_order(&params(3, 2, false, 4, 4)).is_err());
    assert!(reader.epoch_order(&params(3, 2, true, 4, 4)).is_err());
    assert!(reader.epoch_order(&params(3, 2, false, 0, 0)).is_err());
    assert!(reader.shard_len(0, 0).is_err());
}

#[test]
fn page_aware_shards_split_units_only_at_their_boundaries() {
    let (_d, reader) = padded_reader(2500);
    // In a padded file a unit is exactly one page's instances.
    let page = |id: u64| reader.location(id).unwrap().1 / 4096;
    for k in [2u64, 3, 7] {
        let mut members: Vec<BTreeSet<u64>> = Vec::new();
        let mut split_total = 0;
        for epoch in 0..3 {
            let shards: Vec<Vec<u64>> = (0..k)
                .map(|i| {
                    reader
                        .epoch_order(&params(4, epoch, true, k, i))
                        .unwrap()
                        .collect()
                })
                .collect();
            let mut shards_of_page: HashMap<u64, Vec<u64>> = HashMap::new();
            for (i, ids) in shards.iter().enumerate() {
                let mut runs = BTreeSet::new();
                for (p, &id) in ids.iter().enumerate() {
                    if p == 0 || page(ids[p - 1]) != page(id) {
                        assert!(runs.insert(page(id)), "a page is split inside shard {i}");
                        shards_of_page.entry(page(id)).or_default().push(i as u64);
                    }
                }
            }
            let mut split = 0;
            for (pg, owners) in &shards_of_page {
                if owners.len() == 1 {
                    continue;
                }
                // A split page: the end of shard i and the start of shard i + 1.
                split += 1;
                assert_eq!(owners.len(), 2, "page {pg} in shards {owners:?}");
                let (a, b) = (owners[0] as usize, owners[1] as usize);
                assert_eq!(b, a + 1, "page {pg} in shards {owners:?}");
                assert_eq!(page(*shards[a].last().unwrap()), *pg);
                assert_eq!(page(shards[b][0]), *pg);
            }
            assert!(split < k as usize, "k={k}: {split} split pages");
            split_total += split;
            members.push(shards[0].iter().copied().collect());
        }
        assert!(
            split_total > 0,
            "k={k}: no unit was split; the test proves nothing"
        );
        // A shard is a different set of instances every epoch.
        assert_ne!(members[0], members[1]);
        assert_ne!(members[1], members[2]);
    }
}

/// Pins the orders: if one of these changes, every user's "same seed, same order" (and
/// a checkpoint restored into a new version) breaks. Change them only with a format
/// version bump.
#[test]
fn golden_orders_are_version_stable() {
    let (_d, reader) = golden_reader();
    let got = |page_aware: bool, epoch: u64, k: u64, i: u64| {
        let ids: Vec<u64> = reader
            .epoch_order(&params(2024, epoch, page_aware, k, i))
            .unwrap()
            .collect();
        (ids.len(), fingerprint(&ids))
    };
    // Page-aware, unsharded.
    assert_eq!(got(true, 0, 1, 0), (600, 0x30f5_16d6));
    assert_eq!(got(true, 1, 1, 0), (600, 0x3d3b_3f81));
    // Instance-based, 3 shards.
    assert_eq!(got(false, 0, 3, 0), (200, 0xf30f_fffe));
    assert_eq!(got(false, 0, 3, 1), (200, 0xf475_55ec));
    assert_eq!(got(false, 0, 3, 2), (200, 0xcefc_4732));
    assert_eq!(got(false, 1, 3, 0), (200, 0x21d0_8f78));
    // Page-aware, 3 shards.
    assert_eq!(got(true, 0, 3, 0), (200, 0x350f_476c));
    assert_eq!(got(true, 0, 3, 1), (200, 0xa1b4_6ab5));
    assert_eq!(got(true, 0, 3, 2), (200, 0x3caa_1386));
    assert_eq!(got(true, 1, 3, 0), (200, 0x577e_e2d7));
    // The first ids, for a reader of docs/FORMAT.md checking a reimplementation.
    let head: Vec<u64> = reader
        .epoch_order(&params(2024, 0, true, 1, 0))
        .unwrap()
        .take(6)
        .collect();
    assert_eq!(head, [144, 141, 148, 138, 149, 134]);
}

#[test]
fn seek_to_every_position_of_a_small_shard() {
    let (_d, reader) = padded_reader(400);
    for page_aware in [false, true] {
        // Shard 1 of 3 begins and ends inside units (page-aware) for this seed.
        let s = params(21, 3, page_aware, 3, 1);
        let full: Vec<u64> = reader.epoch_order(&s).unwrap().collect();
        assert_eq!(full.len(), 133);
        if page_aware {
            let page = |id: u64| reader.location(id).unwrap().1 / 4096;
            let before: Vec<u64> = reader
                .epoch_order(&params(21, 3, true, 3, 0))
                .unwrap()
                .collect();
            let after: Vec<u64> = reader
                .epoch_order(&params(21, 3, true, 3, 2))
                .unwrap()
                .collect();
            assert_eq!(page(*before.last().unwrap()), page(full[0]));
            assert_eq!(page(*full.last().unwrap()), page(after[0]));
        }
        for pos in 0..=full.len() {
            let mut order = reader.epoch_order(&s).unwrap();
            order.seek(pos as u64).unwrap();
            assert_eq!(order.position(), pos as u64);
            assert_eq!(order.len() - order.position(), (full.len() - pos) as u64);
            assert_eq!(order.collect::<Vec<_>>(), full[pos..], "pos {pos}");
        }
        let order = reader.epoch_order(&s).unwrap();
        for (pos, &id) in full.iter().enumerate() {
            assert_eq!(order.position_of(id), pos as u64);
        }
        assert_eq!(order.position_of(full.iter().max().unwrap() + 1), 133);
        // Windows: page-aware, each is the shard's part of one unit (min = 1).
        let mut order = reader.epoch_order(&s).unwrap();
        let mut windows = Vec::new();
        loop {
            let mut w = Vec::new();
            if order.next_window(1, &mut w) == 0 {
                break;
            }
            windows.push(w);
        }
        assert_eq!(windows.concat(), full);
        if page_aware {
            let page = |id: u64| reader.location(id).unwrap().1 / 4096;
            for w in &windows {
                assert!(w.iter().all(|&id| page(id) == page(w[0])), "{w:?}");
            }
        } else {
            assert_eq!(windows.len(), full.len());
        }
    }
}

#[test]
fn seek_continues_the_same_sequence() {
    let (_d, reader) = padded_reader(1500);
    for page_aware in [false, true] {
        let s = params(8, 4, page_aware, 2, 1);
        let full: Vec<u64> = reader.epoch_order(&s).unwrap().collect();
        for pos in [0, 1, 2, 17, full.len() / 2, full.len() - 1, full.len()] {
            let mut order = reader.epoch_order(&s).unwrap();
            order.seek(pos as u64).unwrap();
            assert_eq!(order.position(), pos as u64);
            assert_eq!(order.collect::<Vec<_>>(), full[pos..], "pos {pos}");
        }
        let mut order = reader.epoch_order(&s).unwrap();
        assert!(order.seek(full.len() as u64 + 1).is_err());
    }
}

#[test]
fn several_files_share_one_id_space() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut all = Vec::new();
    for f in 0..3 {
        let payloads: Vec<Vec<u8>> = (0..(50 + f * 10))
            .map(|i| payload(1000 * f + i, 200 + i))
            .collect();
        let path = write_plain(dir.path(), &format!("f{f}"), &payloads);
        files.push((path.clone(), default_table_path(&path)));
        all.extend(payloads);
    }
    let reader = Reader::open(&files, &ReaderOptions::default()).unwrap();
    assert_eq!(reader.len(), all.len() as u64);
    for (id, p) in all.iter().enumerate() {
        assert_eq!(&reader.read(id as u64).unwrap(), p);
    }
    for page_aware in [false, true] {
        let order: Vec<u64> = reader
            .epoch_order(&params(1, 0, page_aware, 1, 0))
            .unwrap()
            .collect();
        // Shuffled across files: the order switches between files many times (each
        // file spans several pages, so even page-aware units interleave).
        let file_of = |id: u64| {
            if id < 50 {
                0
            } else if id < 110 {
                1
            } else {
                2
            }
        };
        let switches = order
            .windows(2)
            .filter(|w| file_of(w[0]) != file_of(w[1]))
            .count();
        assert!(switches > 5, "page_aware={page_aware}: {switches} switches");
        let mut sorted = order;
        sorted.sort_unstable();
        assert_eq!(sorted, (0..all.len() as u64).collect::<Vec<_>>());
    }
}

#[test]
fn spec_api_walks_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..200).map(|i| payload(i, 100)).collect();
    let (path, _) = write_padded(dir.path(), "p", &payloads, 4096, Fit::Next);
    let mut lirs = TFRecordLIRS::open(&path, None).unwrap().with_seed(99);
    assert!(
        lirs.next().unwrap().is_err(),
        "next before shuffle_order is an error"
    );
    assert!(lirs.next().is_none(), "...once, not forever");
    let mut epochs = Vec::new();
    for _ in 0..2 {
        lirs.shuffle_order(true).unwrap();
        let got: Vec<Vec<u8>> = lirs.by_ref().map(|r| r.unwrap()).collect();
        let mut sorted = got.clone();
        sorted.sort();
        let mut expected = payloads.clone();
        expected.sort();
        assert_eq!(sorted, expected);
        epochs.push(got);
    }
    assert_ne!(epochs[0], epochs[1]);
}

/// The spec walk reads through a Fetcher (read-ahead windows, one request per run):
/// on the pread backend (fetch threads) and the default one (mapped, inline) it yields
/// exactly the epoch order read id by id, and a damaged record is an error for that
/// instance alone (naming it) while the walk goes on.
#[test]
fn spec_walk_equals_the_order_read_id_by_id_and_reports_damage_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..1500).map(|i| payload(i, 100)).collect();
    let (path, _) = write_padded(dir.path(), "w", &payloads, 4096, Fit::Next);
    // Damage one payload byte of instance 777.
    let table = std::fs::read(default_table_path(&path)).unwrap();
    let at = u64::from_le_bytes(table[777 * 8..778 * 8].try_into().unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at as usize + 12 + 5] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    for backend in [tfrecord_lirs::Backend::Pread, tfrecord_lirs::Backend::Auto] {
        let options = ReaderOptions {
            backend,
            ..Default::default()
        };
        let reader = Arc::new(Reader::open_one(&path, None, &options).unwrap());
        let mut lirs = TFRecordLIRS::from_reader(Arc::clone(&reader)).with_seed(5);
        for (epoch, page_aware) in [(0, true), (1, false)] {
            lirs.shuffle_order(page_aware).unwrap();
            assert_eq!(lirs.epoch_len(), Some(1500));
            let order: Vec<u64> = reader
                .epoch_order(&params(5, epoch, page_aware, 1, 0))
                .unwrap()
                .collect();
            let walked: Vec<_> = lirs.by_ref().collect();
            assert_eq!(walked.len(), order.len(), "{backend:?}: nothing skipped");
            let errors = walked.iter().filter(|r| r.is_err()).count();
            assert_eq!(errors, 1, "{backend:?}: the damaged instance, once");
            for (id, got) in order.iter().zip(walked) {
                match got {
                    Ok(p) => assert_eq!(p, payloads[*id as usize], "{backend:?} id {id}"),
                    Err(e) => {
                        assert_eq!((*id, e.instance()), (777, Some(777)), "{backend:?}: {e}");
                        assert_eq!(e.kind(), tfrecord_lirs::ErrorKind::DataLoss);
                    }
                }
            }
        }
    }
}

#[test]
fn one_reader_many_threads_many_epochs() {
    let (_d, reader) = padded_reader(2000);
    let reader = Arc::new(reader);
    let expected: HashMap<u64, Vec<u8>> =
        (0..2000).map(|id| (id, reader.read(id).unwrap())).collect();
    let expected = Arc::new(expected);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let reader = Arc::clone(&reader);
            let expected = Arc::clone(&expected);
            std::thread::spawn(move || {
                for epoch in 0..3 {
                    let order = reader
                        .epoch_order(&params(t, epoch, t % 2 == 0, 1, 0))
                        .unwrap();
                    let mut n = 0;
                    for id in order {
                        assert_eq!(reader.read(id).unwrap(), expected[&id]);
                        n += 1;
                    }
                    assert_eq!(n, 2000);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn page_aware_reads_each_padded_page_once_per_epoch() {
    let (_d, reader) = padded_reader(3000);
    reader.reset_io_stats();
    for id in reader.epoch_order(&params(2, 0, true, 1, 0)).unwrap() {
        reader.read(id).unwrap();
    }
    let stats = reader.io_stats();
    // Every small instance's read stays in one page, so page reads == reads for those;
    // every data page is touched.
    assert_eq!(stats.distinct_pages, stats.data_pages);
    assert_eq!(stats.reads, 3000);
}

/// A fixed layout for the golden tests: an unpadded file whose offsets follow from the
/// TFRecord framing alone (no writer policy), with a large record every 53 ids.
fn golden_reader() -> (tempfile::TempDir, Reader) {
    let dir = tempfile::tempdir().unwrap();
    let payloads: Vec<Vec<u8>> = (0..600)
        .map(|i| {
            let len = if i % 53 == 0 {
                5000
            } else {
                40 + (i * 37) % 300
            };
            payload(i, len)
        })
        .collect();
    let path = write_plain(dir.path(), "golden", &payloads);
    let reader = Reader::open_one(&path, None, &ReaderOptions::default()).unwrap();
    (dir, reader)
}

/// CRC-32C of the ids as little-endian u64s: a compact, version-stable fingerprint.
fn fingerprint(ids: &[u64]) -> u32 {
    let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    crc32c::crc32c(&bytes)
}
