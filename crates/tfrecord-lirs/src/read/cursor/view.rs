//! [`BatchView`]: a batch of records as views into the fetch windows that hold them.

use std::sync::Arc;

use crate::read::fetch::Payloads;

/// A batch of records as views into the fetch windows that hold them (no copy): it
/// keeps those windows alive, and their buffers go back to the fetch for reuse when
/// the last batch (and the cursor) let go of them.
#[derive(Default)]
pub struct BatchView {
    windows: Vec<Arc<Payloads>>,
    /// (index in `windows`, slot in that window) of each record.
    records: Vec<(usize, usize)>,
}

impl BatchView {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Record `i`'s payload (`None` out of range). Panic-free by construction, as a
    /// per-record call from foreign code must be.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let &(w, slot) = self.records.get(i)?;
        self.windows.get(w)?.get(slot)?.ok()
    }

    /// Whether the windows this batch keeps alive hold only its own records: then a
    /// front end may hand its records out as views for as long as anyone likes (each
    /// pins nothing but itself), where otherwise it copies them.
    pub fn holds_only_its_records(&self) -> bool {
        let held: usize = self.windows.iter().map(|w| w.len()).sum();
        held == self.records.len()
    }

    /// The payloads in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Room for `records` records (a batch's records grow into it without moving).
    pub(super) fn with_capacity(records: usize) -> BatchView {
        BatchView {
            windows: Vec::with_capacity(2),
            records: Vec::with_capacity(records),
        }
    }

    pub(super) fn push(&mut self, window: &Arc<Payloads>, slot: usize) {
        self.push_run(window, slot..slot + 1);
    }

    /// Appends slots `slots` of `window`.
    pub(super) fn push_run(&mut self, window: &Arc<Payloads>, slots: std::ops::Range<usize>) {
        if !self.windows.last().is_some_and(|w| Arc::ptr_eq(w, window)) {
            self.windows.push(Arc::clone(window));
        }
        let w = self.windows.len() - 1;
        self.records.extend(slots.map(|slot| (w, slot)));
    }
}

impl std::fmt::Debug for BatchView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchView")
            .field("len", &self.len())
            .field("windows", &self.windows.len())
            .finish()
    }
}
