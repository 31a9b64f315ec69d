//! A batch read with positioned reads: neighbouring spans coalesced into ranged
//! reads, the spans decoded from the buffer they were read into.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::FrameError;

use crate::advice::Stamp;
use crate::read::batch::{Batch, SpanBuf};
use crate::read::stats::Tally;
use crate::storage::local;

use super::decode::SpanCrc;
use super::{BatchRead, Reader, CHECKED_READ_PIECE, MAX_COALESCED_READ, MAX_WHOLE_SPAN_READ};

impl Reader {
    /// Whether any file is read as one that does not fit in the page cache (see
    /// [`ReadAt::reads_cold`](crate::storage::ReadAt::reads_cold)): reads wait on the device, so
    /// more in flight pay.
    pub fn reads_cold(&self) -> bool {
        self.files.iter().any(|f| f.src.reads_cold())
    }

    /// [`read_batch`](Reader::read_batch) through positioned reads, one per run, into
    /// `out`'s buffer; payloads are served where they were read.
    pub(super) fn read_batch_copied(
        &self,
        ids: &[u64],
        out: &mut Batch,
        tally: &mut Tally,
        stop: &AtomicBool,
    ) -> Result<BatchRead> {
        let mut by_id: Vec<usize> = (0..ids.len()).collect();
        by_id.sort_unstable_by_key(|&i| ids[i]);
        out.starts.resize(ids.len(), 0);
        out.ends.resize(ids.len(), 0);
        let mut spans: Vec<(u64, u64)> = Vec::new();
        let mut k = 0;
        while k < by_id.len() {
            if stop.load(Ordering::Relaxed) {
                return Ok(BatchRead::Abandoned);
            }
            let first = ids[by_id[k]];
            self.check_id(first)?;
            let (f, i) = self.layout.locate(first);
            let (first_start, first_end) = self.span(f, i, first)?;
            if first_end - first_start > MAX_WHOLE_SPAN_READ
                || self.checks_in_pieces(f, first_start, first_end)
            {
                // A long span is read only as far as its record goes (see read_span_into),
                // on its own, straight into `out` (no copy of a large payload through a
                // scratch buffer), in pieces checked as they come; the same id repeated is
                // served from that one read.
                let (start, end) = (first_start, first_end);
                let (span_at, fed) = self.read_span_range(f, first, start, end, out, tally)?;
                let span = &out.buf[span_at..out.used];
                let payload = self.decode_read_span(f, first, start, end, span, fed.as_ref())?;
                let (at, stop) = (span_at + payload.start, span_at + payload.end);
                while k < by_id.len() && ids[by_id[k]] == first {
                    out.starts[by_id[k]] = at;
                    out.ends[by_id[k]] = stop;
                    k += 1;
                }
                continue;
            }
            let end = self.extend_run(ids, &by_id, k, (f, i), (first_start, first_end), &mut spans);
            let (start, stop) = (first_start, spans[spans.len() - 1].1);
            let len = self.span_len_usize(f, first, start, stop)?;
            out.align_for(start, len);
            let base = out.used;
            self.read_range(f, first, start, out.tail(len), tally)?;
            out.used += len;
            for &pos in &by_id[k..end] {
                let id = ids[pos];
                let (s, e) = spans[(id - first) as usize];
                let at = base + (s - start) as usize;
                let span = &out.buf[at..base + (e - start) as usize];
                let payload = self.decode_span(f, id, s, e, span)?;
                out.starts[pos] = at + payload.start;
                out.ends[pos] = at + payload.end;
            }
            k = end;
        }
        out.ids.extend_from_slice(ids);
        Ok(BatchRead::Complete)
    }

    /// The end (in `by_id`, the positions of `ids` by id) of the run that starts at
    /// `k`, instance `i` of file `f` with span `first`: it goes on while ids are
    /// consecutive, in this file, and within [`MAX_COALESCED_READ`]. `spans` is set to
    /// the spans of the run, in id order (each checked against its neighbour); the
    /// same id twice is read once, served twice.
    pub(super) fn extend_run(
        &self,
        ids: &[u64],
        by_id: &[usize],
        k: usize,
        (f, i): (usize, usize),
        first: (u64, u64),
        spans: &mut Vec<(u64, u64)>,
    ) -> usize {
        let first_id = ids[by_id[k]];
        let file_len = self.layout.files()[f].len();
        spans.clear();
        spans.push(first);
        let mut end = k + 1;
        while end < by_id.len() {
            let next = ids[by_id[end]];
            let prev = ids[by_id[end - 1]];
            if next == prev {
                end += 1;
                continue;
            }
            let local = i + (next - first_id) as usize;
            if next != prev + 1 || local as u64 >= file_len {
                break;
            }
            // A span the table gets wrong ends the run: its own read reports it, in
            // id order.
            let Ok(span) = self.span(f, local, next) else {
                break;
            };
            if span.1 - first.0 > MAX_COALESCED_READ {
                break;
            }
            spans.push(span);
            end += 1;
        }
        end
    }

    /// `stop - start` as a memory size; `id` names the error.
    pub(super) fn span_len_usize(&self, f: usize, id: u64, start: u64, stop: u64) -> Result<usize> {
        let len = stop - start;
        usize::try_from(len).map_err(|_| {
            Error::layout(
                &self.files[f].data_path,
                Some(id),
                start,
                format!("span of {len} bytes does not fit in memory"),
            )
        })
    }

    /// Appends the bytes `[start, stop)` of file `f` to `buf`; `id` names errors. With
    /// `crc`, they are read in pieces, each fed to it right after its read.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        stop: u64,
        buf: &mut impl SpanBuf,
        tally: &mut Tally,
        crc: &mut Option<SpanCrc>,
    ) -> Result<()> {
        let len = self.span_len_usize(f, id, start, stop)?;
        let dst = buf.extend(len);
        let Some(crc) = crc else {
            return self.read_range(f, id, start, dst, tally);
        };
        let file = &self.files[f];
        let mut at = start;
        for piece in dst.chunks_mut(CHECKED_READ_PIECE) {
            local::read_exact_at(&*file.src, piece, at)
                .map_err(|e| self.range_read_error(f, id, start, len as u64, e))?;
            crc.feed(at, piece);
            at += piece.len() as u64;
        }
        self.note(tally, f, start, len as u64);
        Ok(())
    }

    /// Fills `dst` with the bytes of file `f` from `start`; `id` names errors.
    pub(super) fn read_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        dst: &mut [u8],
        tally: &mut Tally,
    ) -> Result<()> {
        let len = dst.len() as u64;
        local::read_exact_at(&*self.files[f].src, dst, start)
            .map_err(|e| self.range_read_error(f, id, start, len, e))?;
        self.note(tally, f, start, len);
        Ok(())
    }

    /// The error for a failed read of the `len` bytes at `start` of file `f`.
    #[cold]
    #[inline(never)]
    pub(super) fn range_read_error(
        &self,
        f: usize,
        id: u64,
        start: u64,
        len: u64,
        e: std::io::Error,
    ) -> Error {
        let file = &self.files[f];
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            // What the file holds now from `start` (a read came up short: it is
            // shorter than at open), not what it held then.
            let now = Stamp::of(&self.storage, &file.data_path).map_or(file.src.size(), |s| s.len);
            let short = Error::frame(
                &file.data_path,
                Some(id),
                start,
                FrameError::Truncated {
                    needed: len,
                    available: now.saturating_sub(start),
                },
            );
            self.if_changed(f, short)
        } else {
            Error::io(&file.data_path, e)
        }
    }
}
