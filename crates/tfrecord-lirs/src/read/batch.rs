//! [`Batch`]: the payloads of a batch of instances, in one reused buffer.

use std::sync::{Arc, Mutex};

use tfrecord_lirs_format::framing;

use crate::storage::local;

/// Payloads of a batch, left in place in the buffer they were read into (no copy out of
/// the framing): read them with [`payload`](Batch::payload) or [`payloads`](Batch::payloads).
#[derive(Debug, Default, Clone)]
pub struct Batch {
    /// The instance ids, in batch order.
    pub ids: Vec<u64>,
    /// The bytes read, payloads in place among their framing (and filler); only
    /// `buf[..used]` is this batch's, the rest is kept to be reused without zeroing.
    pub(crate) buf: Vec<u8>,
    pub(crate) used: usize,
    /// Payload `i` is `buf[starts[i]..ends[i]]`.
    pub(crate) starts: Vec<usize>,
    pub(crate) ends: Vec<usize>,
}

impl Batch {
    /// Number of payloads.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Payload `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.buf.get(*self.starts.get(i)?..*self.ends.get(i)?)
    }

    /// Payload `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`; see [`get`](Batch::get).
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.buf[self.starts[i]..self.ends[i]]
    }

    /// The payloads, in batch order.
    pub fn payloads(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.starts
            .iter()
            .zip(&self.ends)
            .map(|(&s, &e)| &self.buf[s..e])
    }

    /// Total bytes of the payloads.
    pub fn payload_bytes(&self) -> usize {
        self.starts.iter().zip(&self.ends).map(|(s, e)| e - s).sum()
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.ids.clear();
        self.used = 0;
        self.starts.clear();
        self.ends.clear();
    }

    /// Appends payload `bytes` of instance `id`.
    pub fn push(&mut self, id: u64, bytes: &[u8]) {
        self.align_for(bytes.as_ptr() as u64, bytes.len());
        let at = self.used;
        self.tail(bytes.len()).copy_from_slice(bytes);
        self.used += bytes.len();
        self.ids.push(id);
        self.starts.push(at);
        self.ends.push(at + bytes.len());
    }

    /// Appends payload `bytes` of instance `id`, checking them against the record's
    /// `footer` as they are copied ([`framing::copy_check_payload`]): on a mismatch the
    /// error, and the batch is as before. `None` only if the copy could not be made.
    pub(crate) fn push_checked(
        &mut self,
        id: u64,
        bytes: &[u8],
        footer: &[u8; framing::FOOTER_LEN],
    ) -> Option<Result<(), framing::FrameError>> {
        self.align_for(bytes.as_ptr() as u64, bytes.len());
        let at = self.used;
        let checked = framing::copy_check_payload(bytes, footer, self.tail(bytes.len()))?;
        if checked.is_ok() {
            self.used += bytes.len();
            self.ids.push(id);
            self.starts.push(at);
            self.ends.push(at + bytes.len());
        }
        Some(checked)
    }

    /// Makes room for `len` bytes copied from `source` (a file offset, or an address),
    /// skipping up to [`local::COPY_ALIGN`]` - 1` bytes so that they land at the same place
    /// within a cache line as their source: misaligned copies are several times slower.
    pub(crate) fn align_for(&mut self, source: u64, len: usize) {
        let room = self.used + local::COPY_ALIGN + len;
        if self.buf.len() < room {
            self.buf.resize(room, 0);
        }
        self.used += local::copy_pad(self.buf.as_ptr() as usize + self.used, source);
    }

    /// `len` writable bytes at `used` (zero-filled only where the buffer grows).
    pub(crate) fn tail(&mut self, len: usize) -> &mut [u8] {
        let end = self.used + len;
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        &mut self.buf[self.used..end]
    }
}

/// A growing buffer a record's span is read into: a [`Batch`] (the span then stays
/// in place, its payload among its framing) or a plain `Vec<u8>`.
pub(crate) trait SpanBuf {
    /// Skips up to [`local::COPY_ALIGN`]` - 1` bytes so that the next byte lands at the
    /// same place within a cache line as `source` (a file offset), with room for `len`
    /// more; returns where the next byte goes.
    fn align_for(&mut self, source: u64, len: usize) -> usize;
    /// `len` more bytes at the end, held from now on, to be filled by the caller.
    fn extend(&mut self, len: usize) -> &mut [u8];
    /// The bytes held.
    fn held(&self) -> &[u8];
}

impl SpanBuf for Batch {
    fn align_for(&mut self, source: u64, len: usize) -> usize {
        Batch::align_for(self, source, len);
        self.used
    }

    fn extend(&mut self, len: usize) -> &mut [u8] {
        let at = self.used;
        self.tail(len);
        self.used += len;
        &mut self.buf[at..at + len]
    }

    fn held(&self) -> &[u8] {
        &self.buf[..self.used]
    }
}

impl SpanBuf for Vec<u8> {
    fn align_for(&mut self, source: u64, len: usize) -> usize {
        self.reserve(local::COPY_ALIGN + len);
        let at = self.len() + local::copy_pad(self.as_ptr() as usize + self.len(), source);
        self.resize(at, 0);
        at
    }

    fn extend(&mut self, len: usize) -> &mut [u8] {
        let base = self.len();
        self.resize(base + len, 0);
        &mut self[base..]
    }

    fn held(&self) -> &[u8] {
        self
    }
}

/// Batches kept for reuse by every fetch over one reader: the buffers one epoch's fetch
/// hands back are refilled by the next epoch's instead of being allocated again. A
/// fresh buffer costs a page fault and a zero fill per page before the first copy into
/// it, and with windows of hundreds of megabytes (batches of 1 MB records) every window
/// of a short epoch would be fresh.
#[derive(Debug, Default, Clone)]
pub(crate) struct SpareBatches(Arc<Mutex<Vec<Batch>>>);

impl SpareBatches {
    /// A kept batch (emptied), or a new one.
    pub(crate) fn take(&self) -> Batch {
        self.0
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    /// Batches kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().map(|v| v.len()).unwrap_or_default()
    }

    /// Keeps `batches` (emptied) while fewer than `keep` are kept; drops the others.
    pub(crate) fn give(&self, batches: impl IntoIterator<Item = Batch>, keep: usize) {
        if let Ok(mut v) = self.0.lock() {
            for mut b in batches {
                if v.len() >= keep {
                    break;
                }
                b.clear();
                v.push(b);
            }
        }
    }
}
