//! A [`DatasetCursor`] over one part of an epoch ([`EpochParts`]), or over one
//! data-loading worker's batches of it.

use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use super::options::CursorOptions;
use super::order::Slice;
use super::parts::EpochParts;
use super::state::CursorState;
use super::walk::DatasetCursor;
use crate::read::elastic::EpochState;
use crate::read::reader::Reader;

impl DatasetCursor {
    /// A cursor over part `part` of `parts` of the whole epoch of `options.order`
    /// (one shard of one, kept remainder), at `state` (positions counted in the
    /// part). Workers that share the seeds walk disjoint parts of one order, so a
    /// coordinator handing out each part once delivers the epoch once.
    pub fn part(
        reader: Arc<Reader>,
        options: CursorOptions,
        parts: EpochParts,
        part: u64,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        if options.order.num_shards != 1 || options.shard_remainder != ShardRemainder::Keep {
            return Err(Error::invalid_argument(format!(
                "a walk of parts reads the whole epoch: num_shards must be 1 (got {}) and \
                 shard_remainder 'keep'",
                options.order.num_shards
            )));
        }
        DatasetCursor::open(reader, options, None, Slice::Part(parts, part), state)
    }

    /// A cursor over data-loading worker `worker`'s batches of `workers` (batches
    /// `i` with `i % workers == worker`, of `options.batch_size`) of the shard's epoch
    /// of `options.order`, from `base` when the epoch is one resumed elastically, at
    /// `state` (positions counted in the worker's batches).
    pub fn worker_batches(
        reader: Arc<Reader>,
        options: CursorOptions,
        base: Option<&EpochState>,
        workers: u64,
        worker: u64,
        state: &CursorState,
    ) -> Result<DatasetCursor> {
        if options.batch_size == 0 {
            return Err(Error::invalid_argument(
                "workers split a walk by batches: batch_size must be >= 1",
            ));
        }
        let base = match base {
            Some(base) => {
                base.check_fits(&reader, &options.order, options.order_version)?;
                (!base.is_fresh()).then(|| Arc::new(base.clone()))
            }
            None => None,
        };
        let slice = Slice::Batches { workers, worker };
        DatasetCursor::open(reader, options, base, slice, state)
    }
}
