//! From an instance id to its bytes, one id at a time: the id checked, its span looked
//! up in the offset table (a bad entry named), and a single record read whole or in
//! pieces with its payload's CRC fed as the pieces arrive.

use super::*;

impl Reader {
    pub(super) fn check_id(&self, id: u64) -> Result<()> {
        if id >= self.layout.len() {
            return Err(Error::invalid_argument(format!(
                "instance id {id} out of range: the dataset has {} instances{}",
                self.layout.len(),
                match self.files.as_slice() {
                    [one] => format!(" ({})", one.data_path.display()),
                    _ => String::new(),
                }
            )));
        }
        Ok(())
    }

    /// `[start, end)` of the span of instance `i` of file `f` (global `id`), read from
    /// its table and checked against the next entry and the file size.
    pub(super) fn span(&self, f: usize, i: usize, id: u64) -> Result<(u64, u64)> {
        let file = &self.layout.files()[f];
        match file.span(i as u64) {
            Ok(Ok(span)) => Ok(span),
            Ok(Err(bad)) => Err(self.bad_span(f, id, bad)),
            Err(e) => Err(self.table_read_error(f, i, id, e)),
        }
    }

    /// The error for instance `i` of file `f` (global `id`) whose span, as the table
    /// gives it, cannot be one: names the table, the instance whose entry is wrong and
    /// its byte, with the advice a table that does not match its data file gets at open.
    #[cold]
    #[inline(never)]
    pub(super) fn bad_span(&self, f: usize, id: u64, bad: BadSpan) -> Error {
        let file = &self.files[f];
        let layout = &self.layout.files()[f];
        let (data, table) = (&file.data_path, &file.table_path);
        let err = bad_span_error((data, table), layout.size, id, bad);
        let err = advice::table_mismatch(&self.storage, (data, table), layout, &*file.src, err);
        self.if_changed(f, err)
    }

    /// The error for the table of file `f` failing to read instance `i`'s entries
    /// (global `id`): an I/O error, or the table shorter than at open.
    #[cold]
    #[inline(never)]
    pub(super) fn table_read_error(&self, f: usize, i: usize, id: u64, e: std::io::Error) -> Error {
        let table = &self.files[f].table_path;
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            let had = self.layout.files()[f].table.byte_len();
            let now = std::fs::metadata(table).map(|m| m.len()).ok();
            return Error::damaged_table(
                table,
                Some(id),
                Some(i as u64 * 8),
                format!(
                    "the table's entry for instance {id} (its byte {}) cannot be read: the table had {had} bytes at open{}; the table was truncated or replaced while it was read: rebuild it, then open the data again",
                    i as u64 * 8,
                    now.map_or_else(String::new, |now| format!(" and has {now} now")),
                ),
            );
        }
        Error::io(table, e)
    }

    /// The payload of instance `id` (spec §1: span from eq. 1, one positioned read).
    pub fn read(&self, id: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        let payload = self.read_span_into(id, &mut buf)?;
        buf.truncate(payload.end);
        buf.drain(..payload.start);
        Ok(buf)
    }

    /// Reads instance `id`'s whole span (of a span over 1 MiB, only its record) into `buf`
    /// (replacing its contents) and returns the range of the payload inside it. Avoids a
    /// copy on hot paths.
    pub fn read_span_into(&self, id: u64, buf: &mut Vec<u8>) -> Result<std::ops::Range<usize>> {
        self.check_id(id)?;
        let (f, i) = self.layout.locate(id);
        let (start, end) = self.span(f, i, id)?;
        buf.clear();
        let mut tally = Tally::default();
        let read = self.read_span_range(f, id, start, end, buf, &mut tally);
        self.add(tally);
        let (at, fed) = read?;
        let payload = self.decode_read_span(f, id, start, end, &buf[at..], fed.as_ref())?;
        Ok(at + payload.start..at + payload.end)
    }

    /// The reads of [`read_span_into`](Reader::read_span_into), into the empty `buf`;
    /// returns where in `buf` the span starts (a few bytes in, so that the copy out of the
    /// page cache is aligned like its source: see [`local::COPY_ALIGN`]), and, for a span
    /// long enough to be read in pieces ([`CHECKED_READ_MIN_SPAN`]), its payload's CRC
    /// fed on the way (check it with [`decode_read_span`](Reader::decode_read_span)).
    pub(super) fn read_span_range(
        &self,
        f: usize,
        id: u64,
        start: u64,
        end: u64,
        buf: &mut impl SpanBuf,
        tally: &mut Tally,
    ) -> Result<(usize, Option<SpanCrc>)> {
        let first_read = (end - start).min(MAX_WHOLE_SPAN_READ);
        let at = buf.align_for(start, usize::try_from(first_read).unwrap_or(0));
        let mut fed = self
            .checks_in_pieces(f, start, end)
            .then(|| SpanCrc::new(start));
        let crc = &mut fed;
        if end - start <= MAX_WHOLE_SPAN_READ {
            self.append_range(f, id, start, end, buf, tally, crc)?;
        } else {
            // A long span is bounded only by the table, and a damaged table can make it
            // as long as the file: read the record's first part, then only as much as its
            // header says (at most the span), never the whole span.
            let first = start + MAX_WHOLE_SPAN_READ;
            self.append_range(f, id, start, first, buf, tally, crc)?;
            let header: &[u8; HEADER_LEN] = buf.held()[at..at + HEADER_LEN]
                .try_into()
                .expect("12 bytes");
            // A bad header is reported by decode_span.
            if let Ok(len) = framing::decode_header(header) {
                let record_end = start.saturating_add(framing::framed_len(len));
                let stop = record_end.min(end);
                if stop > first {
                    self.append_range(f, id, first, stop, buf, tally, crc)?;
                }
                // The rest of the span was not read: check it is filler with a few
                // small reads (decode_span only checks a tail it holds).
                if record_end < end {
                    let file = &self.files[f];
                    let found = walk_tail(&*file.src, record_end, end, self.padding, |pos, len| {
                        self.note(tally, f, pos, len)
                    })
                    .map_err(|e| Error::io(&file.data_path, e))?;
                    if let Some((pos, e)) = found {
                        return Err(tail_error(
                            (&file.data_path, &file.table_path),
                            id,
                            (start, end),
                            pos,
                            e,
                        ));
                    }
                }
            }
        }
        Ok((at, fed))
    }

    /// Whether the span `[start, end)` of file `f` is read in pieces, its payload's CRC
    /// fed piece by piece ([`CHECKED_READ_MIN_SPAN`]).
    pub(super) fn checks_in_pieces(&self, f: usize, start: u64, end: u64) -> bool {
        self.verify_payload_crc
            && end - start >= CHECKED_READ_MIN_SPAN
            && self.files[f].reads_in_pieces
    }
}
