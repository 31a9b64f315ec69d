//! Epoch orders (spec §5 `shuffle_order(page_aware)`), identical on every machine and
//! every version of this crate for the same `(seed, epoch)` and [`OrderVersion`]. This
//! module is order version 1 (below) and the [`EpochOrder`] iterator over both versions;
//! version 2, position → id in O(1) memory, is `order_v2.rs` ([`OrderV2`]).
//!
//! # The algorithm (a contract: do not change it without a format version bump)
//!
//! Written out in full, enough to reimplement, in `docs/FORMAT.md` §5.
//!
//! * **Generator.** ChaCha8 (`rand_chacha::ChaCha8Rng::from_seed`) with the 32-byte key
//!   `seed ‖ epoch ‖ purpose ‖ extra`, each a little-endian `u64`. Purposes: 1 = the
//!   instance permutation, 2 = the unit permutation, 3 = the shuffle inside one unit
//!   (`extra` = the unit's first instance id).
//! * **Bounded draw** `below(n)`: Lemire's multiply-and-reject on `next_u64`:
//!   `m = x·n` (128-bit); if `low64(m) < (2^64 − n) mod n` draw again; result `high64(m)`.
//! * **Shuffle**: Fisher–Yates from the back: for `i = len−1 … 1`, swap `i` with `below(i+1)`.
//! * **Instance-based** (`page_aware = false`): shuffle `0..N` (purpose 1). Shard `k` of
//!   `K` takes positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)` of that permutation.
//! * **Page-aware**: a *unit* is a maximal run of consecutive ids whose records start in
//!   the same page of the same file; an instance whose span is larger than a page is a
//!   unit of its own. Units (listed by first id, in file order) are shuffled (purpose 2);
//!   each unit's ids are shuffled (purpose 3, when the unit is reached); the epoch order
//!   is their concatenation, so a batch takes a page's instances together. Shard `k` of
//!   `K` takes positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)` of that order, like instance-based
//!   shards: membership changes every epoch, the size never does, and only a unit that
//!   straddles a shard boundary (at most `K − 1` per epoch) is split between the two
//!   neighbouring shards; every other unit is whole and contiguous in one shard.
//!
//! Memory: the order holds one id per instance (instance-based) or one first id per unit
//! (page-aware), as `u32` when every id fits (N ≤ 2^32), else `u64` — at most 4 (8)
//! bytes per instance, allocated exactly. That full array is the peak; a shard then
//! keeps only its slice of it, compacted in place and shrunk.
//!
//! Over 600 lines: order version 1 is one algorithm and one contract (its generator,
//! its two plans and the iterator over both versions); kept whole, it reads against
//! `docs/FORMAT.md` §5 in one place.

use std::ops::Range;
use std::sync::Arc;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::layout::{Layout, Offsets};
use crate::order_v2::{OrderV2, V2Cursor};

const PURPOSE_INSTANCES: u64 = 1;
const PURPOSE_UNITS: u64 = 2;
const PURPOSE_IN_UNIT: u64 = 3;

/// Which algorithm makes an epoch order: part of what a checkpoint must record, since the
/// same `(seed, epoch)` gives different orders in different versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OrderVersion {
    /// `docs/FORMAT.md` §5.1–5.7: Fisher–Yates over the whole epoch (one id per instance,
    /// or one first id per page-aware unit, in memory while the epoch is read).
    #[default]
    V1,
    /// `docs/FORMAT.md` §5.8: position → id through keyed bijections ([`OrderV2`]);
    /// nothing stored per instance, O(1) to start an epoch.
    V2,
}

impl OrderVersion {
    /// The version's number, 1 or 2 (what front ends and checkpoints carry).
    pub fn number(self) -> u64 {
        match self {
            OrderVersion::V1 => 1,
            OrderVersion::V2 => 2,
        }
    }

    /// The version numbered `number` (see `tfrecord_lirs::options::order_version`).
    pub fn from_number(number: u64) -> Result<OrderVersion> {
        match number {
            1 => Ok(OrderVersion::V1),
            2 => Ok(OrderVersion::V2),
            _ => Err(Error::invalid_argument(format!(
                "order version must be 1 or 2, got {number}"
            ))),
        }
    }
}

/// Which order to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderParams {
    /// The shuffle seed.
    pub seed: u64,
    /// The epoch number; every epoch has its own order.
    pub epoch: u64,
    /// Page-aware (whole pages are the shuffle unit) or instance-based.
    pub page_aware: bool,
    /// Number of workers sharing the epoch (≥ 1).
    pub num_shards: u64,
    /// This worker's shard, `< num_shards`.
    pub shard_index: u64,
}

/// The shard rule of every order: `num_shards >= 1` and `shard_index < num_shards`.
pub fn check_shard(num_shards: u64, shard_index: u64) -> Result<()> {
    if num_shards == 0 || shard_index >= num_shards {
        return Err(Error::invalid_argument(format!(
            "shard_index must be in [0, num_shards), got shard_index={shard_index} num_shards={num_shards}"
        )));
    }
    Ok(())
}

impl OrderParams {
    /// Checks the shard of these parameters: `num_shards >= 1` and
    /// `shard_index < num_shards`.
    pub fn check_shard(&self) -> Result<()> {
        check_shard(self.num_shards, self.shard_index)
    }
}

impl Default for OrderParams {
    fn default() -> Self {
        OrderParams {
            seed: 0,
            epoch: 0,
            page_aware: false,
            num_shards: 1,
            shard_index: 0,
        }
    }
}

/// The generator for `(seed, epoch, purpose, extra)`.
fn generator(seed: u64, epoch: u64, purpose: u64, extra: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    for (chunk, word) in key.chunks_exact_mut(8).zip([seed, epoch, purpose, extra]) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    ChaCha8Rng::from_seed(key)
}

/// A uniform draw from `0..n` (`n > 0`), Lemire's method.
fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    debug_assert!(n > 0);
    let mut m = u128::from(rng.next_u64()) * u128::from(n);
    if (m as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (m as u64) < threshold {
            m = u128::from(rng.next_u64()) * u128::from(n);
        }
    }
    (m >> 64) as u64
}

fn fisher_yates<T>(items: &mut [T], rng: &mut ChaCha8Rng) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// Ids stored as narrowly as they fit.
#[derive(Debug, Clone)]
enum Ids {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

/// Whether ids below `n` need 64 bits.
fn needs_wide(n: u64) -> bool {
    n > u64::from(u32::MAX) + 1
}

impl Ids {
    /// Room for exactly `capacity` ids below `max_id_exclusive`. Callers count first, so
    /// the vector never grows by doubling (which can leave up to twice the ids' size).
    fn with_capacity(max_id_exclusive: u64, capacity: usize) -> Ids {
        if needs_wide(max_id_exclusive) {
            Ids::Wide(Vec::with_capacity(capacity))
        } else {
            Ids::Narrow(Vec::with_capacity(capacity))
        }
    }

    fn push(&mut self, id: u64) {
        match self {
            Ids::Narrow(v) => v.push(id as u32),
            Ids::Wide(v) => v.push(id),
        }
    }

    fn get(&self, i: usize) -> u64 {
        match self {
            Ids::Narrow(v) => u64::from(v[i]),
            Ids::Wide(v) => v[i],
        }
    }

    fn len(&self) -> usize {
        match self {
            Ids::Narrow(v) => v.len(),
            Ids::Wide(v) => v.len(),
        }
    }

    fn shuffle(&mut self, rng: &mut ChaCha8Rng) {
        match self {
            Ids::Narrow(v) => fisher_yates(v, rng),
            Ids::Wide(v) => fisher_yates(v, rng),
        }
    }

    /// Keeps positions `[lo, hi)` only. They are moved to the front of the same buffer,
    /// which is then shrunk (a shrinking `realloc`), so no second buffer is built.
    fn keep_range(&mut self, lo: usize, hi: usize) {
        match self {
            Ids::Narrow(v) => {
                v.truncate(hi);
                v.drain(..lo);
                v.shrink_to_fit();
            }
            Ids::Wide(v) => {
                v.truncate(hi);
                v.drain(..lo);
                v.shrink_to_fit();
            }
        }
    }
}

/// The ids of an order's positions, computed from the positions alone on any thread
/// (see the engine's `OrderSource::next_positions`; [`OrderV2`] is one).
pub trait PositionIds: Send + Sync {
    /// Appends the ids at the order's positions `positions` to `out`, in order.
    fn compute_ids(&self, positions: Range<u64>, out: &mut Vec<u64>);
}

/// The (epoch, position) of global index `index` of a run whose epochs each hold `len`
/// elements of this shard: what a map-style front end (Grain's `__getitem__`) is given
/// is an index into the epochs laid end to end.
pub fn locate(index: u64, len: u64) -> Result<(u64, u64)> {
    if len == 0 {
        return Err(Error::invalid_argument(format!(
            "index {index}: this shard has no instances"
        )));
    }
    Ok((index / len, index % len))
}

/// Position `⌊k·n/K⌋` where shard `k` of `K` starts, without overflow.
pub fn shard_bound(n: u64, k: u64, num_shards: u64) -> u64 {
    (u128::from(n) * u128::from(k) / u128::from(num_shards)) as u64
}

/// The units of an epoch's page-aware order that hold its positions `[lo, hi)`: units
/// `first..end` of the permuted unit sequence, entered `skip` ids into unit `first`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnitSlice {
    first: usize,
    skip: u64,
    end: usize,
}

/// Finds the [`UnitSlice`] for positions `[lo, hi)` from the units' lengths in epoch
/// order (stops reading `lens` at the unit holding position `hi − 1`). The lengths must
/// sum to at least `hi`; an empty range gives an empty slice.
fn slice_units(lens: impl IntoIterator<Item = u64>, lo: u64, hi: u64) -> UnitSlice {
    let mut slice = UnitSlice {
        first: 0,
        skip: 0,
        end: 0,
    };
    if lo >= hi {
        return slice;
    }
    let mut unit_start = 0u64;
    let mut found_first = false;
    for (i, len) in lens.into_iter().enumerate() {
        let unit_end = unit_start + len;
        if !found_first && unit_end > lo {
            slice.first = i;
            slice.skip = lo - unit_start;
            found_first = true;
        }
        if found_first {
            slice.end = i + 1;
        }
        if unit_end >= hi {
            break;
        }
        unit_start = unit_end;
    }
    slice
}

/// Page-aware state: the shard's units in epoch order and the unit being read.
#[derive(Debug, Clone)]
struct Units {
    /// First ids of the shard's units, in the epoch's unit order.
    starts: Ids,
    /// Their lengths (so that walking the order never reads a table).
    lens: Ids,
    /// Ids at the front of the first unit that belong to the previous shard.
    first_skip: u64,
    /// Index in `starts` of the next unit to enter.
    next_unit: usize,
    /// The entered unit's ids, shuffled.
    current: Vec<u64>,
    /// Next index into `current`.
    current_pos: usize,
}

impl Units {
    fn new(starts: Ids, lens: Ids, first_skip: u64) -> Units {
        Units {
            starts,
            lens,
            first_skip,
            next_unit: 0,
            current: Vec::new(),
            current_pos: 0,
        }
    }

    /// The same units, back at the start of the shard.
    fn rewound(&self) -> Units {
        Units::new(self.starts.clone(), self.lens.clone(), self.first_skip)
    }

    /// Ids of unit `i` that this shard reads.
    fn readable(&self, i: usize) -> u64 {
        let len = self.lens.get(i);
        if i == 0 {
            len - self.first_skip
        } else {
            len
        }
    }

    /// Enters the next unit: its ids shuffled exactly as in the unsharded order, read
    /// from past the ids the previous shard took.
    fn enter(&mut self, params: &OrderParams) {
        let start = self.starts.get(self.next_unit);
        let skip = if self.next_unit == 0 {
            self.first_skip
        } else {
            0
        };
        self.next_unit += 1;
        self.current.clear();
        self.current
            .extend(start..start + self.lens.get(self.next_unit - 1));
        fisher_yates(
            &mut self.current,
            &mut generator(params.seed, params.epoch, PURPOSE_IN_UNIT, start),
        );
        self.current_pos = skip as usize;
    }

    /// The next id; the caller bounds the calls by the shard's length.
    fn next(&mut self, params: &OrderParams) -> u64 {
        if self.current_pos >= self.current.len() {
            self.enter(params);
        }
        let id = self.current[self.current_pos];
        self.current_pos += 1;
        id
    }

    /// Moves to `position` (at most the shard's length), stepping over whole units by
    /// their lengths and shuffling only the unit that holds `position`.
    fn seek(&mut self, params: &OrderParams, position: u64) {
        self.next_unit = 0;
        self.current.clear();
        self.current_pos = 0;
        let mut left = position;
        while left > 0 {
            let readable = self.readable(self.next_unit);
            if left < readable {
                self.enter(params);
                self.current_pos += left as usize;
                return;
            }
            left -= readable;
            self.next_unit += 1;
        }
    }

    /// Ids left in the entered unit.
    fn rest_of_unit(&self) -> usize {
        self.current.len() - self.current_pos
    }
}

enum Plan {
    /// Instance-based: the shard's ids in order.
    Instances(Ids),
    /// Page-aware: the shard's units.
    Units(Units),
    /// Order version 2 (either kind): computed position by position (boxed: its round
    /// keys make it several times the size of the other plans).
    V2(Box<V2Cursor>),
}

/// One epoch's order of instance ids for one shard: an owning iterator.
///
/// A shard is positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)` of the epoch's order (instance-based or
/// page-aware), so its length never depends on the epoch. A page-aware shard may begin
/// and end inside a unit; every other unit it holds is whole and contiguous.
///
/// Order version 2 (`Reader::epoch_order_with_version`)
/// holds no ids: it computes them from the positions, 256 at a time.
///
/// Memory (version 1): the full order of an epoch is built once, at most 4 bytes per instance
/// (8 when N > 2^32): instance-based, one id per instance; page-aware, one first id per
/// unit, allocated exactly after counting the units. A shard then keeps only its own
/// slice (moved to the front of the same buffer, which is shrunk), plus, page-aware, the
/// ids of the one unit being read.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..50u8 { w.write(&[i; 100])?; }
/// # w.finish()?;
/// use tfrecord_lirs::{Reader, OrderParams};
/// let reader = Reader::open_one(&path, None, &Default::default())?;
/// let order = reader.epoch_order(&OrderParams { seed: 7, epoch: 0, page_aware: true, ..Default::default() })?;
/// let mut ids: Vec<u64> = order.collect();
/// ids.sort();
/// assert_eq!(ids, (0..50).collect::<Vec<_>>());
/// # Ok(()) }
/// ```
pub struct EpochOrder {
    params: OrderParams,
    plan: Plan,
    len: u64,
    position: u64,
}

impl EpochOrder {
    /// The order of `layout`'s instances for `params`, made by `version`.
    pub fn new<T: Offsets>(
        layout: &Layout<T>,
        params: &OrderParams,
        version: OrderVersion,
    ) -> Result<EpochOrder> {
        if version == OrderVersion::V2 {
            let order = OrderV2::for_layout(layout, params)?;
            return Ok(EpochOrder {
                params: *params,
                len: order.len(),
                plan: Plan::V2(Box::new(V2Cursor::new(order))),
                position: 0,
            });
        }
        params.check_shard()?;
        let n = layout.len();
        let lo = shard_bound(n, params.shard_index, params.num_shards);
        let hi = shard_bound(n, params.shard_index + 1, params.num_shards);
        let plan = if params.page_aware {
            Plan::Units(unit_plan(layout, params, lo, hi)?)
        } else {
            let mut ids = Ids::with_capacity(n, n as usize);
            for id in 0..n {
                ids.push(id);
            }
            ids.shuffle(&mut generator(
                params.seed,
                params.epoch,
                PURPOSE_INSTANCES,
                0,
            ));
            ids.keep_range(lo as usize, hi as usize);
            Plan::Instances(ids)
        };
        Ok(EpochOrder {
            params: *params,
            plan,
            len: hi - lo,
            position: 0,
        })
    }

    /// The instance-based order of `n` instances that are not described by any file
    /// (e.g. a sampler given only a length): the same order a `Reader`
    /// of `n` instances gives for `params`. Page-aware orders need the files' layout:
    /// `params.page_aware` is an [`InvalidArgument`](crate::error::Error::InvalidArgument).
    pub fn of_len(n: u64, params: &OrderParams, version: OrderVersion) -> Result<EpochOrder> {
        if params.page_aware {
            return Err(Error::invalid_argument(
                "a page-aware order needs the files' offset tables, not only a length",
            ));
        }
        EpochOrder::new(&Layout::<Vec<u64>>::of_len(n)?, params, version)
    }

    /// Instances in this shard's epoch.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the shard is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many ids have been taken.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The spec this order was made from.
    pub fn params(&self) -> &OrderParams {
        &self.params
    }

    /// The algorithm that made this order.
    pub fn version(&self) -> OrderVersion {
        match self.plan {
            Plan::V2(_) => OrderVersion::V2,
            _ => OrderVersion::V1,
        }
    }

    /// Continues from `position` (0 ..= len), e.g. when restoring a checkpoint.
    pub fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.len {
            return Err(Error::invalid_argument(format!(
                "cannot seek to position {position}: the epoch order has {} ids",
                self.len
            )));
        }
        if let Plan::Units(units) = &mut self.plan {
            units.seek(&self.params, position);
        }
        self.position = position;
        Ok(())
    }

    /// The position of `id` in this order (a linear search from the start; for tests and
    /// tools, not hot paths). `len()` if the id is not in this shard.
    pub fn position_of(&self, id: u64) -> u64 {
        if let Plan::V2(cursor) = &self.plan {
            return cursor.order.position_of(id).unwrap_or(self.len);
        }
        let mut fresh = EpochOrder {
            params: self.params,
            plan: match &self.plan {
                Plan::Instances(ids) => Plan::Instances(ids.clone()),
                Plan::Units(units) => Plan::Units(units.rewound()),
                Plan::V2(cursor) => Plan::V2(cursor.clone()),
            },
            len: self.len,
            position: 0,
        };
        Iterator::position(&mut fresh, |x| x == id).map_or(self.len, |p| p as u64)
    }

    /// Appends at least `min` next ids to `out` (fewer only at the end of the epoch) and,
    /// when page-aware, the rest of the unit the last one belongs to (as far as this
    /// shard holds it), so that a fetch window never splits a page between two reads.
    /// Returns how many were appended.
    pub fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        let mut taken = self.next_batch(min, out);
        let rest = match &self.plan {
            Plan::Units(units) => units.rest_of_unit(),
            Plan::V2(cursor) if taken > 0 && self.params.page_aware => {
                // The unit of the last id taken ends at or before the shard's end.
                let last = self.position - 1;
                let end = cursor.order.unit_end(last).unwrap_or(self.position);
                (end - self.position) as usize
            }
            _ => 0,
        };
        taken += self.next_batch(rest, out);
        taken
    }

    /// Version 2: takes the positions of the next window (as
    /// [`next_window`](Self::next_window), or [`next_batch`](Self::next_batch) when
    /// `exact`, would) without computing their ids, and returns them with the order.
    /// `None` for version 1, which takes nothing.
    pub fn next_positions(
        &mut self,
        min: usize,
        exact: bool,
    ) -> Option<(Range<u64>, Arc<OrderV2>)> {
        let Plan::V2(cursor) = &self.plan else {
            return None;
        };
        let start = self.position;
        let mut end = start.saturating_add(min as u64).min(self.len);
        if !exact && end > start && self.params.page_aware {
            // The rest of the last position's unit (it ends at or before the shard's end).
            end = cursor.order.unit_end(end - 1).unwrap_or(end);
        }
        self.position = end;
        Some((start..end, Arc::clone(&cursor.order)))
    }

    /// Appends up to `max` next ids to `out`; returns how many.
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        if let Plan::V2(cursor) = &mut self.plan {
            // All at once (the bijection runs on many values side by side).
            let end = self.position.saturating_add(max as u64).min(self.len);
            cursor.ids_into(self.position..end, out);
            let taken = end - self.position;
            self.position = end;
            return taken as usize;
        }
        let before = out.len();
        while out.len() - before < max {
            match self.next() {
                Some(id) => out.push(id),
                None => break,
            }
        }
        out.len() - before
    }
}

impl Iterator for EpochOrder {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.position >= self.len {
            return None;
        }
        let id = match &mut self.plan {
            Plan::Instances(ids) => ids.get(self.position as usize),
            Plan::Units(units) => units.next(&self.params),
            Plan::V2(cursor) => cursor.id_at(self.position),
        };
        self.position += 1;
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.len - self.position) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for EpochOrder {}

/// Every page-aware unit's first id, in id order (units tile the ids of each file, and
/// files follow each other), and the ids in all: a unit's length is the distance to
/// the next unit's start.
struct UnitBounds<'a> {
    starts: &'a Ids,
    len: u64,
}

impl UnitBounds<'_> {
    /// The length of the unit that starts at `start` (a unit start).
    fn len_of(&self, start: u64) -> u64 {
        let (mut lo, mut hi) = (0usize, self.starts.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.starts.get(mid) <= start {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let next = if lo < self.starts.len() {
            self.starts.get(lo)
        } else {
            self.len
        };
        next - start
    }
}

/// The units holding positions `[lo, hi)` of the epoch's page-aware order, with their
/// lengths: computed here from the tables, once, so that walking the order never reads
/// a table (a read could fail where the walk cannot report it).
fn unit_plan<T: Offsets>(
    layout: &Layout<T>,
    params: &OrderParams,
    lo: u64,
    hi: u64,
) -> Result<Units> {
    let mut count = 0usize;
    layout.for_each_unit(|_, _| count += 1)?;
    let mut in_id_order = Ids::with_capacity(layout.len(), count);
    layout.for_each_unit(|start, _| in_id_order.push(start))?;
    let mut starts = in_id_order.clone();
    starts.shuffle(&mut generator(params.seed, params.epoch, PURPOSE_UNITS, 0));
    let bounds = UnitBounds {
        starts: &in_id_order,
        len: layout.len(),
    };
    let slice = if lo == 0 && hi == layout.len() {
        UnitSlice {
            first: 0,
            skip: 0,
            end: starts.len(),
        }
    } else {
        slice_units(
            (0..starts.len()).map(|i| bounds.len_of(starts.get(i))),
            lo,
            hi,
        )
    };
    starts.keep_range(slice.first, slice.end);
    let mut lens = Ids::with_capacity(layout.len() + 1, starts.len());
    for i in 0..starts.len() {
        lens.push(bounds.len_of(starts.get(i)));
    }
    Ok(Units::new(starts, lens, slice.skip))
}

/// Instances in shard `shard_index` of `num_shards`: `⌊(k+1)N/K⌋ − ⌊kN/K⌋`, the same in
/// every epoch and for both kinds of order (a page-aware shard is a slice of positions
/// too).
pub fn shard_len<T: Offsets>(layout: &Layout<T>, num_shards: u64, shard_index: u64) -> Result<u64> {
    check_shard(num_shards, shard_index)?;
    let n = layout.len();
    Ok(shard_bound(n, shard_index + 1, num_shards) - shard_bound(n, shard_index, num_shards))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_lays_epochs_end_to_end_and_refuses_an_empty_shard() {
        assert_eq!(locate(0, 7).unwrap(), (0, 0));
        assert_eq!(locate(13, 7).unwrap(), (1, 6));
        assert_eq!(locate(u64::MAX, 1).unwrap(), (u64::MAX, 0));
        let e = locate(3, 0).unwrap_err();
        assert_eq!(e.kind(), "InvalidArgument");
        assert!(e.to_string().contains("no instances"), "{e}");
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = generator(1, 2, 3, 4);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[below(&mut rng, 6) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(below(&mut rng, 1), 0);
        let big = below(&mut rng, u64::MAX);
        assert!(big < u64::MAX);
    }

    #[test]
    fn all_permutations_of_three_are_equally_likely() {
        let mut seen = std::collections::HashMap::new();
        for epoch in 0..6000 {
            let mut v = [0u8, 1, 2];
            fisher_yates(&mut v, &mut generator(9, epoch, PURPOSE_INSTANCES, 0));
            *seen.entry(v).or_insert(0u32) += 1;
        }
        assert_eq!(seen.len(), 6);
        for (perm, c) in seen {
            assert!((850..1150).contains(&c), "{perm:?}: {c}");
        }
    }

    /// Pins the algorithm: if this changes, every user's "same seed, same order" breaks.
    #[test]
    fn golden_order_is_version_stable() {
        let mut v: Vec<u32> = (0..10).collect();
        fisher_yates(&mut v, &mut generator(42, 0, PURPOSE_INSTANCES, 0));
        assert_eq!(v, GOLDEN_42_0);
        let mut rng = generator(0, 0, 0, 0);
        // The published ChaCha8 test vector for the all-zero key and nonce starts with
        // the bytes 3e 00 ef 2f 89 5f 40 d6: the generator is the standard ChaCha8.
        assert_eq!(rng.next_u64(), GOLDEN_ZERO_KEY_FIRST_U64);
    }

    const GOLDEN_42_0: [u32; 10] = [8, 6, 0, 2, 5, 4, 1, 3, 7, 9];
    const GOLDEN_ZERO_KEY_FIRST_U64: u64 = 0xd640_5f89_2fef_003e;

    #[test]
    fn order_type_arithmetic_beyond_u32() {
        assert!(!needs_wide(1 << 32));
        assert!(needs_wide((1 << 32) + 1));
        let n = 10_000_000_000u64;
        assert_eq!(shard_bound(n, 3, 3), n);
        assert_eq!(shard_bound(u64::MAX, 1, 2), u64::MAX / 2);
        let total: u64 = (0..7)
            .map(|k| shard_bound(n, k + 1, 7) - shard_bound(n, k, 7))
            .sum();
        assert_eq!(total, n);
        let mut ids = Ids::with_capacity(n, 2);
        ids.push(n - 1);
        ids.push(5);
        assert_eq!(ids.get(0), n - 1);
    }

    #[test]
    fn unit_slices_beyond_u32() {
        // Units of 3·2^31, 2^33, 5 and 2^32 + 1 ids (only their lengths exist here).
        let lens = [3u64 << 31, 1 << 33, 5, (1 << 32) + 1];
        let n: u64 = lens.iter().sum();
        assert!(n > 1 << 34);
        let at = |lo: u64, hi: u64| slice_units(lens, lo, hi);
        let (u1, u2, u3) = (lens[0], lens[0] + lens[1], lens[0] + lens[1] + lens[2]);
        assert_eq!(
            at(0, n),
            UnitSlice {
                first: 0,
                skip: 0,
                end: 4
            }
        );
        assert_eq!(
            at(u1 + 7, u2),
            UnitSlice {
                first: 1,
                skip: 7,
                end: 2
            }
        );
        assert_eq!(
            at(u1, u2 + 1),
            UnitSlice {
                first: 1,
                skip: 0,
                end: 3
            }
        );
        assert_eq!(
            at(u2 + 4, u3 + 1),
            UnitSlice {
                first: 2,
                skip: 4,
                end: 4
            }
        );
        assert_eq!(
            at(n - 1, n),
            UnitSlice {
                first: 3,
                skip: lens[3] - 1,
                end: 4
            }
        );
        assert_eq!(at(5, 5).end, 0);
        for k in [1u64, 2, 3, 7, 1000] {
            let mut previous: Option<(UnitSlice, u64)> = None;
            let mut covered = 0u64;
            for i in 0..k {
                let (lo, hi) = (shard_bound(n, i, k), shard_bound(n, i + 1, k));
                let s = at(lo, hi);
                if lo == hi {
                    assert_eq!(s.end, 0);
                    continue;
                }
                // Positions taken: the units' lengths minus the skipped head and the
                // tail left for the next shard.
                let whole: u64 = lens[s.first..s.end].iter().sum();
                let tail = lens[..s.end].iter().sum::<u64>() - hi;
                assert_eq!(whole - s.skip - tail, hi - lo, "k={k} i={i}");
                if let Some((p, p_hi)) = previous {
                    // Either the shard starts a fresh unit, or it continues the
                    // previous shard's last unit exactly where that one stopped.
                    let p_end_pos: u64 = lens[..p.end].iter().sum();
                    if s.skip == 0 {
                        assert_eq!(s.first, p.end);
                        assert_eq!(p_end_pos, p_hi);
                    } else {
                        assert_eq!(s.first, p.end - 1);
                        assert_eq!(p_end_pos - lens[s.first] + s.skip, p_hi);
                    }
                }
                covered += hi - lo;
                previous = Some((s, hi));
            }
            assert_eq!(covered, n);
        }
    }
}
