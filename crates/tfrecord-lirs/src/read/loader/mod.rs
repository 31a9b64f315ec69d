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

use crate::error::{Error, Result};
use crate::options;
use crate::read::cursor::batch_split::worker_batches_len;
use crate::read::cursor::options::CursorOptions;
use crate::read::cursor::state::CursorState;
use crate::read::cursor::view::BatchView;
use crate::read::cursor::walk::DatasetCursor;
use crate::read::elastic::{EpochState, ShardState};
use crate::read::reader::Reader;
pub use crate::read::walk_identity::{compose_shards, WalkIdentity, WorkerSplit};
use tfrecord_lirs_format::order::{OrderParams, OrderVersion};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

mod arguments;
#[cfg(test)]
mod tests;

pub use arguments::{LoaderOptions, LoaderState};

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
