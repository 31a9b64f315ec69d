//! [`Batch`]: the payloads of a batch of instances, in one reused buffer.

use crate::{format, io};

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
    /// `footer` as they are copied ([`format::copy_check_payload`]): on a mismatch the
    /// error, and the batch is as before. `None` only if the copy could not be made.
    pub(crate) fn push_checked(
        &mut self,
        id: u64,
        bytes: &[u8],
        footer: &[u8; format::FOOTER_LEN],
    ) -> Option<Result<(), format::FrameError>> {
        self.align_for(bytes.as_ptr() as u64, bytes.len());
        let at = self.used;
        let checked = format::copy_check_payload(bytes, footer, self.tail(bytes.len()))?;
        if checked.is_ok() {
            self.used += bytes.len();
            self.ids.push(id);
            self.starts.push(at);
            self.ends.push(at + bytes.len());
        }
        Some(checked)
    }

    /// Makes room for `len` bytes copied from `source` (a file offset, or an address),
    /// skipping up to [`io::COPY_ALIGN`]` - 1` bytes so that they land at the same place
    /// within a cache line as their source: misaligned copies are several times slower.
    pub(crate) fn align_for(&mut self, source: u64, len: usize) {
        let room = self.used + io::COPY_ALIGN + len;
        if self.buf.len() < room {
            self.buf.resize(room, 0);
        }
        self.used += io::copy_pad(self.buf.as_ptr() as usize + self.used, source);
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
