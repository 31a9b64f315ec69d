//! The [`RefurbishSampler`]: a front end's view of the refurbish schedule when it hands
//! out each epoch whole (PyTorch's `RefurbishSampler`): the schedule, the epoch the
//! next walk walks and where it starts, and the checkpoint. The epoch moves on by the
//! rule of the plain [`Sampler`](crate::read::sampler::Sampler) ([`EpochWalks`]): when
//! a walk has handed out the whole epoch, so a user who never sets the epoch still
//! gets epoch after epoch.
//!
//! ```
//! use tfrecord_lirs::{RefurbishParams, RefurbishSampler, RefurbishSchedule};
//! let params = RefurbishParams { reuse_factor: 2, batch_size: 4, ..RefurbishParams::default() };
//! let mut sampler = RefurbishSampler::new(RefurbishSchedule::new(10, &params)?);
//! let walk = sampler.walk()?;
//! assert_eq!((walk.epoch(), walk.count()), (0, 10));
//! sampler.walked(0);
//! assert_eq!(sampler.walk()?.epoch(), 1);
//! # Ok::<(), tfrecord_lirs::Error>(())
//! ```

use crate::error::Result;
use tfrecord_lirs_format::refurbish::{
    EpochSchedule, RefurbishParams, RefurbishSchedule, REFURBISH_SCHEDULE_VERSION,
};

use crate::options;
use crate::read::epoch_walks::EpochWalks;

/// A [`RefurbishSampler`]'s checkpoint: the schedule it is a position of (its version
/// and options) and the position, restored in any process
/// ([`RefurbishSampler::restore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefurbishSamplerState {
    /// The schedule algorithm's version.
    pub version: u64,
    /// The schedule's options.
    pub params: RefurbishParams,
    /// The epoch walked (or next to walk).
    pub epoch: u64,
    /// Uses of the epoch handed out (or taken).
    pub position: u64,
}

/// One shard's refurbish schedule, epoch by epoch.
#[derive(Debug, Clone)]
pub struct RefurbishSampler {
    schedule: RefurbishSchedule,
    walks: EpochWalks,
}

impl RefurbishSampler {
    /// The sampler of `schedule`, at epoch 0.
    pub fn new(schedule: RefurbishSchedule) -> RefurbishSampler {
        RefurbishSampler {
            schedule,
            walks: EpochWalks::new(options::defaults::EPOCH),
        }
    }

    /// The schedule.
    pub fn schedule(&self) -> &RefurbishSchedule {
        &self.schedule
    }

    /// The epoch the next walk walks.
    pub fn epoch(&self) -> u64 {
        self.walks.epoch()
    }

    /// Sets the epoch the next walk walks (from its start).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.walks.set_epoch(epoch);
    }

    /// The next walk: its epoch's schedule from where it starts. Beginning a walk moves
    /// nothing: the epoch moves on when the walk has handed out every use
    /// ([`walked`](RefurbishSampler::walked)).
    pub fn walk(&self) -> Result<EpochSchedule> {
        let (epoch, start) = self.walks.next_walk();
        let mut walk = self.schedule.epoch(epoch)?;
        walk.seek(start)?;
        Ok(walk)
    }

    /// A walk of `epoch` handed out every use: the next walk walks the epoch after,
    /// from its start (unless the epoch was set to another since).
    pub fn walked(&mut self, epoch: u64) {
        self.walks.walked(epoch);
    }

    /// The checkpoint at position `position` of a walk of `epoch` (`None`: the start
    /// of the next walk).
    pub fn state(&self, walk: Option<(u64, u64)>) -> RefurbishSamplerState {
        let (epoch, position) = walk.unwrap_or(self.walks.next_walk());
        RefurbishSamplerState {
            version: REFURBISH_SCHEDULE_VERSION,
            params: *self.schedule.params(),
            epoch,
            position,
        }
    }

    /// Restores `state` (a [`state`](RefurbishSampler::state) of a sampler with the
    /// same schedule version and options): the next walk walks its epoch from its
    /// position. Another schedule's state, or a position past the epoch's end, is an
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming what
    /// differs, and the sampler is left as it was.
    pub fn restore(&mut self, state: &RefurbishSamplerState) -> Result<()> {
        self.schedule
            .check_state(state.version, &state.params, state.position)?;
        self.walks.start_at(state.epoch, state.position);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfrecord_lirs_format::refurbish::Use;

    fn sampler() -> RefurbishSampler {
        let params = RefurbishParams {
            seed: 7,
            reuse_factor: 3,
            batch_size: 4,
            ..RefurbishParams::default()
        };
        RefurbishSampler::new(RefurbishSchedule::new(10, &params).unwrap())
    }

    fn uses(walk: EpochSchedule) -> Vec<Use> {
        walk.collect()
    }

    #[test]
    fn epochs_move_on_when_a_walk_ends_and_set_epoch_wins() {
        let mut s = sampler();
        // A walk begun and dropped (a DataLoader's first iterator) moves nothing.
        let dropped = s.walk().unwrap();
        assert_eq!(dropped.epoch(), 0);
        let walk = s.walk().unwrap();
        assert_eq!(walk.epoch(), 0);
        assert_eq!(uses(walk), uses(s.schedule().epoch(0).unwrap()));
        s.walked(0);
        let mut seen = Vec::new();
        for e in 1..4 {
            let walk = s.walk().unwrap();
            assert_eq!(walk.epoch(), e);
            let u = uses(walk);
            assert_eq!(u, uses(s.schedule().epoch(e).unwrap()));
            seen.push(u);
            s.walked(e);
        }
        assert_ne!(seen[0], seen[1]);
        assert_ne!(seen[1], seen[2]);
        s.set_epoch(9);
        s.walked(4); // the end of a walk of an epoch set away from
        assert_eq!(s.walk().unwrap().epoch(), 9);
        assert_eq!(s.state(None).epoch, 9);
    }

    #[test]
    fn a_state_restores_exactly_in_a_new_sampler_and_a_foreign_one_is_refused() {
        let mut s = sampler();
        s.walked(0);
        s.walked(1);
        let state = s.state(Some((2, 6)));
        assert_eq!((state.version, state.epoch, state.position), (1, 2, 6));
        let mut t = sampler();
        t.restore(&state).unwrap();
        assert_eq!(t.state(None), state);
        let rest = uses(t.walk().unwrap());
        let whole = uses(s.schedule().epoch(2).unwrap());
        assert_eq!(rest, whole[6..]);
        t.walked(2);
        assert_eq!(t.walk().unwrap().epoch(), 3);

        let mut other = state;
        other.params.seed = 8;
        let err = t.restore(&other).unwrap_err().to_string();
        assert!(err.contains("seed=8"), "{err}");
        let past = RefurbishSamplerState {
            position: 11,
            ..state
        };
        assert!(t.restore(&past).is_err());
        assert_eq!(t.state(None).epoch, 3, "a refused state leaves the sampler");
    }
}
