//! The dataset cursor as a state machine, without TensorFlow: checkpoints at every
//! step restore exactly the rest (ordered: the same sequence; unordered: the
//! undelivered set), errors at window edges with batches kept across them,
//! `drop_remainder` with short unordered windows, unordered completion orders, and
//! the fresh fetch after a window-level failure.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::id_of;
use tfrecord_lirs::{
    CursorOptions, CursorState, DatasetCursor, ErrorKind, FetchOptions, OrderParams, PaddedWriter,
    Reader,
};

const N: u64 = 300;

/// A padded file of `N` instances, instance i holding `i` as 4 LE bytes and some
/// padding (so page-aware units hold several instances).
fn write_file(dir: &Path) -> PathBuf {
    let path = dir.join("d");
    let mut w = PaddedWriter::create(&path, &Default::default()).unwrap();
    for i in 0..N as u32 {
        let mut record = i.to_le_bytes().to_vec();
        record.resize(4 + (i as usize * 7) % 300, b'x');
        w.write(&record).unwrap();
    }
    w.finish().unwrap();
    path
}

/// Damages the payloads of `ids` (a CRC mismatch each).
fn damage(path: &Path, ids: &[u64]) {
    let reader = Reader::open_one(path, None, &Default::default()).unwrap();
    let offsets: Vec<u64> = ids
        .iter()
        .map(|&id| reader.location(id).unwrap().1)
        .collect();
    drop(reader);
    let mut bytes = std::fs::read(path).unwrap();
    for off in offsets {
        bytes[off as usize + 12] ^= 1;
    }
    std::fs::write(path, bytes).unwrap();
}

fn reader(path: &Path) -> Arc<Reader> {
    Arc::new(Reader::open_one(path, None, &Default::default()).unwrap())
}

fn options(reader: &Reader, batch_size: usize, threads: usize, window: usize) -> CursorOptions {
    let mut o = CursorOptions::dataset(reader, batch_size as i64, threads.max(1) as i64).unwrap();
    o.order = OrderParams {
        seed: 11,
        epoch: 2,
        page_aware: false,
        num_shards: 1,
        shard_index: 0,
    };
    o.fetch = FetchOptions {
        threads,
        window,
        depth: 3,
    };
    o
}

/// What one call gave: the ids of a batch (or one element), or the instance of an
/// error; `None` at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Records(Vec<u64>),
    Error(Option<u64>),
}

fn step(cursor: &mut DatasetCursor) -> Option<Event> {
    if cursor.options().batch_size == 0 {
        Some(match cursor.next_element()? {
            Ok(p) => Event::Records(vec![id_of(p)]),
            Err(e) => Event::Error(e.instance()),
        })
    } else {
        Some(match cursor.next_batch()? {
            Ok(b) => Event::Records(b.iter().map(id_of).collect()),
            Err(e) => Event::Error(e.instance()),
        })
    }
}

/// Every call to the end, with the state before each call (and the final one).
fn walk(cursor: &mut DatasetCursor) -> (Vec<Event>, Vec<CursorState>) {
    let (mut events, mut states) = (Vec::new(), vec![cursor.state()]);
    while let Some(e) = step(cursor) {
        events.push(e);
        states.push(cursor.state());
        assert!(events.len() < 10 * N as usize, "the epoch does not end");
    }
    (events, states)
}

fn records(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .flat_map(|e| match e {
            Event::Records(ids) => ids.clone(),
            Event::Error(_) => vec![],
        })
        .collect()
}

fn errors(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Error(i) => Some(i.expect("a read error names its instance")),
            Event::Records(_) => None,
        })
        .collect()
}

fn order(reader: &Reader, o: &CursorOptions) -> Vec<u64> {
    reader.epoch_order(&o.order).unwrap().collect()
}

/// The rest of the epoch from `state`, through the state's bytes.
fn rest_from(reader: &Arc<Reader>, o: CursorOptions, state: &CursorState) -> Vec<Event> {
    let state = CursorState::decode(&state.encode()).unwrap();
    let mut cursor = DatasetCursor::new(Arc::clone(reader), o, &state).unwrap();
    walk(&mut cursor).0
}

#[test]
fn ordered_checkpoints_at_every_step_restore_the_same_rest() {
    let dir = tempfile::tempdir().unwrap();
    let r = reader(&write_file(dir.path()));
    for page_aware in [false, true] {
        for (batch, threads, window) in [(0, 0, 16), (0, 2, 7), (7, 1, 16), (16, 0, 64), (5, 3, 9)]
        {
            let mut o = options(&r, batch, threads, window);
            o.order.page_aware = page_aware;
            let want = order(&r, &o);
            let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
            let (events, states) = walk(&mut cursor);
            assert_eq!(records(&events), want, "{batch} {threads} {window}");
            if batch > 0 {
                let sizes: Vec<usize> = events
                    .iter()
                    .map(|e| match e {
                        Event::Records(ids) => ids.len(),
                        Event::Error(_) => 0,
                    })
                    .collect();
                assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == batch));
            }
            for (k, state) in states.iter().enumerate() {
                assert!(state.delivered_after.is_empty());
                let mut got = records(&events[..k]);
                assert_eq!(state.position, got.len() as u64);
                got.extend(records(&rest_from(&r, o, state)));
                assert_eq!(got, want, "restored at step {k}");
            }
        }
    }
}

#[test]
fn unordered_checkpoints_restore_the_undelivered_set() {
    let dir = tempfile::tempdir().unwrap();
    let r = reader(&write_file(dir.path()));
    let mut orders_seen = BTreeSet::new();
    for round in 0..3 {
        for (batch, threads, window) in [(0, 4, 8), (10, 4, 64), (16, 2, 64), (9, 3, 64)] {
            let mut o = options(&r, batch, threads, window);
            o.unordered = true;
            o.order.seed = round;
            let want: BTreeSet<u64> = order(&r, &o).into_iter().collect();
            let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
            let (events, states) = walk(&mut cursor);
            let got = records(&events);
            assert_eq!(got.len(), N as usize);
            assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), want);
            orders_seen.insert(got);
            if batch > 0 {
                // Each batch is one exact window: `batch` consecutive positions.
                let positions = order(&r, &o);
                for e in &events {
                    let Event::Records(ids) = e else {
                        panic!("{e:?}")
                    };
                    let at = positions.iter().position(|&x| x == ids[0]).unwrap();
                    assert_eq!(at % batch, 0);
                    assert_eq!(ids.as_slice(), &positions[at..(at + batch).min(N as usize)]);
                }
            }
            for (k, state) in states.iter().enumerate() {
                let before = records(&events[..k]);
                let after = records(&rest_from(&r, o, state));
                let mut all: Vec<u64> = before.iter().chain(&after).copied().collect();
                all.sort_unstable();
                assert_eq!(all, want.iter().copied().collect::<Vec<_>>(), "step {k}");
            }
        }
    }
    // Not a proof of reordering (timing decides), but the walk is not stuck to one.
    assert!(!orders_seen.is_empty());
}

/// Damaged instances at the first and last slot of windows, and a whole damaged
/// window: every error passes its own position, batches are kept across errors (so
/// they stay full), and a checkpoint taken anywhere (mid-batch included) restores to
/// the same records.
#[test]
fn errors_at_window_edges_keep_batches_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let clean = reader(&path);
    let window = 16;
    let o = options(&clean, 7, 2, window);
    let positions = order(&clean, &o);
    drop(clean);
    // First and last slot of windows 0 and 3, and all of window 5.
    let mut bad: Vec<u64> = [0, 15, 48, 63].iter().map(|&p| positions[p]).collect();
    bad.extend(&positions[80..96]);
    damage(&path, &bad);
    let r = reader(&path);
    let want: Vec<u64> = positions
        .iter()
        .copied()
        .filter(|id| !bad.contains(id))
        .collect();
    for (batch, threads, unordered) in [(7, 2, false), (0, 0, false), (5, 0, false), (7, 3, true)] {
        let mut o = options(&r, batch, threads, window);
        o.unordered = unordered;
        let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
        let (events, states) = walk(&mut cursor);
        let mut errs = errors(&events);
        errs.sort_unstable();
        let mut bad_sorted = bad.clone();
        bad_sorted.sort_unstable();
        assert_eq!(errs, bad_sorted, "{batch} {threads} {unordered}");
        let got = records(&events);
        if unordered {
            let mut sorted = got.clone();
            sorted.sort_unstable();
            let mut w = want.clone();
            w.sort_unstable();
            assert_eq!(sorted, w);
        } else {
            assert_eq!(got, want);
            if let Some(whole) = want.len().checked_div(batch) {
                let full = events
                    .iter()
                    .filter(|e| matches!(e, Event::Records(ids) if ids.len() == batch));
                assert_eq!(full.count(), whole, "batches stay whole across errors");
            }
        }
        for (k, state) in states.iter().enumerate() {
            let mut all = records(&events[..k]);
            all.extend(records(&rest_from(&r, o, state)));
            if unordered {
                all.sort_unstable();
                let mut w = want.clone();
                w.sort_unstable();
                assert_eq!(all, w, "step {k}");
            } else {
                assert_eq!(all, want, "step {k}");
            }
        }
    }
}

#[test]
fn drop_remainder_drops_short_unordered_windows_and_the_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path());
    let clean = reader(&path);
    let o = options(&clean, 16, 2, 64);
    let positions = order(&clean, &o);
    drop(clean);
    // One damaged instance in the third batch-window.
    damage(&path, &[positions[40]]);
    let r = reader(&path);
    for unordered in [false, true] {
        for drop_remainder in [false, true] {
            let mut o = options(&r, 16, 2, 64);
            o.unordered = unordered;
            o.drop_remainder = drop_remainder;
            let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
            let (events, _) = walk(&mut cursor);
            assert_eq!(errors(&events), vec![positions[40]]);
            let sizes: Vec<usize> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Records(ids) => Some(ids.len()),
                    Event::Error(_) => None,
                })
                .collect();
            let mut got = records(&events);
            got.sort_unstable();
            let expect = |range: &mut dyn Iterator<Item = usize>| {
                let mut v: Vec<u64> = range.map(|p| positions[p]).collect();
                v.sort_unstable();
                v
            };
            match (unordered, drop_remainder) {
                (false, false) => {
                    // 299 records: 18 full batches and a last one of 11.
                    assert_eq!(sizes.iter().filter(|&&s| s == 16).count(), 18);
                    assert_eq!(sizes.last(), Some(&11));
                    assert_eq!(got, expect(&mut (0..300).filter(|&p| p != 40)));
                }
                (false, true) => {
                    assert!(sizes.iter().all(|&s| s == 16) && sizes.len() == 18);
                    assert_eq!(got.len(), 18 * 16);
                }
                (true, false) => {
                    // The damaged window gives a batch of 15, the order's last one 12.
                    let mut s = sizes.clone();
                    s.sort_unstable();
                    assert_eq!(&s[..2], &[12, 15]);
                    assert_eq!(got, expect(&mut (0..300).filter(|&p| p != 40)));
                }
                (true, true) => {
                    // Both short windows dropped, whenever they completed.
                    assert!(sizes.iter().all(|&s| s == 16) && sizes.len() == 17);
                    assert_eq!(
                        got,
                        expect(&mut (0..288).filter(|&p| !(32..48).contains(&p)))
                    );
                }
            }
        }
    }
}

#[test]
fn damaged_or_foreign_states_are_refused_on_restore() {
    let dir = tempfile::tempdir().unwrap();
    let r = reader(&write_file(dir.path()));
    let o = options(&r, 0, 1, 16);
    let bad = [
        CursorState::from_signed(N as i64 + 1, &[]).unwrap(),
        CursorState::from_signed(3, &[N as i64]).unwrap(),
        CursorState {
            order_version: 2,
            position: 0,
            delivered_after: vec![],
        },
    ];
    let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
    let first = id_of(cursor.next_element().unwrap().unwrap());
    for state in &bad {
        let e = DatasetCursor::new(Arc::clone(&r), o, state).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
        // A failed restore leaves the cursor as it was.
        assert!(cursor.restore(state).is_err());
    }
    assert_eq!(cursor.state().position, 1);
    cursor.restore(&CursorState::start()).unwrap();
    assert_eq!(id_of(cursor.next_element().unwrap().unwrap()), first);
}

/// Windows that fail as a whole (a panic on a fetch thread, a panic taking the next
/// window): each failure passes one position, the fetch starts afresh, and nothing
/// else is lost or repeated.
#[cfg(feature = "fault-injection")]
#[test]
fn a_fetch_panic_passes_one_position_and_the_fetch_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let r = reader(&write_file(dir.path()));
    for (batch, threads, unordered) in [
        (0, 2, false),
        (0, 0, false),
        (7, 2, false),
        (8, 3, true),
        (0, 3, true),
    ] {
        for (worker, next_window) in [(true, false), (false, true)] {
            let mut o = options(&r, batch, threads, 16);
            o.unordered = unordered;
            let mut cursor = DatasetCursor::new(Arc::clone(&r), o, &CursorState::start()).unwrap();
            let mut events = Vec::new();
            // A few calls, then the fault for one call, then the rest.
            for _ in 0..3 {
                events.push(step(&mut cursor).unwrap());
            }
            // Drain the window being served, so the next call takes a new one.
            let mut drained = 0;
            while drained < 200 {
                cursor.set_test_panics(worker, next_window);
                let e = step(&mut cursor).unwrap();
                cursor.set_test_panics(false, false);
                match e {
                    // Not an instance's failure: the whole window's.
                    Event::Error(None) => break,
                    other => events.push(other),
                }
                drained += 1;
            }
            assert!(
                drained < 200,
                "the fault never fired: {batch} {threads} {unordered} {worker}"
            );
            let (rest, _) = walk(&mut cursor);
            assert!(errors(&rest).is_empty());
            let mut got = records(&events);
            got.extend(records(&rest));
            let mut sorted = got.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), got.len(), "nothing twice");
            let want = order(&r, &o);
            if unordered {
                assert_eq!(got.len(), N as usize - 1, "exactly one position passed");
            } else {
                // In order: the first position of the window that failed is passed.
                let w = got.iter().zip(&want).position(|(a, b)| a != b).unwrap();
                assert_eq!(got, [&want[..w], &want[w + 1..]].concat());
            }
        }
    }
}

/// The first batch of an epoch, and the first after a restore, waits only for its own
/// reads: the fetch starts with a window of one batch (unbatched: 64 records), then
/// doubles up to the window, instead of reading a whole window first.
#[test]
fn the_first_batch_reads_one_batch_not_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let r = reader(&write_file(dir.path()));
    // (batch, window, reads before the first batch or element at most)
    for (batch, window, first_window) in [(8, 64, 8), (0, 256, 64)] {
        let o = options(&r, batch, 0, window);
        let first_reads = |state: &CursorState| {
            let mut cursor = DatasetCursor::new(Arc::clone(&r), o, state).unwrap();
            let before = r.io_stats().reads;
            let first = step(&mut cursor).unwrap();
            (r.io_stats().reads - before, first, cursor)
        };
        let (reads, _, mut cursor) = first_reads(&CursorState::start());
        assert!(reads <= first_window, "batch {batch}: {reads} reads");
        // 100 positions into the epoch, then a restore: the same again, and the rest
        // is the same.
        for _ in 0..100 / batch.max(1) {
            step(&mut cursor).unwrap();
        }
        let state = cursor.state();
        let rest = walk(&mut cursor).0;
        let (reads, first, mut restored) = first_reads(&state);
        assert!(
            reads <= first_window,
            "batch {batch}, restored: {reads} reads"
        );
        let mut restored_rest = vec![first];
        restored_rest.extend(walk(&mut restored).0);
        assert_eq!(restored_rest, rest, "batch {batch}");
    }
}
