//! The [`Sampler`]: a front end's view of the epoch orders when it takes each epoch's
//! order whole (PyTorch's `Sampler`, Grain's index samplers) rather than walking it
//! with a [`DatasetCursor`](crate::DatasetCursor): the epoch counter, the order of an
//! epoch for one shard, the elastic-resume states (docs/FORMAT.md §6) and the map from
//! a global index over all epochs to (epoch, position).
//!
//! ```
//! use tfrecord_lirs::{Sampler, SamplerSource};
//! let mut sampler = Sampler::new(SamplerSource::Instances(10), 1, false, 1, 0, 1)?;
//! assert_eq!(sampler.len()?, 10);
//! sampler.set_epoch(1);
//! let mut ids = sampler.order(sampler.epoch())?;
//! ids.sort_unstable();
//! assert_eq!(ids, (0..10).collect::<Vec<u64>>());
//! assert_eq!(sampler.locate(23)?, (2, 3));
//! # Ok::<(), tfrecord_lirs::Error>(())
//! ```

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::options;
use crate::read::cursor::state::CursorState;
use crate::read::elastic::{EpochState, ShardState};
use crate::read::epoch_walks::EpochWalks;
use crate::read::loader::WalkIdentity;
use crate::read::reader::Reader;
use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
use tfrecord_lirs_format::order::{self, EpochOrder, OrderParams, OrderVersion};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

/// What a [`Sampler`] orders.
#[derive(Clone)]
pub enum SamplerSource {
    /// The instances of these files (page-aware orders need them).
    Files(Arc<Reader>),
    /// `n` instances described by no file (instance-based orders only).
    Instances(u64),
}

/// A [`Sampler`]'s checkpoint: what it is a position of (the dataset and the order's
/// options) and the position, restored exactly in any process
/// ([`Sampler::restore`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerState {
    /// The order's inputs (a Loader's checkpoints name the same): the dataset (its
    /// files, or for ids described by no file one unnamed "file" of that many instances
    /// and no bytes), seed, page-awareness, shard and remainder.
    pub walk: WalkIdentity,
    /// The order algorithm's number.
    pub order_version: u64,
    /// The epoch walked (or next to walk).
    pub epoch: u64,
    /// Ids of the epoch's order handed out.
    pub position: u64,
    /// When the epoch is one resumed elastically: the epoch state its order is this
    /// shard's part of.
    pub resumed_from: Option<EpochState>,
}

/// The epoch orders of one shard of a source, epoch by epoch, with elastic resume.
#[derive(Clone)]
pub struct Sampler {
    source: SamplerSource,
    seed: u64,
    page_aware: bool,
    num_shards: u64,
    shard_index: u64,
    version: OrderVersion,
    /// What the shards do with the remainder (equal shards for data-parallel ranks).
    remainder: ShardRemainder,
    /// The epoch and position the next walk starts at.
    walks: EpochWalks,
    /// Instances of this shard in every fresh epoch.
    len: u64,
    /// An epoch resumed from a state: its order is this shard's part of what the state
    /// did not deliver.
    resumed: Option<EpochState>,
}

impl Sampler {
    /// The sampler of shard `shard_index` of `num_shards` of `source` for `seed`,
    /// page-aware or not, with order algorithm `order_version`, at epoch 0. The
    /// arguments are checked now (the order version first), not at the first epoch.
    pub fn new(
        source: SamplerSource,
        seed: u64,
        page_aware: bool,
        num_shards: u64,
        shard_index: u64,
        order_version: u64,
    ) -> Result<Sampler> {
        let version = options::order_version(order_version)?;
        let mut sampler = Sampler {
            source,
            seed,
            page_aware,
            num_shards,
            shard_index,
            version,
            remainder: ShardRemainder::Keep,
            walks: EpochWalks::new(options::defaults::EPOCH),
            len: 0,
            resumed: None,
        };
        sampler.len = match &sampler.source {
            SamplerSource::Files(reader) => reader.shard_len(num_shards, shard_index)?,
            SamplerSource::Instances(_) => sampler.fresh_order(0)?.len(),
        };
        Ok(sampler)
    }

    /// This sampler with shards that treat the remainder by `remainder`
    /// ([`ShardRemainder`]: `Drop` and `Pad` give every shard the same length, as
    /// `DistributedSampler(drop_last=True/False)`). Elastic resume
    /// ([`shard_state`](Sampler::shard_state), [`resume`](Sampler::resume)) takes
    /// `Keep` shards only.
    pub fn with_remainder(mut self, remainder: ShardRemainder) -> Sampler {
        self.remainder = remainder;
        if remainder != ShardRemainder::Keep {
            self.len = remainder.shard_len(self.instances(), self.num_shards, self.shard_index);
        }
        self
    }

    /// What the shards do with the remainder.
    pub fn remainder(&self) -> ShardRemainder {
        self.remainder
    }

    /// The order's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whether whole pages are the shuffle unit.
    pub fn page_aware(&self) -> bool {
        self.page_aware
    }

    /// (shards, this shard's index).
    pub fn shard(&self) -> (u64, u64) {
        (self.num_shards, self.shard_index)
    }

    /// The order algorithm.
    pub fn order_version(&self) -> OrderVersion {
        self.version
    }

    /// The epoch the next iteration walks.
    pub fn epoch(&self) -> u64 {
        self.walks.epoch()
    }

    /// Sets the epoch the next iteration walks (from its start).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.walks.set_epoch(epoch);
    }

    /// Where the next walk starts: (epoch, position in its [`order`](Sampler::order)).
    /// A walk moves nothing until it has handed out the whole epoch
    /// ([`walked`](Sampler::walked), the rule of [`EpochWalks`]), so a walk begun and
    /// dropped (a `DataLoader` makes its sampler's iterator more than once per epoch)
    /// costs no epoch.
    pub fn next_walk(&self) -> (u64, u64) {
        self.walks.next_walk()
    }

    /// A walk of `epoch` handed out its whole order: the next walk walks the epoch
    /// after, from its start (unless the epoch was set to another since).
    pub fn walked(&mut self, epoch: u64) {
        self.walks.walked(epoch);
    }

    /// The checkpoint at position `position` of a walk of `epoch` in progress (`None`:
    /// no walk in progress, the start of the next one).
    pub fn state(&self, walk: Option<(u64, u64)>) -> SamplerState {
        let (epoch, position) = walk.unwrap_or(self.walks.next_walk());
        SamplerState {
            walk: WalkIdentity {
                dataset: self.dataset(),
                seed: self.seed,
                page_aware: self.page_aware,
                num_shards: self.num_shards,
                shard_index: self.shard_index,
                shard_remainder: self.remainder,
            },
            order_version: self.version.number(),
            epoch,
            position,
            resumed_from: self.resumed.clone().filter(|r| r.epoch == epoch),
        }
    }

    /// Restores `state` (a [`state`](Sampler::state) of a sampler of the same
    /// dataset, seed, page-awareness, shard, remainder and order version, in any
    /// process): the next walk walks its epoch from its position. Another sampler's
    /// state, or a position past its epoch's end, is an
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming what
    /// differs, and the sampler is left as it was.
    pub fn restore(&mut self, state: &SamplerState) -> Result<()> {
        let here = self.state(None);
        here.walk.check_restore(&state.walk, "Sampler")?;
        if state.order_version != here.order_version {
            return Err(Error::invalid_argument(format!(
                "this state was saved by a Sampler of order_version={} (this Sampler has \
                 order_version={})",
                state.order_version, here.order_version
            )));
        }
        let mut restored = self.clone();
        restored.resumed = None;
        if let Some(base) = &state.resumed_from {
            restored.resume(base.clone())?;
        }
        restored.set_epoch(state.epoch);
        let len = restored.len()?;
        if state.position > len {
            return Err(Error::invalid_argument(format!(
                "this state is at position {} of epoch {}, past its end (this Sampler's \
                 epoch has {len} instances)",
                state.position, state.epoch
            )));
        }
        restored.walks.start_at(state.epoch, state.position);
        *self = restored;
        Ok(())
    }

    fn dataset(&self) -> DatasetIdentity {
        match &self.source {
            SamplerSource::Files(reader) => reader.identity(),
            // Ids described by no file: one "file" of that many instances, no name.
            SamplerSource::Instances(n) => DatasetIdentity {
                files: vec![(*n, 0)],
                names: None,
            },
        }
    }

    /// The epoch state an epoch was resumed from, if any.
    pub fn resumed(&self) -> Option<&EpochState> {
        self.resumed.as_ref()
    }

    /// The ids of `epoch` in this shard, in order: this shard's part of what the
    /// resumed state did not deliver when `epoch` is the resumed one.
    pub fn order(&self, epoch: u64) -> Result<Vec<u64>> {
        match &self.resumed {
            Some(state) if state.epoch == epoch => {
                state.shard_ids(self.reader(), &self.params(epoch), self.version)
            }
            _ if self.remainder != ShardRemainder::Keep => {
                // The unsharded order, cut (or extended) into equal shards.
                let whole: Vec<u64> = self.unsharded_order(epoch)?.collect();
                let n = whole.len() as u64;
                Ok(self
                    .remainder
                    .positions(n, self.num_shards, self.shard_index)
                    .map(|p| whole[p as usize])
                    .collect())
            }
            _ => Ok(self.fresh_order(epoch)?.collect()),
        }
    }

    /// Instances of the current epoch in this shard.
    pub fn len(&self) -> Result<u64> {
        match &self.resumed {
            Some(state) if state.epoch == self.epoch() => {
                Ok(self.order(self.epoch())?.len() as u64)
            }
            _ => Ok(self.len),
        }
    }

    /// Whether the current epoch has no instances in this shard.
    pub fn is_empty(&self) -> Result<bool> {
        self.len().map(|n| n == 0)
    }

    /// Global index `index` over all epochs, each [`len`](Sampler::len) long, as
    /// (epoch, position in the epoch's order).
    pub fn locate(&self, index: u64) -> Result<(u64, u64)> {
        Ok(order::locate(index, self.len()?)?)
    }

    /// The seed of the record at global index `index` of a run seeded `seed`: the key
    /// of its random generator (wider than 64 bits, so no two indices share one).
    pub fn record_seed(seed: u64, index: u64) -> u128 {
        u128::from(seed) + u128::from(index)
    }

    /// This shard's state for elastic resume: the first `consumed` ids of the current
    /// epoch's [`order`](Sampler::order) delivered.
    pub fn shard_state(&self, consumed: u64) -> Result<ShardState> {
        self.check_elastic()?;
        let base = match &self.resumed {
            Some(state) if state.epoch == self.epoch() => state.clone(),
            _ => match &self.source {
                SamplerSource::Files(reader) => {
                    EpochState::fresh_of(reader, &self.params(self.epoch()), self.version)
                }
                SamplerSource::Instances(n) => {
                    EpochState::fresh(*n, &self.params(self.epoch()), self.version)
                }
            },
        };
        ShardState::of_positions(
            base,
            self.num_shards,
            self.shard_index,
            consumed,
            Vec::new(),
        )
    }

    /// Goes on with the epoch `state` describes: the epoch becomes the state's, and its
    /// order this shard's part of what the state did not deliver. The state is checked
    /// against this sampler (seed, order version, page-awareness, instances) now.
    pub fn resume(&mut self, state: EpochState) -> Result<()> {
        self.check_elastic()?;
        state.shard_ids(self.reader(), &self.params(state.epoch), self.version)?;
        self.walks.set_epoch(state.epoch);
        self.resumed = Some(state);
        Ok(())
    }

    fn reader(&self) -> Option<&Reader> {
        match &self.source {
            SamplerSource::Files(reader) => Some(reader),
            SamplerSource::Instances(_) => None,
        }
    }

    fn instances(&self) -> u64 {
        match &self.source {
            SamplerSource::Files(reader) => reader.len(),
            SamplerSource::Instances(n) => *n,
        }
    }

    fn params(&self, epoch: u64) -> OrderParams {
        OrderParams {
            seed: self.seed,
            epoch,
            page_aware: self.page_aware,
            num_shards: self.num_shards,
            shard_index: self.shard_index,
        }
    }

    /// Elastic resume maps positions of `Keep` shards (docs/FORMAT.md §6).
    fn check_elastic(&self) -> Result<()> {
        if self.remainder == ShardRemainder::Keep {
            return Ok(());
        }
        Err(Error::invalid_argument(format!(
            "elastic resume (shard_state, resume) works on shards with shard_remainder=\"keep\"; \
             this sampler has shard_remainder=\"{}\"",
            self.remainder.name()
        )))
    }

    fn unsharded_order(&self, epoch: u64) -> Result<EpochOrder> {
        let params = OrderParams {
            num_shards: 1,
            shard_index: 0,
            ..self.params(epoch)
        };
        match &self.source {
            SamplerSource::Files(reader) => reader.epoch_order_with_version(&params, self.version),
            SamplerSource::Instances(n) => Ok(EpochOrder::of_len(*n, &params, self.version)?),
        }
    }

    fn fresh_order(&self, epoch: u64) -> Result<EpochOrder> {
        let params = self.params(epoch);
        match &self.source {
            SamplerSource::Files(reader) => reader.epoch_order_with_version(&params, self.version),
            SamplerSource::Instances(n) => Ok(EpochOrder::of_len(*n, &params, self.version)?),
        }
    }
}

impl ShardState {
    /// A worker's state: shard `shard_index` of `num_shards` (shards that keep the
    /// remainder) walking from `base`, having delivered its positions below `position` and those in `delivered_after`
    /// (checked as a decoded state is: ascending, past the position).
    pub fn of_positions(
        base: EpochState,
        num_shards: u64,
        shard_index: u64,
        position: u64,
        delivered_after: Vec<u64>,
    ) -> Result<ShardState> {
        options::shard(num_shards, shard_index)?;
        let mut state = CursorState::start_of(base.order_version);
        state.position = position;
        state.delivered_after = delivered_after;
        let state = CursorState::decode(&state.encode())?;
        Ok(ShardState {
            base,
            num_shards,
            shard_index,
            state,
            remainder: ShardRemainder::Keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_and_pad_give_every_rank_the_same_count() {
        // 400 over 3 ranks: 133/133/134 kept, 133 each dropped, 134 each padded.
        let rank = |k: u64, rule: ShardRemainder| {
            Sampler::new(SamplerSource::Instances(400), 9, false, 3, k, 2)
                .unwrap()
                .with_remainder(rule)
        };
        let lens = |rule| {
            (0..3)
                .map(|k| rank(k, rule).len().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(lens(ShardRemainder::Keep), [133, 133, 134]);
        assert_eq!(lens(ShardRemainder::Drop), [133, 133, 133]);
        assert_eq!(lens(ShardRemainder::Pad), [134, 134, 134]);
        let whole = Sampler::new(SamplerSource::Instances(400), 9, false, 1, 0, 2)
            .unwrap()
            .order(4)
            .unwrap();
        for rule in [ShardRemainder::Drop, ShardRemainder::Pad] {
            let mut all = Vec::new();
            for k in 0..3 {
                let ids = rank(k, rule).order(4).unwrap();
                assert_eq!(ids.len() as u64, rank(k, rule).len().unwrap());
                all.extend(ids);
            }
            match rule {
                // Distinct ids: the whole order less its last 400 mod 3 positions.
                ShardRemainder::Drop => assert_eq!(all, whole[..399]),
                // Every id, then the order's first 2 again (DistributedSampler's padding).
                _ => assert_eq!(all, [&whole[..], &whole[..2]].concat()),
            }
        }
        let e = rank(0, ShardRemainder::Pad).shard_state(3).unwrap_err();
        assert!(e.to_string().contains("shard_remainder"), "{e}");
    }

    #[test]
    fn the_orders_are_the_epoch_orders_and_resume_walks_the_rest() {
        let sampler = Sampler::new(SamplerSource::Instances(20), 5, false, 2, 1, 1).unwrap();
        let params = OrderParams {
            seed: 5,
            epoch: 3,
            page_aware: false,
            num_shards: 2,
            shard_index: 1,
        };
        let expected: Vec<u64> = EpochOrder::of_len(20, &params, OrderVersion::V1)
            .unwrap()
            .collect();
        assert_eq!(sampler.order(3).unwrap(), expected);
        assert_eq!(sampler.len().unwrap(), 10);

        // Two workers deliver 4 and 7 of epoch 2; one new worker walks the other 9.
        let states: Vec<ShardState> = (0..2)
            .map(|k| {
                let mut s = Sampler::new(SamplerSource::Instances(20), 5, false, 2, k, 1).unwrap();
                s.set_epoch(2);
                s.shard_state([4, 7][k as usize]).unwrap()
            })
            .collect();
        let combined = EpochState::combine(&states).unwrap();
        let mut one = Sampler::new(SamplerSource::Instances(20), 5, false, 1, 0, 1).unwrap();
        one.resume(combined.clone()).unwrap();
        assert_eq!((one.epoch(), one.len().unwrap()), (2, 9));
        let delivered: Vec<u64> = (0..2u64)
            .flat_map(|k| {
                let s = Sampler::new(SamplerSource::Instances(20), 5, false, 2, k, 1).unwrap();
                let n = [4, 7][k as usize];
                s.order(2).unwrap().into_iter().take(n)
            })
            .collect();
        let mut all: Vec<u64> = delivered.into_iter().chain(one.order(2).unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..20).collect::<Vec<u64>>());
        // The epoch after the resumed one is a fresh one-shard epoch.
        assert_eq!(one.order(3).unwrap().len(), 20);

        let mut other_seed = Sampler::new(SamplerSource::Instances(20), 6, false, 1, 0, 1).unwrap();
        assert!(other_seed.resume(combined).is_err());
        assert_eq!(other_seed.epoch(), 0);
    }

    #[test]
    fn arguments_are_checked_at_creation() {
        let e = Sampler::new(SamplerSource::Instances(5), 0, false, 1, 0, 3)
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("order version must be 1 or 2"),
            "{e}"
        );
        assert!(Sampler::new(SamplerSource::Instances(5), 0, true, 1, 0, 1).is_err());
        assert!(Sampler::new(SamplerSource::Instances(5), 0, false, 2, 2, 1).is_err());
        let sampler = Sampler::new(SamplerSource::Instances(5), 0, false, 1, 0, 2).unwrap();
        assert_eq!(sampler.locate(12).unwrap(), (2, 2));
        assert_eq!(Sampler::record_seed(u64::MAX, 2), (1u128 << 64) + 1);
    }

    #[test]
    fn a_walk_moves_the_epoch_only_when_it_handed_out_the_whole_epoch() {
        let mut s = Sampler::new(SamplerSource::Instances(10), 3, false, 1, 0, 1).unwrap();
        assert_eq!(s.next_walk(), (0, 0));
        // A walk begun and dropped: the next one walks the same epoch.
        assert_eq!(s.next_walk(), (0, 0));
        s.walked(0);
        assert_eq!(s.next_walk(), (1, 0));
        // A stale walk of another epoch moves nothing.
        s.walked(0);
        assert_eq!(s.next_walk(), (1, 0));
        s.set_epoch(5);
        s.walked(5);
        assert_eq!(s.next_walk(), (6, 0));
    }

    #[test]
    fn a_state_restores_epoch_and_position_in_a_new_sampler() {
        let mut s = Sampler::new(SamplerSource::Instances(10), 3, false, 2, 1, 1).unwrap();
        s.set_epoch(4);
        let state = s.state(Some((4, 3)));
        let mut fresh = Sampler::new(SamplerSource::Instances(10), 3, false, 2, 1, 1).unwrap();
        fresh.restore(&state).unwrap();
        assert_eq!(fresh.next_walk(), (4, 3));
        assert_eq!(fresh.state(None), state);
        // set_epoch drops the restored position.
        fresh.set_epoch(4);
        assert_eq!(fresh.next_walk(), (4, 0));
    }

    #[test]
    fn a_state_of_another_sampler_is_refused_naming_what_differs() {
        let state = Sampler::new(SamplerSource::Instances(10), 3, false, 2, 1, 1)
            .unwrap()
            .state(Some((2, 1)));
        let refused = |mut other: Sampler, needle: &str| {
            let before = other.next_walk();
            let e = other.restore(&state).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(needle), "{e}");
            assert_eq!(other.next_walk(), before);
        };
        let new = |n, seed, k, v| Sampler::new(SamplerSource::Instances(n), seed, false, 2, k, v);
        refused(new(11, 3, 1, 1).unwrap(), "another dataset");
        refused(
            new(10, 4, 1, 1).unwrap(),
            "seed 3 (this Sampler has seed 4)",
        );
        refused(
            new(10, 3, 0, 1).unwrap(),
            "shard 1 of 2 (this Sampler, with its worker, is shard 0 of 2)",
        );
        refused(
            new(10, 3, 1, 2).unwrap(),
            "order_version=1 (this Sampler has order_version=2)",
        );
        refused(
            new(10, 3, 1, 1)
                .unwrap()
                .with_remainder(ShardRemainder::Pad),
            "shard_remainder=\"keep\" (this Sampler has shard_remainder=\"pad\")",
        );
        let mut past = state.clone();
        past.position = 6;
        let e = new(10, 3, 1, 1).unwrap().restore(&past).unwrap_err();
        assert!(e.to_string().contains("position 6 of epoch 2"), "{e}");
    }

    #[test]
    fn a_state_of_an_elastically_resumed_epoch_restores_its_order() {
        let old: Vec<Sampler> = (0..2)
            .map(|k| Sampler::new(SamplerSource::Instances(20), 1, false, 2, k, 1).unwrap())
            .collect();
        let epoch = EpochState::combine(&[
            old[0].shard_state(4).unwrap(),
            old[1].shard_state(7).unwrap(),
        ])
        .unwrap();
        let mut s = Sampler::new(SamplerSource::Instances(20), 1, false, 3, 2, 1).unwrap();
        s.resume(epoch).unwrap();
        let order = s.order(0).unwrap();
        let state = s.state(Some((0, 2)));
        let mut fresh = Sampler::new(SamplerSource::Instances(20), 1, false, 3, 2, 1).unwrap();
        fresh.restore(&state).unwrap();
        assert_eq!(fresh.order(0).unwrap(), order);
        assert_eq!(fresh.next_walk(), (0, 2));
    }
}
