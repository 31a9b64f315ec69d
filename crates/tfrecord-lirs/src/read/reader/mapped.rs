//! A batch read from memory-mapped files: each record decoded in place, its payload
//! copied once, table entries and records ahead prefetched.

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::{self};
use tfrecord_lirs_format::layout::span_of;

use crate::read::batch::Batch;
use crate::read::stats::Tally;
use crate::storage::local::{self, TableView};

use super::{
    Reader, FUSED_COPY_MIN_SPAN, PREFETCH_RECORDS_AHEAD, PREFETCH_RECORD_BYTES,
    PREFETCH_TABLE_AHEAD,
};

impl Reader {
    /// A view of every file's map, if every file is mapped now (a leased map is
    /// revoked when a writer comes: reads then go through `pread`).
    pub(super) fn map_views(&self) -> Option<Vec<crate::storage::MapView<'_>>> {
        self.files.iter().map(|f| f.src.map_view()).collect()
    }

    /// [`read_batch`](Reader::read_batch) from memory-mapped files: each record is
    /// decoded in place and its payload copied once, into `out`. The order of `ids` is
    /// known, so table entries and records ahead are prefetched.
    pub(super) fn read_batch_mapped(
        &self,
        ids: &[u64],
        maps: &[crate::storage::MapView<'_>],
        out: &mut Batch,
        tally: &mut Tally,
    ) -> Result<()> {
        for &id in ids {
            self.check_id(id)?;
        }
        let single = self.layout.files().len() == 1;
        let entry = |id: u64| -> (usize, usize) {
            if single {
                (0, id as usize)
            } else {
                self.layout.locate(id)
            }
        };
        // Each table as a slice for this batch where it is mapped (or in memory).
        let tables: Vec<Option<TableView<'_>>> =
            self.layout.files().iter().map(|f| f.table.view()).collect();
        let prefetch_entry = |id: u64| {
            let (f, i) = entry(id);
            if let Some(entry) = tables[f].as_deref().and_then(|t| t.get(i)) {
                local::prefetch(entry);
            }
        };
        // A span whose entries are not valid is not prefetched (its read reports it).
        let span_at = |f: usize, i: usize| -> Option<(u64, u64)> {
            let table = tables[f].as_deref()?;
            span_of(table, self.layout.files()[f].size, i).ok()
        };
        // Table entries of the first records, then records ahead, then decode.
        for &id in ids.iter().take(PREFETCH_TABLE_AHEAD) {
            prefetch_entry(id);
        }
        let prefetch_record = |id: u64| {
            let (f, i) = entry(id);
            let Some((start, end)) = span_at(f, i) else {
                return;
            };
            let map: &[u8] = &maps[f];
            let stop = end.min(start + PREFETCH_RECORD_BYTES);
            let mut at = start & !63;
            while at < stop {
                if let Some(byte) = map.get(at as usize) {
                    local::prefetch(byte);
                }
                at += 64;
            }
        };
        for &id in ids.iter().take(PREFETCH_RECORDS_AHEAD) {
            prefetch_record(id);
        }
        for (k, &id) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(k + PREFETCH_TABLE_AHEAD) {
                prefetch_entry(ahead);
            }
            if let Some(&ahead) = ids.get(k + PREFETCH_RECORDS_AHEAD) {
                prefetch_record(ahead);
            }
            let (f, i) = entry(id);
            let (start, end) = match tables[f].as_deref() {
                Some(table) => span_of(table, self.layout.files()[f].size, i)
                    .map_err(|bad| self.bad_span(f, id, bad))?,
                None => self.span(f, i, id)?,
            };
            let map: &[u8] = &maps[f];
            // The span was checked against the file size, so it is in the map; `get`
            // keeps a broken invariant an error, not a panic.
            let span = map.get(start as usize..end as usize).ok_or_else(|| {
                Error::table(
                    &self.files[f].table_path,
                    Some(id),
                    Some(start),
                    format!("span [{start}, {end}) is outside the mapped file"),
                )
            })?;
            // A long payload's CRC is checked in the copy (read from memory once).
            let fused = self.verify_payload_crc && end - start >= FUSED_COPY_MIN_SPAN;
            // Checked here unless the copy checks it, or payload CRCs are not checked.
            let check_here = self.verify_payload_crc && !fused;
            let payload = self.decode_span_checking(f, id, start, end, span, check_here)?;
            // Only the record is touched, not the filler after it.
            self.note(tally, f, start, (payload.end + framing::FOOTER_LEN) as u64);
            if !fused {
                out.push(id, &span[payload]);
                continue;
            }
            let footer = span
                .get(payload.end..payload.end + framing::FOOTER_LEN)
                .and_then(|b| <&[u8; framing::FOOTER_LEN]>::try_from(b).ok());
            let checked = footer.and_then(|footer| out.push_checked(id, &span[payload], footer));
            match checked {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    let file = &self.files[f];
                    let e = Error::frame(&file.data_path, Some(id), start, e);
                    return Err(self.if_changed(f, e));
                }
                None => {
                    return Err(Error::internal(format!(
                    "instance {id}: the decoded record at byte {start} has no footer in its span"
                )))
                }
            }
        }
        Ok(())
    }
}
