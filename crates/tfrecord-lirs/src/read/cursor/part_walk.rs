//! A [`DatasetCursor`] over one part of an epoch ([`EpochParts`]).

use std::sync::Arc;

use tfrecord_lirs_format::error::{Error, Result};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use super::options::CursorOptions;
use super::parts::EpochParts;
use super::state::CursorState;
use super::walk::DatasetCursor;
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
        DatasetCursor::open(reader, options, None, Some((parts, part)), state)
    }
}
