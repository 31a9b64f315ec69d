//! The epoch loader of the TensorFlow-free front ends (Python's `tfrecord_lirs.Loader`):
//! epochs of batches over a [`DatasetCursor`], the epoch counter, the sharding of a
//! process's data-loading workers, and a checkpoint that names the dataset it belongs
//! to. Front ends convert types; every default, check and rule is here.
//!
//! # Epochs
//!
//! Each iteration ([`DatasetLoader::begin`]) walks the current epoch from its start, or
//! from a state just restored; when it ends, the epoch counter moves on, so the next
//! iteration is a fresh permutation. [`DatasetLoader::set_epoch`] sets it (as a
//! `DistributedSampler`'s `set_epoch`).
//!
//! # Shards
//!
//! The order's shard is `(num_shards, shard_index)`. The data-loading workers of the
//! process that iterates (worker `worker_index` of `worker_count`) split its walk by
//! whole batches ([`WorkerSplit::Batches`]): worker `w` walks the shard's batches `i`
//! with `i % worker_count == w`. Every instance of an epoch is in exactly one worker
//! of one shard, and the shard's batches per epoch
//! ([`batches_per_epoch`](DatasetLoader::batches_per_epoch)) do not depend on the
//! number of workers. States saved before that split (state version 2 and before)
//! name a composed shard ([`compose_shards`], [`WorkerSplit::Shards`]): the epoch
//! they are of is walked with that split, the epochs after it with whole batches.
//!
//! # Checkpoints
//!
//! A [`LoaderState`] is the epoch, the cursor's [`CursorState`] and what identifies the
//! walk it is a position of ([`WalkIdentity`]: the files' shapes, the seed, page-aware
//! or not, the composed shard). Restoring a state into a loader of another walk is an
//! [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming what
//! differs.

use std::sync::Arc;

use crate::options;
use crate::read::cursor::batch_split::worker_batches_len;
pub use crate::read::walk_identity::{compose_shards, WalkIdentity, WorkerSplit};
use crate::{
    BatchView, CursorOptions, CursorState, DatasetCursor, EpochState, Error, OrderParams,
    OrderVersion, Reader, Result, ShardState,
};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

/// The arguments of a loader, as its front ends take them; [`Default`] gives the
/// defaults of every one a caller leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderOptions {
    /// The order's seed (the same orders as the CLI's `order --seed` and `Sampler`).
    pub seed: u64,
    /// Records per batch, at least 1.
    pub batch_size: i64,
    /// Whole pages as the shuffle unit (files padded by `pad`).
    pub page_aware: bool,
    /// Batches in the order's order; `false`: as their reads complete (the same
    /// batches' multiset per epoch, a slow read holds up only its own batch).
    pub deterministic: bool,
    /// Fetch threads: -1 (automatic) or at least 1.
    pub num_parallel_reads: i64,
    /// Shards of every epoch (before a process's workers split its shard further).
    pub num_shards: u64,
    /// This loader's shard.
    pub shard_index: u64,
    /// Drop each epoch's last batch when it is short.
    pub drop_remainder: bool,
    /// The order algorithm: 1 or 2 (docs/FORMAT.md §5).
    pub order_version: u64,
    /// What the shards do with the remainder: `Drop`/`Pad` give every shard (and
    /// worker) the same count (docs/FORMAT.md §5.5).
    pub shard_remainder: ShardRemainder,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        use crate::options::defaults;
        LoaderOptions {
            seed: defaults::SEED,
            batch_size: defaults::BATCH_SIZE,
            page_aware: defaults::PAGE_AWARE,
            deterministic: defaults::DETERMINISTIC,
            num_parallel_reads: defaults::NUM_PARALLEL_READS,
            num_shards: defaults::NUM_SHARDS,
            shard_index: defaults::SHARD_INDEX,
            drop_remainder: defaults::DROP_REMAINDER,
            order_version: defaults::ORDER_VERSION,
            shard_remainder: ShardRemainder::Keep,
        }
    }
}

/// A loader's checkpoint: the epoch, the cursor's position in it and the walk it
/// belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoaderState {
    /// What the positions are positions of.
    pub walk: WalkIdentity,
    /// How the workers split the walk (positions are the worker's).
    pub split: WorkerSplit,
    /// The epoch being walked (or next to walk).
    pub epoch: u64,
    /// What of that epoch was delivered.
    pub cursor: CursorState,
    /// When the epoch is one resumed elastically (docs/FORMAT.md §6): the epoch
    /// state its walk started from; the cursor's positions are positions of that walk.
    pub resumed_from: Option<EpochState>,
}

/// Epochs of batches over a dataset (see the module docs).
pub struct DatasetLoader {
    reader: Arc<Reader>,
    options: LoaderOptions,
    /// The cursor options of the epoch walks (the order's epoch and shard are set per
    /// walk).
    cursor_options: CursorOptions,
    epoch: u64,
    /// The data-loading worker iterating: (worker_count, worker_index).
    worker: (u64, u64),
    /// The walk in progress and what it walks; `None` between walks.
    cursor: Option<DatasetCursor>,
    walking: Option<(WalkIdentity, WorkerSplit)>,
    /// A state restored and not yet walked from.
    restored: Option<LoaderState>,
    /// The epoch state the walk of epoch `resumed_from.epoch` starts from (elastic
    /// resume); dropped when that epoch ends or another is chosen.
    resumed_from: Option<EpochState>,
    /// This loader's walks run in other processes (copies of it in a `DataLoader`'s
    /// worker processes), which hold the states: this one has none to give.
    walked_elsewhere: bool,
}

impl DatasetLoader {
    /// A loader over `reader` (epoch 0, worker 0 of 1); every option is checked here.
    pub fn new(reader: Arc<Reader>, options: LoaderOptions) -> Result<DatasetLoader> {
        options::batch_size(options.batch_size)?;
        options::shard(options.num_shards, options.shard_index)?;
        let mut cursor_options =
            CursorOptions::dataset(&reader, options.batch_size, options.num_parallel_reads)?;
        cursor_options.order_version = options::order_version(options.order_version)?;
        cursor_options.unordered = !options.deterministic;
        cursor_options.drop_remainder = options.drop_remainder;
        cursor_options.shard_remainder = options.shard_remainder;
        cursor_options.order = OrderParams {
            seed: options.seed,
            epoch: 0,
            page_aware: options.page_aware,
            num_shards: options.num_shards,
            shard_index: options.shard_index,
        };
        Ok(DatasetLoader {
            reader,
            options,
            cursor_options,
            epoch: 0,
            worker: (1, 0),
            cursor: None,
            walking: None,
            restored: None,
            resumed_from: None,
            walked_elsewhere: false,
        })
    }

    /// The options it was made with.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The epoch walked now, or next.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The epoch the next walk walks from its start (a walk in progress, or a state
    /// restored, is dropped).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.cursor = None;
        self.restored = None;
        self.resumed_from = None;
    }

    /// Goes on with an epoch other workers began (elastic resume, docs/FORMAT.md §6):
    /// the next walk is this loader's shard (with its worker) of what `epoch_state`
    /// (from [`EpochState::combine`] of the old workers' [`shard_state`]) did not
    /// deliver; later epochs are ordinary ones. A state of another dataset, seed,
    /// page-awareness or order version is refused (`DataLoss` naming what differs)
    /// and the loader is left as it was.
    ///
    /// [`shard_state`]: DatasetLoader::shard_state
    pub fn resume_epoch(&mut self, epoch_state: &EpochState) -> Result<()> {
        self.check_elastic()?;
        let mut order = self.cursor_options.order;
        order.epoch = epoch_state.epoch;
        epoch_state.check_fits(&self.reader, &order, self.cursor_options.order_version)?;
        self.epoch = epoch_state.epoch;
        self.cursor = None;
        self.restored = None;
        self.resumed_from = Some(epoch_state.clone());
        Ok(())
    }

    /// The former name of [`shard_state`](DatasetLoader::shard_state).
    #[deprecated(since = "0.2.0", note = "renamed `shard_state`")]
    pub fn shard_progress(&self) -> Result<ShardState> {
        self.shard_state()
    }

    /// This process's share of the current epoch for an elastic resume: the epoch
    /// state its walk started from, its shard and what it delivered (a walk not begun
    /// has delivered nothing, or what a state restored says). Not in one of several
    /// data-loading workers: they split the shard by batches, and an elastic state is
    /// a whole shard's.
    pub fn shard_state(&self) -> Result<ShardState> {
        self.check_elastic()?;
        if self.worker.0 > 1 {
            return Err(Error::invalid_argument(format!(
                "elastic resume saves whole shards' states, and this Loader walks worker {} \
                 of {}'s batches of its shard: take shard_state() from a Loader iterated \
                 without DataLoader workers (num_workers=0), one per shard",
                self.worker.1, self.worker.0
            )));
        }
        if let Some(cursor) = &self.cursor {
            return Ok(cursor.shard_state());
        }
        let (num_shards, shard_index) = self.shard()?;
        let (base, state) = match &self.restored {
            Some(restored) => (restored.resumed_from.clone(), restored.cursor.clone()),
            None => (
                self.resumed_from.clone(),
                CursorState::start_of(self.cursor_options.order_version),
            ),
        };
        let base = base.unwrap_or_else(|| {
            let mut order = self.cursor_options.order;
            order.epoch = self.epoch;
            EpochState::fresh_of(&self.reader, &order, self.cursor_options.order_version)
        });
        Ok(ShardState {
            base,
            num_shards,
            shard_index,
            state,
            remainder: self.options.shard_remainder,
        })
    }

    /// Sets the data-loading worker iterating (worker `worker_index` of
    /// `worker_count`, `(1, 0)` outside such workers); checked.
    pub fn set_worker(&mut self, worker_count: u64, worker_index: u64) -> Result<()> {
        compose_shards(
            self.options.num_shards,
            self.options.shard_index,
            worker_count,
            worker_index,
        )?;
        if self.worker != (worker_count, worker_index) {
            self.worker = (worker_count, worker_index);
            self.cursor = None;
        }
        Ok(())
    }

    /// The shard walked, `(num_shards, shard_index)` (its workers split it by batches).
    pub fn shard(&self) -> Result<(u64, u64)> {
        options::shard(self.options.num_shards, self.options.shard_index)?;
        Ok((self.options.num_shards, self.options.shard_index))
    }

    /// How the worker iterating takes its part of the shard.
    pub fn split(&self) -> WorkerSplit {
        WorkerSplit::Batches {
            count: self.worker.0,
            index: self.worker.1,
        }
    }

    /// Instances in each epoch of the shard (all its workers together).
    fn rank_len(&self) -> Result<u64> {
        let (n, i) = self.shard()?;
        match self.options.shard_remainder {
            ShardRemainder::Keep => self.reader.shard_len(n, i),
            rule => Ok(rule.shard_len(self.reader.len(), n, i)),
        }
    }

    /// Instances in each epoch the worker iterating walks (its batches of the shard).
    pub fn shard_len(&self) -> Result<u64> {
        let (count, index) = self.worker;
        let batch = self.options.batch_size as u64;
        Ok(worker_batches_len(self.rank_len()?, batch, count, index))
    }

    /// Batches in each epoch of the shard, all its workers together (so the same for
    /// any number of workers): the short last one counted unless `drop_remainder`.
    pub fn batches_per_epoch(&self) -> Result<u64> {
        let (len, batch) = (self.rank_len()?, self.options.batch_size as u64);
        Ok(if self.options.drop_remainder {
            len / batch
        } else {
            len.div_ceil(batch)
        })
    }

    /// Elastic resume maps positions of `Keep` shards (docs/FORMAT.md §6).
    fn check_elastic(&self) -> Result<()> {
        match self.options.shard_remainder {
            ShardRemainder::Keep => Ok(()),
            rule => Err(Error::invalid_argument(format!(
                "elastic resume (shard_state, resume_epoch) works on shards with \
                 shard_remainder=\"keep\"; this Loader has shard_remainder=\"{}\"",
                rule.name()
            ))),
        }
    }

    /// What the current walk is (the identity of its checkpoints).
    pub fn walk(&self) -> Result<WalkIdentity> {
        let (num_shards, shard_index) = self.shard()?;
        Ok(self.identity(num_shards, shard_index))
    }

    fn identity(&self, num_shards: u64, shard_index: u64) -> WalkIdentity {
        WalkIdentity {
            dataset: self.reader.identity(),
            seed: self.options.seed,
            page_aware: self.options.page_aware,
            num_shards,
            shard_index,
            shard_remainder: self.options.shard_remainder,
        }
    }

    /// The walk and split this loader's worker has for a state of `saved`'s split,
    /// checked against it.
    fn check_state(&self, saved: &LoaderState) -> Result<(WalkIdentity, WorkerSplit)> {
        let (walk, split) = match saved.split {
            WorkerSplit::Shards => {
                let (n, i) = compose_shards(
                    self.options.num_shards,
                    self.options.shard_index,
                    self.worker.0,
                    self.worker.1,
                )?;
                (self.identity(n, i), WorkerSplit::Shards)
            }
            WorkerSplit::Batches { .. } => (self.walk()?, self.split()),
        };
        walk.check_restore(&saved.walk, "Loader")?;
        if let (
            WorkerSplit::Batches { count, index },
            WorkerSplit::Batches {
                count: here,
                index: this,
            },
        ) = (saved.split, split)
        {
            if (count, index) != (here, this) {
                return Err(Error::invalid_argument(format!(
                    "this state was saved by DataLoader worker {index} of {count}, and this \
                     Loader is worker {this} of {here}: restore each worker's state into the \
                     same worker of as many workers"
                )));
            }
        }
        Ok((walk, split))
    }

    /// A cursor over `walk` split as `split`, of `epoch` from `base` (an elastic
    /// resume of that epoch, if any), at `state`.
    fn open_cursor(
        &self,
        walk: &WalkIdentity,
        split: WorkerSplit,
        epoch: u64,
        base: Option<&EpochState>,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        let mut options = self.cursor_options;
        options.order.epoch = epoch;
        (options.order.num_shards, options.order.shard_index) = (walk.num_shards, walk.shard_index);
        let reader = Arc::clone(&self.reader);
        let base = base.filter(|b| b.epoch == epoch);
        match split {
            WorkerSplit::Batches { count, index } if count > 1 => {
                DatasetCursor::worker_batches(reader, options, base, count, index, state)
            }
            _ => match base {
                Some(base) => DatasetCursor::resume(reader, options, base, state),
                None => DatasetCursor::new(reader, options, state),
            },
        }
    }

    /// Starts a walk of the current epoch: from the state restored last if there is
    /// one (checked again against the worker now iterating), else from the epoch's
    /// start. A walk in progress is dropped.
    pub fn begin(&mut self) -> Result<()> {
        self.cursor = None;
        let (walk, split, state) = match self.restored.take() {
            Some(restored) => {
                let (walk, split) = self.check_state(&restored)?;
                self.epoch = restored.epoch;
                self.resumed_from = restored.resumed_from;
                (walk, split, restored.cursor)
            }
            None => (
                self.walk()?,
                self.split(),
                CursorState::start_of(self.cursor_options.order_version),
            ),
        };
        let cursor =
            self.open_cursor(&walk, split, self.epoch, self.resumed_from.as_ref(), &state)?;
        self.cursor = Some(cursor);
        self.walking = Some((walk, split));
        Ok(())
    }

    /// The epoch of the state restored and not yet walked from, if any.
    pub fn restored_epoch(&self) -> Option<u64> {
        self.restored.as_ref().map(|r| r.epoch)
    }

    /// Starts a walk of `epoch` (a data-loading worker's, whose epochs a
    /// [`WorkerEpochs`](crate::WorkerEpochs) decides): the walk [`begin`] starts when
    /// `epoch` is the current one (from a state restored or an elastic resume of that
    /// epoch, if any), else a walk of `epoch` from its start.
    ///
    /// [`begin`]: DatasetLoader::begin
    pub fn begin_epoch(&mut self, epoch: u64) -> Result<()> {
        if epoch != self.epoch {
            self.set_epoch(epoch);
        }
        self.begin()
    }

    /// The next batch of the walk; `Err` for an instance that could not be read (the
    /// next call goes on: see [`DatasetCursor::next_batch`]); `None` at the end of the
    /// epoch, or when no walk was begun. The end of an epoch moves the counter on.
    pub fn next_batch(&mut self) -> Option<Result<BatchView>> {
        let cursor = self.cursor.as_mut()?;
        let next = cursor.next_batch();
        if next.is_none() {
            self.cursor = None;
            self.resumed_from = None;
            self.epoch = self.epoch.saturating_add(1);
        }
        next
    }

    /// Marks this loader as one whose walks run in copies of it in other processes
    /// (a PyTorch `DataLoader`'s worker processes): its [`state`](DatasetLoader::state)
    /// is then an error saying where the states are, not the start of a walk it never
    /// made (a resume from which would replay the epoch).
    pub fn set_walked_elsewhere(&mut self) {
        self.walked_elsewhere = true;
    }

    /// The checkpoint: where the walk in progress is, else the state restored and not
    /// yet walked, else the start of the current epoch. An error for a loader whose
    /// walks run elsewhere ([`set_walked_elsewhere`](DatasetLoader::set_walked_elsewhere)).
    pub fn state(&self) -> Result<LoaderState> {
        if self.walked_elsewhere {
            return Err(Error::invalid_argument(
                "this Loader's epochs are walked by copies of it in DataLoader worker \
                 processes, which hold its state: this copy has none (its state would be the \
                 start of the epoch, and a resume from it would replay the epoch). Use \
                 torchdata's StatefulDataLoader (torchdata.stateful_dataloader), whose \
                 state_dict() collects each worker's state and whose load_state_dict() \
                 restores each in its worker, or num_workers=0",
            ));
        }
        if let Some(restored) = &self.restored {
            return Ok(restored.clone());
        }
        let (walk, split, cursor) = match (&self.cursor, &self.walking) {
            (Some(cursor), Some((walk, split))) => (walk.clone(), *split, cursor.state()),
            _ => (
                self.walk()?,
                self.split(),
                CursorState::start_of(self.cursor_options.order_version),
            ),
        };
        Ok(LoaderState {
            walk,
            split,
            epoch: self.epoch,
            cursor,
            resumed_from: self.resumed_from.clone(),
        })
    }

    /// Restores `state` (taken by a loader of the same walk, in any process): the
    /// next walk goes on from it. A state of another walk or order version, or
    /// positions past the epoch's end, are refused here, and the loader is left as it
    /// was.
    pub fn restore(&mut self, state: &LoaderState) -> Result<()> {
        let (walk, split) = self.check_state(state)?;
        let version = self.cursor_options.order_version;
        if u64::from(state.cursor.order_version) != version.number() {
            return Err(Error::invalid_argument(format!(
                "this state was saved by a Loader of order_version={} (this Loader has \
                 order_version={})",
                state.cursor.order_version,
                version.number()
            )));
        }
        // The positions must lie in the epoch: checked by the cursor that walks them.
        let base = state.resumed_from.as_ref();
        self.open_cursor(&walk, split, state.epoch, base, &state.cursor)?;
        self.cursor = None;
        self.epoch = state.epoch;
        self.restored = Some(state.clone());
        Ok(())
    }

    /// The order version walked.
    pub fn order_version(&self) -> OrderVersion {
        self.cursor_options.order_version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A file of `n` records, record `i` holding `i` (u32 LE), its reader.
    fn reader_of(dir: &std::path::Path, n: u32) -> Arc<Reader> {
        let path = dir.join(format!("d{n}"));
        let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
        for i in 0..n {
            w.write(&i.to_le_bytes()).unwrap();
        }
        w.finish().unwrap();
        Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap())
    }

    fn ids(batch: &BatchView) -> Vec<u64> {
        batch
            .iter()
            .map(|p| u64::from(u32::from_le_bytes(p.try_into().unwrap())))
            .collect()
    }

    /// The batches of one walk, as ids.
    fn walk(loader: &mut DatasetLoader) -> Vec<Vec<u64>> {
        loader.begin().unwrap();
        std::iter::from_fn(|| loader.next_batch())
            .map(|b| ids(&b.unwrap()))
            .collect()
    }

    fn order(reader: &Reader, seed: u64, epoch: u64, shards: (u64, u64)) -> Vec<u64> {
        let params = OrderParams {
            seed,
            epoch,
            page_aware: false,
            num_shards: shards.0,
            shard_index: shards.1,
        };
        reader.epoch_order(&params).unwrap().collect()
    }

    #[test]
    fn epochs_walk_the_orders_in_batches_and_move_on() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 1000);
        let options = LoaderOptions {
            seed: 5,
            batch_size: 64,
            ..Default::default()
        };
        let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        for epoch in 0..3 {
            assert_eq!(loader.epoch(), epoch);
            let batches = walk(&mut loader);
            assert_eq!(batches.len(), 16);
            assert!(batches[..15].iter().all(|b| b.len() == 64));
            assert_eq!(batches[15].len(), 1000 - 15 * 64);
            let got: Vec<u64> = batches.concat();
            assert_eq!(got, order(&reader, 5, epoch, (1, 0)));
        }
        loader.set_epoch(1);
        assert_eq!(walk(&mut loader).concat(), order(&reader, 5, 1, (1, 0)));
        // Dropping the remainder; no walk begun: nothing.
        let mut dropping = DatasetLoader::new(
            Arc::clone(&reader),
            LoaderOptions {
                drop_remainder: true,
                ..options
            },
        )
        .unwrap();
        assert!(dropping.next_batch().is_none());
        assert_eq!(walk(&mut dropping).len(), 15);
    }

    #[test]
    fn workers_walk_the_epochs_their_worker_epochs_give_and_keep_a_restored_walk() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 300);
        let options = LoaderOptions {
            seed: 2,
            batch_size: 32,
            ..Default::default()
        };
        let main = crate::WorkerEpochs::create(dir.path()).unwrap();
        // Worker `w` of 2 made for the iteration of base seed `seed`: its whole walk.
        let walk_in = |w: u64, seed: u64, loader: &mut DatasetLoader| {
            let mut epochs = crate::WorkerEpochs::open(main.path()).unwrap();
            loader.set_worker(2, w).unwrap();
            let epoch = epochs.begin(w, seed, loader.restored_epoch()).unwrap();
            loader.begin_epoch(epoch).unwrap();
            std::iter::from_fn(|| loader.next_batch())
                .flat_map(|b| ids(&b.unwrap()))
                .collect::<Vec<u64>>()
        };
        for epoch in 0..3 {
            let mut got = Vec::new();
            for w in 0..2 {
                let mut copy = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
                let mine = walk_in(w, 100 + epoch, &mut copy);
                let mut fresh = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
                fresh.set_worker(2, w).unwrap();
                fresh.set_epoch(epoch);
                assert_eq!(
                    mine,
                    walk(&mut fresh).concat(),
                    "worker {w} walks epoch {epoch}"
                );
                got.extend(mine);
            }
            got.sort_unstable();
            assert_eq!(
                got,
                (0..300).collect::<Vec<u64>>(),
                "epoch {epoch}: each id once"
            );
        }
        // A state restored in a worker: its walk goes on from it.
        let mut first = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        first.set_worker(2, 0).unwrap();
        first.set_epoch(4);
        first.begin().unwrap();
        first.next_batch().unwrap().unwrap();
        let state = first.state().unwrap();
        let rest: Vec<u64> = std::iter::from_fn(|| first.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        let mut restored = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        restored.set_worker(2, 0).unwrap();
        restored.restore(&state).unwrap();
        assert_eq!(restored.restored_epoch(), Some(4));
        assert_eq!(walk_in(0, 7, &mut restored), rest);
        assert_eq!(main.furthest().unwrap(), 5);
    }

    #[test]
    fn an_epoch_of_four_loaders_goes_on_with_three_and_then_runs_as_three() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 1001);
        for (version, deterministic) in [(1, true), (2, true), (2, false)] {
            let options = |num_shards, shard_index| LoaderOptions {
                seed: 11,
                batch_size: 16,
                num_shards,
                shard_index,
                order_version: version,
                deterministic,
                num_parallel_reads: 2,
                ..Default::default()
            };
            let mut delivered = Vec::new();
            // Four workers each take 3 batches of epoch 0, then stop.
            let shard_states: Vec<ShardState> = (0..4)
                .map(|k| {
                    let mut old = DatasetLoader::new(Arc::clone(&reader), options(4, k)).unwrap();
                    old.begin().unwrap();
                    for _ in 0..3 {
                        delivered.extend(ids(&old.next_batch().unwrap().unwrap()));
                    }
                    old.shard_state().unwrap()
                })
                .collect();
            let epoch_state = EpochState::combine(&shard_states).unwrap();
            assert_eq!(epoch_state.delivered_count(), 4 * 3 * 16);
            for j in 0..3 {
                let mut new = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
                new.resume_epoch(&epoch_state).unwrap();
                // A checkpoint after one batch restores into a fresh loader, which
                // walks the rest of the resumed shard.
                new.begin().unwrap();
                delivered.extend(ids(&new.next_batch().unwrap().unwrap()));
                let state = new.state().unwrap();
                assert!(state.resumed_from.is_some());
                let mut restored = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
                restored.restore(&state).unwrap();
                delivered.extend(walk(&mut restored).concat());
                // The next epoch is an ordinary 3-shard epoch.
                assert_eq!(restored.epoch(), 1);
                let mut next = walk(&mut restored).concat();
                let mut fresh = DatasetLoader::new(Arc::clone(&reader), options(3, j)).unwrap();
                fresh.set_epoch(1);
                let mut expected = walk(&mut fresh).concat();
                if !deterministic {
                    // Unordered delivery: the same instances, in completion order.
                    next.sort_unstable();
                    expected.sort_unstable();
                }
                assert_eq!(next, expected, "version {version}");
            }
            delivered.sort_unstable();
            assert_eq!(
                delivered,
                (0..1001).collect::<Vec<u64>>(),
                "version {version}"
            );
        }
        // A state of another seed is refused, and the loader keeps its epoch.
        let mut other = DatasetLoader::new(
            Arc::clone(&reader),
            LoaderOptions {
                seed: 12,
                ..Default::default()
            },
        )
        .unwrap();
        let state = DatasetLoader::new(Arc::clone(&reader), LoaderOptions::default())
            .unwrap()
            .shard_state()
            .unwrap();
        let err = other
            .resume_epoch(&EpochState::combine(&[state]).unwrap())
            .unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::DataLoss, "{err}");
        assert_eq!(other.epoch(), 0);
    }

    #[test]
    fn unordered_walks_give_each_epochs_multiset() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 3000);
        let mut loader = DatasetLoader::new(
            Arc::clone(&reader),
            LoaderOptions {
                seed: 2,
                batch_size: 100,
                deterministic: false,
                num_parallel_reads: 3,
                ..Default::default()
            },
        )
        .unwrap();
        for epoch in 0..2 {
            let mut got = walk(&mut loader).concat();
            got.sort_unstable();
            assert_eq!(got, (0..3000).collect::<Vec<u64>>(), "epoch {epoch}");
        }
    }

    /// The batches the `workers` of a loader of `options` walk, dealt back in the
    /// shard's order (batch `i` is worker `i % workers`'s), and each worker's count.
    fn dealt(reader: &Arc<Reader>, options: LoaderOptions, workers: u64) -> Vec<Vec<u64>> {
        let mut each: Vec<std::collections::VecDeque<Vec<u64>>> = (0..workers)
            .map(|w| {
                let mut loader = DatasetLoader::new(Arc::clone(reader), options).unwrap();
                loader.set_worker(workers, w).unwrap();
                let batches = walk(&mut loader);
                let len: usize = batches.iter().map(Vec::len).sum();
                if !options.drop_remainder {
                    assert_eq!(len as u64, loader.shard_len().unwrap());
                }
                batches.into()
            })
            .collect();
        let mut out = Vec::new();
        for i in 0.. {
            let w = i % each.len();
            match each[w].pop_front() {
                Some(batch) => out.push(batch),
                None => break,
            }
        }
        assert!(
            each.iter().all(|b| b.is_empty()),
            "a worker's batches out of turn"
        );
        out
    }

    #[test]
    fn workers_take_whole_batches_so_the_batches_per_epoch_do_not_depend_on_them() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 777);
        for (drop_remainder, rule, version) in [
            (false, ShardRemainder::Keep, 1),
            (true, ShardRemainder::Keep, 2),
            (false, ShardRemainder::Pad, 1),
            (true, ShardRemainder::Drop, 2),
        ] {
            let mut count = BTreeMap::new();
            for shard in 0..2 {
                let options = LoaderOptions {
                    seed: 9,
                    batch_size: 50,
                    num_shards: 2,
                    shard_index: shard,
                    drop_remainder,
                    shard_remainder: rule,
                    order_version: version,
                    num_parallel_reads: 2,
                    ..Default::default()
                };
                let alone = walk(&mut DatasetLoader::new(Arc::clone(&reader), options).unwrap());
                let batches = DatasetLoader::new(Arc::clone(&reader), options)
                    .unwrap()
                    .batches_per_epoch()
                    .unwrap();
                assert_eq!(alone.len() as u64, batches);
                for workers in 1..=4 {
                    let got = dealt(&reader, options, workers);
                    // The same batches, in the same order, for any number of workers.
                    assert_eq!(got, alone, "{workers} workers, {rule:?}");
                    let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
                    loader.set_worker(workers, workers - 1).unwrap();
                    assert_eq!(loader.shard().unwrap(), (2, shard));
                    assert_eq!(loader.batches_per_epoch().unwrap(), batches);
                }
                for id in alone.concat() {
                    *count.entry(id).or_insert(0) += 1;
                }
            }
            match (rule, drop_remainder) {
                (ShardRemainder::Keep, false) => {
                    assert_eq!(count.len(), 777);
                    assert!(count.values().all(|&c| c == 1));
                }
                (ShardRemainder::Pad, _) => assert_eq!(count.len(), 777),
                _ => assert!(count.values().all(|&c| c == 1)),
            }
        }
    }

    #[test]
    fn a_state_of_a_composed_worker_shard_restores_that_epoch_then_batches_follow() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 500);
        let options = LoaderOptions {
            seed: 2,
            batch_size: 16,
            num_parallel_reads: 2,
            ..Default::default()
        };
        // A state saved (state version 2) by worker 1 of 2 walking shard 1 of 2 of
        // epoch 3, two batches in.
        let composed = order(&reader, 2, 3, (2, 1));
        let mut old = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        old.set_epoch(3);
        let mut state = old.state().unwrap();
        (state.walk.num_shards, state.walk.shard_index) = (2, 1);
        state.split = WorkerSplit::Shards;
        state.cursor.position = 32;
        let mut worker = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        worker.set_worker(2, 1).unwrap();
        worker.restore(&state).unwrap();
        assert_eq!(worker.state().unwrap(), state);
        worker.begin().unwrap();
        worker.next_batch().unwrap().unwrap();
        assert_eq!(worker.state().unwrap().split, WorkerSplit::Shards);
        let rest: Vec<u64> = std::iter::from_fn(|| worker.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(rest, composed[48..]);
        // The next epoch: the worker's whole batches.
        assert_eq!(worker.epoch(), 4);
        let next = walk(&mut worker);
        let whole = order(&reader, 2, 4, (1, 0));
        let mine: Vec<Vec<u64>> = whole
            .chunks(16)
            .skip(1)
            .step_by(2)
            .map(<[u64]>::to_vec)
            .collect();
        assert_eq!(next, mine);
        // In another worker it is refused, naming the composed shard.
        let mut other = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        other.set_worker(2, 0).unwrap();
        let e = other.restore(&state).unwrap_err();
        assert!(e.to_string().contains("shard 1 of 2"), "{e}");
    }

    #[test]
    fn bad_options_and_workers_are_invalid_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 10);
        let make = |options: LoaderOptions| {
            DatasetLoader::new(Arc::clone(&reader), options)
                .err()
                .unwrap()
        };
        for (options, want) in [
            (
                LoaderOptions {
                    batch_size: 0,
                    ..Default::default()
                },
                "batch_size must be >= 1, got 0",
            ),
            (
                LoaderOptions {
                    num_shards: 2,
                    shard_index: 2,
                    ..Default::default()
                },
                "shard_index must be in [0, num_shards), got shard_index=2 num_shards=2",
            ),
            (
                LoaderOptions {
                    order_version: 3,
                    ..Default::default()
                },
                "order version must be 1 or 2",
            ),
            (
                LoaderOptions {
                    num_parallel_reads: 0,
                    ..Default::default()
                },
                "num_parallel_reads must be >= 1 or -1 (automatic), got 0",
            ),
        ] {
            let e = make(options);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
        let mut loader = DatasetLoader::new(Arc::clone(&reader), Default::default()).unwrap();
        let e = loader.set_worker(2, 2).unwrap_err();
        assert!(
            e.to_string()
                .contains("worker_index must be in [0, worker_count), got worker_index=2"),
            "{e}"
        );
        assert_eq!(compose_shards(1, 0, 0, 0).unwrap_err().kind(), e.kind());
        assert!(compose_shards(u64::MAX, 0, 2, 0)
            .unwrap_err()
            .to_string()
            .contains("too many"));
    }

    #[test]
    fn states_restore_the_rest_of_the_epoch_and_name_a_mismatch() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 1000);
        for deterministic in [true, false] {
            let options = LoaderOptions {
                seed: 3,
                batch_size: 64,
                deterministic,
                num_parallel_reads: 2,
                ..Default::default()
            };
            let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
            loader.set_epoch(4);
            loader.begin().unwrap();
            let first: Vec<u64> = (0..5)
                .flat_map(|_| ids(&loader.next_batch().unwrap().unwrap()))
                .collect();
            let state = loader.state().unwrap();
            assert_eq!(state.epoch, 4);
            let rest: Vec<u64> = std::iter::from_fn(|| loader.next_batch())
                .flat_map(|b| ids(&b.unwrap()))
                .collect();
            assert_eq!(loader.epoch(), 5);
            assert_eq!(loader.state().unwrap().cursor, CursorState::start());

            let mut again = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
            again.restore(&state).unwrap();
            assert_eq!(again.state().unwrap(), state);
            let resumed = walk(&mut again).concat();
            if deterministic {
                assert_eq!(resumed, rest);
            }
            let mut all = [first, resumed].concat();
            all.sort_unstable();
            assert_eq!(all, (0..1000).collect::<Vec<u64>>());
            assert_eq!(again.epoch(), 5);

            // Another seed, shard, worker or dataset: refused, naming it.
            let other = |o: LoaderOptions| DatasetLoader::new(Arc::clone(&reader), o).unwrap();
            let e = other(LoaderOptions { seed: 4, ..options })
                .restore(&state)
                .unwrap_err();
            assert!(
                e.to_string().contains("seed 3 (this Loader has seed 4)"),
                "{e}"
            );
            let e = other(LoaderOptions {
                num_shards: 2,
                ..options
            })
            .restore(&state)
            .unwrap_err();
            assert!(e.to_string().contains("shard 0 of 1"), "{e}");
            let mut worker = other(options);
            worker.set_worker(2, 1).unwrap();
            let e = worker.restore(&state).unwrap_err();
            assert!(
                e.to_string().contains(
                    "saved by DataLoader worker 0 of 1, and this Loader is worker 1 of 2"
                ),
                "{e}"
            );
            let e = other(LoaderOptions {
                order_version: 2,
                ..options
            })
            .restore(&state)
            .unwrap_err();
            assert!(e.to_string().contains("order_version=1"), "{e}");
            let small = reader_of(dir.path(), 999);
            let e = DatasetLoader::new(small, options)
                .unwrap()
                .restore(&state)
                .unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("another dataset"), "{e}");
            // A restored state is checked again against the worker that walks it.
            let mut late = other(options);
            late.restore(&state).unwrap();
            late.set_worker(2, 0).unwrap();
            assert!(late.begin().is_err());
        }
    }

    #[test]
    fn drop_and_pad_shards_give_every_rank_the_same_count() {
        let dir = tempfile::tempdir().unwrap();
        let reader = reader_of(dir.path(), 1000);
        for version in [1, 2] {
            let whole = {
                let options = LoaderOptions {
                    seed: 6,
                    batch_size: 7,
                    order_version: version,
                    ..Default::default()
                };
                walk(&mut DatasetLoader::new(Arc::clone(&reader), options).unwrap()).concat()
            };
            for (rule, each) in [(ShardRemainder::Drop, 333), (ShardRemainder::Pad, 334)] {
                let mut all = Vec::new();
                for rank in 0..3 {
                    let options = LoaderOptions {
                        seed: 6,
                        batch_size: 7,
                        order_version: version,
                        num_shards: 3,
                        shard_index: rank,
                        shard_remainder: rule,
                        ..Default::default()
                    };
                    let ids = dealt(&reader, options, 4).concat();
                    assert_eq!(ids.len() as u64, each, "{rule:?} v{version}");
                    all.extend(ids);
                }
                match rule {
                    ShardRemainder::Drop => assert_eq!(all, whole[..999]),
                    _ => assert_eq!(all, [&whole[..], &whole[..2]].concat()),
                }
            }
        }
        // A padded shard's state restores the rest exactly; a Keep loader refuses it.
        let options = LoaderOptions {
            seed: 6,
            batch_size: 10,
            num_shards: 3,
            shard_index: 2,
            shard_remainder: ShardRemainder::Pad,
            ..Default::default()
        };
        let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        loader.begin().unwrap();
        let first = ids(&loader.next_batch().unwrap().unwrap());
        let state = loader.state().unwrap();
        let rest: Vec<u64> = std::iter::from_fn(|| loader.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(first.len() + rest.len(), 334);
        let mut again = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        again.restore(&state).unwrap();
        assert_eq!(walk(&mut again).concat(), rest);
        let keep = LoaderOptions {
            shard_remainder: ShardRemainder::Keep,
            ..options
        };
        let e = DatasetLoader::new(Arc::clone(&reader), keep)
            .unwrap()
            .restore(&state)
            .unwrap_err();
        assert!(e.to_string().contains("shard_remainder=\"pad\""), "{e}");
        assert!(loader.shard_state().is_err());

        // The op's checkpoints: a cursor's shard state (a fresh base) resumes the rest.
        let mut cursor_options = CursorOptions::dataset(&reader, 10, 2).unwrap();
        cursor_options.order = OrderParams {
            seed: 6,
            epoch: 0,
            page_aware: false,
            num_shards: 3,
            shard_index: 1,
        };
        cursor_options.shard_remainder = ShardRemainder::Drop;
        let mut cursor =
            DatasetCursor::new(Arc::clone(&reader), cursor_options, &CursorState::start()).unwrap();
        let first = ids(&cursor.next_batch().unwrap().unwrap());
        let saved = cursor.shard_state();
        let rest: Vec<u64> = std::iter::from_fn(|| cursor.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(first.len() + rest.len(), 333);
        let mut again = DatasetCursor::resume(
            Arc::clone(&reader),
            cursor_options,
            &saved.base,
            &saved.state,
        )
        .unwrap();
        let resumed: Vec<u64> = std::iter::from_fn(|| again.next_batch())
            .flat_map(|b| ids(&b.unwrap()))
            .collect();
        assert_eq!(resumed, rest);
    }

    /// Files of the sizes of `sizes`, named `names`, in `dir`, as one reader.
    fn reader_of_named(dir: &std::path::Path, names: &[&str]) -> Arc<Reader> {
        let files: Vec<(std::path::PathBuf, std::path::PathBuf)> = names
            .iter()
            .map(|name| {
                let path = dir.join(name);
                let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
                for i in 0..100u32 {
                    w.write(&i.to_le_bytes()).unwrap();
                }
                w.finish().unwrap();
                let table = tfrecord_lirs_format::table_path::default_table_path(&path);
                (path, table)
            })
            .collect();
        Arc::new(Reader::open(&files, &Default::default()).unwrap())
    }

    #[test]
    fn states_name_their_files_and_refuse_other_splits_or_orders_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let train = ["t-00000-of-00002", "t-00001-of-00002"];
        let reader = reader_of_named(dir.path(), &train);
        let options = LoaderOptions {
            seed: 1,
            batch_size: 10,
            ..Default::default()
        };
        let mut loader = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        loader.begin().unwrap();
        loader.next_batch().unwrap().unwrap();
        let state = loader.state().unwrap();
        assert_eq!(
            state.walk.dataset.names,
            Some(train.map(String::from).to_vec())
        );
        // The same files in another order: same counts and sizes, refused naming them.
        let swapped = reader_of_named(dir.path(), &[train[1], train[0]]);
        let e = DatasetLoader::new(swapped, options)
            .unwrap()
            .restore(&state)
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        let text = e.to_string();
        assert!(text.contains("another dataset"), "{text}");
        assert!(
            text.contains("the state's file 0 t-00000-of-00002 (100 instances")
                && text.contains("this Loader's file 0 t-00001-of-00002 (100 instances"),
            "{text}"
        );
        // Another split of the same sizes: refused.
        let other = tempfile::tempdir().unwrap();
        let valid = reader_of_named(other.path(), &["v-00000-of-00002", "v-00001-of-00002"]);
        let e = DatasetLoader::new(valid, options)
            .unwrap()
            .restore(&state)
            .unwrap_err();
        assert!(e.to_string().contains("v-00000-of-00002"), "{e}");
        // The same names elsewhere (a moved dataset): restores.
        let moved = tempfile::tempdir().unwrap();
        let moved = reader_of_named(moved.path(), &train);
        DatasetLoader::new(moved, options)
            .unwrap()
            .restore(&state)
            .unwrap();
        // A copy whose walks run in worker processes has no state of its own.
        let mut main_copy = DatasetLoader::new(Arc::clone(&reader), options).unwrap();
        main_copy.set_walked_elsewhere();
        let e = main_copy.state().unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("StatefulDataLoader"), "{e}");
        // A state saved before names were kept (version 1) restores as before.
        let mut old = state.clone();
        old.walk.dataset.names = None;
        let swapped = reader_of_named(dir.path(), &[train[1], train[0]]);
        DatasetLoader::new(swapped, options)
            .unwrap()
            .restore(&old)
            .unwrap();
    }
}
