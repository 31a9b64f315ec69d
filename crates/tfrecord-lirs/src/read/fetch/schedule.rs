//! The fetch schedule: which ids each fetch window holds, at which positions of the
//! epoch order (pure: no I/O, no threads).
//!
//! The order is consumed through [`OrderSource`], a narrow interface (its length, and
//! the ids of the next positions, a window at a time), so an order that computes the
//! id of a position without holding an array can take the place of [`EpochOrder`].

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::error::Result;
use tfrecord_lirs_format::order::{EpochOrder, PositionIds};

/// The version of the order algorithm of [`EpochOrder`] (docs/FORMAT.md §5), as
/// checkpoints record it.
pub const ORDER_VERSION_1: u32 = 1;

/// An epoch order as the fetch and the dataset cursor consume it: a length, a
/// position, and the ids of the next positions a window at a time.
pub trait OrderSource: Send {
    /// The version of the order algorithm (recorded in checkpoints, so a state is
    /// never restored into another algorithm's order).
    fn version(&self) -> u32;
    /// Positions (instances) in this shard's epoch.
    fn len(&self) -> u64;
    /// Whether the epoch is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The next position to be taken.
    fn position(&self) -> u64;
    /// Continues from `position` (0 ..= len).
    fn seek(&mut self, position: u64) -> Result<()>;
    /// Appends the ids of at least `min` next positions to `out` (fewer only at the
    /// end), extended so that a window never splits a page-aware unit; returns how
    /// many.
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize;
    /// Appends the ids of up to `max` next positions to `out`; returns how many.
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize;
    /// For an order whose ids are a function of the positions alone (order version
    /// 2): takes the next window's positions (as [`next_window`](Self::next_window), or
    /// [`next_batch`](Self::next_batch) when `exact`, would take them; empty at the
    /// end) without computing their ids, and returns them with what computes the ids,
    /// so that a fetch thread computes them instead of the consumer. `None`, taking
    /// nothing, for any other order (the default).
    fn next_positions(
        &mut self,
        min: usize,
        exact: bool,
    ) -> Option<(Range<u64>, Arc<dyn PositionIds>)> {
        let _ = (min, exact);
        None
    }
}

impl OrderSource for EpochOrder {
    fn version(&self) -> u32 {
        // 1 or 2: fits.
        EpochOrder::version(self).number() as u32
    }
    fn len(&self) -> u64 {
        EpochOrder::len(self)
    }
    fn position(&self) -> u64 {
        EpochOrder::position(self)
    }
    fn seek(&mut self, position: u64) -> Result<()> {
        Ok(EpochOrder::seek(self, position)?)
    }
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        EpochOrder::next_window(self, min, out)
    }
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        EpochOrder::next_batch(self, max, out)
    }
    fn next_positions(
        &mut self,
        min: usize,
        exact: bool,
    ) -> Option<(Range<u64>, Arc<dyn PositionIds>)> {
        let (positions, order) = EpochOrder::next_positions(self, min, exact)?;
        let ids_of: Arc<dyn PositionIds> = order;
        Some((positions, ids_of))
    }
}

impl<T: OrderSource + ?Sized> OrderSource for Box<T> {
    fn version(&self) -> u32 {
        (**self).version()
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn position(&self) -> u64 {
        (**self).position()
    }
    fn seek(&mut self, position: u64) -> Result<()> {
        (**self).seek(position)
    }
    fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
        (**self).next_window(min, out)
    }
    fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        (**self).next_batch(max, out)
    }
    fn next_positions(
        &mut self,
        min: usize,
        exact: bool,
    ) -> Option<(Range<u64>, Arc<dyn PositionIds>)> {
        (**self).next_positions(min, exact)
    }
}

/// One window as scheduled: its ids in order and their positions in the order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cut {
    /// The ids, in the order's order.
    pub ids: Vec<u64>,
    /// The order position of each id (ascending).
    pub positions: Vec<u64>,
}

/// The ids of a window cut by [`FetchSchedule::next_cut_deferred`], computed once by
/// whichever thread asks first (clones share them).
#[derive(Clone)]
pub(crate) struct DeferredIds {
    ids_of: Arc<dyn PositionIds>,
    /// The window's positions, as runs of consecutive positions.
    runs: Arc<[Range<u64>]>,
    ids: Arc<OnceLock<Vec<u64>>>,
}

impl DeferredIds {
    /// Positions in the window.
    pub(crate) fn len(&self) -> u64 {
        self.runs.iter().map(|run| run.end - run.start).sum()
    }

    /// The window's first position.
    pub(crate) fn first(&self) -> Option<u64> {
        self.runs.first().map(|run| run.start)
    }

    /// The window's ids, in window order (computed here if no thread has yet).
    pub(crate) fn ids(&self) -> &[u64] {
        self.ids.get_or_init(|| {
            let mut out = Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0));
            for run in self.runs.iter() {
                self.ids_of.compute_ids(run.clone(), &mut out);
            }
            out
        })
    }

    /// Whether a thread has computed the ids.
    pub(crate) fn is_computed(&self) -> bool {
        self.ids.get().is_some()
    }

    fn new(ids_of: Arc<dyn PositionIds>, runs: Vec<Range<u64>>) -> DeferredIds {
        DeferredIds {
            ids_of,
            runs: runs.into(),
            ids: Arc::default(),
        }
    }
}

/// Cuts an order into fetch windows, leaving out positions already delivered.
pub struct FetchSchedule {
    order: Box<dyn OrderSource>,
    window: usize,
    /// Windows of exactly `window` ids, not extended to a unit's end.
    exact: bool,
    /// Ids of the next window, at least, while the windows ramp up to `window` (see
    /// [`ramp_up`](Self::ramp_up)); `window` once they have.
    ramp: usize,
    /// Positions delivered before this schedule started (from a resume point).
    skip: BTreeSet<u64>,
}

impl FetchSchedule {
    /// Windows of at least `window` ids of `order` from its position (`exact`: exactly
    /// `window`, the last one shorter).
    pub fn new(order: Box<dyn OrderSource>, window: usize, exact: bool) -> FetchSchedule {
        FetchSchedule {
            order,
            window,
            exact,
            ramp: window,
            skip: BTreeSet::new(),
        }
    }

    /// Cuts windows of exactly `window` ids (`true`) or extends them to a unit's end.
    pub fn set_exact(&mut self, exact: bool) {
        self.exact = exact;
    }

    /// Makes the next window (the first, from where the order is: an epoch's start, a
    /// resume point) at least `first` ids and each one after it twice the last, up to
    /// `window`: the first batch then waits for its own reads only, not a whole window
    /// of them (a window is many random reads on a cold disk). Windows of exactly
    /// `window` ids ([`set_exact`](Self::set_exact): each one a batch) do not ramp.
    /// The ids and positions cut, in order, are the same either way; only where the
    /// windows end differs.
    pub fn ramp_up(&mut self, first: usize) {
        self.ramp = first.clamp(1, self.window.max(1));
    }

    /// Ids of the next window, at least (exactly, when `exact`).
    fn ramp_peek(&self) -> usize {
        if self.exact {
            self.window
        } else {
            self.ramp
        }
    }

    /// [`ramp_peek`](Self::ramp_peek), moving the ramp on to the window after.
    fn take_window_len(&mut self) -> usize {
        let len = self.ramp_peek();
        self.ramp = self.ramp.saturating_mul(2).min(self.window);
        len
    }

    /// Leaves out `positions` (those before the order's position change nothing).
    pub fn skip(&mut self, positions: impl IntoIterator<Item = u64>) {
        let from = self.order.position();
        self.skip
            .extend(positions.into_iter().filter(|&p| p >= from));
    }

    /// The positions left out and not yet passed.
    pub fn skipped(&self) -> impl Iterator<Item = u64> + '_ {
        self.skip.iter().copied()
    }

    /// Whether no window is left to cut: every position of the order is cut or skipped.
    pub(crate) fn is_exhausted(&self) -> bool {
        let left = self.order.len().saturating_sub(self.order.position());
        left <= self.skip.len() as u64
    }

    /// The order.
    pub fn order(&self) -> &dyn OrderSource {
        self.order.as_ref()
    }

    /// The next window as [`next_cut`](Self::next_cut) cuts it, but, from an order
    /// that computes ids from positions ([`OrderSource::next_positions`]), with its ids
    /// left to compute: `ids` empty, and the runs of consecutive positions to compute
    /// them from with the [`PositionIds`] returned.
    pub(crate) fn next_cut_deferred(&mut self) -> Option<(Cut, Option<DeferredIds>)> {
        loop {
            let Some((range, ids_of)) = self.order.next_positions(self.ramp_peek(), self.exact)
            else {
                return self.next_cut().map(|cut| (cut, None));
            };
            self.take_window_len();
            if range.is_empty() {
                return None;
            }
            if self.skip.is_empty() {
                let runs = vec![range.clone()];
                let cut = Cut {
                    ids: Vec::new(),
                    positions: range.collect(),
                };
                return Some((cut, Some(DeferredIds::new(ids_of, runs))));
            }
            let positions: Vec<u64> = range.filter(|p| !self.skip.remove(p)).collect();
            if positions.is_empty() {
                continue;
            }
            let mut runs: Vec<Range<u64>> = Vec::new();
            for &p in &positions {
                match runs.last_mut() {
                    Some(run) if run.end == p => run.end += 1,
                    _ => runs.push(p..p + 1),
                }
            }
            let cut = Cut {
                ids: Vec::new(),
                positions,
            };
            return Some((cut, Some(DeferredIds::new(ids_of, runs))));
        }
    }

    /// The next window; `None` at the end of the order.
    pub fn next_cut(&mut self) -> Option<Cut> {
        loop {
            let start = self.order.position();
            let len = self.take_window_len();
            let mut ids = Vec::with_capacity(len);
            let taken = if self.exact {
                self.order.next_batch(len, &mut ids)
            } else {
                self.order.next_window(len, &mut ids)
            };
            if taken == 0 {
                return None;
            }
            let mut positions: Vec<u64> = (start..start + ids.len() as u64).collect();
            if !self.skip.is_empty() {
                let keep: Vec<bool> = positions.iter().map(|p| !self.skip.remove(p)).collect();
                let mut k = keep.iter();
                ids.retain(|_| *k.next().unwrap_or(&true));
                let mut k = keep.iter();
                positions.retain(|_| *k.next().unwrap_or(&true));
                if ids.is_empty() {
                    continue;
                }
            }
            return Some(Cut { ids, positions });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An order that is the identity, in units of `unit` ids (for the schedule alone).
    struct Identity {
        len: u64,
        position: u64,
        unit: u64,
    }

    impl OrderSource for Identity {
        fn version(&self) -> u32 {
            0
        }
        fn len(&self) -> u64 {
            self.len
        }
        fn position(&self) -> u64 {
            self.position
        }
        fn seek(&mut self, position: u64) -> Result<()> {
            self.position = position;
            Ok(())
        }
        fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
            let mut end = (self.position + min as u64).min(self.len);
            end = end.div_ceil(self.unit) * self.unit;
            self.next_batch((end.min(self.len) - self.position) as usize, out)
        }
        fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
            let end = (self.position + max as u64).min(self.len);
            out.extend(self.position..end);
            let n = (end - self.position) as usize;
            self.position = end;
            n
        }
    }

    fn cuts(mut s: FetchSchedule) -> Vec<Vec<u64>> {
        std::iter::from_fn(|| s.next_cut())
            .map(|c| {
                assert_eq!(c.ids, c.positions); // the identity order
                c.ids
            })
            .collect()
    }

    #[test]
    fn windows_extend_to_units_unless_exact() {
        let order = || {
            Box::new(Identity {
                len: 10,
                position: 0,
                unit: 4,
            })
        };
        let extended = cuts(FetchSchedule::new(order(), 3, false));
        assert_eq!(
            extended,
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]
        );
        let exact = cuts(FetchSchedule::new(order(), 3, true));
        assert_eq!(
            exact,
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]
        );
    }

    #[test]
    fn skipped_positions_are_left_out_and_empty_windows_passed() {
        let mut order = Box::new(Identity {
            len: 9,
            position: 0,
            unit: 1,
        });
        order.seek(2).unwrap();
        let mut s = FetchSchedule::new(order, 3, true);
        s.skip([0, 3, 5, 6, 7]); // 0 is before the position: ignored
        assert_eq!(s.skipped().collect::<Vec<_>>(), vec![3, 5, 6, 7]);
        assert_eq!(cuts(s), vec![vec![2, 4], vec![8]]);
    }

    /// As [`Identity`], but an order whose ids are a function of the positions (as
    /// order version 2), so the schedule cuts it with ids left to compute.
    struct IdentityByPosition(Identity);

    struct IdentityIds;

    impl PositionIds for IdentityIds {
        fn compute_ids(&self, positions: Range<u64>, out: &mut Vec<u64>) {
            out.extend(positions);
        }
    }

    impl OrderSource for IdentityByPosition {
        fn version(&self) -> u32 {
            0
        }
        fn len(&self) -> u64 {
            self.0.len
        }
        fn position(&self) -> u64 {
            self.0.position
        }
        fn seek(&mut self, position: u64) -> Result<()> {
            self.0.seek(position)
        }
        fn next_window(&mut self, min: usize, out: &mut Vec<u64>) -> usize {
            self.0.next_window(min, out)
        }
        fn next_batch(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
            self.0.next_batch(max, out)
        }
        fn next_positions(
            &mut self,
            min: usize,
            exact: bool,
        ) -> Option<(Range<u64>, Arc<dyn PositionIds>)> {
            let start = self.0.position;
            let mut ids = Vec::new();
            if exact {
                self.0.next_batch(min, &mut ids);
            } else {
                self.0.next_window(min, &mut ids);
            }
            Some((start..self.0.position, Arc::new(IdentityIds)))
        }
    }

    /// The windows of `s` as `next_cut_deferred` cuts them, their ids computed.
    fn deferred_cuts(mut s: FetchSchedule) -> Vec<Vec<u64>> {
        std::iter::from_fn(|| s.next_cut_deferred())
            .map(|(cut, deferred)| {
                let ids = deferred.expect("ids left to compute").ids().to_vec();
                assert_eq!(ids, cut.positions); // the identity order
                ids
            })
            .collect()
    }

    fn identity(len: u64, position: u64, unit: u64) -> Box<Identity> {
        Box::new(Identity {
            len,
            position,
            unit,
        })
    }

    /// A schedule over `order` whose windows are cut by `next_cut_deferred` (ids
    /// computed from positions) when `deferred`, else by `next_cut`.
    fn schedule(order: Box<Identity>, window: usize, exact: bool, deferred: bool) -> FetchSchedule {
        if deferred {
            FetchSchedule::new(Box::new(IdentityByPosition(*order)), window, exact)
        } else {
            FetchSchedule::new(order, window, exact)
        }
    }

    fn sizes(windows: &[Vec<u64>]) -> Vec<usize> {
        windows.iter().map(Vec::len).collect()
    }

    #[test]
    fn windows_ramp_up_from_the_first_then_hold_the_window() {
        for deferred in [false, true] {
            let mut s = schedule(identity(100, 0, 1), 16, false, deferred);
            s.ramp_up(3);
            let windows = if deferred { deferred_cuts(s) } else { cuts(s) };
            assert_eq!(
                sizes(&windows),
                [3, 6, 12, 16, 16, 16, 16, 15],
                "{deferred}"
            );
            // The same ids in the same order: only where windows end differs.
            let all: Vec<u64> = windows.concat();
            assert_eq!(all, (0..100).collect::<Vec<_>>(), "{deferred}");
        }
        // A first window larger than the window is the window; 0 is one id.
        let mut s = FetchSchedule::new(identity(40, 0, 1), 16, false);
        s.ramp_up(1000);
        assert_eq!(sizes(&cuts(s)), [16, 16, 8]);
        let mut s = FetchSchedule::new(identity(40, 0, 1), 16, false);
        s.ramp_up(0);
        assert_eq!(sizes(&cuts(s)), [1, 2, 4, 8, 16, 9]);
    }

    #[test]
    fn ramped_windows_still_end_at_unit_ends() {
        let mut s = FetchSchedule::new(identity(60, 0, 4), 16, false);
        s.ramp_up(3);
        // At least 3 (to 4), at least 6 (4..10, to 12), at least 12 (12..24), 16 ...
        assert_eq!(
            cuts(s),
            vec![
                (0..4).collect::<Vec<u64>>(),
                (4..12).collect(),
                (12..24).collect(),
                (24..40).collect(),
                (40..56).collect(),
                (56..60).collect(),
            ]
        );
    }

    #[test]
    fn the_ramp_starts_where_the_order_is_after_a_seek() {
        for deferred in [false, true] {
            let mut order = identity(100, 0, 1);
            order.seek(70).unwrap();
            let mut s = schedule(order, 16, false, deferred);
            s.ramp_up(4);
            let windows = if deferred { deferred_cuts(s) } else { cuts(s) };
            assert_eq!(
                windows,
                vec![
                    (70..74).collect::<Vec<u64>>(),
                    (74..82).collect(),
                    (82..98).collect(),
                    (98..100).collect(),
                ],
                "{deferred}"
            );
        }
    }

    #[test]
    fn the_ramp_counts_positions_taken_with_a_skip_set() {
        for deferred in [false, true] {
            let mut order = identity(60, 0, 1);
            order.seek(10).unwrap();
            let mut s = schedule(order, 16, false, deferred);
            s.skip([11, 12].into_iter().chain(14..22).chain([30, 31]));
            s.ramp_up(4);
            // Positions 10..14, 14..22 (all delivered: passed) and 22..38, less those
            // delivered, then 16 at a time.
            let windows = if deferred { deferred_cuts(s) } else { cuts(s) };
            assert_eq!(
                windows,
                vec![
                    vec![10, 13],
                    (22..30).chain(32..38).collect::<Vec<u64>>(),
                    (38..54).collect(),
                    (54..60).collect(),
                ],
                "{deferred}"
            );
        }
    }

    #[test]
    fn exact_windows_do_not_ramp() {
        for deferred in [false, true] {
            let mut s = schedule(identity(40, 0, 4), 16, true, deferred);
            s.ramp_up(2);
            let windows = if deferred { deferred_cuts(s) } else { cuts(s) };
            assert_eq!(sizes(&windows), [16, 16, 8], "{deferred}");
        }
    }
}
