//! The delivered ledger: which positions of an epoch order a consumer has been given,
//! as a resume point (pure: no I/O, no threads).
//!
//! In order, delivery is a growing prefix, kept as one number; with unordered
//! delivery (or after a restore that skips positions) the positions past the first
//! gap are kept in a set until the gap closes.

use std::collections::BTreeSet;

/// Where a consumer is in an epoch order, for a checkpoint: every position below
/// `position` and every one in `after` has been delivered, and nothing else. In order,
/// `after` is empty; with unordered delivery it holds the windows delivered ahead of a
/// slower one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    /// The first position not delivered.
    pub position: u64,
    /// Positions past `position` already delivered, ascending.
    pub after: Vec<u64>,
}

/// The positions delivered so far: every one below `low`, and those in `above`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveredLedger {
    low: u64,
    /// Delivered positions past `low` (never `low` itself).
    above: BTreeSet<u64>,
}

impl DeliveredLedger {
    /// A ledger at a resume point: everything below `position` and every position of
    /// `after` delivered (those below `position` change nothing).
    pub fn new(position: u64, after: impl IntoIterator<Item = u64>) -> DeliveredLedger {
        let mut ledger = DeliveredLedger {
            low: position,
            above: after.into_iter().filter(|&p| p >= position).collect(),
        };
        ledger.close_gap();
        ledger
    }

    /// Records `position` as delivered.
    pub fn deliver(&mut self, position: u64) {
        if position == self.low {
            self.low += 1;
            if !self.above.is_empty() {
                self.close_gap();
            }
        } else if position > self.low {
            self.above.insert(position);
        }
    }

    /// Records `positions` as delivered. The usual case, a run ascending from the
    /// first position not delivered, costs no set operation.
    pub fn deliver_all(&mut self, positions: &[u64]) {
        let run = positions.len() as u64;
        if self.above.is_empty()
            && positions.first() == Some(&self.low)
            && positions.last().is_some_and(|&p| p + 1 == self.low + run)
            && positions.windows(2).all(|w| w[0] + 1 == w[1])
        {
            self.low += run;
            return;
        }
        for &p in positions {
            self.deliver(p);
        }
    }

    /// Whether `position` is delivered.
    pub fn contains(&self, position: u64) -> bool {
        position < self.low || self.above.contains(&position)
    }

    /// The first position not delivered.
    pub fn position(&self) -> u64 {
        self.low
    }

    /// The resume point.
    pub fn resume(&self) -> Resume {
        Resume {
            position: self.low,
            after: self.above.iter().copied().collect(),
        }
    }

    fn close_gap(&mut self) {
        while self.above.remove(&self.low) {
            self.low += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_delivery_is_a_prefix() {
        let mut ledger = DeliveredLedger::new(10, []);
        ledger.deliver_all(&[10, 11, 12]);
        ledger.deliver(13);
        assert_eq!(
            ledger.resume(),
            Resume {
                position: 14,
                after: vec![]
            }
        );
        assert!(ledger.contains(13) && !ledger.contains(14));
    }

    #[test]
    fn gaps_close_when_filled() {
        let mut ledger = DeliveredLedger::new(0, []);
        ledger.deliver_all(&[4, 5, 6]); // a later window first
        ledger.deliver_all(&[2, 0]); // out of order within a window
        assert_eq!(ledger.resume().position, 1);
        assert_eq!(ledger.resume().after, vec![2, 4, 5, 6]);
        ledger.deliver(1);
        assert_eq!(ledger.resume().position, 3);
        ledger.deliver(3);
        assert_eq!(
            ledger.resume(),
            Resume {
                position: 7,
                after: vec![]
            }
        );
        // Delivering again, or below the prefix, changes nothing.
        ledger.deliver(2);
        ledger.deliver_all(&[5, 6]);
        assert_eq!(ledger.resume().position, 7);
    }

    #[test]
    fn a_restored_ledger_normalizes_its_resume_point() {
        let ledger = DeliveredLedger::new(5, [3, 5, 6, 9]);
        assert_eq!(
            ledger.resume(),
            Resume {
                position: 7,
                after: vec![9]
            }
        );
        // A run that is not ascending from the prefix takes the set path.
        let mut ledger = DeliveredLedger::new(0, []);
        ledger.deliver_all(&[0, 2, 1]);
        assert_eq!(ledger.resume().position, 3);
    }
}
