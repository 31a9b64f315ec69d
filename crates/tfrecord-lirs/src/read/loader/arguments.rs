//! What a loader is given and what it gives back: its options with their defaults,
//! and its checkpoint.

use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use crate::read::cursor::state::CursorState;
use crate::read::elastic::EpochState;
use crate::read::walk_identity::{WalkIdentity, WorkerSplit};

/// The arguments of a loader, as its front ends take them; [`Default`] gives the
/// defaults of every one a caller leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderOptions {
    /// The order's seed (the same orders as the CLI's `order --seed` and `Sampler`).
    pub seed: u64,
    /// Instances per batch, at least 1.
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
