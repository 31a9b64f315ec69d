//! Shards of equal length, for data-parallel training where every rank must run the same
//! number of steps (PyTorch's `DistributedSampler`): what a shard does with the
//! remainder of `N` instances over `K` shards.
//!
//! * [`ShardRemainder::Keep`] (the default, the orders of every earlier release): shard
//!   `k` walks positions `[⌊kN/K⌋, ⌊(k+1)N/K⌋)` of the unsharded order (§5.5), so shard
//!   lengths differ by at most one.
//! * [`ShardRemainder::Drop`] (`DistributedSampler(drop_last=True)`): the last `N mod K`
//!   positions of the unsharded order are left out of the epoch; shard `k` walks
//!   positions `[k·m, (k+1)·m)`, `m = ⌊N/K⌋`.
//! * [`ShardRemainder::Pad`] (`DistributedSampler(drop_last=False)`): the order is
//!   extended to `K·M` positions, `M = ⌈N/K⌉`, by repeating it from its start (position
//!   `p ≥ N` is position `p mod N`); shard `k` walks `[k·M, (k+1)·M)` of that.
//!
//! Positions here are those of the unsharded order (`num_shards = 1`).

use crate::error::{Error, Result};

/// What the shards do with the remainder of the instances (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardRemainder {
    /// Shards differ in length by at most one instance.
    #[default]
    Keep,
    /// Every shard has `⌊N/K⌋` instances; `N mod K` are left out of the epoch.
    Drop,
    /// Every shard has `⌈N/K⌉` instances; the order repeats from its start.
    Pad,
}

impl ShardRemainder {
    /// The names the front ends take.
    pub const NAMES: [&'static str; 3] = ["keep", "drop", "pad"];

    /// The rule named `name` ("keep", "drop" or "pad").
    ///
    /// ```
    /// use tfrecord_lirs_format::shard_remainder::ShardRemainder;
    /// assert_eq!(ShardRemainder::from_name("pad").unwrap(), ShardRemainder::Pad);
    /// assert!(ShardRemainder::from_name("last").is_err());
    /// ```
    pub fn from_name(name: &str) -> Result<ShardRemainder> {
        match name {
            "keep" => Ok(ShardRemainder::Keep),
            "drop" => Ok(ShardRemainder::Drop),
            "pad" => Ok(ShardRemainder::Pad),
            other => Err(Error::invalid_argument(format!(
                "shard_remainder must be one of \"keep\", \"drop\", \"pad\", got {other:?}"
            ))),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ShardRemainder::Keep => "keep",
            ShardRemainder::Drop => "drop",
            ShardRemainder::Pad => "pad",
        }
    }

    /// The positions of the unsharded order of `n` instances that shard `shard_index`
    /// of `num_shards` walks, in order (a pair checked by the caller).
    ///
    /// ```
    /// use tfrecord_lirs_format::shard_remainder::ShardRemainder;
    /// let shard = |rule: ShardRemainder, k| rule.positions(10, 3, k).collect::<Vec<u64>>();
    /// assert_eq!(shard(ShardRemainder::Keep, 2), [6, 7, 8, 9]);
    /// assert_eq!(shard(ShardRemainder::Drop, 2), [6, 7, 8]);
    /// assert_eq!(shard(ShardRemainder::Pad, 2), [8, 9, 0, 1]);
    /// ```
    pub fn positions(self, n: u64, num_shards: u64, shard_index: u64) -> impl Iterator<Item = u64> {
        let (start, end) = self.bounds(n, num_shards, shard_index);
        let modulus = n.max(1);
        (start..end).map(move |p| p % modulus)
    }

    /// The range of positions of the extended order (Pad: positions `p ≥ N` are `p mod
    /// N`) shard `shard_index` walks.
    fn bounds(self, n: u64, num_shards: u64, shard_index: u64) -> (u64, u64) {
        let (k, i) = (u128::from(num_shards.max(1)), u128::from(shard_index));
        let n128 = u128::from(n);
        let (start, end) = match self {
            ShardRemainder::Keep => (i * n128 / k, (i + 1) * n128 / k),
            ShardRemainder::Drop => {
                let m = n128 / k;
                (i * m, (i + 1) * m)
            }
            ShardRemainder::Pad if n == 0 => (0, 0),
            ShardRemainder::Pad => {
                let m = n128.div_ceil(k);
                (i * m, (i + 1) * m)
            }
        };
        // Positions below K·⌈N/K⌉ < N + K (instance counts are far below 2^63).
        let fit = |p: u128| u64::try_from(p).unwrap_or(u64::MAX);
        (fit(start), fit(end))
    }

    /// [`positions`](ShardRemainder::positions) as ranges of the unsharded order, in
    /// walk order (Pad: the order's start again after its end).
    pub fn ranges(self, n: u64, num_shards: u64, shard_index: u64) -> Vec<std::ops::Range<u64>> {
        let (start, end) = self.bounds(n, num_shards, shard_index);
        let mut ranges = Vec::new();
        let mut at = start;
        while at < end && n > 0 {
            let (lap, offset) = (at / n, at % n);
            let stop = end.min((lap + 1) * n);
            ranges.push(offset..offset + (stop - at));
            at = stop;
        }
        ranges
    }

    /// How many positions each shard walks (every shard of `num_shards` alike for Drop
    /// and Pad; shard `shard_index`'s for Keep).
    pub fn shard_len(self, n: u64, num_shards: u64, shard_index: u64) -> u64 {
        let (start, end) = self.bounds(n, num_shards, shard_index);
        end - start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_the_positions() {
        for rule in [
            ShardRemainder::Keep,
            ShardRemainder::Drop,
            ShardRemainder::Pad,
        ] {
            for (n, k) in [(10u64, 3u64), (2, 5), (7, 7), (0, 2)] {
                for i in 0..k {
                    let flat: Vec<u64> = rule.ranges(n, k, i).into_iter().flatten().collect();
                    assert_eq!(flat, rule.positions(n, k, i).collect::<Vec<_>>());
                }
            }
        }
    }

    #[test]
    fn every_rank_gets_the_same_count_and_the_rules_cover_the_epoch() {
        for n in [0u64, 1, 2, 7, 400, 401] {
            for k in 1u64..=5 {
                let all = |rule: ShardRemainder| -> Vec<Vec<u64>> {
                    (0..k).map(|i| rule.positions(n, k, i).collect()).collect()
                };
                // Keep: a partition of 0..n, lengths within one.
                let keep = all(ShardRemainder::Keep);
                assert_eq!(keep.concat(), (0..n).collect::<Vec<_>>());
                // Drop: equal lengths ⌊n/k⌋, distinct positions.
                let drop = all(ShardRemainder::Drop);
                assert!(drop.iter().all(|s| s.len() as u64 == n / k));
                assert_eq!(drop.concat(), (0..n / k * k).collect::<Vec<_>>());
                // Pad: equal lengths ⌈n/k⌉, every position at least once, the extra ones
                // from the start of the order.
                let pad = all(ShardRemainder::Pad);
                assert!(pad.iter().all(|s| s.len() as u64 == n.div_ceil(k)));
                let flat = pad.concat();
                let expect: Vec<u64> = (0..n.div_ceil(k) * k).map(|p| p % n.max(1)).collect();
                assert_eq!(flat, expect);
            }
        }
    }
}
