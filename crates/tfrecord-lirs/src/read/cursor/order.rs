//! The order a [`DatasetCursor`](super::walk::DatasetCursor) walks: the one place a
//! cursor chooses an order algorithm, and what of the shard's epoch it walks.

use crate::error::Result;
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use super::batch_split::BatchSplit;
use super::options::CursorOptions;
use super::parts::{part_order, EpochParts};
use crate::read::elastic::resumed::ResumedOrder;
use crate::read::elastic::EpochState;
use crate::read::fetch::OrderSource;
use crate::read::reader::Reader;

/// What of the shard's epoch a cursor walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slice {
    /// All of it.
    Whole,
    /// Part `k` of `parts` (of the unsharded epoch).
    Part(EpochParts, u64),
    /// Batches `i` with `i % workers == worker` (a data-loading worker's).
    Batches { workers: u64, worker: u64 },
}

/// The epoch order of `options` over `reader`, from `base` (an elastic resume point
/// with positions delivered; `None`: the epoch's start): the one place a cursor
/// chooses an order algorithm (`options.order_version`), consumed only through
/// [`OrderSource`].
pub(super) fn open_order(
    reader: &Reader,
    options: &CursorOptions,
    base: Option<&EpochState>,
    slice: Slice,
) -> Result<Box<dyn OrderSource>> {
    match slice {
        Slice::Part(parts, k) => part_order(reader, options, parts, k),
        Slice::Whole => shard_order(reader, options, base),
        Slice::Batches { workers, worker } => {
            let shard = shard_order(reader, options, base)?;
            let batch = options.batch_size as u64;
            Ok(Box::new(BatchSplit::new(shard, batch, workers, worker)?))
        }
    }
}

/// The shard's epoch order (see [`open_order`]).
fn shard_order(
    reader: &Reader,
    options: &CursorOptions,
    base: Option<&EpochState>,
) -> Result<Box<dyn OrderSource>> {
    if options.shard_remainder != ShardRemainder::Keep {
        // A fresh base (a checkpoint's walk from the epoch's start) is the equal shard.
        let order = ResumedOrder::equal_shard(reader.layout(), options, base)?;
        return Ok(Box::new(order));
    }
    if let Some(base) = base {
        return Ok(Box::new(ResumedOrder::new(
            reader.layout(),
            base,
            &options.order,
        )?));
    }
    Ok(Box::new(reader.epoch_order_with_version(
        &options.order,
        options.order_version,
    )?))
}
