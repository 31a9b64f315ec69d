//! The walk of shard `j` of `K'` from an [`EpochState`]: the order a resumed
//! [`DatasetCursor`](crate::read::cursor::walk::DatasetCursor) reads.

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::order::{EpochOrder, OrderParams, OrderVersion};
use tfrecord_lirs_format::order_v2::OrderV2;

use crate::read::fetch::OrderSource;
use crate::storage::table_files::Layout;

use super::EpochState;

/// The order of shard `j` of `K'` walked from an [`EpochState`] with positions
/// delivered: its positions are ranks among the shard's global positions; each maps to
/// its id through the epoch's unsharded order.
pub(crate) struct ResumedOrder {
    version: OrderVersion,
    /// The shard's global positions, ascending.
    walk: Vec<Range<u64>>,
    /// The shard position where each range of `walk` starts.
    starts: Vec<u64>,
    len: u64,
    position: u64,
    ids: ResumedIds,
}

enum ResumedIds {
    /// Version 1: the shard's ids in walk order, taken from the whole epoch's
    /// permutation (which version 1 computes whole anyway).
    Listed(Vec<u64>),
    /// Version 2: the unsharded order, position by position.
    Computed(OrderV2),
}

impl ResumedOrder {
    /// Shard `order.shard_index` of `order.num_shards` at `epoch` over `layout`.
    pub(crate) fn new(
        layout: &Arc<Layout>,
        epoch: &EpochState,
        order: &OrderParams,
    ) -> Result<ResumedOrder> {
        let walk = epoch.shard_positions(order.num_shards, order.shard_index)?;
        ResumedOrder::of_ranges(layout, walk, order, epoch.order_version)
    }

    /// The shard of `options` under its equal-shard rule (`Drop` or `Pad`,
    /// docs/FORMAT.md §5.5): ranges of the unsharded order. `base`, a walk's starting
    /// point, must be the epoch's start: elastic resume maps `Keep` shards only.
    pub(crate) fn equal_shard(
        layout: &Arc<Layout>,
        options: &crate::read::cursor::options::CursorOptions,
        base: Option<&EpochState>,
    ) -> Result<ResumedOrder> {
        if base.is_some_and(|b| !b.is_fresh()) {
            return Err(Error::invalid_argument(format!(
                "elastic resume (an epoch state with instances delivered) works on shards \
                 with shard_remainder=\"keep\", not \"{}\"",
                options.shard_remainder.name()
            )));
        }
        let order = &options.order;
        crate::options::shard(order.num_shards, order.shard_index)?;
        let walk =
            options
                .shard_remainder
                .ranges(layout.len(), order.num_shards, order.shard_index);
        ResumedOrder::of_ranges(layout, walk, order, options.order_version)
    }

    /// The walk of `walk`, ranges of positions of the unsharded order of `order`'s
    /// epoch in walk order (any order, repeats allowed: the equal shards of
    /// [`ShardRemainder`](tfrecord_lirs_format::shard_remainder::ShardRemainder)).
    /// Version 1 streams the order past the gaps when the ranges ascend (an elastic
    /// shard's walk: only its ids are kept) and picks from the whole permutation
    /// otherwise; version 2 computes each id at its position.
    pub(crate) fn of_ranges(
        layout: &Arc<Layout>,
        walk: Vec<Range<u64>>,
        order: &OrderParams,
        version: OrderVersion,
    ) -> Result<ResumedOrder> {
        let mut starts = Vec::with_capacity(walk.len());
        let mut len = 0u64;
        for r in &walk {
            starts.push(len);
            len += r.end - r.start;
        }
        let whole = OrderParams {
            num_shards: 1,
            shard_index: 0,
            ..*order
        };
        let ids = match version {
            OrderVersion::V2 => ResumedIds::Computed(OrderV2::for_layout(layout, &whole)?),
            OrderVersion::V1 if ascending(&walk) => {
                ResumedIds::Listed(streamed_v1(layout, &whole, &walk, len)?)
            }
            OrderVersion::V1 => {
                // Version 1 computes the whole permutation anyway.
                let all: Vec<u64> = EpochOrder::new(layout, &whole, OrderVersion::V1)?.collect();
                let ids = walk
                    .iter()
                    .flat_map(|r| all[r.start as usize..r.end as usize].iter().copied())
                    .collect();
                ResumedIds::Listed(ids)
            }
        };
        Ok(ResumedOrder {
            version,
            walk,
            starts,
            len,
            position: 0,
            ids,
        })
    }

    /// The range of `walk` holding shard position `position` (`< len`).
    fn range_of(&self, position: u64) -> usize {
        self.starts.partition_point(|&s| s <= position) - 1
    }

    /// Appends the ids of shard positions `from..to` to `out`.
    fn ids_into(&self, from: u64, to: u64, out: &mut Vec<u64>) {
        match &self.ids {
            ResumedIds::Listed(ids) => out.extend_from_slice(&ids[from as usize..to as usize]),
            ResumedIds::Computed(order) => {
                let mut at = from;
                while at < to {
                    let i = self.range_of(at);
                    let global = self.walk[i].start + (at - self.starts[i]);
                    let run = (self.walk[i].end - global).min(to - at);
                    // Within the whole epoch's order by construction.
                    if order.ids_into(global..global + run, out).is_err() {
                        return;
                    }
                    at += run;
                }
            }
        }
    }
}

/// Whether `walk`'s ranges ascend (each starts at or past the end of the one before):
/// an elastic shard's walk, not an equal shard's that goes round to the order's start.
fn ascending(walk: &[Range<u64>]) -> bool {
    walk.windows(2).all(|w| w[0].end <= w[1].start)
}

/// The version 1 ids of ascending `walk` (`len` positions) of the unsharded order
/// `whole`: the order streamed past the gaps between the ranges, only the walk's ids
/// kept.
fn streamed_v1(
    layout: &Arc<Layout>,
    whole: &OrderParams,
    walk: &[Range<u64>],
    len: u64,
) -> Result<Vec<u64>> {
    let mut epoch = EpochOrder::new(layout, whole, OrderVersion::V1)?;
    let mut ids = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    let mut at = 0u64;
    let mut skipped = Vec::new();
    for r in walk {
        // Ids before the range are passed over.
        while at < r.start {
            skipped.clear();
            let step = usize::try_from((r.start - at).min(1 << 16)).unwrap_or(1 << 16);
            match epoch.next_batch(step, &mut skipped) {
                0 => break,
                n => at += n as u64,
            }
        }
        let want = usize::try_from(r.end - r.start)
            .map_err(|_| Error::invalid_argument("a resumed shard too large for this machine"))?;
        at += epoch.next_batch(want, &mut ids) as u64;
    }
    Ok(ids)
}

impl OrderSource for ResumedOrder {
    fn version(&self) -> u32 {
        // 1 or 2: fits.
        self.version.number() as u32
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.len {
            return Err(Error::invalid_argument(format!(
                "cannot seek to position {position}: the resumed shard has {} ids",
                self.len
            )));
        }
        self.position = position;
        Ok(())
    }
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        let mut end = (self.position + min as u64).min(self.len);
        if let (ResumedIds::Computed(order), true) = (&self.ids, end > self.position) {
            if order.params().page_aware {
                // The rest of the last id's unit, as far as its range goes.
                let i = self.range_of(end - 1);
                let global = self.walk[i].start + (end - 1 - self.starts[i]);
                if let Ok(unit_end) = order.unit_end(global) {
                    end += unit_end.min(self.walk[i].end) - global - 1;
                }
            }
        }
        let taken = end - self.position;
        self.ids_into(self.position, end, out);
        self.position = end;
        taken as usize
    }
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        let end = (self.position + max as u64).min(self.len);
        let taken = end - self.position;
        self.ids_into(self.position, end, out);
        self.position = end;
        taken as usize
    }
}
