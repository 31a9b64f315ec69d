//! Elastic resume: an epoch checkpointed by `K` shards goes on with `K'` shards (more
//! or fewer), every instance not yet delivered in it delivered exactly once across the
//! `K'` new workers (docs/FORMAT.md §6).
//!
//! An epoch order is one sequence of *global positions* `0..N`; shard `k` of `K` walks
//! a part of it. What the `K` workers delivered is a set of global positions, kept as
//! ranges: an [`EpochState`] (order version, seed, epoch, page-aware or not, `N`,
//! delivered ranges). Shard `j` of `K'` at an `EpochState` walks the undelivered
//! global positions of rank `[⌊jM/K'⌋, ⌊(j+1)M/K'⌋)` among the `M` undelivered ones, in
//! ascending global position, each mapped to its id by the epoch's unsharded order. An
//! epoch where nothing was delivered gives `M = N` and exactly the shards of a fresh
//! run, so an ordinary `K`-shard epoch is the special case of an empty epoch state.
//!
//! A worker's checkpoint is a [`ShardState`]: the epoch state its walk started from
//! (empty for an ordinary epoch), its shard, and its [`CursorState`] (positions of its
//! own walk). [`EpochState::combine`] takes every worker's and gives the
//! epoch's state; [`DatasetCursor::resume`](crate::DatasetCursor::resume) opens shard `j` of
//! `K'` at it. The following epochs are ordinary (a fresh `K'`-shard run).

mod encoding;
pub(crate) mod resumed;

use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
use tfrecord_lirs_format::order::{OrderParams, OrderVersion};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use crate::read::cursor::state::CursorState;
use crate::read::fetch::OrderSource;
use crate::read::reader::Reader;
use crate::storage::table_files::Layout;
use resumed::ResumedOrder;

/// What every shard of one epoch delivered, as global positions of the epoch's order
/// (see the module docs), and the dataset it is of. A small value: a few words, one
/// range per run of delivered positions (about one per shard in order, more with
/// unordered delivery) and each file's name and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochState {
    /// The order algorithm.
    pub order_version: OrderVersion,
    /// The order's seed.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// Page-aware or instance-based.
    pub page_aware: bool,
    /// Instances of the whole epoch (every shard's), `N`.
    pub instances: u64,
    /// The dataset (each file's base name, instances and bytes), checked when the
    /// state is resumed; `None` for instances described by no file and for states
    /// saved before it was kept (compared by `instances` only then).
    pub dataset: Option<DatasetIdentity>,
    /// Delivered global positions: ascending, disjoint, non-adjacent, non-empty ranges
    /// within `0..instances`.
    delivered: Vec<Range<u64>>,
}

impl EpochState {
    /// An epoch of `instances` ids of `order` (its seed, epoch and page-awareness; the
    /// shard is ignored) where nothing was delivered yet.
    pub fn fresh(instances: u64, order: &OrderParams, version: OrderVersion) -> EpochState {
        EpochState {
            order_version: version,
            seed: order.seed,
            epoch: order.epoch,
            page_aware: order.page_aware,
            instances,
            dataset: None,
            delivered: Vec::new(),
        }
    }

    /// An epoch of `reader`'s instances where nothing was delivered yet, naming its
    /// dataset (see [`fresh`](EpochState::fresh)).
    pub fn fresh_of(reader: &Reader, order: &OrderParams, version: OrderVersion) -> EpochState {
        EpochState {
            dataset: Some(reader.identity()),
            ..EpochState::fresh(reader.len(), order, version)
        }
    }

    /// The delivered global positions, as ascending disjoint ranges.
    pub fn delivered(&self) -> &[Range<u64>] {
        &self.delivered
    }

    /// How many positions are delivered.
    pub fn delivered_count(&self) -> u64 {
        self.delivered.iter().map(|r| r.end - r.start).sum()
    }

    /// How many positions are not delivered yet (`M`).
    pub fn undelivered_count(&self) -> u64 {
        self.instances - self.delivered_count()
    }

    /// Whether nothing is delivered (an ordinary epoch start).
    pub fn is_fresh(&self) -> bool {
        self.delivered.is_empty()
    }

    /// The global positions shard `shard_index` of `num_shards` walks from this
    /// epoch state, ascending: the undelivered ones of rank `[⌊jM/K⌋, ⌊(j+1)M/K⌋)`.
    pub fn shard_positions(&self, num_shards: u64, shard_index: u64) -> Result<Vec<Range<u64>>> {
        crate::options::shard(num_shards, shard_index)?;
        let m = self.undelivered_count();
        let lo = tfrecord_lirs_format::order::shard_bound(m, shard_index, num_shards);
        let hi = tfrecord_lirs_format::order::shard_bound(m, shard_index + 1, num_shards);
        let mut out = Vec::new();
        let mut rank = 0u64;
        for gap in self.gaps() {
            let len = gap.end - gap.start;
            let (from, to) = (lo.max(rank), hi.min(rank + len));
            if from < to {
                out.push(gap.start + (from - rank)..gap.start + (to - rank));
            }
            rank += len;
            if rank >= hi {
                break;
            }
        }
        Ok(out)
    }

    /// The undelivered ranges, ascending.
    fn gaps(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        let mut next = 0u64;
        self.delivered
            .iter()
            .map(|r| r.start..r.end)
            .chain(std::iter::once(self.instances..self.instances))
            .filter_map(move |r| {
                let gap = next..r.start;
                next = r.end;
                (!gap.is_empty()).then_some(gap)
            })
    }

    /// The epoch state after the walks of `shards`, every shard of one run
    /// (the same epoch state they started from, of one dataset, the same shard count
    /// and remainder rule, each shard index once).
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a set that
    /// is not one run's shards (naming the files that differ for states of two
    /// datasets); [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for a state that
    /// does not fit its shard.
    ///
    /// Shards of equal length (`Drop`, `Pad`; docs/FORMAT.md §5.5) walk from the
    /// epoch's start only; each position they delivered counts once (a padded shard's
    /// repeats of the order's first positions are those positions), and what `Drop`
    /// left out stays undelivered: the resumed shards deliver it.
    pub fn combine(shards: &[ShardState]) -> Result<EpochState> {
        let first = shards
            .first()
            .ok_or_else(|| Error::invalid_argument("no shard states to combine"))?;
        let num_shards = first.num_shards;
        if u64::try_from(shards.len()).ok() != Some(num_shards) {
            return Err(Error::invalid_argument(format!(
                "got {} shard states of a run of {num_shards} shards: every shard's state is needed",
                shards.len()
            )));
        }
        let mut seen = vec![false; shards.len()];
        let mut delivered = first.base.delivered.clone();
        for shard in shards {
            if shard.num_shards != num_shards {
                return Err(Error::invalid_argument(format!(
                    "shard states of runs of {num_shards} and {} shards cannot be combined",
                    shard.num_shards
                )));
            }
            if shard.remainder != first.remainder {
                return Err(Error::invalid_argument(format!(
                    "shard {} walked with shard_remainder=\"{}\" and shard {} with \"{}\": \
                     states of one run are needed",
                    first.shard_index,
                    first.remainder.name(),
                    shard.shard_index,
                    shard.remainder.name()
                )));
            }
            if let (Some(a), Some(b)) = (&first.base.dataset, &shard.base.dataset) {
                let holder = format!("shard {}'s state", shard.shard_index);
                if let Some(what) = a.differences(b, &holder) {
                    return Err(Error::invalid_argument(format!(
                        "shard {} and shard {} are states of two datasets ({what}): \
                         states of one run are needed",
                        first.shard_index, shard.shard_index
                    )));
                }
            }
            if shard.base != first.base {
                return Err(Error::invalid_argument(format!(
                    "shard {} started from another epoch state than shard {} (another \
                     seed, epoch, order or resume point): states of one run are needed",
                    shard.shard_index, first.shard_index
                )));
            }
            let index = usize::try_from(shard.shard_index)
                .ok()
                .filter(|&i| i < seen.len())
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "shard index {} of a run of {num_shards} shards",
                        shard.shard_index
                    ))
                })?;
            if std::mem::replace(&mut seen[index], true) {
                return Err(Error::invalid_argument(format!(
                    "shard {index}'s state is given twice"
                )));
            }
            let walk = shard.walk()?;
            let len = ranges_len(&walk);
            shard
                .state
                .check(len, first.base.order_version.number() as u32)
                .map_err(|e| {
                    Error::data_loss(format!("shard {} of {num_shards}: {e}", shard.shard_index))
                })?;
            delivered.extend(local_to_global(&walk, 0..shard.state.position));
            for &p in &shard.state.delivered_after {
                delivered.extend(local_to_global(&walk, p..p + 1));
            }
        }
        Ok(EpochState {
            delivered: normalized(delivered),
            ..first.base.clone()
        })
    }

    /// The ids shard `order.shard_index` of `order.num_shards` walks from this
    /// epoch state, in order (what [`DatasetCursor::resume`](crate::DatasetCursor::resume)
    /// walks), for a front end that takes a shard's order whole, e.g. a sampler;
    /// `reader`: the files (needed for page-aware orders), or `None` for instances
    /// described by no file (instance-based only). `order` and `version` must be this
    /// epoch state's (as [`check_fits`](EpochState::check_fits)).
    pub fn shard_ids(
        &self,
        reader: Option<&Reader>,
        order: &OrderParams,
        version: OrderVersion,
    ) -> Result<Vec<u64>> {
        self.check_order(order, version)?;
        let layout = match reader {
            Some(reader) => {
                self.check_fits(reader, order, version)?;
                Arc::clone(reader.layout())
            }
            None if self.page_aware => {
                return Err(Error::invalid_argument(
                    "a page-aware order needs the files' offset tables, not only a length",
                ))
            }
            None => Arc::new(Layout::of_len(self.instances)?),
        };
        let mut source = ResumedOrder::new(&layout, self, order)?;
        let mut ids = Vec::new();
        let len = usize::try_from(source.len())
            .map_err(|_| Error::invalid_argument("a shard too large for this machine's memory"))?;
        source.next_batch(len, &mut ids);
        Ok(ids)
    }

    /// Checks that this epoch state belongs to the epoch `reader` and `order` walk with
    /// `version`; [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) naming what
    /// differs (for another dataset, each file that differs: its name, instances and
    /// bytes in the state and in `reader`; by instances only for a state that does not
    /// name its dataset).
    pub fn check_fits(
        &self,
        reader: &Reader,
        order: &OrderParams,
        version: OrderVersion,
    ) -> Result<()> {
        if let Some(dataset) = &self.dataset {
            if let Some(what) = dataset.differences(&reader.identity(), "this dataset") {
                return Err(Error::data_loss(format!(
                    "epoch state of another dataset: {what}"
                )));
            }
        }
        if self.instances != reader.len() {
            return Err(mismatch(
                "instances",
                self.instances.to_string(),
                reader.len().to_string(),
            ));
        }
        self.check_order(order, version)
    }

    /// Checks that this epoch state is of `order`'s seed, epoch and page-awareness and
    /// of `version`.
    fn check_order(&self, order: &OrderParams, version: OrderVersion) -> Result<()> {
        let mismatch = |what: &str, state: String, here: String| Err(mismatch(what, state, here));
        if self.order_version != version {
            return mismatch(
                "order version",
                self.order_version.number().to_string(),
                version.number().to_string(),
            );
        }
        if self.seed != order.seed {
            return mismatch("seed", self.seed.to_string(), order.seed.to_string());
        }
        if self.epoch != order.epoch {
            return mismatch("epoch", self.epoch.to_string(), order.epoch.to_string());
        }
        if self.page_aware != order.page_aware {
            return mismatch(
                "page_aware",
                self.page_aware.to_string(),
                order.page_aware.to_string(),
            );
        }
        Ok(())
    }
}

/// One worker's checkpoint for elastic resume: the epoch state its walk started
/// from, its shard, and its cursor's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardState {
    /// The epoch state the shard's walk started from (fresh for an ordinary epoch).
    pub base: EpochState,
    /// Shards of the run.
    pub num_shards: u64,
    /// This shard.
    pub shard_index: u64,
    /// The cursor's state: positions of this shard's walk.
    pub state: CursorState,
    /// What the run's shards did with the remainder (docs/FORMAT.md §5.5): `Keep`
    /// shards walk from any epoch state, `Drop` and `Pad` ones from the epoch's start.
    pub remainder: ShardRemainder,
}

impl ShardState {
    /// The global positions this shard walks, in walk order: its part of what the
    /// base did not deliver (`Keep`), or its equal shard of the whole epoch (`Drop`,
    /// `Pad`: positions of the order's start again after its end).
    /// [`ErrorKind::DataLoss`](crate::ErrorKind::DataLoss) for an equal shard over a
    /// base with positions delivered, which no walk makes.
    fn walk(&self) -> Result<Vec<Range<u64>>> {
        if self.remainder == ShardRemainder::Keep {
            return self.base.shard_positions(self.num_shards, self.shard_index);
        }
        if !self.base.is_fresh() {
            return Err(Error::data_loss(format!(
                "shard {} of {} walked with shard_remainder=\"{}\" from an epoch state with \
                 positions delivered; such shards walk from the epoch's start only",
                self.shard_index,
                self.num_shards,
                self.remainder.name()
            )));
        }
        Ok(self
            .remainder
            .ranges(self.base.instances, self.num_shards, self.shard_index))
    }
}

/// A state that does not belong to a dataset: `what` differs.
fn mismatch(what: &str, state: String, here: String) -> Error {
    Error::data_loss(format!(
        "epoch state of {what} {state}, but this dataset has {what} {here}"
    ))
}

/// Positions in `ranges`.
fn ranges_len(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// The global positions of local positions `local` of a walk over `walk` (ascending
/// global ranges), as ranges.
fn local_to_global(walk: &[Range<u64>], local: Range<u64>) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    let mut rank = 0u64;
    for r in walk {
        let len = r.end - r.start;
        let (from, to) = (local.start.max(rank), local.end.min(rank + len));
        if from < to {
            out.push(r.start + (from - rank)..r.start + (to - rank));
        }
        rank += len;
        if rank >= local.end {
            break;
        }
    }
    out
}

/// `ranges` sorted, with overlapping and adjacent ones merged and empty ones dropped.
fn normalized(mut ranges: Vec<Range<u64>>) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The former name of [`EpochState`] ("progress" now means only how far a scan has got).
#[deprecated(since = "0.2.0", note = "renamed `EpochState`")]
pub type EpochProgress = EpochState;

/// The former name of [`ShardState`].
#[deprecated(since = "0.2.0", note = "renamed `ShardState`")]
pub type ShardProgress = ShardState;

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch_state(instances: u64, delivered: Vec<Range<u64>>) -> EpochState {
        EpochState {
            delivered,
            ..EpochState::fresh(instances, &OrderParams::default(), OrderVersion::V2)
        }
    }

    #[test]
    fn a_fresh_epoch_gives_the_ordinary_shards() {
        let p = epoch_state(103, vec![]);
        for k in 0..7 {
            let lo = tfrecord_lirs_format::order::shard_bound(103, k, 7);
            let hi = tfrecord_lirs_format::order::shard_bound(103, k + 1, 7);
            assert_eq!(p.shard_positions(7, k).unwrap(), vec![lo..hi]);
        }
    }

    #[test]
    fn shards_split_the_undelivered_positions() {
        let p = epoch_state(20, vec![2..5, 9..10, 15..20]);
        assert_eq!(p.undelivered_count(), 11);
        let all: Vec<Vec<Range<u64>>> = (0..3).map(|j| p.shard_positions(3, j).unwrap()).collect();
        assert_eq!(all[0], vec![0..2, 5..6]);
        // Ranks 3..7 and 7..11 of the undelivered 0 1 5 6 7 8 10 11 12 13 14.
        assert_eq!(all[1], vec![6..9, 10..11]);
        assert_eq!(all[2], vec![11..15]);
    }

    #[test]
    fn local_positions_map_to_global_ones() {
        let walk = vec![0..2, 5..9];
        assert_eq!(local_to_global(&walk, 0..3), vec![0..2, 5..6]);
        assert_eq!(local_to_global(&walk, 3..4), vec![6..7]);
        assert_eq!(normalized(vec![5..6, 0..2, 2..3, 8..8]), vec![0..3, 5..6]);
    }

    #[test]
    fn epoch_state_encodes_and_decodes() {
        let p = epoch_state(20, vec![2..5, 9..10]);
        assert_eq!(EpochState::decode(&p.encode()).unwrap(), p);
        let s = ShardState {
            base: p,
            num_shards: 3,
            shard_index: 1,
            state: CursorState {
                order_version: 2,
                position: 1,
                delivered_after: vec![2],
            },
            remainder: ShardRemainder::Keep,
        };
        assert_eq!(ShardState::decode(&s.encode()).unwrap(), s);
    }

    #[test]
    fn damaged_epoch_state_is_data_loss() {
        let good = epoch_state(20, vec![2..5, 9..10]).encode();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = good.clone();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            b
        };
        for (bytes, want) in [
            (good[..30].to_vec(), "ends early"),
            (with(0, b"X"), "not a tfrecord-lirs epoch state"),
            (with(8, &3u32.to_le_bytes()), "encoding version 3"),
            (
                with(12, &7u32.to_le_bytes()),
                "order version must be 1 or 2",
            ),
            (with(32, &2u64.to_le_bytes()), "page-aware flag is 2"),
            (with(48, &3u64.to_le_bytes()), "claims 3 delivered ranges"),
            (with(56, &5u64.to_le_bytes()), "range 5..5 is empty"),
            (with(72, &5u64.to_le_bytes()), "range 5..10"),
            (with(80, &21u64.to_le_bytes()), "range 9..21"),
        ] {
            let e = EpochState::decode(&bytes).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
    }

    #[test]
    fn an_epoch_state_naming_its_dataset_is_version_2() {
        let mut p = epoch_state(20, vec![2..5, 9..10]);
        assert_eq!(p.encode()[8..12], 1u32.to_le_bytes());
        p.dataset = Some(DatasetIdentity::of_files([
            (std::path::Path::new("/d/a-0"), 12, 300),
            (std::path::Path::new("/d/a-1"), 8, 200),
        ]));
        let bytes = p.encode();
        assert_eq!(bytes[8..12], 2u32.to_le_bytes());
        assert_eq!(EpochState::decode(&bytes).unwrap(), p);
        // Files of other instances than the state's, or bytes after them: damage.
        let mut other = p.clone();
        other.instances = 21;
        let e = EpochState::decode(&other.encode()).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
        assert!(e.to_string().contains("names files of 20 instances"), "{e}");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(EpochState::decode(&longer).is_err());
        let e = EpochState::decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
    }

    #[test]
    fn combining_needs_every_shard_of_one_run() {
        let base = epoch_state(20, vec![]);
        let shard = |k: u64, position: u64| ShardState {
            base: base.clone(),
            num_shards: 2,
            shard_index: k,
            state: CursorState {
                order_version: 2,
                position,
                delivered_after: vec![],
            },
            remainder: ShardRemainder::Keep,
        };
        let p = EpochState::combine(&[shard(1, 3), shard(0, 2)]).unwrap();
        assert_eq!(p.delivered(), &[0..2, 10..13]);
        for (shards, want) in [
            (vec![], "no shard states"),
            (vec![shard(0, 1)], "got 1 shard states of a run of 2"),
            (
                vec![shard(0, 1), shard(0, 1)],
                "shard 0's state is given twice",
            ),
        ] {
            let e = EpochState::combine(&shards).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains(want), "{e}");
        }
        let e = EpochState::combine(&[shard(0, 11), shard(1, 0)]).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
        assert!(e.to_string().contains("position 11 is past the end"), "{e}");
        let mut other = shard(1, 0);
        other.base.seed = 9;
        let e = EpochState::combine(&[shard(0, 1), other]).unwrap_err();
        assert!(e.to_string().contains("another epoch state"), "{e}");
    }
}
