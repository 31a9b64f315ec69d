//! [`EpochWalks`]: the epoch counter of a front end that hands out each epoch's order
//! whole (PyTorch's `Sampler`s): which epoch the next walk walks and from where, and
//! the one rule by which it moves on. A `DataLoader` makes its sampler's iterator
//! more than once per epoch and drops all but one, so the epoch moves on only when a
//! walk has handed out the whole epoch, never when a walk begins.

/// Where the next walk starts, epoch after epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EpochWalks {
    epoch: u64,
    /// The position the next walk starts at: 0, or a restored state's.
    start: u64,
}

impl EpochWalks {
    /// Walks from the start of `epoch`.
    pub fn new(epoch: u64) -> EpochWalks {
        EpochWalks { epoch, start: 0 }
    }

    /// The epoch the next walk walks.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sets the epoch the next walk walks (from its start).
    pub fn set_epoch(&mut self, epoch: u64) {
        *self = EpochWalks::new(epoch);
    }

    /// Sets where the next walk starts: position `position` of `epoch` (a restored
    /// state's; the caller checks the position against the epoch's length).
    pub fn start_at(&mut self, epoch: u64, position: u64) {
        *self = EpochWalks {
            epoch,
            start: position,
        };
    }

    /// Where the next walk starts: (epoch, position). Beginning a walk moves nothing,
    /// so a walk begun and dropped costs no epoch.
    pub fn next_walk(&self) -> (u64, u64) {
        (self.epoch, self.start)
    }

    /// A walk of `epoch` handed out its whole order: the next walk walks the epoch
    /// after, from its start (unless the epoch was set to another since).
    pub fn walked(&mut self, epoch: u64) {
        if epoch == self.epoch {
            *self = EpochWalks::new(epoch.saturating_add(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EpochWalks;

    #[test]
    fn the_epoch_moves_on_only_when_a_walk_of_it_ends() {
        let mut w = EpochWalks::new(0);
        // Two walks begun (a DataLoader drops one): still epoch 0.
        assert_eq!(w.next_walk(), (0, 0));
        assert_eq!(w.next_walk(), (0, 0));
        w.walked(0);
        assert_eq!(w.next_walk(), (1, 0));
        // The end of a walk of an epoch set away from meanwhile moves nothing.
        w.set_epoch(5);
        w.walked(1);
        assert_eq!(w.next_walk(), (5, 0));
        w.start_at(7, 3);
        assert_eq!(w.next_walk(), (7, 3));
        w.walked(7);
        assert_eq!(w.next_walk(), (8, 0));
        w.start_at(u64::MAX, 0);
        w.walked(u64::MAX);
        assert_eq!(w.epoch(), u64::MAX);
    }
}
