//! The shared core of every strategy: a span's record decoded and checked (its
//! framing, its CRCs, the padding after it), and a read error explained (a file
//! changed underneath, a table that does not fit).

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::{self, FrameError, HEADER_LEN};

use crate::advice::{self, Stamp};
use crate::read::table_check::tail_error;

use super::Reader;

impl Reader {
    /// Checks the record at the front of `span` (instance `id` at byte `start` of file `f`,
    /// its span ending at byte `end`) and returns the payload's range within `span`.
    ///
    /// When `span` holds the whole span, what follows the record must be filler: a
    /// second instance there is one the table does not index, and returning only the
    /// first would silently skip it. (A span read only in part has its tail checked by
    /// [`read_span_range`](Reader::read_span_range).)
    pub(super) fn decode_span(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        span: &[u8],
    ) -> Result<std::ops::Range<usize>> {
        // Only a failure looks at the file again (a stat per read would cost the small
        // records' hot path).
        self.decode_span_checking(f, id, start, end, span, self.verify_payload_crc)
    }

    /// [`decode_span`](Reader::decode_span) of a span read by
    /// [`read_span_range`](Reader::read_span_range): with the payload's CRC fed as it was
    /// read (`fed`), that CRC is checked instead of computing it again, with the same
    /// checks in the same order (header, length, payload CRC, then what follows).
    pub(super) fn decode_read_span(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        span: &[u8],
        fed: Option<&SpanCrc>,
    ) -> Result<std::ops::Range<usize>> {
        // Fed from the span's first byte on, past a header whose length CRC held.
        let Some(fed) = fed.filter(|fed| fed.payload.is_some()) else {
            return self.decode_span(f, id, start, end, span);
        };
        // A frame that does not decode is reported by decode_span_checking below.
        if let Ok(frame) = framing::decode_record(span, false) {
            // The frame is the one the feed decoded (the same first bytes), and it lies
            // inside the span read, so the feed covered its whole payload.
            let at = HEADER_LEN + frame.payload.len();
            let Some(footer) = span
                .get(at..at + framing::FOOTER_LEN)
                .and_then(|b| <&[u8; framing::FOOTER_LEN]>::try_from(b).ok())
            else {
                return self.decode_span(f, id, start, end, span);
            };
            if let Err(e) = fed.crc.check(footer) {
                let e = Error::frame(&self.files[f].data_path, Some(id), start, e);
                return Err(self.if_changed(f, e));
            }
        }
        self.decode_span_checking(f, id, start, end, span, false)
    }

    /// [`decode_span`](Reader::decode_span), checking the payload's CRC only if
    /// `check_payload_crc` (a caller that copies the payload checks it in that copy).
    pub(super) fn decode_span_checking(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        span: &[u8],
        check_payload_crc: bool,
    ) -> Result<std::ops::Range<usize>> {
        match self.decode_span_as_opened(f, id, start, end, span, check_payload_crc) {
            Ok(payload) => Ok(payload),
            Err(e) => Err(self.if_changed(f, e)),
        }
    }

    /// `err`, from reading file `f`, as the error that the file changed underneath if
    /// its size or modification time is not what it was at open.
    #[cold]
    #[inline(never)]
    pub(super) fn if_changed(&self, f: usize, err: Error) -> Error {
        let file = &self.files[f];
        match (file.opened, Stamp::of(&self.storage, &file.data_path)) {
            (Some(opened), Some(now)) => {
                advice::changed_underneath(&file.data_path, &file.table_path, opened, now, err)
            }
            _ => err,
        }
    }

    /// [`decode_span`](Reader::decode_span) without the look at the file on failure.
    #[inline]
    pub(super) fn decode_span_as_opened(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        span: &[u8],
        check_payload_crc: bool,
    ) -> Result<std::ops::Range<usize>> {
        let file = &self.files[f];
        let span_end = start + span.len() as u64;
        let frame = framing::decode_record(span, check_payload_crc).map_err(|e| match e {
            // A record overrunning a span that ends before the end of the file: the
            // table's next offset is wrong, not the data.
            FrameError::Truncated { needed, .. }
                if span_end < self.layout.files()[f].size && needed > HEADER_LEN as u64 =>
            {
                Error::table(
                    &file.table_path,
                    Some(id),
                    Some(start),
                    format!(
                        "the record at byte {start} of {} needs {needed} bytes but the table gives its span as {} bytes (the next entry is byte {span_end}): the table does not match the data file",
                        file.data_path.display(),
                        span.len()
                    ),
                )
            }
            e => Error::frame(&file.data_path, Some(id), start, e),
        })?;
        if framing::is_filler(frame.payload) {
            return Err(Error::table(
                &file.table_path,
                Some(id),
                Some(start),
                format!(
                    "points at a filler record in {}: the table does not match the data file",
                    file.data_path.display()
                ),
            ));
        }
        if span_end == end {
            // `framed_len <= span.len()`, checked by decode_record.
            let tail = &span[frame.framed_len as usize..];
            if let Err((at, e)) = framing::check_padding_tail(tail, self.padding) {
                let at = start + frame.framed_len + at as u64;
                return Err(tail_error(
                    (&file.data_path, &file.table_path),
                    id,
                    (start, end),
                    at,
                    e,
                ));
            }
        }
        Ok(HEADER_LEN..HEADER_LEN + frame.payload.len())
    }
}

/// The payload CRC of one record, fed as its span is read piece by piece from its
/// first byte on ([`CHECKED_READ_MIN_SPAN`](super::CHECKED_READ_MIN_SPAN)).
pub(super) struct SpanCrc {
    /// The file offset of the span (the record's header).
    start: u64,
    /// The payload's file range, once the header was read and its length CRC held.
    payload: Option<(u64, u64)>,
    crc: framing::PayloadCrc,
}

impl SpanCrc {
    pub(super) fn new(start: u64) -> SpanCrc {
        SpanCrc {
            start,
            payload: None,
            crc: framing::PayloadCrc::new(),
        }
    }

    /// `bytes`, just read from file offset `at` (the pieces in order, back to back).
    pub(super) fn feed(&mut self, at: u64, bytes: &[u8]) {
        if at == self.start {
            let header = bytes
                .get(..HEADER_LEN)
                .and_then(|h| <&[u8; HEADER_LEN]>::try_from(h).ok());
            if let Some(Ok(len)) = header.map(framing::decode_header) {
                let from = self.start + HEADER_LEN as u64;
                self.payload = Some((from, from.saturating_add(len)));
            }
        }
        let Some((from, to)) = self.payload else {
            return;
        };
        let end = at + bytes.len() as u64;
        let (lo, hi) = (from.max(at), to.min(end));
        if lo < hi {
            self.crc
                .update(&bytes[(lo - at) as usize..(hi - at) as usize]);
        }
    }
}
