//! Elastic resume: an epoch checkpointed by K shards goes on with K' shards; across the
//! new workers every instance not yet delivered is delivered exactly once, for both
//! order versions, instance-based and page-aware, ordered and unordered.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::take;
use tfrecord_lirs::{
    CursorOptions, CursorState, DatasetCursor, EpochState, ErrorKind, OrderParams, OrderVersion,
    PaddedWriter, Reader, ShardState,
};

const INSTANCES: u32 = 997;
const BATCH: i64 = 16;

/// A padded file of `INSTANCES` records of varied sizes (so page-aware units vary),
/// record i starting with i as 4 LE bytes.
fn reader(dir: &std::path::Path) -> Arc<Reader> {
    let path = dir.join("d");
    let mut w = PaddedWriter::create(&path, &Default::default()).unwrap();
    for i in 0..INSTANCES {
        let mut record = i.to_le_bytes().to_vec();
        record.resize(4 + (i as usize * 37) % 700, b'x');
        w.write(&record).unwrap();
    }
    w.finish().unwrap();
    Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap())
}

#[derive(Clone, Copy, Debug)]
struct Run {
    version: OrderVersion,
    page_aware: bool,
    unordered: bool,
}

fn options(reader: &Reader, run: Run, epoch: u64, num_shards: u64, k: u64) -> CursorOptions {
    let mut o = CursorOptions::dataset(reader, BATCH, 2).unwrap();
    o.order = OrderParams {
        seed: 11,
        epoch,
        page_aware: run.page_aware,
        num_shards,
        shard_index: k,
    };
    o.order_version = run.version;
    o.unordered = run.unordered;
    o
}

fn count(ids: &[u64], into: &mut BTreeMap<u64, u32>) {
    for &id in ids {
        *into.entry(id).or_default() += 1;
    }
}

/// Epoch 0 with `k` shards (shard i takes `i + 2` batches, so states differ), then
/// with `k2` shards from the combined state, a checkpoint and restore of each new
/// worker halfway, then the rest; every instance exactly once.
fn elastic(run: Run, k: u64, k2: u64) {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    let mut seen = BTreeMap::new();
    let mut states = Vec::new();
    let mut before = 0u64;
    for i in 0..k {
        let o = options(&reader, run, 0, k, i);
        let mut c = DatasetCursor::new(Arc::clone(&reader), o, &CursorState::start_of(run.version))
            .unwrap();
        let mut ids = Vec::new();
        take(&mut c, i as usize + 2, &mut ids);
        before += ids.len() as u64;
        count(&ids, &mut seen);
        // A worker's state travels as bytes.
        states.push(ShardState::decode(&c.shard_state().encode()).unwrap());
    }
    states.reverse();
    let epoch = EpochState::decode(&EpochState::combine(&states).unwrap().encode()).unwrap();
    assert_eq!(epoch.delivered_count(), before, "{run:?}");
    assert!(!epoch.is_fresh());

    for j in 0..k2 {
        let o = options(&reader, run, 0, k2, j);
        let mut c = DatasetCursor::resume(
            Arc::clone(&reader),
            o,
            &epoch,
            &CursorState::start_of(run.version),
        )
        .unwrap();
        let len = c.len();
        let mut ids = Vec::new();
        take(&mut c, 3, &mut ids);
        // Checkpoint halfway, restore into a new cursor: the same walk goes on.
        let saved = ShardState::decode(&c.shard_state().encode()).unwrap();
        assert_eq!((saved.num_shards, saved.shard_index), (k2, j));
        let mut again =
            DatasetCursor::resume(Arc::clone(&reader), o, &saved.base, &saved.state).unwrap();
        take(&mut again, usize::MAX, &mut ids);
        assert_eq!(ids.len() as u64, len, "{run:?} shard {j} of {k2}");
        count(&ids, &mut seen);
    }
    assert_eq!(seen.len() as u32, INSTANCES, "{run:?} {k}->{k2}");
    assert!(
        seen.values().all(|&n| n == 1),
        "{run:?} {k}->{k2}: an id twice"
    );
}

fn runs() -> Vec<Run> {
    let mut out = Vec::new();
    for version in [OrderVersion::V1, OrderVersion::V2] {
        for page_aware in [false, true] {
            for unordered in [false, true] {
                out.push(Run {
                    version,
                    page_aware,
                    unordered,
                });
            }
        }
    }
    out
}

#[test]
fn four_shards_resume_as_three() {
    for run in runs() {
        elastic(run, 4, 3);
    }
}

#[test]
fn two_shards_resume_as_five() {
    for run in runs() {
        elastic(run, 2, 5);
    }
}

/// In order, a resumed shard walks its part of the undelivered global positions in
/// ascending order, each the id the unsharded order has there.
#[test]
fn resumed_shards_walk_the_unsharded_order() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    for version in [OrderVersion::V1, OrderVersion::V2] {
        for page_aware in [false, true] {
            let run = Run {
                version,
                page_aware,
                unordered: false,
            };
            let whole: Vec<u64> = reader
                .epoch_order_with_version(
                    &OrderParams {
                        seed: 11,
                        page_aware,
                        ..Default::default()
                    },
                    version,
                )
                .unwrap()
                .collect();
            let mut states = Vec::new();
            for i in 0..3 {
                let o = options(&reader, run, 0, 3, i);
                let mut c =
                    DatasetCursor::new(Arc::clone(&reader), o, &CursorState::start_of(run.version))
                        .unwrap();
                take(&mut c, i as usize, &mut Vec::new());
                states.push(c.shard_state());
            }
            let epoch = EpochState::combine(&states).unwrap();
            for j in 0..2 {
                let o = options(&reader, run, 0, 2, j);
                let mut c = DatasetCursor::resume(
                    Arc::clone(&reader),
                    o,
                    &epoch,
                    &CursorState::start_of(run.version),
                )
                .unwrap();
                let mut ids = Vec::new();
                take(&mut c, usize::MAX, &mut ids);
                let want: Vec<u64> = epoch
                    .shard_positions(2, j)
                    .unwrap()
                    .into_iter()
                    .flatten()
                    .map(|p| whole[p as usize])
                    .collect();
                assert_eq!(ids, want, "{run:?} shard {j}");
            }
        }
    }
}

/// Resuming twice in one epoch (4 shards, then 3, then 5) still delivers every
/// instance once; resuming at an epoch's start is exactly the ordinary run, and the
/// next epoch of the new run is an ordinary K'-shard epoch.
#[test]
fn resumes_chain_and_a_fresh_resume_is_the_ordinary_run() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    for run in runs() {
        let mut seen = BTreeMap::new();
        let mut base = EpochState::fresh(
            reader.len(),
            &options(&reader, run, 0, 1, 0).order,
            run.version,
        );
        for (shards, batches) in [(4u64, 2usize), (3, 3), (5, usize::MAX)] {
            let mut states = Vec::new();
            for j in 0..shards {
                let o = options(&reader, run, 0, shards, j);
                let mut c = DatasetCursor::resume(
                    Arc::clone(&reader),
                    o,
                    &base,
                    &CursorState::start_of(run.version),
                )
                .unwrap();
                let mut ids = Vec::new();
                take(&mut c, batches, &mut ids);
                count(&ids, &mut seen);
                states.push(c.shard_state());
            }
            base = EpochState::combine(&states).unwrap();
        }
        assert_eq!(base.undelivered_count(), 0, "{run:?}");
        assert_eq!(seen.len() as u32, INSTANCES, "{run:?}");
        assert!(seen.values().all(|&n| n == 1), "{run:?}");

        // Epoch 1 of three shards: resume at its start == new.
        for j in 0..3 {
            let o = options(&reader, run, 1, 3, j);
            let fresh = EpochState::fresh_of(&reader, &o.order, run.version);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut c = DatasetCursor::resume(
                Arc::clone(&reader),
                o,
                &fresh,
                &CursorState::start_of(run.version),
            )
            .unwrap();
            take(&mut c, usize::MAX, &mut a);
            let mut c =
                DatasetCursor::new(Arc::clone(&reader), o, &CursorState::start_of(run.version))
                    .unwrap();
            take(&mut c, usize::MAX, &mut b);
            if !run.unordered {
                assert_eq!(a, b, "{run:?}");
            }
            a.sort();
            b.sort();
            assert_eq!(a, b, "{run:?}");
            assert_eq!(c.shard_state().base, fresh);
        }
    }
}

#[test]
fn a_state_of_another_dataset_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reader = reader(dir.path());
    let run = Run {
        version: OrderVersion::V2,
        page_aware: false,
        unordered: false,
    };
    let o = options(&reader, run, 0, 2, 0);
    let epoch = EpochState::fresh(reader.len(), &o.order, run.version);
    for (change, want) in [
        (
            Box::new(|o: &mut CursorOptions| o.order.seed = 12) as Box<dyn Fn(&mut CursorOptions)>,
            "seed 11, but this dataset has seed 12",
        ),
        (
            Box::new(|o| o.order.epoch = 1),
            "epoch 0, but this dataset has epoch 1",
        ),
        (Box::new(|o| o.order.page_aware = true), "page_aware false"),
        (
            Box::new(|o| o.order_version = OrderVersion::V1),
            "order version 2, but this dataset has order version 1",
        ),
    ] {
        let mut o = o;
        change(&mut o);
        let e = DatasetCursor::resume(
            Arc::clone(&reader),
            o,
            &epoch,
            &CursorState::start_of(run.version),
        )
        .err()
        .unwrap();
        assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
        assert!(e.to_string().contains(want), "{e} / {want}");
    }
    let mut other = epoch.clone();
    other.instances += 1;
    let e = DatasetCursor::resume(
        Arc::clone(&reader),
        o,
        &other,
        &CursorState::start_of(run.version),
    )
    .err()
    .unwrap();
    assert!(
        e.to_string()
            .contains("instances 998, but this dataset has instances 997"),
        "{e}"
    );
}
