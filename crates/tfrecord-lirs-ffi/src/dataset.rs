//! A LIRSDataset: its arguments checked before any iteration, its reader (shared by
//! its iterators), the policy TensorFlow asks about (the elements' shape, how many
//! there are, whether an iteration delivers in order), and where each iteration
//! starts: fresh, from the dataset's epoch state (only the first), or from a
//! checkpoint.

use std::sync::atomic::{AtomicBool, Ordering};

use tfrecord_lirs as core;
use tfrecord_lirs::options::shape;

use crate::checkpoint::{self, epoch_state_seeds};
use crate::cursor::DatasetCursor;
use crate::reader::{open_reader, LirsReader};
use crate::status::{guard, ok_status, report, FfiError, FfiResult};
use crate::{op_config, rules};
use crate::{
    CursorCheckpoint, CursorConfig, DatasetConfig, FilePath, IterationSeeds, NamedValue, Status,
};

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds rust::Vecs
pub(crate) fn open_dataset(
    args: &Vec<NamedValue>,
    files: &Vec<FilePath>,
    tables: &Vec<FilePath>,
    status: &mut Status,
) -> FfiResult<Box<LirsDataset>> {
    let config = report(status, op_config::dataset_config(args, files, tables))?;
    open_dataset_config(&config, status)
}

fn decode_part_state(saved: &[u8]) -> FfiResult<crate::elastic::TfPartState> {
    crate::elastic::TfPartState::decode(saved).map_err(|e| {
        let e = FfiError::from(e);
        FfiError::new(e.code, format!("LIRSDataset part state: {}", e.message))
    })
}

fn seeds_of(seeds: &crate::elastic::TfSeeds) -> IterationSeeds {
    IterationSeeds {
        seed: seeds.seed,
        seed2: seeds.seed2,
        num_random_samples: seeds.num_random_samples,
    }
}

/// The state of an iteration read in splits that holds no split yet: its seeds.
pub(crate) fn save_no_part(seeds: &IterationSeeds) -> Vec<u8> {
    crate::elastic::TfPartState {
        seeds: crate::elastic::TfSeeds {
            seed: seeds.seed,
            seed2: seeds.seed2,
            num_random_samples: seeds.num_random_samples,
        },
        part: None,
    }
    .encode()
}

/// The seeds of a part state (`save_part`'s or `save_no_part`'s bytes) into `seeds`;
/// whether it holds a split (then `restore_part` restores its cursor).
pub(crate) fn part_state_seeds(
    saved: &[u8],
    seeds: &mut IterationSeeds,
    status: &mut Status,
) -> FfiResult<bool> {
    let saved = report(status, decode_part_state(saved))?;
    *seeds = seeds_of(&saved.seeds);
    Ok(saved.part.is_some())
}

pub(crate) fn checkpoint_keys() -> Vec<String> {
    op_config::CHECKPOINT_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// The LIRSDataset of `config`: every field checked, then its reader opened; public
/// for Rust-side tests.
pub fn open_dataset_config(
    config: &DatasetConfig,
    status: &mut Status,
) -> FfiResult<Box<LirsDataset>> {
    report(
        status,
        guard("open_dataset", || {
            // Every argument is checked before any file is opened.
            rules::parse_backend(&config.reader.backend)?;
            let deterministic = rules::parse_deterministic(&config.deterministic)?;
            let epoch_seeds = if config.epoch_state.is_empty() {
                None
            } else {
                Some(epoch_state_seeds(&config.epoch_state).map_err(|e| {
                    let e = FfiError::from(e);
                    FfiError::new(e.code, format!("LIRSDataset epoch_state: {}", e.message))
                })?)
            };
            let (num_shards, shard_index) =
                rules::check_shard(Some(config.walk.num_shards), Some(config.walk.shard_index))?;
            rules::order_version_of(config.walk.order_version)?;
            let remainder = core::options::shard_remainder(&config.walk.shard_remainder)?;
            let mut st = ok_status();
            let reader = open_reader(&config.reader, &mut st)?;
            let shard_len = match remainder {
                core::format::shard_remainder::ShardRemainder::Keep => {
                    reader.core().shard_len(num_shards, shard_index)?
                }
                rule => rule.shard_len(reader.core().len(), num_shards, shard_index),
            };
            core::CursorOptions::dataset(
                reader.core(),
                config.walk.batch_size,
                config.walk.num_parallel_reads,
            )?;
            Ok(Box::new(LirsDataset {
                reader: *reader,
                config: config.clone(),
                shard_len,
                deterministic,
                epoch_seeds,
                epoch_state_taken: AtomicBool::new(false),
            }))
        }),
    )
}

/// A LIRSDataset: its checked settings and its (shared) reader.
pub struct LirsDataset {
    reader: LirsReader,
    config: DatasetConfig,
    shard_len: u64,
    /// In order (`Some(true)`), unordered (`Some(false)`), or as the pipeline says.
    deterministic: Option<bool>,
    /// The seeds of the epoch state the first iteration starts from, if any.
    epoch_seeds: Option<IterationSeeds>,
    /// Whether an iteration took the epoch state (only the first does; the next
    /// ones draw seeds as a fresh run).
    epoch_state_taken: AtomicBool,
}

impl LirsDataset {
    /// The batch size the walk uses (0: unbatched); checked `>= 0` at open.
    fn batch_size(&self) -> u64 {
        u64::try_from(self.config.walk.batch_size).unwrap_or(0)
    }

    /// tf.data's cardinality: the core's element count, or TensorFlow's
    /// `kUnknownCardinality` (-2) when the core does not know it.
    pub(crate) fn cardinality(&self) -> i64 {
        const UNKNOWN: i64 = -2;
        let resumed = self.epoch_seeds.is_some();
        shape::elements(
            self.shard_len,
            self.batch_size(),
            self.config.walk.drop_remainder,
            resumed,
        )
        .map_or(UNKNOWN, |n| n as i64)
    }

    pub(crate) fn element_dims(&self) -> Vec<i64> {
        shape::element_dims(self.batch_size(), self.config.walk.drop_remainder)
    }

    /// `pipeline_deterministic`: TensorFlow's `DeterminismPolicy` (0 nondeterministic,
    /// 1 deterministic, anything else default).
    pub(crate) fn unordered(&self, pipeline_deterministic: i32) -> bool {
        let pipeline = match pipeline_deterministic {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        shape::unordered(self.deterministic, pipeline)
    }

    pub(crate) fn take_epoch_state(&self, seeds: &mut IterationSeeds) -> bool {
        match &self.epoch_seeds {
            Some(s) if !self.epoch_state_taken.swap(true, Ordering::SeqCst) => {
                *seeds = s.clone();
                true
            }
            _ => false,
        }
    }

    /// The cursor config of one iteration.
    fn cursor_config(&self, seeds: &IterationSeeds, unordered: bool) -> CursorConfig {
        CursorConfig {
            seed: seeds.seed,
            seed2: seeds.seed2,
            unordered,
            epoch_state: Vec::new(),
            walk: self.config.walk.clone(),
        }
    }

    /// Starts an iteration (public for Rust-side tests).
    pub fn start(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        from_epoch_state: bool,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let mut config = self.cursor_config(seeds, unordered);
        if from_epoch_state {
            config.epoch_state = self.config.epoch_state.clone();
        }
        let fresh = CursorCheckpoint {
            position: 0,
            has_delivered_after: false,
            delivered_after: Vec::new(),
            order_version: 0,
            shard_state: Vec::new(),
        };
        self.reader.fetch(&config, &fresh, status)
    }

    /// How many parts (splits) an epoch is read in, after checking that this
    /// dataset, whose op was given (`seed`, `seed2`), may be read in parts
    /// ([`rules::check_parts`]); public for Rust-side tests.
    pub fn split_count(&self, seed: i64, seed2: i64, status: &mut Status) -> FfiResult<i64> {
        report(
            status,
            guard("split_count", || {
                let walk = &self.config.walk;
                rules::check_parts(walk, seed, seed2, !self.config.epoch_state.is_empty())?;
                let count = rules::epoch_parts(walk, self.reader.core().len()).count();
                i64::try_from(count)
                    .map_err(|_| FfiError::invalid(format!("{count} splits do not fit an int64")))
            }),
        )
    }

    /// Starts reading part `part` of the epoch of an iteration (public for Rust-side
    /// tests).
    pub fn start_part(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        part: i64,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        self.reader
            .fetch_part(&self.cursor_config(seeds, unordered), part, None, status)
    }

    /// The cursor of a checkpoint taken while reading a part (`save_part`'s bytes);
    /// `DataLoss` when they are damaged, hold no part (see `part_state_seeds`) or
    /// cannot belong to this dataset.
    pub fn restore_part(
        &self,
        unordered: bool,
        saved: &[u8],
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let saved = report(status, decode_part_state(saved))?;
        let Some((part, state)) = saved.part else {
            return report(
                status,
                Err(FfiError::new(
                    crate::ErrorCode::DataLoss,
                    "LIRSDataset part state: it holds no split",
                )),
            );
        };
        let part = report(
            status,
            i64::try_from(part).map_err(|_| FfiError::invalid(format!("part {part} is too large"))),
        )?;
        self.reader.fetch_part(
            &self.cursor_config(&seeds_of(&saved.seeds), unordered),
            part,
            Some(&state),
            status,
        )
    }

    #[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds a rust::Vec
    pub(crate) fn restore(
        &self,
        num_random_samples: i64,
        unordered: bool,
        saved: &Vec<NamedValue>,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let (seeds, checkpoint) = report(status, op_config::checkpoint(saved, num_random_samples))?;
        // Without seeds of its own, the checkpoint's shard_state holds them.
        let seeds = seeds.unwrap_or(IterationSeeds {
            seed: 0,
            seed2: 0,
            num_random_samples,
        });
        self.restore_checkpoint(&seeds, unordered, &checkpoint, status)
    }

    /// Restores a checkpoint's cursor (public for Rust-side tests).
    pub fn restore_checkpoint(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        checkpoint: &CursorCheckpoint,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        // The checkpoint says where its walk started, not the dataset's epoch state.
        let seeds = report(
            status,
            checkpoint::checkpoint_seeds(checkpoint, seeds).map_err(FfiError::from),
        )?;
        self.reader
            .fetch(&self.cursor_config(&seeds, unordered), checkpoint, status)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{test_support, ErrorCode, WalkConfig};

    /// The records' ids (each record starts with its id as 4 LE bytes) of `cursor`'s
    /// next `elements` elements, or of all of them.
    #[cfg(not(feature = "fault-injection"))]
    fn next_ids(cursor: &mut DatasetCursor, elements: Option<usize>) -> Vec<u32> {
        let mut st = ok_status();
        let mut out = Vec::new();
        for _ in 0..elements.unwrap_or(usize::MAX) {
            if cursor.inner.options().batch_size == 0 {
                if !cursor.next_element(&mut st).unwrap() {
                    break;
                }
                out.push(u32::from_le_bytes(
                    cursor.element()[..4].try_into().unwrap(),
                ));
                continue;
            }
            let view = cursor.next_batch(&mut st).unwrap();
            if view.is_empty() {
                break;
            }
            for i in 0..view.len() {
                out.push(u32::from_le_bytes(view.record(i)[..4].try_into().unwrap()));
            }
        }
        out
    }

    fn dataset_config(path: &Path, batch_size: i64) -> DatasetConfig {
        DatasetConfig {
            reader: test_support::reader_config(path, "pread"),
            walk: test_support::cursor_config(batch_size, 2).walk,
            epoch_state: Vec::new(),
            deterministic: "default".into(),
        }
    }

    /// `config` with its walk changed by `change`.
    fn dataset_with(config: &DatasetConfig, change: impl FnOnce(&mut WalkConfig)) -> DatasetConfig {
        let mut config = config.clone();
        change(&mut config.walk);
        config
    }

    /// Two workers with the same seeds, taking splits from one counter in turn,
    /// deliver the epoch once; a split's checkpoint restores to the same rest; the
    /// datasets that cannot be read in splits say why.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn splits_deliver_the_epoch_once_and_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 1000, 8);
        let mut st = ok_status();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 7,
            num_random_samples: 1,
        };
        for batch_size in [0, 4] {
            let config = dataset_config(&path, batch_size);
            let workers = [
                open_dataset_config(&config, &mut st).unwrap(),
                open_dataset_config(&config, &mut st).unwrap(),
            ];
            let count = workers[0].split_count(5, 7, &mut st).unwrap();
            assert_eq!(count, 250);
            let mut seen = Vec::new();
            for k in 0..count {
                let ds = &workers[(k % 2) as usize];
                let mut cursor = ds.start_part(&seeds, false, k, &mut st).unwrap();
                seen.extend(next_ids(&mut cursor, None));
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..1000).collect::<Vec<u32>>());
            // A checkpoint inside split 3.
            let ds = &workers[0];
            let whole = next_ids(&mut ds.start_part(&seeds, false, 3, &mut st).unwrap(), None);
            let mut cursor = ds.start_part(&seeds, false, 3, &mut st).unwrap();
            let head = next_ids(&mut cursor, Some(1));
            let saved = cursor.save_part(1, &mut st).unwrap();
            let mut got = IterationSeeds {
                seed: 0,
                seed2: 0,
                num_random_samples: 0,
            };
            assert!(part_state_seeds(&saved, &mut got, &mut st).unwrap());
            assert_eq!((got.seed, got.seed2, got.num_random_samples), (5, 7, 1));
            let none = save_no_part(&seeds);
            assert!(!part_state_seeds(&none, &mut got, &mut st).unwrap());
            assert!(ds.restore_part(false, &none, &mut st).is_err());
            assert!(st.message.contains("holds no split"), "{}", st.message);
            let mut st = ok_status();
            let mut restored = ds.restore_part(false, &saved, &mut st).unwrap();
            assert_eq!([head, next_ids(&mut restored, None)].concat(), whole);
            assert!(ds.restore_part(false, &saved[..10], &mut st).is_err());
            assert_eq!(st.code, ErrorCode::DataLoss);
            assert!(
                st.message.contains("LIRSDataset part state"),
                "{}",
                st.message
            );
            // A whole-epoch cursor has no part to save.
            let mut st = ok_status();
            let plain = ds.start(&seeds, false, false, &mut st).unwrap();
            assert!(plain.save_part(1, &mut st).is_err());
        }
        let config = dataset_config(&path, 4);
        for (config, seed, want) in [
            (config.clone(), 0, "needs a fixed seed"),
            (
                dataset_with(&config, |w| (w.num_shards, w.shard_index) = (2, 1)),
                5,
                "num_shards must be 1 and shard_index 0, got num_shards=2 shard_index=1",
            ),
            (
                dataset_with(&config, |w| w.shard_remainder = "drop".into()),
                5,
                "shard_remainder 'keep'",
            ),
            (
                dataset_with(&config, |w| (w.page_aware, w.drop_remainder) = (true, true)),
                5,
                "drop_remainder would drop records",
            ),
        ] {
            let mut st = ok_status();
            let ds = open_dataset_config(&config, &mut st).unwrap();
            assert!(ds.split_count(seed, 0, &mut st).is_err());
            assert_eq!(st.code, ErrorCode::InvalidArgument);
            assert!(st.message.contains(want), "{}", st.message);
        }
    }

    /// A dataset saves its cursor as one value (`shard_state`, which holds the seeds),
    /// and restores it, and the older checkpoints' values (position, delivered_after,
    /// order_version, with the seeds from their own keys), to the same rest.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn a_dataset_saves_one_value_and_restores_it_and_older_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        for (batch_size, unordered) in [(0, false), (4, false), (4, true)] {
            let ds = open_dataset_config(&dataset_config(&path, batch_size), &mut st).unwrap();
            let seeds = IterationSeeds {
                seed: 5,
                seed2: 7,
                num_random_samples: 1,
            };
            let mut c = ds.start(&seeds, unordered, false, &mut st).unwrap();
            let first = next_ids(&mut c, Some(3));
            let state = c.save(1, &mut st).unwrap();
            let mut older = c.checkpoint(&seeds, &mut st).unwrap();
            older.shard_state.clear();
            let rest = next_ids(&mut c, None);
            assert_eq!(first.len() + rest.len(), 30);
            // The values as the kernel reads them back under checkpoint_keys().
            let named = |name: &str, ints: Vec<i64>, bytes: &[u8]| NamedValue {
                name: name.into(),
                ints,
                bytes: bytes.to_vec(),
            };
            let from_state = vec![named("shard_state", vec![], &state)];
            // The oldest checkpoints have no order_version (version 1).
            let mut older_values = vec![
                named("seed", vec![5], b""),
                named("seed2", vec![7], b""),
                named("position", vec![older.position], b""),
            ];
            if older.has_delivered_after {
                older_values.push(named("delivered_after", older.delivered_after.clone(), b""));
            }
            assert!(checkpoint_keys().iter().all(|k| k != "num_random_samples"));
            let mut again = ds.restore(0, unordered, &from_state, &mut st).unwrap();
            let mut old = ds.restore(1, unordered, &older_values, &mut st).unwrap();
            older_values.push(named("order_version", vec![1], b""));
            let old_with_version = ds.restore(1, unordered, &older_values, &mut st).unwrap();
            assert_eq!(old_with_version.inner.state(), old.inner.state());
            let (again, old) = (next_ids(&mut again, None), next_ids(&mut old, None));
            if unordered {
                let sorted = |mut v: Vec<u32>| {
                    v.sort_unstable();
                    v
                };
                assert_eq!(sorted(again.clone()), sorted(rest.clone()));
                assert_eq!(sorted(old), sorted(rest));
            } else {
                assert_eq!(again, rest);
                assert_eq!(old, rest);
            }
        }
    }

    #[test]
    fn a_dataset_checks_its_arguments_and_knows_its_cardinality() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        for (batch_size, drop_remainder, want) in [(0, false, 30), (4, false, 8), (4, true, 7)] {
            let config = dataset_with(&dataset_config(&path, batch_size), |w| {
                w.drop_remainder = drop_remainder
            });
            assert_eq!(
                open_dataset_config(&config, &mut st).unwrap().cardinality(),
                want
            );
        }
        let bad = |config: DatasetConfig, code: ErrorCode, words: &str| {
            let mut st = ok_status();
            assert!(open_dataset_config(&config, &mut st).is_err());
            assert_eq!(st.code, code);
            assert!(st.message.contains(words), "{}", st.message);
        };
        let good = dataset_config(&path, 4);
        let mut reader = good.reader.clone();
        reader.page_size = -4096;
        bad(
            DatasetConfig {
                reader,
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "page_size must be a power of two from 512 to 16777216 bytes, got -4096",
        );
        let mut reader = good.reader.clone();
        reader.backend = "io_uring".into();
        bad(
            DatasetConfig {
                reader,
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "backend",
        );
        bad(
            dataset_with(&good, |w| (w.num_shards, w.shard_index) = (2, 2)),
            ErrorCode::InvalidArgument,
            "shard",
        );
        bad(
            dataset_with(&good, |w| w.batch_size = -1),
            ErrorCode::InvalidArgument,
            "batch_size",
        );
        bad(
            dataset_with(&good, |w| w.order_version = 3),
            ErrorCode::InvalidArgument,
            "order version",
        );
        bad(
            DatasetConfig {
                epoch_state: b"LIRSTFE\0garbage".to_vec(),
                ..good.clone()
            },
            ErrorCode::DataLoss,
            "LIRSDataset epoch_state: ",
        );
        bad(
            DatasetConfig {
                deterministic: "no".into(),
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "deterministic",
        );
        let unordered = |deterministic: &str, pipeline: i32| {
            let config = DatasetConfig {
                deterministic: deterministic.into(),
                ..good.clone()
            };
            open_dataset_config(&config, &mut ok_status())
                .unwrap()
                .unordered(pipeline)
        };
        for pipeline in [-1, 0, 1] {
            assert!(unordered("false", pipeline));
            assert!(!unordered("true", pipeline));
        }
        assert!(unordered("default", 0));
        assert!(!unordered("default", 1));
        assert!(!unordered("default", -1));
    }

    /// Only the first iteration of a dataset made with an epoch state starts from it;
    /// its cardinality is unknown.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn only_the_first_iteration_takes_the_epoch_state() {
        use crate::checkpoint::combine_shard_states;
        use crate::StateBytes;
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 3,
        };
        let ds = open_dataset_config(&dataset_config(&path, 4), &mut st).unwrap();
        let mut taken = seeds.clone();
        assert!(!ds.take_epoch_state(&mut taken));
        let mut c = ds.start(&seeds, false, false, &mut st).unwrap();
        next_ids(&mut c, Some(2));
        let state = combine_shard_states(
            &vec![StateBytes {
                bytes: c.save(3, &mut st).unwrap(),
            }],
            &mut st,
        )
        .unwrap();
        let resumed = open_dataset_config(
            &DatasetConfig {
                epoch_state: state,
                ..dataset_config(&path, 4)
            },
            &mut st,
        )
        .unwrap();
        assert_eq!(resumed.cardinality(), -2);
        let mut taken = IterationSeeds {
            seed: 0,
            seed2: 0,
            num_random_samples: 0,
        };
        assert!(resumed.take_epoch_state(&mut taken));
        assert_eq!(
            (taken.seed, taken.seed2, taken.num_random_samples),
            (5, 0, 3)
        );
        assert!(!resumed.take_epoch_state(&mut taken));
        let mut c = resumed.start(&taken, false, true, &mut st).unwrap();
        assert_eq!(next_ids(&mut c, None).len(), 30 - 8);
    }
}
