//! What a fetch hands out: a [`Window`] and its [`Payloads`], left where the fetch
//! threads read them.

use crate::error::{Error, Result};

use crate::read::batch::{Batch, SpareBatches};

/// One window of an epoch order, as fetched.
#[derive(Debug)]
pub struct Window {
    /// The ids of the window, in order.
    pub ids: Vec<u64>,
    /// Their positions in the epoch order (ascending).
    pub positions: Vec<u64>,
    /// Their payloads (each read or failed on its own), or the error that failed the
    /// whole window (always [`ErrorKind::Internal`](crate::ErrorKind::Internal)).
    pub result: Result<Payloads>,
}

/// The payloads of one window where the fetch threads put them (no copy into one
/// buffer); slot `i` is the window's `i`-th id: its payload, or the error reading it.
pub struct Payloads {
    pub(super) parts: Parts,
    /// (slot, error) of each slot whose read failed, by slot; usually empty.
    pub(super) failed: Vec<(usize, Error)>,
    pub(super) spares: Spares,
}

/// Where the payloads of a window are.
pub(super) enum Parts {
    /// One batch holding the window's payloads in window order (read on the
    /// consumer's thread).
    InOrder(Batch),
    /// Batches read by the fetch threads; slot `i` is `batches[slots[i].0]`, payload
    /// `slots[i].1`.
    Scattered {
        batches: Vec<Batch>,
        slots: Vec<(usize, usize)>,
    },
}

impl Payloads {
    /// Number of slots (the window's ids).
    pub fn len(&self) -> usize {
        match &self.parts {
            Parts::InOrder(batch) => batch.len(),
            Parts::Scattered { slots, .. } => slots.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slot `i`: the payload of the window's `i`-th id, or the error reading that
    /// instance (naming its file, id and byte); `None` if `i` is out of range.
    pub fn get(&self, i: usize) -> Option<std::result::Result<&[u8], &Error>> {
        if !self.failed.is_empty() {
            if let Ok(k) = self.failed.binary_search_by_key(&i, |&(slot, _)| slot) {
                return Some(Err(&self.failed[k].1));
            }
        }
        let payload = match &self.parts {
            Parts::InOrder(batch) => batch.get(i),
            Parts::Scattered { batches, slots } => {
                let &(p, j) = slots.get(i)?;
                batches.get(p)?.get(j)
            }
        };
        payload.map(Ok)
    }

    /// The slots that failed, in window order, with their errors.
    pub fn failures(&self) -> impl ExactSizeIterator<Item = (usize, &Error)> + '_ {
        self.failed.iter().map(|(slot, e)| (*slot, e))
    }

    /// The payloads copied into one [`Batch`] with `ids`, the window's ids; the error of
    /// the first failed slot if any failed.
    pub fn into_batch(mut self, ids: &[u64]) -> Result<Batch> {
        if !self.failed.is_empty() {
            return Err(self.failed.swap_remove(0).1);
        }
        let mut out = Batch::default();
        for (i, &id) in ids.iter().enumerate() {
            match self.get(i) {
                Some(Ok(payload)) => out.push(id, payload),
                _ => break,
            }
        }
        Ok(out)
    }
}

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payloads")
            .field("len", &self.len())
            .field("failed", &self.failed.len())
            .finish()
    }
}

impl Drop for Payloads {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.parts, Parts::InOrder(Batch::default())) {
            Parts::InOrder(batch) => self.spares.give([batch]),
            Parts::Scattered { batches, .. } => self.spares.give(batches),
        }
    }
}

/// Used batches, handed back by the consumer so the threads reuse their buffers: the
/// reader's [`SpareBatches`], shared with every other fetch over it (the next epoch's
/// too), of which this fetch keeps up to `keep` (more would only hold memory).
#[derive(Clone)]
pub(super) struct Spares {
    pub(super) pool: SpareBatches,
    pub(super) keep: usize,
}

impl Spares {
    pub(super) fn take(&self) -> Batch {
        self.pool.take()
    }

    pub(super) fn give(&self, batches: impl IntoIterator<Item = Batch>) {
        self.pool.give(batches, self.keep);
    }
}
