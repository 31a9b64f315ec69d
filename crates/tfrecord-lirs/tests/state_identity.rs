//! Every saved state names its dataset (each file's base name, instances and bytes):
//! a state of one split is refused by another split of the same counts and sizes,
//! naming the file that differs, while the same files moved elsewhere restore; and
//! the states of shards of equal length (`Drop`, `Pad`) combine exactly.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::take;
use tfrecord_lirs::format::shard_remainder::ShardRemainder;
use tfrecord_lirs::{
    CursorOptions, CursorState, DatasetCursor, DatasetLoader, EpochState, ErrorKind, LoaderOptions,
    OrderParams, OrderVersion, PaddedWriter, Reader, Sampler, SamplerSource, ShardState,
};

const PER_FILE: u32 = 100;

/// Two files named `<prefix>-0000i-of-00002` in `dir`, of `PER_FILE` records each
/// (the same sizes whatever the prefix; record i of file f starts with `f*PER_FILE+i`).
fn split(dir: &Path, prefix: &str) -> Arc<Reader> {
    split_of(dir, prefix, [PER_FILE, PER_FILE])
}

fn split_of(dir: &Path, prefix: &str, counts: [u32; 2]) -> Arc<Reader> {
    let files: Vec<(PathBuf, PathBuf)> = (0..2u32)
        .map(|f| {
            let path = dir.join(format!("{prefix}-0000{f}-of-00002"));
            let mut w = PaddedWriter::create(&path, &Default::default()).unwrap();
            for i in 0..counts[f as usize] {
                let mut record = (f * PER_FILE + i).to_le_bytes().to_vec();
                record.resize(4 + (i as usize * 13) % 90, b'x');
                w.write(&record).unwrap();
            }
            w.finish().unwrap();
            let table = tfrecord_lirs::default_table_path(&path);
            (path, table)
        })
        .collect();
    Arc::new(Reader::open(&files, &Default::default()).unwrap())
}

fn options(reader: &Reader, num_shards: u64, k: u64, rule: ShardRemainder) -> CursorOptions {
    let mut o = CursorOptions::dataset(reader, 8, 2).unwrap();
    o.order = OrderParams {
        seed: 4,
        epoch: 0,
        page_aware: false,
        num_shards,
        shard_index: k,
    };
    o.order_version = OrderVersion::V2;
    o.shard_remainder = rule;
    o
}

/// The epoch state after two shards of `reader` took one and two batches.
fn epoch_state_of(reader: &Arc<Reader>) -> EpochState {
    let states: Vec<ShardState> = (0..2)
        .map(|k| {
            let o = options(reader, 2, k, ShardRemainder::Keep);
            let mut c = DatasetCursor::new(
                Arc::clone(reader),
                o,
                &CursorState::start_of(OrderVersion::V2),
            )
            .unwrap();
            take(&mut c, k as usize + 1, &mut Vec::new());
            ShardState::decode(&c.shard_state().encode()).unwrap()
        })
        .collect();
    EpochState::decode(&EpochState::combine(&states).unwrap().encode()).unwrap()
}

/// `e`'s text names both files (the state's and this dataset's).
fn names_both(e: &tfrecord_lirs::Error, saved: &str, here: &str) {
    let text = e.to_string();
    assert!(
        text.contains(&format!("the state's file 0 {saved} (100 instances"))
            && text.contains(&format!("file 0 {here} (100 instances")),
        "{text}"
    );
}

#[test]
fn an_epoch_state_of_another_split_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let train = split(dir.path(), "t");
    let valid = split(dir.path(), "v");
    assert_eq!(train.len(), valid.len());
    let epoch = epoch_state_of(&train);
    let names = epoch.dataset.as_ref().unwrap().names.clone().unwrap();
    assert_eq!(names, ["t-00000-of-00002", "t-00001-of-00002"]);
    let resume = |reader: &Arc<Reader>, state: &EpochState| {
        DatasetCursor::resume(
            Arc::clone(reader),
            options(reader, 3, 0, ShardRemainder::Keep),
            state,
            &CursorState::start_of(OrderVersion::V2),
        )
    };
    let e = resume(&valid, &epoch).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
    assert!(
        e.to_string().contains("epoch state of another dataset"),
        "{e}"
    );
    names_both(&e, "t-00000-of-00002", "v-00000-of-00002");
    // A worker's checkpoint of a resumed walk is refused the same way.
    let mut c = resume(&train, &epoch).unwrap();
    take(&mut c, 1, &mut Vec::new());
    let saved = ShardState::decode(&c.shard_state().encode()).unwrap();
    let o = options(&valid, 3, 0, ShardRemainder::Keep);
    let e = DatasetCursor::resume(Arc::clone(&valid), o, &saved.base, &saved.state)
        .err()
        .unwrap();
    names_both(&e, "t-00000-of-00002", "v-00000-of-00002");
    // The same files elsewhere (a moved dataset) resume.
    let moved = tempfile::tempdir().unwrap();
    resume(&split(moved.path(), "t"), &epoch).unwrap();
    // Another count in one file (the same total): named with its count.
    let other = tempfile::tempdir().unwrap();
    let uneven = split_of(other.path(), "t", [PER_FILE - 1, PER_FILE + 1]);
    let e = resume(&uneven, &epoch).err().unwrap();
    assert!(
        e.to_string()
            .contains("this dataset's file 0 t-00000-of-00002 (99 instances"),
        "{e}"
    );
    // A state saved before it named its dataset (encoding version 1) is compared by
    // instances only, as before.
    let mut old = epoch.clone();
    old.dataset = None;
    let bytes = old.encode();
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    assert_eq!(epoch.encode()[8..12], 2u32.to_le_bytes());
    resume(&valid, &EpochState::decode(&bytes).unwrap()).unwrap();
}

#[test]
fn shard_states_of_two_splits_do_not_combine() {
    let dir = tempfile::tempdir().unwrap();
    let readers = [split(dir.path(), "t"), split(dir.path(), "v")];
    let states: Vec<ShardState> = (0..2)
        .map(|k| {
            let reader = &readers[k as usize];
            let o = options(reader, 2, k, ShardRemainder::Keep);
            DatasetCursor::new(
                Arc::clone(reader),
                o,
                &CursorState::start_of(OrderVersion::V2),
            )
            .unwrap()
            .shard_state()
        })
        .collect();
    let e = EpochState::combine(&states).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("states of two datasets"), "{e}");
    names_both(&e, "t-00000-of-00002", "v-00000-of-00002");
}

#[test]
fn a_sampler_state_of_another_split_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let train = split(dir.path(), "t");
    let valid = split(dir.path(), "v");
    let sampler = |reader: &Arc<Reader>, num_shards, k| {
        Sampler::new(
            SamplerSource::Files(Arc::clone(reader)),
            3,
            false,
            num_shards,
            k,
            2,
        )
        .unwrap()
    };
    let states: Vec<ShardState> = (0..2)
        .map(|k| {
            let s = sampler(&train, 2, k).shard_state(10 + k).unwrap();
            ShardState::decode(&s.encode()).unwrap()
        })
        .collect();
    let epoch = EpochState::decode(&EpochState::combine(&states).unwrap().encode()).unwrap();
    let mut other = sampler(&valid, 3, 1);
    let e = other.resume(epoch.clone()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
    names_both(&e, "t-00000-of-00002", "v-00000-of-00002");
    assert_eq!(other.epoch(), 0);
    let moved = tempfile::tempdir().unwrap();
    sampler(&split(moved.path(), "t"), 3, 1)
        .resume(epoch.clone())
        .unwrap();
    // A sampler of a length only has no files to compare: instances decide.
    let mut counted = Sampler::new(SamplerSource::Instances(200), 3, false, 3, 1, 2).unwrap();
    counted.resume(epoch).unwrap();
}

#[test]
fn a_loader_resumes_no_epoch_of_another_split() {
    let dir = tempfile::tempdir().unwrap();
    let train = split(dir.path(), "t");
    let valid = split(dir.path(), "v");
    let options = LoaderOptions {
        seed: 4,
        batch_size: 8,
        num_shards: 2,
        order_version: 2,
        ..Default::default()
    };
    let states: Vec<ShardState> = (0..2)
        .map(|k| {
            let mut loader = DatasetLoader::new(
                Arc::clone(&train),
                LoaderOptions {
                    shard_index: k,
                    ..options
                },
            )
            .unwrap();
            loader.begin().unwrap();
            loader.next_batch().unwrap().unwrap();
            loader.shard_state().unwrap()
        })
        .collect();
    let epoch = EpochState::combine(&states).unwrap();
    let one = LoaderOptions {
        num_shards: 1,
        ..options
    };
    let mut loader = DatasetLoader::new(Arc::clone(&valid), one).unwrap();
    let e = loader.resume_epoch(&epoch).unwrap_err();
    names_both(&e, "t-00000-of-00002", "v-00000-of-00002");
    let mut loader = DatasetLoader::new(Arc::clone(&train), one).unwrap();
    loader.resume_epoch(&epoch).unwrap();
    // Its state keeps the epoch state, which names the dataset too.
    loader.begin().unwrap();
    loader.next_batch().unwrap().unwrap();
    let state = loader.state().unwrap();
    let resumed_from = state.resumed_from.as_ref().unwrap();
    assert_eq!(resumed_from.dataset.as_ref(), Some(&train.identity()));
}

/// Three shards of equal length (`rule`) take 2, 3 and 4 batches and checkpoint; two
/// `Keep` shards resume from the combined state. What the old shards delivered (a
/// padded shard's repeats included) is delivered by no new one, every other instance
/// by exactly one.
fn equal_shards_combine_exactly(rule: ShardRemainder, counts: [u32; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let reader = split_of(dir.path(), "t", counts);
    let n = reader.len();
    let mut old = BTreeMap::<u64, u32>::new();
    let mut states = Vec::new();
    for k in 0..3 {
        let o = options(&reader, 3, k, rule);
        let mut c = DatasetCursor::new(
            Arc::clone(&reader),
            o,
            &CursorState::start_of(OrderVersion::V2),
        )
        .unwrap();
        let mut ids = Vec::new();
        // The last shard walks to its end: a padded one repeats the order's start.
        take(
            &mut c,
            if k == 2 { usize::MAX } else { 2 + k as usize },
            &mut ids,
        );
        for id in ids {
            *old.entry(id).or_default() += 1;
        }
        states.push(ShardState::decode(&c.shard_state().encode()).unwrap());
    }
    assert!(states.iter().all(|s| s.remainder == rule));
    let epoch = EpochState::combine(&states).unwrap();
    assert_eq!(epoch.delivered_count(), old.len() as u64, "{rule:?}");
    let mut new = BTreeMap::<u64, u32>::new();
    for j in 0..2 {
        let o = options(&reader, 2, j, ShardRemainder::Keep);
        let mut c = DatasetCursor::resume(
            Arc::clone(&reader),
            o,
            &epoch,
            &CursorState::start_of(OrderVersion::V2),
        )
        .unwrap();
        let mut ids = Vec::new();
        take(&mut c, usize::MAX, &mut ids);
        for id in ids {
            *new.entry(id).or_default() += 1;
        }
    }
    assert!(new.values().all(|&c| c == 1), "{rule:?}: an id twice");
    assert!(new.keys().all(|id| !old.contains_key(id)), "{rule:?}");
    assert_eq!((old.len() + new.len()) as u64, n, "{rule:?}");
}

#[test]
fn padded_shards_combine_counting_each_instance_once() {
    // 199 over 3 shards: 67 each, the order's first 2 positions walked twice.
    equal_shards_combine_exactly(ShardRemainder::Pad, [PER_FILE, PER_FILE - 1]);
}

#[test]
fn dropped_shards_combine_and_the_left_out_instances_go_on() {
    // 200 over 3 shards: 66 each; the order's last 2 positions, left out by every old
    // shard, are delivered by the new ones.
    equal_shards_combine_exactly(ShardRemainder::Drop, [PER_FILE, PER_FILE]);
}

#[test]
fn shards_of_two_remainder_rules_or_an_equal_shard_past_the_start_do_not_combine() {
    let dir = tempfile::tempdir().unwrap();
    let reader = split(dir.path(), "t");
    let state = |k, rule| {
        let o = options(&reader, 2, k, rule);
        DatasetCursor::new(
            Arc::clone(&reader),
            o,
            &CursorState::start_of(OrderVersion::V2),
        )
        .unwrap()
        .shard_state()
    };
    let e = EpochState::combine(&[
        state(0, ShardRemainder::Pad),
        state(1, ShardRemainder::Keep),
    ])
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(
        e.to_string()
            .contains("shard 0 walked with shard_remainder=\"pad\" and shard 1 with \"keep\""),
        "{e}"
    );
    // An equal shard over an epoch state with positions delivered: no walk makes one.
    let mut forged = state(0, ShardRemainder::Drop);
    forged.base = epoch_state_of(&reader);
    let mut other = state(1, ShardRemainder::Drop);
    other.base = forged.base.clone();
    let e = EpochState::combine(&[forged, other]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DataLoss, "{e}");
    assert!(e.to_string().contains("from the epoch's start only"), "{e}");
    // The rule travels in the bytes (encoding version 2); version 1 had zeros: Keep.
    let padded = state(1, ShardRemainder::Pad);
    let mut bytes = padded.encode();
    assert_eq!(bytes[8..16], [2, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(ShardState::decode(&bytes).unwrap(), padded);
    bytes[8..16].copy_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        ShardState::decode(&bytes).unwrap().remainder,
        ShardRemainder::Keep
    );
    bytes[12] = 7;
    let e = ShardState::decode(&bytes).unwrap_err();
    assert!(e.to_string().contains("remainder rule is 7"), "{e}");
}
