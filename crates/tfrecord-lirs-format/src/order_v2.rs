//! Order version 2: epoch orders in O(1) memory, position → id through keyed bijections
//! (`docs/FORMAT.md` §5.8 is the contract; this is its only implementation).
//!
//! * **Bijection of `[0, n)`**: a Feistel network of 12 rounds over the smallest domain
//!   `2^b ≥ n` (`b ≥ 2`; halves of `⌈b/2⌉` and `⌊b/2⌋` bits, rounds alternately update
//!   one half from the other), cycle-walking until the value is below `n`. Round
//!   function `F(k, v) = mix64(v ⊕ k)` (the SplitMix64 finalizer), truncated to the
//!   updated half's width.
//! * **Key schedule**: SplitMix64. `(seed, epoch, purpose, extra)` are absorbed one word
//!   at a time, `h ← mix64((h ⊕ w) + γ)`, then the 12 round keys are the next 12 outputs
//!   of a SplitMix64 generator whose state starts at `h`. Purposes: 4 = instances,
//!   5 = fixed units, 6 = inside one fixed unit (`extra` = the fixed unit's index).
//! * **Page-aware**: a fixed unit is `C` consecutive ids (`C` = the instances a page holds on
//!   average, so in a padded file of equal records a fixed unit is one page); fixed units are
//!   permuted, then the ids inside each fixed unit. Every fixed unit but the last has exactly `C`
//!   ids, so a position's fixed unit is found with one division and one inverse bijection
//!   per epoch (where the short fixed unit went), never a prefix sum over fixed units.
//! * **Shards**: shard `k` of `K` reads positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)`, as in order
//!   version 1.
//!
//! Nothing is stored per instance or per fixed unit: an [`OrderV2`] is a few words, starting an
//! epoch costs a few dozen multiplications, and any position is computed on its own.
//!
//! Over 600 lines: one algorithm and one contract (the bijection, the key schedule,
//! the round tables and the order over them); kept whole, it reads against
//! `docs/FORMAT.md` §5.8 in one place.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::layout::{Layout, Offsets};
use crate::order::{shard_bound, OrderParams, PositionIds};

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
/// Feistel rounds (even: they come in pairs, one per half). Measured on the
/// position-of-id chi-square over 6 × 300·n seeds: with 8 rounds, domains of 5 and 6
/// ids (3 bits, cycle-walked) were biased (z = 3.2, 3.3, 3.9); 10 rounds still gave
/// z = 3.3 once at 12 ids; 12 rounds stayed within ±1.8 at 3–20 ids.
pub(crate) const ROUNDS: usize = 12;

/// Values encrypted side by side in [`Bijection::apply_all`].
const LANES: usize = 8;

/// The widest half whose round functions are tabulated ([`RoundTables`], `u16`
/// entries). Measured on the 2-core bench machine (ns per position, windows of 4096,
/// computed / tabulated): 2^20 domain 10.3 / 4.8, 2^24 17.1 / 10.1, 2^30 (768 KiB of
/// tables) 10.9 / 9.1, 2^32 (1.5 MiB, past what its L2 cache serves well) 10.6 / 12.6.
const TABLE_MAX_HALF_BITS: u32 = 15;

pub(crate) const PURPOSE_INSTANCES: u64 = 4;
pub(crate) const PURPOSE_UNITS: u64 = 5;
pub(crate) const PURPOSE_IN_UNIT: u64 = 6;

/// The SplitMix64 finalizer: a bijection of `u64` with full avalanche.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The round keys for `(seed, epoch, purpose, extra)`.
pub(crate) fn round_keys(seed: u64, epoch: u64, purpose: u64, extra: u64) -> [u64; ROUNDS] {
    let mut h = 0u64;
    for word in [seed, epoch, purpose, extra] {
        h = mix64((h ^ word).wrapping_add(GAMMA));
    }
    let mut keys = [0u64; ROUNDS];
    for key in &mut keys {
        h = h.wrapping_add(GAMMA);
        *key = mix64(h);
    }
    keys
}

/// A keyed bijection of `[0, n)`: a Feistel network over `2^b` values with
/// cycle-walking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bijection {
    n: u64,
    /// Width of the right half `R` (the low bits), `⌊b/2⌋`.
    right_bits: u32,
    /// `2^a − 1` for the left half `L` (the high `a = b − ⌊b/2⌋` bits).
    left_mask: u64,
    keys: [u64; ROUNDS],
}

impl Bijection {
    pub(crate) fn new(n: u64, keys: [u64; ROUNDS]) -> Bijection {
        // b = max(2, ⌈log2 n⌉) ≤ 64: the domain is less than twice n, so a value takes
        // fewer than 2 passes on average.
        let log2 = if n <= 1 {
            0
        } else {
            64 - (n - 1).leading_zeros()
        };
        let bits = log2.max(2);
        let right_bits = bits / 2;
        let left_bits = bits - right_bits;
        Bijection {
            n,
            right_bits,
            left_mask: u64::MAX >> (64 - left_bits),
            keys,
        }
    }

    fn keyed(n: u64, params: &OrderParams, purpose: u64, extra: u64) -> Bijection {
        Bijection::new(n, round_keys(params.seed, params.epoch, purpose, extra))
    }

    fn right_mask(&self) -> u64 {
        (1u64 << self.right_bits) - 1
    }

    fn decrypt(&self, y: u64) -> u64 {
        let right_mask = self.right_mask();
        let (mut left, mut right) = (y >> self.right_bits, y & right_mask);
        for pair in self.keys.rchunks_exact(2) {
            right ^= mix64(left ^ pair[1]) & right_mask;
            left ^= mix64(right ^ pair[0]) & self.left_mask;
        }
        (left << self.right_bits) | right
    }

    /// The image of `x < n` (cycle-walk: encrypt again until the value is below `n`).
    pub(crate) fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.n);
        let mut y = self.encrypt(x);
        while y >= self.n {
            y = self.encrypt(y);
        }
        y
    }

    /// The images of `xs` (each `< n`), in place: the same as [`apply`](Self::apply)
    /// on each, computed pass by pass over the values still outside `[0, n)`, so that
    /// no branch depends on the data and independent values run side by side. With
    /// `tables` (this bijection's, [`tabulate`](Self::tabulate)) the round functions
    /// are looked up instead of computed. `pending` is scratch space, reused across
    /// calls.
    pub(crate) fn apply_all(
        &self,
        xs: &mut [u64],
        tables: Option<&RoundTables>,
        pending: &mut Vec<usize>,
    ) {
        match tables {
            Some(tables) => self.walk_all(&Tabulated::new(self, tables), xs, pending),
            None => self.walk_all(self, xs, pending),
        }
    }

    fn walk_all(&self, network: &impl Network, xs: &mut [u64], pending: &mut Vec<usize>) {
        pending.clear();
        pending.extend(0..xs.len());
        while !pending.is_empty() {
            encrypt_at(network, xs, pending);
            // Keeps the indices of values still outside (a conditional count, no branch).
            let mut kept = 0;
            for k in 0..pending.len() {
                let i = pending[k];
                pending[kept] = i;
                kept += usize::from(xs[i] >= self.n);
            }
            pending.truncate(kept);
        }
    }

    /// Widths of the halves, `(left, right)`.
    fn half_bits(&self) -> (u32, u32) {
        (self.left_mask.count_ones(), self.right_bits)
    }

    /// Entries of this bijection's [`RoundTables`]: one per value of the half each
    /// round reads.
    pub(crate) fn table_entries(&self) -> u64 {
        let (left, right) = self.half_bits();
        (ROUNDS as u64 / 2) * ((1u64 << left) + (1u64 << right))
    }

    /// The round functions as tables, when both halves are at most
    /// [`TABLE_MAX_HALF_BITS`] wide (the left half is the wider; a domain of at most
    /// 2^30 values).
    pub(crate) fn tabulate(&self) -> Option<RoundTables> {
        let (left_bits, right_bits) = self.half_bits();
        if left_bits > TABLE_MAX_HALF_BITS {
            return None;
        }
        let right_mask = self.right_mask();
        // Round `r` reads the half of `read_bits` and updates the one of `update_mask`.
        let rounds = |first: usize, read_bits: u32, update_mask: u64| -> Box<[u16]> {
            self.keys
                .iter()
                .skip(first)
                .step_by(2)
                .flat_map(|&key| {
                    // Fits: at most 15 bits by the width check above.
                    (0..1u64 << read_bits).map(move |v| (mix64(v ^ key) & update_mask) as u16)
                })
                .collect()
        };
        Some(RoundTables {
            left_updates: rounds(0, right_bits, self.left_mask),
            right_updates: rounds(1, left_bits, right_mask),
        })
    }

    /// The preimage of `y < n`.
    pub(crate) fn invert(&self, y: u64) -> u64 {
        debug_assert!(y < self.n);
        let mut x = self.decrypt(y);
        while x >= self.n {
            x = self.decrypt(x);
        }
        x
    }
}

/// One pass of a bijection's Feistel network over `2^b` values: even rounds update `L`
/// from `R`, odd rounds `R` from `L` (a balanced network when `b` is even). Computed
/// ([`Bijection`]) or looked up ([`Tabulated`]), with the same results.
trait Network {
    fn encrypt(&self, x: u64) -> u64;
    /// [`encrypt`](Self::encrypt) of `LANES` values side by side, round by round: their
    /// chains are independent, so the CPU overlaps them.
    fn encrypt_lanes(&self, xs: [u64; LANES]) -> [u64; LANES];
}

impl Network for Bijection {
    fn encrypt(&self, x: u64) -> u64 {
        let right_mask = self.right_mask();
        let (mut left, mut right) = (x >> self.right_bits, x & right_mask);
        for pair in self.keys.chunks_exact(2) {
            left ^= mix64(right ^ pair[0]) & self.left_mask;
            right ^= mix64(left ^ pair[1]) & right_mask;
        }
        (left << self.right_bits) | right
    }

    fn encrypt_lanes(&self, xs: [u64; LANES]) -> [u64; LANES] {
        let right_mask = self.right_mask();
        let mut left = xs.map(|x| x >> self.right_bits);
        let mut right = xs.map(|x| x & right_mask);
        for pair in self.keys.chunks_exact(2) {
            for (l, r) in left.iter_mut().zip(&right) {
                *l ^= mix64(*r ^ pair[0]) & self.left_mask;
            }
            for (r, l) in right.iter_mut().zip(&left) {
                *r ^= mix64(*l ^ pair[1]) & right_mask;
            }
        }
        std::array::from_fn(|i| (left[i] << self.right_bits) | right[i])
    }
}

/// Encrypts `xs[i]` for every `i` in `at`, `LANES` at a time.
fn encrypt_at(network: &impl Network, xs: &mut [u64], at: &[usize]) {
    let mut lanes = at.chunks_exact(LANES);
    for group in &mut lanes {
        let ys = network.encrypt_lanes(std::array::from_fn(|i| xs[group[i]]));
        for (&i, y) in group.iter().zip(ys) {
            xs[i] = y;
        }
    }
    for &i in lanes.remainder() {
        xs[i] = network.encrypt(xs[i]);
    }
}

/// The round functions of one [`Bijection`], looked up instead of computed: for each
/// round, `F(k, v)` truncated to the half it updates, for every value `v` of the half
/// it reads. A round is then one load and one XOR instead of two multiplications and
/// their shifts. Built in one round function per entry
/// ([`Bijection::table_entries`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RoundTables {
    /// Rounds 0, 2, 4, … (update `L` from `R`): `ROUNDS / 2` tables of `2^right_bits`
    /// entries, back to back.
    left_updates: Box<[u16]>,
    /// Rounds 1, 3, 5, … (update `R` from `L`): `ROUNDS / 2` tables of `2^left_bits`
    /// entries.
    right_updates: Box<[u16]>,
}

impl std::fmt::Debug for RoundTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundTables")
            .field(
                "entries",
                &(self.left_updates.len() + self.right_updates.len()),
            )
            .finish()
    }
}

/// A bijection's network through its [`RoundTables`].
struct Tabulated<'a> {
    right_bits: u32,
    right_mask: u64,
    /// Per pair of rounds: the table of its even round and of its odd round.
    pairs: [(&'a [u16], &'a [u16]); ROUNDS / 2],
}

impl<'a> Tabulated<'a> {
    fn new(bijection: &Bijection, tables: &'a RoundTables) -> Tabulated<'a> {
        let (left_bits, right_bits) = bijection.half_bits();
        let (reads_right, reads_left) = (1usize << right_bits, 1usize << left_bits);
        Tabulated {
            right_bits,
            right_mask: bijection.right_mask(),
            pairs: std::array::from_fn(|p| {
                (
                    &tables.left_updates[p * reads_right..(p + 1) * reads_right],
                    &tables.right_updates[p * reads_left..(p + 1) * reads_left],
                )
            }),
        }
    }
}

impl Network for Tabulated<'_> {
    fn encrypt(&self, x: u64) -> u64 {
        let (mut left, mut right) = (
            (x >> self.right_bits) as usize,
            (x & self.right_mask) as usize,
        );
        for (even, odd) in self.pairs {
            left ^= usize::from(even[right]);
            right ^= usize::from(odd[left]);
        }
        ((left as u64) << self.right_bits) | right as u64
    }

    fn encrypt_lanes(&self, xs: [u64; LANES]) -> [u64; LANES] {
        // Halves of at most 16 bits (tables exist only then): they fit a usize.
        let mut left = xs.map(|x| (x >> self.right_bits) as usize);
        let mut right = xs.map(|x| (x & self.right_mask) as usize);
        for (even, odd) in self.pairs {
            for (l, r) in left.iter_mut().zip(&right) {
                *l ^= usize::from(even[*r]);
            }
            for (r, l) in right.iter_mut().zip(&left) {
                *r ^= usize::from(odd[*l]);
            }
        }
        std::array::from_fn(|i| ((left[i] as u64) << self.right_bits) | right[i] as u64)
    }
}

/// The ids per fixed unit of order version 2 for `layout`:
/// `max(1, ⌊P·N / B⌋)` with `P` the page size, `N` the instances and `B` the data files'
/// total size — the instances a page holds on average (1 without instances). Needs only
/// per-file sizes and counts, no offset table.
pub fn ids_per_unit<T: Offsets>(layout: &Layout<T>) -> u64 {
    let bytes: u64 = layout.files.iter().map(|f| f.size).sum();
    if bytes == 0 {
        return 1;
    }
    let per_page = u128::from(layout.page.get()) * u128::from(layout.len()) / u128::from(bytes);
    (per_page as u64).max(1)
}

/// One shard's epoch order, version 2: a pure function from a position to an id.
///
/// Holds a few words (the spec, the shard's bounds, two sets of round keys); nothing
/// per instance or per fixed unit. Positions are the shard's own, `0..len()`.
///
/// ```
/// use tfrecord_lirs::{OrderParams, OrderV2};
/// let params = OrderParams { seed: 7, epoch: 3, num_shards: 4, shard_index: 1, ..Default::default() };
/// let order = OrderV2::new(1_000_000_000_000, 1, &params)?;
/// assert_eq!(order.len(), 250_000_000_000);
/// let id = order.id_at(123_456_789)?;
/// assert_eq!(order.position_of(id), Some(123_456_789));
/// let mut window = Vec::new();
/// order.ids_into(10..20, &mut window)?;
/// assert_eq!(window.len(), 10);
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderV2 {
    params: OrderParams,
    /// `N`, all shards' instances.
    instances: u64,
    /// `C`: ids per fixed unit (1 when instance-based).
    unit_len: u64,
    /// The bijection over instances (instance-based) or over fixed units (page-aware).
    outer: Bijection,
    /// Page-aware: the epoch slot of the last, possibly short, fixed unit.
    short_slot: u64,
    /// Page-aware: the last fixed unit's length, `1..=C`.
    last_len: u64,
    /// The shard's positions in the epoch order.
    lo: u64,
    hi: u64,
    /// `outer`'s round functions as tables, built at the first [`ids_into`](Self::ids_into)
    /// when the shard is long enough to repay them.
    tables: LazyTables,
}

/// A [`Bijection`]'s [`RoundTables`], built on first use (`None` inside: not worth it
/// or too wide). A cache of what the round keys determine: it takes no part in
/// equality.
#[derive(Clone, Default)]
struct LazyTables(OnceLock<Option<Arc<RoundTables>>>);

impl PartialEq for LazyTables {
    fn eq(&self, _: &LazyTables) -> bool {
        true
    }
}

impl Eq for LazyTables {}

impl std::fmt::Debug for LazyTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get() {
            None => f.write_str("not built"),
            Some(None) => f.write_str("none"),
            Some(Some(tables)) => tables.fmt(f),
        }
    }
}

impl OrderV2 {
    /// The order of `instances` ids for `params`; `ids_per_unit` is `C` for page-aware
    /// orders (see [`ids_per_unit`]; at least 1) and ignored otherwise.
    pub fn new(instances: u64, ids_per_unit: u64, params: &OrderParams) -> Result<OrderV2> {
        params.check_shard()?;
        if params.page_aware && ids_per_unit == 0 {
            return Err(Error::invalid_argument(
                "a page-aware unit must hold at least 1 instance",
            ));
        }
        let unit_len = if params.page_aware { ids_per_unit } else { 1 };
        let lo = shard_bound(instances, params.shard_index, params.num_shards);
        let hi = shard_bound(instances, params.shard_index + 1, params.num_shards);
        let mut order = OrderV2 {
            params: *params,
            instances,
            unit_len,
            outer: Bijection::keyed(instances, params, PURPOSE_INSTANCES, 0),
            short_slot: 0,
            last_len: 1,
            lo,
            hi,
            tables: LazyTables::default(),
        };
        if params.page_aware && instances > 0 {
            let units = instances.div_ceil(unit_len);
            order.outer = Bijection::keyed(units, params, PURPOSE_UNITS, 0);
            order.short_slot = order.outer.invert(units - 1);
            order.last_len = instances - (units - 1) * unit_len;
        }
        Ok(order)
    }

    /// The order of `layout`'s instances for `params` (fixed units of [`ids_per_unit`]).
    pub fn for_layout<T: Offsets>(layout: &Layout<T>, params: &OrderParams) -> Result<OrderV2> {
        OrderV2::new(layout.len(), ids_per_unit(layout), params)
    }

    /// Positions in this shard: `⌊(k+1)N/K⌋ − ⌊kN/K⌋`, the same every epoch.
    pub fn len(&self) -> u64 {
        self.hi - self.lo
    }

    /// Whether the shard has no positions.
    pub fn is_empty(&self) -> bool {
        self.hi == self.lo
    }

    /// The spec this order was made from.
    pub fn params(&self) -> &OrderParams {
        &self.params
    }

    /// Ids per fixed unit: `C` page-aware, 1 instance-based.
    pub fn unit_len(&self) -> u64 {
        self.unit_len
    }

    fn check_position(&self, position: u64) -> Result<()> {
        if position >= self.len() {
            return Err(Error::invalid_argument(format!(
                "position {position} is past the end of this epoch order ({} ids)",
                self.len()
            )));
        }
        Ok(())
    }

    /// The id at `position` (`< len()`).
    pub fn id_at(&self, position: u64) -> Result<u64> {
        self.check_position(position)?;
        Ok(self.id_at_global(self.lo + position, &mut None))
    }

    /// Appends the ids at `positions` (within `0..=len()`) to `out`, in order.
    pub fn ids_into(&self, positions: Range<u64>, out: &mut Vec<u64>) -> Result<()> {
        if positions.start > positions.end || positions.end > self.len() {
            return Err(Error::invalid_argument(format!(
                "positions {}..{} are not within this epoch order (0..{})",
                positions.start,
                positions.end,
                self.len()
            )));
        }
        self.ids_into_with(positions, out, &mut Vec::new());
        Ok(())
    }

    /// `outer`'s tables, built the first time if the shard repays them: when it calls
    /// `outer` at least as often as the tables have entries, building them costs less
    /// than a twelfth of computing those calls (one round function per entry, against
    /// 12 per call and pass).
    fn tables(&self) -> Option<&RoundTables> {
        self.tables
            .0
            .get_or_init(|| {
                let calls = self.len().div_ceil(self.unit_len);
                (calls >= self.outer.table_entries())
                    .then(|| self.outer.tabulate())
                    .flatten()
                    .map(Arc::new)
            })
            .as_deref()
    }

    /// [`ids_into`](Self::ids_into) of positions already checked, with `pending` as
    /// scratch space.
    pub(crate) fn ids_into_with(
        &self,
        positions: Range<u64>,
        out: &mut Vec<u64>,
        pending: &mut Vec<usize>,
    ) {
        let tables = self.tables();
        if !self.params.page_aware {
            let from = out.len();
            out.extend((self.lo + positions.start)..(self.lo + positions.end));
            self.outer.apply_all(&mut out[from..], tables, pending);
            return;
        }
        if positions.is_empty() {
            return;
        }
        // The slots' fixed units in one batch, then slot by slot: the fixed unit's bijection over
        // the offsets taken.
        let (mut global, end) = (self.lo + positions.start, self.lo + positions.end);
        let (first_slot, mut offset) = self.slot_of(global);
        let (last_slot, _) = self.slot_of(end - 1);
        let mut units: Vec<u64> = (first_slot..=last_slot).collect();
        self.outer.apply_all(&mut units, tables, pending);
        out.reserve((end - global) as usize);
        for (slot, unit) in (first_slot..).zip(units) {
            let take = (self.slot_len(slot) - offset).min(end - global);
            let first = unit * self.unit_len;
            let from = out.len();
            out.extend(offset..offset + take);
            self.inner(unit).apply_all(&mut out[from..], None, pending);
            for id in &mut out[from..] {
                *id += first;
            }
            global += take;
            offset = 0;
        }
    }

    /// The shard position just past the fixed unit that holds `position` (`< len()`), or
    /// `len()` if the shard ends first: a window ending there never splits a fixed unit
    /// between two reads. Instance-based, `position + 1`.
    pub fn unit_end(&self, position: u64) -> Result<u64> {
        self.check_position(position)?;
        let (slot, offset) = self.slot_of(self.lo + position);
        let len = self.slot_len(slot);
        let unit_end = (self.lo + position).saturating_add(len - offset);
        Ok(unit_end.min(self.hi) - self.lo)
    }

    /// The position of `id` in this shard, `None` if another shard (or no shard) has it.
    pub fn position_of(&self, id: u64) -> Option<u64> {
        if id >= self.instances {
            return None;
        }
        let global = if self.params.page_aware {
            let (unit, within) = (id / self.unit_len, id % self.unit_len);
            let offset = self.inner(unit).invert(within);
            self.slot_start(self.outer.invert(unit)) + offset
        } else {
            self.outer.invert(id)
        };
        (self.lo..self.hi)
            .contains(&global)
            .then(|| global - self.lo)
    }

    fn units(&self) -> u64 {
        self.instances.div_ceil(self.unit_len)
    }

    /// The bijection inside fixed unit `unit`.
    fn inner(&self, unit: u64) -> Bijection {
        let len = if unit + 1 == self.units() {
            self.last_len
        } else {
            self.unit_len
        };
        Bijection::keyed(len, &self.params, PURPOSE_IN_UNIT, unit)
    }

    fn slot_len(&self, slot: u64) -> u64 {
        if slot == self.short_slot {
            self.last_len
        } else {
            self.unit_len
        }
    }

    /// The first epoch position of `slot`.
    fn slot_start(&self, slot: u64) -> u64 {
        if slot <= self.short_slot {
            slot * self.unit_len
        } else {
            slot * self.unit_len - (self.unit_len - self.last_len)
        }
    }

    /// `(slot, offset in the slot)` of an epoch position: one division.
    fn slot_of(&self, global: u64) -> (u64, u64) {
        let c = self.unit_len;
        let short_start = self.short_slot * c;
        if global < short_start {
            (global / c, global % c)
        } else if global - short_start < self.last_len {
            (self.short_slot, global - short_start)
        } else {
            let rest = global - short_start - self.last_len;
            (self.short_slot + 1 + rest / c, rest % c)
        }
    }

    /// The id at epoch position `global`; `unit` caches the last fixed unit's bijection.
    fn id_at_global(&self, global: u64, unit: &mut Option<(u64, Bijection)>) -> u64 {
        if !self.params.page_aware {
            return self.outer.apply(global);
        }
        let (slot, offset) = self.slot_of(global);
        let u = self.outer.apply(slot);
        let inner = match unit {
            Some((cached, b)) if *cached == u => *b,
            _ => {
                let b = self.inner(u);
                *unit = Some((u, b));
                b
            }
        };
        u * self.unit_len + inner.apply(offset)
    }
}

impl PositionIds for OrderV2 {
    /// The ids at shard positions `positions` (within `0..=len()`; others append
    /// nothing).
    fn compute_ids(&self, positions: Range<u64>, out: &mut Vec<u64>) {
        if positions.start <= positions.end && positions.end <= self.len() {
            self.ids_into_with(positions, out, &mut Vec::new());
        }
    }
}

/// Ids a [`V2Cursor`] computes at a time: enough for the branch-free first pass of
/// [`OrderV2::ids_into`] to pipeline (2 KiB of ids).
const CURSOR_BLOCK: u64 = 256;

/// A cursor over an [`OrderV2`]: the iterator state of an [`EpochOrder`] of version 2.
/// It computes the ids of [`CURSOR_BLOCK`] positions at a time.
///
/// [`EpochOrder`]: crate::order::EpochOrder
#[derive(Debug, Clone)]
pub(crate) struct V2Cursor {
    /// Shared with the fetch threads that compute windows' ids
    /// (`OrderSource::next_positions` of the engine's fetch).
    pub(crate) order: Arc<OrderV2>,
    /// Ids of shard positions `block_start..block_start + block.len()`.
    block: Vec<u64>,
    block_start: u64,
    /// Scratch space of [`OrderV2::ids_into_with`].
    pending: Vec<usize>,
}

impl V2Cursor {
    pub(crate) fn new(order: OrderV2) -> V2Cursor {
        V2Cursor {
            order: Arc::new(order),
            block: Vec::new(),
            block_start: 0,
            pending: Vec::new(),
        }
    }

    /// The id at shard position `position` (`< len`).
    pub(crate) fn id_at(&mut self, position: u64) -> u64 {
        let offset = position.wrapping_sub(self.block_start);
        if offset >= self.block.len() as u64 {
            self.block.clear();
            let end = position.saturating_add(CURSOR_BLOCK).min(self.order.len());
            self.order
                .ids_into_with(position..end, &mut self.block, &mut self.pending);
            self.block_start = position;
            return self.block[0];
        }
        self.block[offset as usize]
    }

    /// Appends the ids at shard positions `positions` (within `0..=len`) to `out`,
    /// computed in one batch.
    pub(crate) fn ids_into(&mut self, positions: Range<u64>, out: &mut Vec<u64>) {
        self.order.ids_into_with(positions, out, &mut self.pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_and_keys_match_splitmix64() {
        // SplitMix64 seeded with 0: its first output is mix64(γ) = 0xe220a8397b1dcdaf
        // (the published first value of splitmix64 with seed 0).
        assert_eq!(mix64(GAMMA), 0xe220_a839_7b1d_cdaf);
        let keys = round_keys(1, 2, 3, 4);
        let again = round_keys(1, 2, 3, 4);
        assert_eq!(keys, again);
        assert_ne!(keys, round_keys(1, 2, 3, 5));
    }

    #[test]
    fn bijection_domains() {
        // (n, right bits, left bits)
        for (n, right, left) in [
            (0u64, 1u32, 1u32),
            (1, 1, 1),
            (2, 1, 1),
            (4, 1, 1),
            (5, 1, 2),
            (8, 1, 2),
            (9, 2, 2),
            (17, 2, 3),
            (1 << 62, 31, 31),
            ((1 << 62) + 1, 31, 32),
            (u64::MAX, 32, 32),
        ] {
            let b = Bijection::new(n, [0; ROUNDS]);
            assert_eq!(b.right_bits, right, "n={n}");
            assert_eq!(b.left_mask, (1u64 << left) - 1, "n={n}");
        }
    }

    #[test]
    fn bijection_is_a_permutation_and_inverts() {
        for n in [1u64, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4097] {
            let b = Bijection::new(n, round_keys(9, n, 4, 0));
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = b.apply(x);
                assert!(y < n);
                assert!(!seen[y as usize], "n={n}: {y} twice");
                seen[y as usize] = true;
                assert_eq!(b.invert(y), x);
            }
            let mut all: Vec<u64> = (0..n).collect();
            b.apply_all(&mut all, None, &mut Vec::new());
            assert_eq!(all, (0..n).map(|x| b.apply(x)).collect::<Vec<_>>());
            let mut looked_up: Vec<u64> = (0..n).collect();
            let tables = b.tabulate();
            b.apply_all(&mut looked_up, tables.as_ref(), &mut Vec::new());
            assert_eq!(looked_up, all, "n={n}");
        }
        let b = Bijection::new(u64::MAX, round_keys(1, 1, 4, 0));
        for x in [0, 1, u64::MAX - 1, 1 << 63] {
            assert_eq!(b.invert(b.apply(x)), x);
        }
    }

    #[test]
    fn tabulated_rounds_give_the_computed_images() {
        // Domains of 2^2 .. 2^30 (odd and even widths, cycle-walked or not), values
        // spread over each (every value below 5000, then a stride).
        for n in [
            3u64,
            5,
            1000,
            4096,
            10_000_000,
            (1 << 27) + 3,
            (1 << 29) + 1,
            1 << 30,
        ] {
            let b = Bijection::new(n, round_keys(5, n, PURPOSE_INSTANCES, 0));
            let tables = b.tabulate().expect("halves of at most 16 bits");
            let (left, right) = b.half_bits();
            assert_eq!(
                (tables.left_updates.len() + tables.right_updates.len()) as u64,
                b.table_entries()
            );
            assert!(tables.left_updates.len() == (ROUNDS / 2) << right);
            assert!(tables.right_updates.len() == (ROUNDS / 2) << left);
            let mut xs: Vec<u64> = (0..n.min(5000))
                .chain((0..n).step_by((n / 3001).max(1) as usize))
                .collect();
            let expected: Vec<u64> = xs.iter().map(|&x| b.apply(x)).collect();
            b.apply_all(&mut xs, Some(&tables), &mut Vec::new());
            assert_eq!(xs, expected, "n={n}");
        }
        // Wider halves are computed.
        assert!(Bijection::new((1 << 30) + 1, [0; ROUNDS])
            .tabulate()
            .is_none());
    }

    #[test]
    fn orders_build_tables_only_when_they_repay_them() {
        let whole = OrderParams::default();
        // 10^6 ids: 2^20, tables of 6·2·2^10 entries, far fewer than the positions.
        let order = OrderV2::new(1_000_000, 1, &whole).unwrap();
        assert!(order.tables().is_some());
        // 10^6 ids over 1000 shards: 1000 positions each, fewer than the entries.
        let sharded = OrderParams {
            num_shards: 1000,
            ..whole
        };
        let order = OrderV2::new(1_000_000, 1, &sharded).unwrap();
        assert!(order.tables().is_none());
        // Page-aware: one outer call per fixed unit of 100 ids (10^4 fixed units: 6·2·2^7 entries).
        let page_aware = OrderParams {
            page_aware: true,
            ..whole
        };
        assert!(OrderV2::new(1_000_000, 100, &page_aware)
            .unwrap()
            .tables()
            .is_some());
        assert!(OrderV2::new(1_000_000, 10_000, &page_aware)
            .unwrap()
            .tables()
            .is_none());
        // Tables or not, the same ids.
        let mut with = Vec::new();
        let order = OrderV2::new(1_000_000, 1, &whole).unwrap();
        order.ids_into(1000..9000, &mut with).unwrap();
        let computed: Vec<u64> = (1000..9000).map(|p| order.id_at(p).unwrap()).collect();
        assert_eq!(with, computed);
        assert_eq!(order, OrderV2::new(1_000_000, 1, &whole).unwrap());
    }
}
