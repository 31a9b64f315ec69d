//! The orders of a reader's instances: each epoch's order for a shard, as a list
//! (version 1 or 2) or as a function from position to id (version 2), and shard sizes.

use crate::error::Result;
use tfrecord_lirs_format::order::{self, EpochOrder, OrderParams, OrderVersion};
use tfrecord_lirs_format::order_v2::OrderV2;

use super::Reader;

impl Reader {
    /// The order of one epoch for one shard (order version 1).
    pub fn epoch_order(&self, params: &OrderParams) -> Result<EpochOrder> {
        Ok(EpochOrder::new(&self.layout, params, OrderVersion::V1)?)
    }

    /// The order of one epoch for one shard, made by order version `version`.
    pub fn epoch_order_with_version(
        &self,
        params: &OrderParams,
        version: OrderVersion,
    ) -> Result<EpochOrder> {
        Ok(EpochOrder::new(&self.layout, params, version)?)
    }

    /// Order version 2 of one epoch for one shard, as a function from position to id
    /// (nothing materialised; see [`OrderV2`]).
    pub fn order_v2(&self, params: &OrderParams) -> Result<OrderV2> {
        Ok(OrderV2::for_layout(&self.layout, params)?)
    }

    /// Instances of shard `shard_index` of `num_shards` in every epoch, for both kinds
    /// of order (a shard is a slice of positions of the epoch's order).
    pub fn shard_len(&self, num_shards: u64, shard_index: u64) -> Result<u64> {
        Ok(order::shard_len(&self.layout, num_shards, shard_index)?)
    }
}
