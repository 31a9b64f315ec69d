//! A LIRSDataset: its arguments checked before any iteration, its reader (shared by
//! its iterators), the policy TensorFlow asks about (the elements' shape, how many
//! there are, whether an iteration delivers in order), and where each iteration
//! starts: fresh, from the dataset's epoch state (only the first), or from a
//! checkpoint.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tfrecord_lirs as core;
use tfrecord_lirs::options::shape;
use tfrecord_lirs::SeedRule;

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
                if config.seeds.start_epoch != 0 {
                    return Err(FfiError::invalid(format!(
                        "LIRSDataset: start_epoch={} with an epoch_state: the state says \
                         where the first iteration starts; give one or the other",
                        config.seeds.start_epoch
                    )));
                }
                Some(epoch_state_seeds(&config.epoch_state).map_err(|e| {
                    let e = FfiError::from(e);
                    FfiError::new(e.code, format!("LIRSDataset epoch_state: {}", e.message))
                })?)
            };
            // The run resumed from an epoch state goes on by that run's rule.
            let rule = epoch_seeds
                .as_ref()
                .map_or(config.seeds.rule, |(_, rule)| *rule);
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
                epoch_seeds: epoch_seeds.map(|(seeds, _)| seeds),
                epoch_state_taken: AtomicBool::new(false),
                seed_rule: AtomicU32::new(rule.number()),
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
    /// The number of the run's seed rule: the op's, or that of the state the run
    /// resumed (an epoch state, or the last checkpoint restored), so that the
    /// iterations after a restore order as the run that saved it did.
    seed_rule: AtomicU32,
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

    pub(crate) fn first_random_samples(&self) -> i64 {
        self.config.seeds.skipped_samples()
    }

    /// The run's seed rule.
    fn seed_rule(&self) -> SeedRule {
        SeedRule::from_number(self.seed_rule.load(Ordering::SeqCst).into())
            .unwrap_or(self.config.seeds.rule)
    }

    /// The cursor config of one iteration that drew `seeds`, ordering by `rule`.
    fn cursor_config(
        &self,
        seeds: &IterationSeeds,
        rule: SeedRule,
        unordered: bool,
    ) -> CursorConfig {
        CursorConfig {
            seed: seeds.seed,
            seed2: seeds.seed2,
            order: self.config.seeds.order(rule, seeds),
            seed_rule: rule,
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
        let mut config = self.cursor_config(seeds, self.seed_rule(), unordered);
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

    /// Starts reading part `part` of the epoch of an iteration, in the order the
    /// run's seed rule gives it as it does a whole-epoch iteration (public for
    /// Rust-side tests).
    pub fn start_part(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        part: i64,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let config = self.cursor_config(seeds, self.seed_rule(), unordered);
        self.reader.fetch_part(&config, part, None, status)
    }

    /// The state of an iteration read in splits that holds no split yet: its seeds
    /// and the run's seed rule.
    pub fn save_no_part(&self, seeds: &IterationSeeds) -> Vec<u8> {
        crate::elastic::TfPartState {
            seeds: crate::elastic::TfSeeds::new(seeds, self.seed_rule()),
            part: None,
        }
        .encode()
    }

    /// The seeds of a part state (`save_part`'s or `save_no_part`'s bytes) into
    /// `seeds`, the run going on by its seed rule; whether it holds a split (then
    /// `restore_part` restores its cursor).
    pub fn part_state_seeds(
        &self,
        saved: &[u8],
        seeds: &mut IterationSeeds,
        status: &mut Status,
    ) -> FfiResult<bool> {
        let saved = report(status, decode_part_state(saved))?;
        *seeds = saved.seeds.into();
        self.seed_rule
            .store(saved.seeds.seed_rule.number(), Ordering::SeqCst);
        Ok(saved.part.is_some())
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
        // The part continues in the order its run's rule gave it.
        let rule = saved.seeds.seed_rule;
        let config = self.cursor_config(&saved.seeds.into(), rule, unordered);
        let cursor = self
            .reader
            .fetch_part(&config, part, Some(&state), status)?;
        self.seed_rule.store(rule.number(), Ordering::SeqCst);
        Ok(cursor)
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
        // The checkpoint says where its walk started, not the dataset's epoch state,
        // and by which rule its run orders.
        let (seeds, rule) = report(
            status,
            checkpoint::checkpoint_seeds(checkpoint, seeds).map_err(FfiError::from),
        )?;
        let cursor = self.reader.fetch(
            &self.cursor_config(&seeds, rule, unordered),
            checkpoint,
            status,
        )?;
        self.seed_rule.store(rule.number(), Ordering::SeqCst);
        Ok(cursor)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{test_support, DatasetSeeds, ErrorCode, WalkConfig};

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
            seeds: DatasetSeeds::new((5, 0), 0, 0, true).unwrap(),
            epoch_state: Vec::new(),
            deterministic: "default".into(),
        }
    }

    /// Iteration `e`'s seeds as the reshuffling generator hands them out: a pair and
    /// its count after the draw, 2(e+1).
    #[cfg(not(feature = "fault-injection"))]
    fn drawn(e: i64) -> IterationSeeds {
        IterationSeeds {
            seed: 100 + e,
            seed2: 200 + e,
            num_random_samples: 2 * (e + 1),
        }
    }

    /// The ids of epoch `epoch` of seed `seed`, as the TensorFlow-free front ends
    /// order them.
    #[cfg(not(feature = "fault-injection"))]
    fn core_order(ds: &LirsDataset, seed: u64, epoch: u64) -> Vec<u32> {
        let params = core::OrderParams {
            seed,
            epoch,
            ..Default::default()
        };
        let order = ds.reader.core().epoch_order(&params).unwrap();
        order.map(|id| id as u32).collect()
    }

    /// Seed rule 1: an op seed without a global seed orders iteration e as epoch
    /// `start_epoch + e` of that seed; another pair (a global seed) folds each
    /// iteration's drawn pair, as rule 0 does for every pair.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn iterations_of_an_op_seed_are_its_epochs() {
        use tfrecord_lirs::DEFAULT_GRAPH_SEED;
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 40, 8);
        let mut st = ok_status();
        let with = |pair, rule, start_epoch| DatasetConfig {
            seeds: DatasetSeeds::new(pair, rule, start_epoch, true).unwrap(),
            ..dataset_config(&path, 0)
        };
        let ds = open_dataset_config(&with((DEFAULT_GRAPH_SEED, 42), 1, 0), &mut st).unwrap();
        assert_eq!(ds.first_random_samples(), 0);
        for e in 0..3 {
            let mut c = ds.start(&drawn(e), false, false, &mut st).unwrap();
            assert_eq!(next_ids(&mut c, None), core_order(&ds, 42, e as u64));
        }
        let later = open_dataset_config(&with((DEFAULT_GRAPH_SEED, 42), 1, 2), &mut st).unwrap();
        assert_eq!(later.first_random_samples(), 4);
        let mut c = later.start(&drawn(2), false, false, &mut st).unwrap();
        assert_eq!(next_ids(&mut c, None), core_order(&ds, 42, 2));
        // A global seed (7): the drawn pair folded, epoch 0; so does rule 0 for any pair.
        for (pair, rule) in [((7, 42), 1), ((DEFAULT_GRAPH_SEED, 42), 0)] {
            let ds = open_dataset_config(&with(pair, rule, 0), &mut st).unwrap();
            let mut c = ds.start(&drawn(1), false, false, &mut st).unwrap();
            let folded = core::seed_from_pair(101, 201);
            assert_eq!(next_ids(&mut c, None), core_order(&ds, folded, 0));
        }
        // start_epoch says where a fresh run starts; an epoch state says it too.
        let state = {
            let c = ds.start(&drawn(0), false, false, &mut st).unwrap();
            crate::checkpoint::combine_shard_states(
                &vec![crate::StateBytes {
                    bytes: c.save(2, &mut st).unwrap(),
                }],
                &mut st,
            )
            .unwrap()
        };
        let mut st = ok_status();
        let both = DatasetConfig {
            epoch_state: state,
            ..with((DEFAULT_GRAPH_SEED, 42), 1, 3)
        };
        assert!(open_dataset_config(&both, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        assert!(
            st.message.contains("start_epoch=3 with an epoch_state"),
            "{}",
            st.message
        );
    }

    /// A checkpoint holds its run's seed rule: restored into a dataset of another
    /// rule, it walks the rest of its epoch and the iterations after it as the run
    /// that saved it would have.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn a_restored_run_keeps_the_rule_it_was_saved_with() {
        use tfrecord_lirs::DEFAULT_GRAPH_SEED;
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 40, 8);
        let mut st = ok_status();
        let with = |rule| DatasetConfig {
            seeds: DatasetSeeds::new((DEFAULT_GRAPH_SEED, 42), rule, 0, true).unwrap(),
            ..dataset_config(&path, 0)
        };
        for (saved_by, restored_into) in [(0, 1), (1, 0)] {
            let old = open_dataset_config(&with(saved_by), &mut st).unwrap();
            let mut c = old.start(&drawn(0), false, false, &mut st).unwrap();
            next_ids(&mut c, Some(5));
            let state = c.save(2, &mut st).unwrap();
            let rest = next_ids(&mut c, None);
            let next_epoch = next_ids(
                &mut old.start(&drawn(1), false, false, &mut st).unwrap(),
                None,
            );
            let new = open_dataset_config(&with(restored_into), &mut st).unwrap();
            // Another iteration ran before the restore: the restore overrides it.
            new.start(&drawn(0), false, false, &mut st).unwrap();
            let saved = vec![NamedValue {
                name: "shard_state".into(),
                ints: vec![],
                bytes: state,
            }];
            let mut c = new.restore(2, false, &saved, &mut st).unwrap();
            assert_eq!(next_ids(&mut c, None), rest);
            let mut c = new.start(&drawn(1), false, false, &mut st).unwrap();
            assert_eq!(
                next_ids(&mut c, None),
                next_epoch,
                "saved by rule {saved_by}"
            );
        }
        // Checkpoints from before the shard_state (their seeds under their own keys)
        // are of rule 0, the only one then.
        let old = open_dataset_config(&with(0), &mut st).unwrap();
        let want = next_ids(
            &mut old.start(&drawn(1), false, false, &mut st).unwrap(),
            None,
        );
        let new = open_dataset_config(&with(1), &mut st).unwrap();
        let int = |name: &str, value| NamedValue {
            name: name.into(),
            ints: vec![value],
            bytes: vec![],
        };
        let oldest = vec![int("seed", 100), int("seed2", 200), int("position", 3)];
        new.restore(2, false, &oldest, &mut st).unwrap();
        let got = next_ids(
            &mut new.start(&drawn(1), false, false, &mut st).unwrap(),
            None,
        );
        assert_eq!(got, want);
    }

    /// Parts are cut from the order a whole-epoch iteration of the same seeds walks,
    /// by the run's seed rule (rule 1, an op seed alone: its epoch `e`); a part's
    /// state holds the rule, so a restore into an op of the other rule reads the rest
    /// of the same order, and the run's iterations after it go on by that rule.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn parts_walk_the_order_of_the_seed_rule_and_save_it() {
        use tfrecord_lirs::DEFAULT_GRAPH_SEED;
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 1000, 8);
        let mut st = ok_status();
        let with = |rule| DatasetConfig {
            seeds: DatasetSeeds::new((DEFAULT_GRAPH_SEED, 42), rule, 0, true).unwrap(),
            ..dataset_config(&path, 0)
        };
        let in_parts = |ds: &LirsDataset, seeds: &IterationSeeds| {
            let count = ds
                .split_count(DEFAULT_GRAPH_SEED, 42, &mut ok_status())
                .unwrap();
            let mut ids = Vec::new();
            for k in 0..count {
                let mut c = ds.start_part(seeds, false, k, &mut ok_status()).unwrap();
                ids.extend(next_ids(&mut c, None));
            }
            ids
        };
        let op_seed = open_dataset_config(&with(1), &mut st).unwrap();
        for e in 0..2 {
            assert_eq!(
                in_parts(&op_seed, &drawn(e)),
                core_order(&op_seed, 42, e as u64)
            );
        }
        let fold = open_dataset_config(&with(0), &mut st).unwrap();
        let folded = core::seed_from_pair(drawn(1).seed, drawn(1).seed2);
        assert_eq!(in_parts(&fold, &drawn(1)), core_order(&fold, folded, 0));
        for (saved_by, restored_into) in [(&op_seed, 0), (&fold, 1)] {
            let whole = next_ids(
                &mut saved_by.start_part(&drawn(1), false, 5, &mut st).unwrap(),
                None,
            );
            let mut c = saved_by.start_part(&drawn(1), false, 5, &mut st).unwrap();
            let head = next_ids(&mut c, Some(2));
            let saved = c.save_part(4, &mut st).unwrap();
            let next_epoch = in_parts(saved_by, &drawn(2));
            let none = saved_by.save_no_part(&drawn(1));
            for state in [&saved, &none] {
                let new = open_dataset_config(&with(restored_into), &mut st).unwrap();
                let mut seeds = drawn(0);
                let has_part = new.part_state_seeds(state, &mut seeds, &mut st).unwrap();
                assert_eq!(has_part, *state == saved);
                let got = (seeds.seed, seeds.seed2, seeds.num_random_samples);
                assert_eq!(got, (101, 201, 4));
                if has_part {
                    let mut c = new.restore_part(false, state, &mut st).unwrap();
                    assert_eq!([head.clone(), next_ids(&mut c, None)].concat(), whole);
                }
                assert_eq!(in_parts(&new, &drawn(2)), next_epoch);
            }
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
            assert!(ds.part_state_seeds(&saved, &mut got, &mut st).unwrap());
            assert_eq!((got.seed, got.seed2, got.num_random_samples), (5, 7, 1));
            let none = ds.save_no_part(&seeds);
            assert!(!ds.part_state_seeds(&none, &mut got, &mut st).unwrap());
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

    /// The split provider's part state round trip, as TensorFlow drives it when a
    /// worker's iterator is saved in the middle of a split and restored into a new
    /// dataset (a restarted worker): page-aware and not, both order versions, in
    /// order or not, elements or batches, cut anywhere in the part, the restored
    /// cursor delivers exactly the rest of the part.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn a_split_saved_anywhere_restores_its_rest_in_a_new_dataset() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 600, 40);
        let mut st = ok_status();
        let seeds = IterationSeeds {
            seed: 9,
            seed2: 4,
            num_random_samples: 3,
        };
        for (page_aware, order_version, batch_size, unordered) in [
            (false, 1, 0, false),
            (true, 1, 0, false),
            (true, 2, 4, false),
            (true, 1, 4, true),
            (false, 2, 0, true),
        ] {
            let config = dataset_with(&dataset_config(&path, batch_size), |w| {
                w.page_aware = page_aware;
                w.order_version = order_version;
            });
            let ds = open_dataset_config(&config, &mut st).unwrap();
            let count = ds.split_count(9, 4, &mut st).unwrap();
            // Page-aware, a part whose ends moved to the same unit end is empty.
            let parts: Vec<(i64, Vec<u32>)> = (0..count)
                .map(|k| {
                    let mut c = ds.start_part(&seeds, unordered, k, &mut st).unwrap();
                    (k, next_ids(&mut c, None))
                })
                .filter(|(_, ids)| !ids.is_empty())
                .collect();
            assert!(parts.len() >= 3);
            for (part, whole) in [0, parts.len() / 2, parts.len() - 1].map(|i| parts[i].clone()) {
                let elements = if batch_size == 0 {
                    whole.len()
                } else {
                    whole.len().div_ceil(4)
                };
                for cut in 0..=elements {
                    let mut cursor = ds.start_part(&seeds, unordered, part, &mut st).unwrap();
                    let head = next_ids(&mut cursor, Some(cut));
                    let saved = cursor.save_part(seeds.num_random_samples, &mut st).unwrap();
                    let new = open_dataset_config(&config, &mut st).unwrap();
                    let mut got = test_support::no_seeds();
                    assert!(new.part_state_seeds(&saved, &mut got, &mut st).unwrap());
                    assert_eq!((got.seed, got.seed2, got.num_random_samples), (9, 4, 3));
                    let mut restored = new.restore_part(unordered, &saved, &mut st).unwrap();
                    let mut all = [head, next_ids(&mut restored, None)].concat();
                    let mut want = whole.clone();
                    if unordered {
                        // Unordered: the same instances, in the order reads complete.
                        all.sort_unstable();
                        want.sort_unstable();
                    }
                    assert_eq!(
                        all, want,
                        "{page_aware} v{order_version} b{batch_size} part {part} cut {cut}"
                    );
                }
            }
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
