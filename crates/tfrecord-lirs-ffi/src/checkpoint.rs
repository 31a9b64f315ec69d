//! Saved states read back: where a restored or resumed walk starts. Today's
//! checkpoint is one value, the worker's `shard_state` (it holds the iteration's seeds
//! and the epoch state its walk started from); a checkpoint written before it existed
//! holds the position, the positions delivered after it and the order version under
//! their own keys (read by `op_config::checkpoint`), its seeds beside them, and its
//! walk started at the epoch's start. Elastic resume combines the workers'
//! `shard_state`s into an epoch state, which a new iteration starts from.

use tfrecord_lirs as core;

use crate::elastic;
use crate::status::{guard, report, FfiResult};
use crate::{CursorCheckpoint, IterationSeeds, StateBytes, Status};

/// The cursor state `checkpoint` restores, and the epoch state its walk started
/// from (`None`: the epoch's start), for a cursor of `order_version` that starts a new
/// iteration at `epoch_state` (empty: none) when the checkpoint is a fresh one.
pub(crate) fn starting_point(
    checkpoint: &CursorCheckpoint,
    order_version: core::OrderVersion,
    epoch_state: &[u8],
) -> core::Result<(core::CursorState, Option<core::EpochState>)> {
    // A checkpoint's shard_state is the whole state, with where the walk started;
    // older checkpoints hold the position, the positions delivered after it and the
    // order version (version 1 when absent) under their own keys, and started at the
    // epoch's start.
    if !checkpoint.shard_state.is_empty() {
        let saved = elastic::TfShardState::decode(&checkpoint.shard_state)?;
        return Ok((saved.shard.state, Some(saved.shard.base)));
    }
    let after: &[i64] = if checkpoint.has_delivered_after {
        &checkpoint.delivered_after
    } else {
        &[]
    };
    let mut state = core::CursorState::from_signed(checkpoint.position, after)?;
    state.order_version = match checkpoint.order_version {
        0 => core::CursorState::start_of(order_version).order_version,
        v => u32::try_from(v)
            .map_err(|_| core::Error::data_loss(format!("checkpoint of order version {v}")))?,
    };
    // A new iteration starts at the dataset's epoch state, if any.
    let base = (!epoch_state.is_empty())
        .then(|| elastic::TfEpochState::decode(epoch_state))
        .transpose()?
        .map(|epoch| epoch.state);
    Ok((state, base))
}

/// The seeds the walk of `checkpoint` took and its run's seed rule: its
/// `shard_state`'s, or `seeds` (those an older checkpoint holds beside its position)
/// and rule 0 (the only one then) when it has none.
pub(crate) fn checkpoint_seeds(
    checkpoint: &CursorCheckpoint,
    seeds: &IterationSeeds,
) -> core::Result<(IterationSeeds, core::SeedRule)> {
    if checkpoint.shard_state.is_empty() {
        return Ok((seeds.clone(), core::SeedRule::Fold));
    }
    let saved = elastic::TfShardState::decode(&checkpoint.shard_state)?.seeds;
    Ok((saved.into(), saved.seed_rule))
}

/// The seeds an iteration starting from `epoch_state` takes, and its run's seed rule.
pub(crate) fn epoch_state_seeds(
    epoch_state: &[u8],
) -> core::Result<(IterationSeeds, core::SeedRule)> {
    let saved = elastic::TfEpochState::decode(epoch_state)?.seeds;
    Ok((saved.into(), saved.seed_rule))
}

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds a rust::Vec
pub(crate) fn combine_shard_states(
    states: &Vec<StateBytes>,
    status: &mut Status,
) -> FfiResult<Vec<u8>> {
    report(
        status,
        guard("combine_shard_states", || {
            let shards = states
                .iter()
                .map(|s| elastic::TfShardState::decode(&s.bytes))
                .collect::<core::Result<Vec<_>>>()?;
            Ok(elastic::TfEpochState::combine(&shards)?.encode())
        }),
    )
}

// Not with `fault-injection`: its tests arm process-wide panic points that would hit
// these tests' fetches.
#[cfg(all(test, not(feature = "fault-injection")))]
mod tests {
    use super::*;
    use crate::cursor::DatasetCursor;
    use crate::reader::open_reader;
    use crate::status::ok_status;
    use crate::{CursorConfig, ErrorCode};

    /// Elastic resume through the bridge: two workers' checkpoints combine into an
    /// epoch state that three workers resume from; a checkpoint of a resumed worker
    /// restores (its `shard_state` holds where the walk started) without the epoch
    /// state; every instance once.
    #[test]
    fn checkpoints_of_two_workers_resume_on_three() {
        use crate::test_support::{
            cursor_config, cursor_with, reader_config, start, write_u32_file,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path(), 301, 8);
        let mut st = ok_status();
        let reader = open_reader(&reader_config(&path, "pread"), &mut st).unwrap();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 2,
        };
        let ids_of = |cursor: &mut DatasetCursor, batches: usize, out: &mut Vec<u32>| {
            let mut st = ok_status();
            for _ in 0..batches {
                let batch = cursor.next_batch(&mut st).unwrap();
                if batch.is_empty() {
                    return;
                }
                for i in 0..batch.len() {
                    out.push(u32::from_le_bytes(batch.record(i)[..4].try_into().unwrap()));
                }
            }
        };
        for order_version in [1, 2] {
            let config = |num_shards, shard_index| {
                cursor_with(&cursor_config(10, 1), |w| {
                    (w.num_shards, w.shard_index, w.order_version) =
                        (num_shards, shard_index, order_version)
                })
            };
            let (mut seen, mut states) = (Vec::new(), Vec::new());
            for k in 0..2 {
                let mut c = reader.fetch(&config(2, k), &start(), &mut st).unwrap();
                ids_of(&mut c, 3 + k as usize, &mut seen);
                states.push(StateBytes {
                    bytes: c.checkpoint(&seeds, &mut st).unwrap().shard_state,
                });
            }
            let epoch_state = combine_shard_states(&states, &mut st).unwrap();
            let (iteration, rule) = epoch_state_seeds(&epoch_state).unwrap();
            assert_eq!(rule, core::SeedRule::Fold);
            assert_eq!(
                (
                    iteration.seed,
                    iteration.seed2,
                    iteration.num_random_samples
                ),
                (5, 0, 2)
            );
            for j in 0..3 {
                let resumed = CursorConfig {
                    epoch_state: epoch_state.clone(),
                    ..config(3, j)
                };
                let mut c = reader.fetch(&resumed, &start(), &mut st).unwrap();
                ids_of(&mut c, 2, &mut seen);
                let ckpt = c.checkpoint(&seeds, &mut st).unwrap();
                // Restored into the plain K'-shard spec: the walk goes on.
                let mut again = reader.fetch(&config(3, j), &ckpt, &mut st).unwrap();
                ids_of(&mut again, usize::MAX, &mut seen);
            }
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..301).collect::<Vec<u32>>(),
                "order version {order_version}"
            );
        }
        // A damaged epoch state is DataLoss; states of different iterations do not
        // combine.
        let mut st = ok_status();
        let bad = CursorConfig {
            epoch_state: b"LIRSTFE\0garbage".to_vec(),
            ..cursor_config(10, 1)
        };
        assert!(reader.fetch(&bad, &start(), &mut st).is_err());
        assert_eq!(st.code, ErrorCode::DataLoss);
        let mut st = ok_status();
        let c = reader
            .fetch(&cursor_config(10, 1), &start(), &mut st)
            .unwrap();
        let one = c.checkpoint(&seeds, &mut st).unwrap().shard_state;
        let other = c
            .checkpoint(
                &IterationSeeds {
                    seed: 6,
                    ..seeds.clone()
                },
                &mut st,
            )
            .unwrap()
            .shard_state;
        assert!(combine_shard_states(
            &vec![StateBytes { bytes: one }, StateBytes { bytes: other }],
            &mut st
        )
        .is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
    }

    /// An iterator checkpoint names its dataset: restored into another split of the
    /// same counts and sizes it is refused naming the files; into the same files
    /// elsewhere it restores.
    #[test]
    fn a_checkpoint_of_another_split_is_refused_naming_the_file() {
        use crate::test_support::{cursor_config, reader_config, start};
        let write = |dir: &std::path::Path, name: &str| {
            let path = dir.join(name);
            let mut w = core::PaddedWriter::create(&path, &Default::default()).unwrap();
            for i in 0..50u32 {
                w.write(&i.to_le_bytes()).unwrap();
            }
            w.finish().unwrap();
            path
        };
        let (dir, moved) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut st = ok_status();
        let mut open = |path: std::path::PathBuf| {
            open_reader(&reader_config(&path, "pread"), &mut st).unwrap()
        };
        let train = open(write(dir.path(), "train.tfrecord-00000-of-00001"));
        let valid = open(write(dir.path(), "valid.tfrecord-00000-of-00001"));
        let train_moved = open(write(moved.path(), "train.tfrecord-00000-of-00001"));
        let config = cursor_config(10, 1);
        let mut st = ok_status();
        let mut c = train.fetch(&config, &start(), &mut st).unwrap();
        c.next_batch(&mut st).unwrap();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 1,
        };
        let ckpt = c.checkpoint(&seeds, &mut st).unwrap();
        assert!(valid.fetch(&config, &ckpt, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::DataLoss);
        assert!(
            st.message
                .contains("the state's file 0 train.tfrecord-00000-of-00001 (50 instances")
                && st
                    .message
                    .contains("this dataset's file 0 valid.tfrecord-00000-of-00001 (50 instances"),
            "{}",
            st.message
        );
        let mut st = ok_status();
        let mut again = train_moved.fetch(&config, &ckpt, &mut st).unwrap();
        assert_eq!(again.next_batch(&mut st).unwrap().len(), 10);
    }
}
