//! An epoch cut into parts: contiguous blocks of positions of the (unsharded) epoch
//! order, handed out one at a time by a coordinator (tf.data service's split
//! providers). Every worker computes the same order from the same seeds, so the
//! parts are disjoint and together cover the epoch once, whichever worker reads
//! which part.
//!
//! Part `k` nominally starts at `k · part_len`; page-aware, each bound moves to the
//! end of the unit holding the position before it, so a unit is never split between
//! two parts (a part may then be empty when a unit is longer than a part).

use std::ops::Range;

use crate::error::{Error, Result};

use super::options::CursorOptions;
use crate::read::fetch::OrderSource;
use crate::read::reader::Reader;

/// The order of part `k` of `parts` of the epoch of `options` over `reader`.
pub(super) fn part_order(
    reader: &Reader,
    options: &CursorOptions,
    parts: EpochParts,
    k: u64,
) -> Result<Box<dyn OrderSource>> {
    // The whole epoch's order, twice: once to find the part's bounds, once to walk it
    // (an order only moves forward cheaply).
    let whole = || reader.epoch_order_with_version(&options.order, options.order_version);
    let range = parts.positions(&mut whole()?, k)?;
    Ok(Box::new(PartOrder::new(Box::new(whole()?), range)?))
}

/// Parts per epoch aimed at: enough for workers to balance their load (a worker
/// asks for a part whenever it finished one), few enough that asking costs little.
pub const PARTS_PER_EPOCH: u64 = 256;

/// How an epoch of `len` instances is cut into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochParts {
    len: u64,
    part_len: u64,
    page_aware: bool,
}

impl EpochParts {
    /// The parts of an epoch of `len` instances read in batches of `batch_size` (0:
    /// single records): about [`PARTS_PER_EPOCH`] parts, each a whole number of
    /// batches, so that without page-awareness only the epoch's last batch is short.
    pub fn new(len: u64, batch_size: usize, page_aware: bool) -> EpochParts {
        let batch = (batch_size as u64).max(1);
        let part_len = len.div_ceil(PARTS_PER_EPOCH).max(1).div_ceil(batch) * batch;
        EpochParts {
            len,
            part_len,
            page_aware,
        }
    }

    /// How many parts (0 for an empty epoch).
    pub fn count(&self) -> u64 {
        self.len.div_ceil(self.part_len)
    }

    /// Instances in the epoch.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the epoch is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nominal instances per part (page-aware parts differ by less than a unit).
    pub fn part_len(&self) -> u64 {
        self.part_len
    }

    /// `part`'s positions in `order` (the whole epoch's order, moved by this call).
    pub fn positions(&self, order: &mut dyn OrderSource, part: u64) -> Result<Range<u64>> {
        if part >= self.count() {
            return Err(Error::invalid_argument(format!(
                "part {part} is out of range: the epoch has {} parts",
                self.count()
            )));
        }
        if order.len() != self.len {
            return Err(Error::invalid_argument(format!(
                "the order has {} positions, the parts were cut for {}",
                order.len(),
                self.len
            )));
        }
        Ok(self.bound(order, part)?..self.bound(order, part + 1)?)
    }

    /// Where part `k` starts (`len` for `k == count`).
    fn bound(&self, order: &mut dyn OrderSource, k: u64) -> Result<u64> {
        let nominal = k.saturating_mul(self.part_len).min(self.len);
        if !self.page_aware || nominal == 0 || nominal == self.len {
            return Ok(nominal);
        }
        // The end of the unit holding the position before: a window of one position
        // is extended to its unit's end.
        order.seek(nominal - 1)?;
        let mut ids = Vec::new();
        order.next_window(1, &mut ids);
        Ok(order.position())
    }
}

/// The positions `range` of an epoch order, as an order of their own (positions
/// counted from the range's start).
pub(crate) struct PartOrder {
    inner: Box<dyn OrderSource>,
    range: Range<u64>,
}

impl PartOrder {
    pub(crate) fn new(mut inner: Box<dyn OrderSource>, range: Range<u64>) -> Result<PartOrder> {
        inner.seek(range.start)?;
        Ok(PartOrder { inner, range })
    }

    /// Positions left in the part.
    fn left(&self) -> u64 {
        self.range.end.saturating_sub(self.inner.position())
    }

    /// Drops whatever the last take appended past the part's end (`before`: the
    /// length of `out` before it), so no read goes past the part.
    fn clip(&mut self, from: u64, out: &mut Vec<u64>, before: usize) -> usize {
        let taken = self.inner.position().saturating_sub(from);
        let allowed = self.range.end.saturating_sub(from);
        if taken > allowed {
            out.truncate(before + allowed as usize);
            // Back to the part's end, which the inner order already passed.
            let _ = self.inner.seek(self.range.end);
        }
        out.len() - before
    }
}

impl OrderSource for PartOrder {
    fn version(&self) -> u32 {
        self.inner.version()
    }
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }
    fn position(&self) -> u64 {
        self.inner.position().saturating_sub(self.range.start)
    }
    fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.len() {
            return Err(Error::data_loss(format!(
                "position {position} is past the end of this part ({} positions)",
                self.len()
            )));
        }
        self.inner.seek(self.range.start + position)
    }
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        let left = self.left();
        if left == 0 {
            return 0;
        }
        let (from, before) = (self.inner.position(), out.len());
        let min = usize::try_from(left).map_or(min, |l| min.min(l));
        self.inner.next_window(min, out);
        self.clip(from, out, before)
    }
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        let left = self.left();
        if left == 0 {
            return 0;
        }
        let (from, before) = (self.inner.position(), out.len());
        let max = usize::try_from(left).map_or(max, |l| max.min(l));
        self.inner.next_batch(max, out);
        self.clip(from, out, before)
    }
    // `next_positions`: the default (none), so the ids are taken through
    // `next_window`, bounded by the part.
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfrecord_lirs_format::order::{EpochOrder, OrderParams, OrderVersion};

    #[test]
    fn parts_are_whole_batches_and_cover_the_epoch() {
        for (len, batch) in [
            (0u64, 0usize),
            (1, 0),
            (255, 0),
            (1000, 0),
            (1000, 32),
            (100_000, 7),
        ] {
            let parts = EpochParts::new(len, batch, false);
            assert_eq!(parts.part_len() % (batch.max(1) as u64), 0);
            assert!(parts.count() <= PARTS_PER_EPOCH || parts.part_len() == batch as u64);
            assert!(parts.count() * parts.part_len() >= len);
            if len > 0 {
                assert!((parts.count() - 1) * parts.part_len() < len);
            }
        }
        assert_eq!(EpochParts::new(0, 0, false).count(), 0);
        assert_eq!(EpochParts::new(1000, 0, false).count(), 250);
        assert_eq!(EpochParts::new(1000, 32, false).part_len(), 32);
    }

    /// Every part's ids, each part read through its own order.
    fn part_ids(len: u64, version: OrderVersion) -> Vec<Vec<u64>> {
        let params = OrderParams {
            seed: 11,
            ..OrderParams::default()
        };
        let parts = EpochParts::new(len, 0, false);
        let order = || -> Box<dyn OrderSource> {
            Box::new(EpochOrder::of_len(len, &params, version).unwrap())
        };
        (0..parts.count())
            .map(|k| {
                let range = parts.positions(&mut *order(), k).unwrap();
                let mut part = PartOrder::new(order(), range.clone()).unwrap();
                assert_eq!(part.len(), range.end - range.start);
                let mut ids = Vec::new();
                while part.next_window(3, &mut ids) > 0 {}
                assert_eq!(ids.len() as u64, part.len());
                assert_eq!(part.position(), part.len());
                ids
            })
            .collect()
    }

    #[test]
    fn parts_read_every_id_once_in_the_epochs_order() {
        for version in [OrderVersion::V1, OrderVersion::V2] {
            let len = 2000;
            let params = OrderParams {
                seed: 11,
                ..OrderParams::default()
            };
            let whole: Vec<u64> = EpochOrder::of_len(len, &params, version).unwrap().collect();
            let parts = part_ids(len, version);
            assert_eq!(parts.concat(), whole, "{version:?}");
        }
    }

    #[test]
    fn out_of_range_parts_are_refused() {
        let params = OrderParams::default();
        let parts = EpochParts::new(10, 0, false);
        let mut order = EpochOrder::of_len(10, &params, OrderVersion::V1).unwrap();
        let e = parts.positions(&mut order, 10).unwrap_err();
        assert!(e.to_string().contains("part 10 is out of range"), "{e}");
        let mut other = EpochOrder::of_len(11, &params, OrderVersion::V1).unwrap();
        assert!(parts.positions(&mut other, 0).is_err());
    }

    /// Walks over the files' real orders: see `cursor_parts_*`.
    mod cursors {
        use std::collections::HashSet;
        use std::sync::Arc;

        use crate::{CursorOptions, CursorState, DatasetCursor, EpochParts, OrderVersion, Reader};

        /// A padded file of `n` records of 300 bytes (about 13 a page), each starting
        /// with its id.
        fn reader_of(dir: &std::path::Path, n: u32) -> Arc<Reader> {
            let path = dir.join("d");
            let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
            for i in 0..n {
                let mut record = i.to_le_bytes().to_vec();
                record.resize(300, 1);
                w.write(&record).unwrap();
            }
            w.finish().unwrap();
            Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap())
        }

        fn ids(cursor: &mut DatasetCursor, batches: Option<usize>) -> Vec<u64> {
            let mut out = Vec::new();
            for _ in 0..batches.unwrap_or(usize::MAX) {
                let Some(batch) = cursor.next_batch() else {
                    break;
                };
                let batch = batch.unwrap();
                for i in 0..batch.len() {
                    let r = batch.get(i).unwrap();
                    out.push(u64::from(u32::from_le_bytes(r[..4].try_into().unwrap())));
                }
            }
            out
        }

        #[test]
        fn cursor_parts_cover_the_epoch_once_and_keep_units_whole() {
            let dir = tempfile::tempdir().unwrap();
            let n = 3000;
            let reader = reader_of(dir.path(), n);
            let page = |id: u64| reader.location(id).unwrap().1 / 4096;
            for version in [OrderVersion::V1, OrderVersion::V2] {
                for page_aware in [false, true] {
                    let mut options = CursorOptions::dataset(&reader, 8, 2).unwrap();
                    (options.order.seed, options.order.page_aware) = (5, page_aware);
                    options.order_version = version;
                    let parts = EpochParts::new(reader.len(), 8, page_aware);
                    assert!(parts.count() > 100, "{}", parts.count());
                    let start = CursorState::start_of(version);
                    let mut all = Vec::new();
                    let mut pages_seen = HashSet::new();
                    // In another order than the parts': a coordinator hands them out
                    // in any order.
                    for k in (0..parts.count()).rev() {
                        let r = Arc::clone(&reader);
                        let mut c = DatasetCursor::part(r, options, parts, k, &start).unwrap();
                        let part = ids(&mut c, None);
                        assert_eq!(part.len() as u64, c.len());
                        if page_aware {
                            let pages: HashSet<u64> = part.iter().map(|&id| page(id)).collect();
                            assert!(pages_seen.is_disjoint(&pages), "{version:?} part {k}");
                            pages_seen.extend(pages);
                        }
                        all.push(part);
                    }
                    all.reverse();
                    let whole = {
                        let r = Arc::clone(&reader);
                        ids(&mut DatasetCursor::new(r, options, &start).unwrap(), None)
                    };
                    // The parts, in their order, are the epoch's order.
                    assert_eq!(all.concat(), whole, "{version:?} page_aware={page_aware}");
                    let mut sorted = all.concat();
                    sorted.sort_unstable();
                    assert_eq!(sorted, (0..u64::from(n)).collect::<Vec<_>>());
                }
            }
        }

        #[test]
        fn a_part_resumes_from_its_state() {
            let dir = tempfile::tempdir().unwrap();
            let reader = reader_of(dir.path(), 3000);
            let mut options = CursorOptions::dataset(&reader, 4, 2).unwrap();
            options.order.seed = 9;
            let parts = EpochParts::new(reader.len(), 4, false);
            let start = CursorState::start();
            let r = || Arc::clone(&reader);
            let whole = ids(
                &mut DatasetCursor::part(r(), options, parts, 3, &start).unwrap(),
                None,
            );
            let mut c = DatasetCursor::part(r(), options, parts, 3, &start).unwrap();
            let head = ids(&mut c, Some(1));
            let state = CursorState::decode(&c.state().encode()).unwrap();
            let tail = ids(
                &mut DatasetCursor::part(r(), options, parts, 3, &state).unwrap(),
                None,
            );
            assert_eq!([head, tail].concat(), whole);
            // A state past the part's end is refused.
            let bad = CursorState {
                position: whole.len() as u64 + 1,
                ..start.clone()
            };
            assert!(DatasetCursor::part(r(), options, parts, 3, &bad).is_err());
            // Parts are of the whole epoch.
            options.order.num_shards = 2;
            let e = DatasetCursor::part(r(), options, parts, 0, &start)
                .err()
                .unwrap();
            assert!(e.to_string().contains("num_shards must be 1"), "{e}");
        }
    }
}
