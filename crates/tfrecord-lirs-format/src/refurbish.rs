//! Refurbish schedule version 1: which id an epoch delivers at each position, whether it
//! is a **refresh** (read and partially augmented, then stored) or a **reuse** (the
//! stored partial output), and its **generation** (the epoch of its last refresh)
//! (`docs/FORMAT.md` §7 is the contract; this is its only implementation).
//!
//! Data refurbishing (Lee et al., "Refurbish Your Training Data", USENIX ATC '21) caches
//! each sample's partially augmented version and reuses it for `r` epochs (the **reuse
//! factor**), running only the final augmentation on a reuse. This schedule decides it
//! ahead, from the seed alone, with the keyed bijections of order version 2
//! (`order_v2.rs`), so a position costs a few bijection walks and nothing is stored per id:
//!
//! * **Balanced eviction**: a fixed seeded permutation ranks the shard's ids; epoch 0
//!   refreshes every id, epoch `e ≥ 1` refreshes the ranks
//!   `[⌊e'·m/r⌋, ⌊(e'+1)·m/r⌋)` with `e' = (e − 1) mod r` — `⌊m/r⌋` or `⌈m/r⌉` ids,
//!   each id exactly every `r` epochs, also when `r` does not divide `m`.
//! * **Cache-aware shuffle**: batch `b` (positions `[s, t)`) holds
//!   `⌊M·t/m⌋ − ⌊M·s/m⌋` of the epoch's `M` refreshes (within ±1 of proportional, the
//!   short last batch included); which refresh and which reuse, and where in the batch,
//!   are drawn by bijections keyed per epoch and per batch.
//! * **Shards**: with `K > 1` shards a shard keeps one fixed, seeded set of ids every
//!   epoch (so its stored entries stay its own); unsharded, every epoch is a permutation
//!   of all ids.
//! * `r = 1` refreshes every id every epoch: the schedule is then exactly the epoch order
//!   of `order.rs` for the same seed, shard and order version.
//!
//! The reuse factor is an integer: a fractional one is refused ([`reuse_factor_from_f64`]).

use crate::error::{Error, Result};
use crate::order::{check_shard, shard_bound, EpochOrder, OrderParams, OrderVersion};
use crate::order_v2::{round_keys, Bijection};

/// The version of the refurbish schedule's algorithm (`docs/FORMAT.md` §7): part of
/// what a refurbish state records, since another version gives another schedule.
pub const REFURBISH_SCHEDULE_VERSION: u64 = 1;

// Key purposes (order version 1 uses 1–3, version 2 uses 4–6).
const PURPOSE_SHARD_IDS: u64 = 7;
const PURPOSE_EVICTION: u64 = 8;
const PURPOSE_REFRESHES: u64 = 9;
const PURPOSE_REUSES: u64 = 10;
const PURPOSE_BATCH_SLOTS: u64 = 11;
const PURPOSE_PARTIAL_SEED: u64 = 12;
const PURPOSE_FINAL_SEED: u64 = 13;

/// Which schedule to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefurbishParams {
    /// The shuffle seed (the same seed as the epoch orders').
    pub seed: u64,
    /// Epochs a partial output serves (≥ 1; 1 = refresh every id every epoch).
    pub reuse_factor: u64,
    /// Ids per batch (≥ 1): the unit over which refreshes are spread evenly.
    pub batch_size: u64,
    /// Number of workers sharing the ids (≥ 1).
    pub num_shards: u64,
    /// This worker's shard, `< num_shards`.
    pub shard_index: u64,
    /// The order the schedule delivers when `reuse_factor` is 1 (unused otherwise).
    pub order_version: OrderVersion,
}

impl Default for RefurbishParams {
    fn default() -> Self {
        RefurbishParams {
            seed: 0,
            reuse_factor: 1,
            batch_size: 1,
            num_shards: 1,
            shard_index: 0,
            order_version: OrderVersion::V1,
        }
    }
}

/// The reuse factor rule: an integer `≥ 1`.
pub fn check_reuse_factor(reuse_factor: u64) -> Result<()> {
    if reuse_factor == 0 {
        return Err(Error::invalid_argument(
            "reuse_factor must be an integer >= 1 (epochs a partial output serves), got 0",
        ));
    }
    Ok(())
}

/// The reuse factor of a front end's number: a whole number `≥ 1`. A fractional one is
/// refused (an integer `r` is what lets every id be refreshed exactly every `r` epochs).
pub fn reuse_factor_from_f64(reuse_factor: f64) -> Result<u64> {
    if !(reuse_factor.is_finite() && reuse_factor.fract() == 0.0 && reuse_factor >= 1.0)
        || reuse_factor > u64::MAX as f64
    {
        return Err(Error::invalid_argument(format!(
            "reuse_factor must be an integer >= 1 (epochs a partial output serves), got {reuse_factor}"
        )));
    }
    Ok(reuse_factor as u64)
}

/// The seed of the partial augmentation of `id` refreshed at epoch `generation`: the
/// same for every use of that generation, so a lost stored entry is recomputed to the
/// same output.
pub fn partial_seed(seed: u64, id: u64, generation: u64) -> u64 {
    round_keys(seed, generation, PURPOSE_PARTIAL_SEED, id)[0]
}

/// The seed of the final augmentation of `id` at `epoch`: new every epoch.
pub fn final_seed(seed: u64, id: u64, epoch: u64) -> u64 {
    round_keys(seed, epoch, PURPOSE_FINAL_SEED, id)[0]
}

/// An augmentation seed as the `int64[2]` TensorFlow's stateless random ops take:
/// its high and low 32 bits (each in `[0, 2^32)`, so neither is negative).
pub fn stateless_seed_pair(seed: u64) -> [i64; 2] {
    [(seed >> 32) as i64, (seed & 0xFFFF_FFFF) as i64]
}

/// One position of an epoch's schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Use {
    /// The instance id.
    pub id: u64,
    /// Read and partially augment (then store) rather than take the stored output.
    pub refresh: bool,
    /// The epoch of the id's last refresh (this epoch when `refresh`).
    pub generation: u64,
}

fn keyed(n: u64, seed: u64, epoch: u64, purpose: u64, extra: u64) -> Bijection {
    Bijection::new(n, round_keys(seed, epoch, purpose, extra))
}

/// `⌊a·b/c⌋` without overflow (`c > 0`, result `≤ a` when `b ≤ c`).
fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    (u128::from(a) * u128::from(b) / u128::from(c)) as u64
}

/// The refurbish schedule of one shard of `n` ids: every epoch's [`EpochSchedule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefurbishSchedule {
    n: u64,
    params: RefurbishParams,
    /// The shard's first position in the id permutation of its membership.
    lo: u64,
    len: u64,
    /// Shard position → id, with more than one shard (`reuse_factor > 1`).
    members: Option<Bijection>,
    /// Eviction rank → the shard's local index.
    eviction: Bijection,
}

impl RefurbishSchedule {
    /// The schedule of shard `params.shard_index` of `n` ids; refuses a reuse factor or
    /// batch size of 0 and a shard index outside `[0, num_shards)`.
    pub fn new(n: u64, params: &RefurbishParams) -> Result<RefurbishSchedule> {
        check_reuse_factor(params.reuse_factor)?;
        if params.batch_size == 0 {
            return Err(Error::invalid_argument("batch_size must be >= 1, got 0"));
        }
        check_shard(params.num_shards, params.shard_index)?;
        let lo = shard_bound(n, params.shard_index, params.num_shards);
        let hi = shard_bound(n, params.shard_index + 1, params.num_shards);
        let members = (params.num_shards > 1 && params.reuse_factor > 1)
            .then(|| keyed(n, params.seed, 0, PURPOSE_SHARD_IDS, 0));
        let eviction = keyed(
            hi - lo,
            params.seed,
            0,
            PURPOSE_EVICTION,
            params.shard_index,
        );
        Ok(RefurbishSchedule {
            n,
            params: *params,
            lo,
            len: hi - lo,
            members,
            eviction,
        })
    }

    /// Ids in this shard, `m`: the same every epoch.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The (epoch, position) of global index `index` (the epochs laid end to end);
    /// an error when the shard has no ids.
    pub fn locate(&self, index: u64) -> Result<(u64, u64)> {
        crate::order::locate(index, self.len)
    }

    /// Whether the shard has no ids.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The spec this schedule was made from.
    pub fn params(&self) -> &RefurbishParams {
        &self.params
    }

    /// The ids of every shard, `n`.
    pub fn total(&self) -> u64 {
        self.n
    }

    /// `⌊e·m/r⌋`: the eviction pointer after epoch `e`'s refreshes, modulo `m`'s cycles
    /// (`c(e')` for the phase `e' = e mod r`).
    fn pointer(&self, phase: u64) -> u64 {
        mul_div(phase, self.len, self.params.reuse_factor)
    }

    /// `(first rank, count)` of the ranks epoch `epoch` refreshes.
    fn refreshed_ranks(&self, epoch: u64) -> (u64, u64) {
        if epoch == 0 || self.params.reuse_factor == 1 {
            return (0, self.len);
        }
        let phase = (epoch - 1) % self.params.reuse_factor;
        let first = self.pointer(phase);
        (first, self.pointer(phase + 1) - first)
    }

    /// Refreshes in `epoch`: every id at epoch 0, then `⌊m/r⌋` or `⌈m/r⌉`.
    pub fn refreshes(&self, epoch: u64) -> u64 {
        self.refreshed_ranks(epoch).1
    }

    /// The generation of the id of eviction rank `rank` at `epoch`.
    fn generation_of_rank(&self, rank: u64, epoch: u64) -> u64 {
        let r = self.params.reuse_factor;
        if epoch == 0 || r == 1 {
            return epoch;
        }
        // The phase p with rank in [⌊p·m/r⌋, ⌊(p+1)·m/r⌋): refreshed at epochs
        // p + 1, p + 1 + r, … (and 0).
        let m = u128::from(self.len);
        let phase = ((u128::from(rank) + 1) * u128::from(r)).div_ceil(m) as u64 - 1;
        if epoch <= phase {
            0
        } else {
            epoch - (epoch - phase - 1) % r
        }
    }

    /// The id at the shard's local index `local` (`< len`).
    fn id_of(&self, local: u64) -> u64 {
        match &self.members {
            Some(members) => members.apply(self.lo + local),
            None => self.lo + local,
        }
    }

    /// The generation of `id` at `epoch`, `None` if another shard has the id. With
    /// `reuse_factor` 1 (every id refreshed every epoch), `epoch`.
    pub fn generation(&self, id: u64, epoch: u64) -> Option<u64> {
        if id >= self.n {
            return None;
        }
        if self.params.reuse_factor == 1 {
            return Some(epoch);
        }
        let position = match &self.members {
            Some(members) => members.invert(id),
            None => id,
        };
        if !(self.lo..self.lo + self.len).contains(&position) {
            return None;
        }
        let rank = self.eviction.invert(position - self.lo);
        Some(self.generation_of_rank(rank, epoch))
    }

    /// The generation a refresh of `id` at epoch `generation` replaces (its
    /// generation at the epoch before), `None` at epoch 0 or for another shard's id:
    /// the stored entry whose generation is then over.
    pub fn replaced_generation(&self, id: u64, generation: u64) -> Option<u64> {
        let before = generation.checked_sub(1)?;
        self.generation(id, before)
    }

    /// Checks a saved refurbish state (a front end's: schedule version, the options it
    /// was made with, a position in an epoch) against this schedule: a state of another
    /// version or options is `InvalidArgument` naming what differs, as is a position
    /// past the epoch's end.
    pub fn check_state(&self, version: u64, params: &RefurbishParams, position: u64) -> Result<()> {
        let ours = &self.params;
        let fields = [
            (
                "refurbish_schedule_version",
                version,
                REFURBISH_SCHEDULE_VERSION,
            ),
            ("seed", params.seed, ours.seed),
            ("reuse_factor", params.reuse_factor, ours.reuse_factor),
            ("batch_size", params.batch_size, ours.batch_size),
            ("num_shards", params.num_shards, ours.num_shards),
            ("shard_index", params.shard_index, ours.shard_index),
            (
                "order_version",
                params.order_version.number(),
                ours.order_version.number(),
            ),
        ];
        for (name, theirs, mine) in fields {
            if theirs != mine {
                return Err(Error::invalid_argument(format!(
                    "the refurbish state has {name}={theirs}, this schedule {name}={mine}: \
                     restore it into a schedule made with the same options"
                )));
            }
        }
        if position > self.len {
            return Err(Error::invalid_argument(format!(
                "the refurbish state's position {position} is past the epoch's end ({} ids)",
                self.len
            )));
        }
        Ok(())
    }

    /// The schedule of `epoch`, at position 0.
    pub fn epoch(&self, epoch: u64) -> Result<EpochSchedule> {
        let p = &self.params;
        let plain = if p.reuse_factor == 1 {
            let order = OrderParams {
                seed: p.seed,
                epoch,
                page_aware: false,
                num_shards: p.num_shards,
                shard_index: p.shard_index,
            };
            Some(EpochOrder::of_len(self.n, &order, p.order_version)?)
        } else {
            None
        };
        let (first, refreshes) = self.refreshed_ranks(epoch);
        let shard = p.shard_index;
        Ok(EpochSchedule {
            schedule: *self,
            epoch,
            first,
            refreshes,
            refreshed: keyed(refreshes, p.seed, epoch, PURPOSE_REFRESHES, shard),
            reused: keyed(self.len - refreshes, p.seed, epoch, PURPOSE_REUSES, shard),
            plain,
            position: 0,
            batch: None,
        })
    }
}

/// One epoch of a [`RefurbishSchedule`]: an iterator of [`Use`]s in delivery order, each
/// position also computable on its own ([`at`](Self::at)).
pub struct EpochSchedule {
    schedule: RefurbishSchedule,
    epoch: u64,
    /// The first eviction rank refreshed and how many are.
    first: u64,
    refreshes: u64,
    /// Refresh number → offset from `first` among the refreshed ranks.
    refreshed: Bijection,
    /// Reuse number → offset from `first + refreshes` (mod m) among the others.
    reused: Bijection,
    /// `reuse_factor` 1: today's epoch order.
    plain: Option<EpochOrder>,
    position: u64,
    /// The current batch's slot bijection.
    batch: Option<(u64, Bijection)>,
}

impl std::fmt::Debug for EpochSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpochSchedule")
            .field("schedule", &self.schedule)
            .field("epoch", &self.epoch)
            .field("refreshes", &self.refreshes)
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

impl EpochSchedule {
    /// Ids in the epoch (the shard's ids).
    pub fn len(&self) -> u64 {
        self.schedule.len
    }

    /// Whether the epoch has no ids.
    pub fn is_empty(&self) -> bool {
        self.schedule.len == 0
    }

    /// The epoch number.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many uses have been taken.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Refreshes in the epoch.
    pub fn refreshes(&self) -> u64 {
        self.refreshes
    }

    /// Continues from `position` (0 ..= len), e.g. when restoring a checkpoint.
    pub fn seek(&mut self, position: u64) -> Result<()> {
        if position > self.schedule.len {
            return Err(Error::invalid_argument(format!(
                "cannot seek to position {position}: the epoch's refurbish schedule has {} ids",
                self.schedule.len
            )));
        }
        if let Some(order) = &mut self.plain {
            order.seek(position)?;
        }
        self.position = position;
        Ok(())
    }

    /// Positions `[s, t)` of batch `batch` and its refreshes
    /// `⌊M·t/m⌋ − ⌊M·s/m⌋`.
    fn batch_bounds(&self, batch: u64) -> (u64, u64, u64) {
        let m = self.schedule.len;
        let size = self.schedule.params.batch_size;
        let start = batch.saturating_mul(size).min(m);
        let end = start.saturating_add(size).min(m);
        let quota = if m == 0 {
            0
        } else {
            mul_div(self.refreshes, end, m) - mul_div(self.refreshes, start, m)
        };
        (start, end, quota)
    }

    /// Refreshes in batch `batch` (positions `[b·B, min((b+1)·B, m))`).
    pub fn batch_refreshes(&self, batch: u64) -> u64 {
        if self.plain.is_some() {
            let (start, end, _) = self.batch_bounds(batch);
            return end - start;
        }
        self.batch_bounds(batch).2
    }

    fn slots(&self, batch: u64, len: u64) -> Bijection {
        let p = &self.schedule.params;
        let extra = batch.wrapping_mul(p.num_shards).wrapping_add(p.shard_index);
        keyed(len, p.seed, self.epoch, PURPOSE_BATCH_SLOTS, extra)
    }

    /// The use at `position` (`reuse_factor > 1`), with batch `batch`'s slots.
    fn use_with(&self, position: u64, batch: u64, slots: &Bijection) -> Use {
        let s = &self.schedule;
        let m = s.len;
        let (start, _, quota) = self.batch_bounds(batch);
        let before = mul_div(self.refreshes, start, m);
        let slot = slots.apply(position - start);
        let (rank, refresh) = if slot < quota {
            let offset = self.refreshed.apply(before + slot);
            (self.first + offset, true)
        } else {
            let offset = self.reused.apply(start - before + slot - quota);
            ((self.first + self.refreshes + offset) % m, false)
        };
        let generation = if refresh {
            self.epoch
        } else {
            s.generation_of_rank(rank, self.epoch)
        };
        Use {
            id: s.id_of(s.eviction.apply(rank)),
            refresh,
            generation,
        }
    }

    /// The use at `position` (`< len`), computed on its own (`reuse_factor > 1`: a
    /// few bijection walks; `reuse_factor` 1: the epoch order from its start).
    pub fn at(&self, position: u64) -> Result<Use> {
        if position >= self.schedule.len {
            return Err(Error::invalid_argument(format!(
                "position {position} is past the end of the epoch's refurbish schedule ({} ids)",
                self.schedule.len
            )));
        }
        if self.plain.is_some() {
            // Version 1 orders have no random access: walk a fresh copy of the epoch.
            let mut fresh = self.schedule.epoch(self.epoch)?;
            fresh.seek(position)?;
            return fresh
                .next()
                .ok_or_else(|| Error::internal("epoch order ended early"));
        }
        let batch = position / self.schedule.params.batch_size;
        let (start, end, _) = self.batch_bounds(batch);
        Ok(self.use_with(position, batch, &self.slots(batch, end - start)))
    }

    /// Appends up to `max` next uses to `out`; returns how many.
    pub fn next_uses(&mut self, max: usize, out: &mut Vec<Use>) -> usize {
        let before = out.len();
        while out.len() - before < max {
            match self.next() {
                Some(u) => out.push(u),
                None => break,
            }
        }
        out.len() - before
    }
}

impl Iterator for EpochSchedule {
    type Item = Use;

    fn next(&mut self) -> Option<Use> {
        if self.position >= self.schedule.len {
            return None;
        }
        let position = self.position;
        self.position += 1;
        if let Some(order) = &mut self.plain {
            let id = order.next()?;
            return Some(Use {
                id,
                refresh: true,
                generation: self.epoch,
            });
        }
        let batch = position / self.schedule.params.batch_size;
        let slots = match self.batch {
            Some((b, slots)) if b == batch => slots,
            _ => {
                let (start, end, _) = self.batch_bounds(batch);
                let slots = self.slots(batch, end - start);
                self.batch = Some((batch, slots));
                slots
            }
        };
        Some(self.use_with(position, batch, &slots))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.schedule.len - self.position) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for EpochSchedule {}
