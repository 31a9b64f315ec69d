//! What a [`DatasetLoader`](crate::DatasetLoader)'s checkpoints are positions of: the
//! walk ([`WalkIdentity`], checked on restore) and how a process's data-loading workers
//! split it ([`WorkerSplit`]; [`compose_shards`] for states saved before whole batches).

use crate::error::{Error, Result};
use crate::options;
use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

/// Shard `shard_index` of `num_shards` split among `worker_count` workers: worker
/// `worker_index`'s shard of `num_shards * worker_count`, as (num_shards, shard_index).
/// Both pairs are checked ([`options::shard`]).
pub fn compose_shards(
    num_shards: u64,
    shard_index: u64,
    worker_count: u64,
    worker_index: u64,
) -> Result<(u64, u64)> {
    options::shard(num_shards, shard_index)?;
    if worker_count == 0 || worker_index >= worker_count {
        return Err(Error::invalid_argument(format!(
            "worker_index must be in [0, worker_count), got worker_index={worker_index} \
             worker_count={worker_count}"
        )));
    }
    let too_many = || {
        Error::invalid_argument(format!(
            "{num_shards} shards of {worker_count} workers each are too many"
        ))
    };
    let shards = num_shards.checked_mul(worker_count).ok_or_else(too_many)?;
    // shard_index < num_shards, so this is below `shards`.
    let index = shard_index * worker_count + worker_index;
    Ok((shards, index))
}

/// What a checkpoint's positions are positions of: the dataset (each file's instances,
/// bytes and base name, [`DatasetIdentity`]: the rule every saved state is checked by)
/// and the order (seed, page-aware or not, composed shard). The order version is the
/// cursor state's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkIdentity {
    /// The dataset; its names are `None` in a state saved before names were kept (not
    /// compared then).
    pub dataset: DatasetIdentity,
    /// The order's seed.
    pub seed: u64,
    /// Page-aware order.
    pub page_aware: bool,
    /// The composed shards (see [`compose_shards`]).
    pub num_shards: u64,
    /// The composed shard.
    pub shard_index: u64,
    /// What the shards do with the remainder.
    pub shard_remainder: ShardRemainder,
}

impl WalkIdentity {
    /// Checks that a state of `saved` can restore into this walk of a `holder`
    /// ("Loader", "Sampler"): the first difference is an
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming it.
    pub(crate) fn check_restore(&self, saved: &WalkIdentity, holder: &str) -> Result<()> {
        let refuse = |what: String| {
            Err(Error::invalid_argument(format!(
                "this state was saved by a {holder} of {what}; restore it into a {holder} of \
                 the same files, seed, page_aware and shard"
            )))
        };
        let this = format!("this {holder}");
        if let Some(what) = saved.dataset.differences(&self.dataset, &this) {
            return refuse(format!("another dataset ({what})"));
        }
        if saved.seed != self.seed {
            return refuse(format!(
                "seed {} ({this} has seed {})",
                saved.seed, self.seed
            ));
        }
        if saved.page_aware != self.page_aware {
            return refuse(format!(
                "page_aware={} ({this} has page_aware={})",
                saved.page_aware, self.page_aware
            ));
        }
        if saved.shard_remainder != self.shard_remainder {
            return refuse(format!(
                "shard_remainder=\"{}\" ({this} has shard_remainder=\"{}\")",
                saved.shard_remainder.name(),
                self.shard_remainder.name()
            ));
        }
        // Another sharding (a job resumed on more or fewer workers) is refused here;
        // resuming K shards' states as K' shards would map them at this point.
        if (saved.num_shards, saved.shard_index) != (self.num_shards, self.shard_index) {
            return refuse(format!(
                "shard {} of {} ({this}, with its worker, is shard {} of {})",
                saved.shard_index, saved.num_shards, self.shard_index, self.num_shards
            ));
        }
        Ok(())
    }
}

/// How the data-loading workers of a process split its shard's walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerSplit {
    /// Worker `index` of `count` walks the shard's batches `i` with
    /// `i % count == index` (a state's walk is then the shard's, not composed).
    Batches {
        /// The workers.
        count: u64,
        /// This worker.
        index: u64,
    },
    /// Each worker walks a shard of its own ([`compose_shards`]; the walk's
    /// `num_shards`/`shard_index` are those composed): the split of states saved
    /// before whole batches (one worker: the same walk).
    Shards,
}
