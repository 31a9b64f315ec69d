//! Epoch orders (spec §5 `shuffle_order(page_aware)`), identical on every machine and
//! every version of this crate for the same `(seed, epoch)`.
//!
//! # The algorithm (a contract: do not change it without a format version bump)
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
//!   unit of its own. Units (numbered `j = 0…U−1` in file order, listed by first id) are
//!   shuffled (purpose 2); shard `k` owns the units with `j mod K = k` and visits them in
//!   the order of that one epoch-wide permutation, so shards are disjoint, whole units,
//!   and of a size that does not change between epochs. Each unit's ids are shuffled
//!   (purpose 3) when the unit is reached, so a batch takes a page's instances together.
//!
//! Memory: the order holds one id per instance (or per unit when page-aware), as `u32`
//! when every id fits (N ≤ 2^32), else `u64`.

use std::sync::Arc;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::reader::Layout;

const PURPOSE_INSTANCES: u64 = 1;
const PURPOSE_UNITS: u64 = 2;
const PURPOSE_IN_UNIT: u64 = 3;

/// Which order to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderSpec {
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

impl Default for OrderSpec {
    fn default() -> Self {
        OrderSpec {
            seed: 0,
            epoch: 0,
            page_aware: false,
            num_shards: 1,
            shard_index: 0,
        }
    }
}

impl OrderSpec {
    pub(crate) fn check_shards(num_shards: u64, shard_index: u64) -> Result<()> {
        if num_shards == 0 || shard_index >= num_shards {
            return Err(Error::InvalidArgument(format!(
                "shard_index must be in [0, num_shards), got shard_index={shard_index} num_shards={num_shards}"
            )));
        }
        Ok(())
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

    fn shuffle(&mut self, rng: &mut ChaCha8Rng) {
        match self {
            Ids::Narrow(v) => fisher_yates(v, rng),
            Ids::Wide(v) => fisher_yates(v, rng),
        }
    }

    /// Keeps positions `[lo, hi)` only.
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

    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        match self {
            Ids::Narrow(v) => v.retain(|&id| keep(u64::from(id))),
            Ids::Wide(v) => v.retain(|&id| keep(id)),
        }
        match self {
            Ids::Narrow(v) => v.shrink_to_fit(),
            Ids::Wide(v) => v.shrink_to_fit(),
        }
    }
}

/// Position `⌊k·n/K⌋` where shard `k` of `K` starts, without overflow.
pub(crate) fn shard_bound(n: u64, k: u64, num_shards: u64) -> u64 {
    (u128::from(n) * u128::from(k) / u128::from(num_shards)) as u64
}

enum Plan {
    /// Instance-based: the shard's ids in order.
    Instances(Ids),
    /// Page-aware: the shard's units (first ids) in order, and the unit being visited.
    Units {
        starts: Ids,
        next_unit: usize,
        current: Vec<u64>,
        current_pos: usize,
    },
}

/// One epoch's order of instance ids for one shard: an owning iterator.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..50u8 { w.write(&[i; 100])?; }
/// # w.finish()?;
/// use tfrecord_lirs::{Reader, OrderSpec};
/// let reader = Reader::open_one(&path, None, &Default::default())?;
/// let order = reader.epoch_order(&OrderSpec { seed: 7, epoch: 0, page_aware: true, ..Default::default() })?;
/// let mut ids: Vec<u64> = order.collect();
/// ids.sort();
/// assert_eq!(ids, (0..50).collect::<Vec<_>>());
/// # Ok(()) }
/// ```
pub struct EpochOrder {
    layout: Arc<Layout>,
    spec: OrderSpec,
    plan: Plan,
    len: u64,
    position: u64,
}

impl EpochOrder {
    pub(crate) fn new(layout: Arc<Layout>, spec: &OrderSpec) -> Result<EpochOrder> {
        OrderSpec::check_shards(spec.num_shards, spec.shard_index)?;
        let n = layout.len();
        let (plan, len) = if spec.page_aware {
            let (starts, len) = unit_plan(&layout, spec);
            (
                Plan::Units {
                    starts,
                    next_unit: 0,
                    current: Vec::new(),
                    current_pos: 0,
                },
                len,
            )
        } else {
            let mut ids = Ids::with_capacity(n, n as usize);
            for id in 0..n {
                ids.push(id);
            }
            ids.shuffle(&mut generator(spec.seed, spec.epoch, PURPOSE_INSTANCES, 0));
            let lo = shard_bound(n, spec.shard_index, spec.num_shards);
            let hi = shard_bound(n, spec.shard_index + 1, spec.num_shards);
            ids.keep_range(lo as usize, hi as usize);
            (Plan::Instances(ids), hi - lo)
        };
        Ok(EpochOrder {
            layout,
            spec: *spec,
            plan,
            len,
            position: 0,
        })
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
    pub fn spec(&self) -> &OrderSpec {
        &self.spec
    }

    /// Continues from `position` (0 ..= len), e.g. when restoring a checkpoint.
    pub fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.len {
            return Err(Error::InvalidArgument(format!(
                "cannot seek to position {position}: the epoch order has {} ids",
                self.len
            )));
        }
        match &mut self.plan {
            Plan::Instances(_) => self.position = position,
            Plan::Units {
                next_unit,
                current,
                current_pos,
                ..
            } => {
                *next_unit = 0;
                current.clear();
                *current_pos = 0;
                self.position = 0;
                // Skip whole units, then step into the one holding `position`.
                while self.position < position {
                    self.enter_next_unit();
                    let Plan::Units {
                        current,
                        current_pos,
                        ..
                    } = &mut self.plan
                    else {
                        unreachable!()
                    };
                    let step = (current.len() as u64).min(position - self.position);
                    *current_pos = step as usize;
                    self.position += step;
                }
            }
        }
        Ok(())
    }

    fn enter_next_unit(&mut self) {
        let Plan::Units {
            starts,
            next_unit,
            current,
            current_pos,
        } = &mut self.plan
        else {
            return;
        };
        let start = starts.get(*next_unit);
        *next_unit += 1;
        current.clear();
        current.extend(start..start + self.layout.unit_len(start));
        fisher_yates(
            current,
            &mut generator(self.spec.seed, self.spec.epoch, PURPOSE_IN_UNIT, start),
        );
        *current_pos = 0;
    }

    /// The position of `id` in this order (a linear search from the start; for tests and
    /// tools, not hot paths). `len()` if the id is not in this shard.
    pub fn position_of(&self, id: u64) -> u64 {
        let mut fresh = EpochOrder {
            layout: Arc::clone(&self.layout),
            spec: self.spec,
            plan: match &self.plan {
                Plan::Instances(ids) => Plan::Instances(ids.clone()),
                Plan::Units { starts, .. } => Plan::Units {
                    starts: starts.clone(),
                    next_unit: 0,
                    current: Vec::new(),
                    current_pos: 0,
                },
            },
            len: self.len,
            position: 0,
        };
        Iterator::position(&mut fresh, |x| x == id).map_or(self.len, |p| p as u64)
    }

    /// Appends at least `min` next ids to `out` (fewer only at the end of the epoch) and,
    /// when page-aware, the rest of the unit the last one belongs to, so that a fetch
    /// window never splits a page between two reads. Returns how many were appended.
    pub fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        let mut taken = self.next_batch(min, out);
        if let Plan::Units {
            current,
            current_pos,
            ..
        } = &self.plan
        {
            let rest = current.len() - *current_pos;
            taken += self.next_batch(rest, out);
        }
        taken
    }

    /// Appends up to `max` next ids to `out`; returns how many.
    pub fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
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
            Plan::Units {
                current,
                current_pos,
                ..
            } => {
                if *current_pos >= current.len() {
                    self.enter_next_unit();
                }
                let Plan::Units {
                    current,
                    current_pos,
                    ..
                } = &mut self.plan
                else {
                    unreachable!()
                };
                let id = current[*current_pos];
                *current_pos += 1;
                id
            }
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

/// The shard's units, permuted, and the instances they hold.
fn unit_plan(layout: &Layout, spec: &OrderSpec) -> (Ids, u64) {
    let n = layout.len();
    let k = spec.num_shards;
    let mut starts = Ids::with_capacity(n, 0);
    // Owned unit starts, as a bitset over ids, when sharded.
    let mut owned: Vec<u64> = if k > 1 {
        vec![0; n.div_ceil(64) as usize]
    } else {
        Vec::new()
    };
    let mut len = 0u64;
    let mut j = 0u64;
    layout.for_each_unit(|start, unit_len| {
        starts.push(start);
        if j % k == spec.shard_index {
            len += unit_len;
            if k > 1 {
                owned[(start / 64) as usize] |= 1 << (start % 64);
            }
        }
        j += 1;
    });
    starts.shuffle(&mut generator(spec.seed, spec.epoch, PURPOSE_UNITS, 0));
    if k > 1 {
        starts.retain(|start| owned[(start / 64) as usize] & (1 << (start % 64)) != 0);
    }
    (starts, len)
}

/// Instances in shard `shard_index` of `num_shards`; the same in every epoch.
pub(crate) fn shard_len(
    layout: &Layout,
    page_aware: bool,
    num_shards: u64,
    shard_index: u64,
) -> Result<u64> {
    OrderSpec::check_shards(num_shards, shard_index)?;
    let n = layout.len();
    if !page_aware {
        return Ok(
            shard_bound(n, shard_index + 1, num_shards) - shard_bound(n, shard_index, num_shards)
        );
    }
    let (mut j, mut len) = (0u64, 0u64);
    layout.for_each_unit(|_, unit_len| {
        if j % num_shards == shard_index {
            len += unit_len;
        }
        j += 1;
    });
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
