//! Offset tables from, and text indexes for, other TFRecord readers (DALI, the
//! `tfrecord` package): the file-reading half of [`crate::text_index`].

use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use tfrecord_lirs_format::text_index::{
    encode_text_index, parse_text_index, TextIndexEntry, TextIndexFormat,
};

use crate::scan::{check_first_instance, RecordScanner};
use crate::storage::table_files::{
    check_output_path, check_table_path, write_atomically, write_table,
};
use crate::storage::Storage;

/// An error about line `line` of the text index `index`.
fn at_line(index: &Path, line: u64, source: Error) -> Error {
    Error::text_index(index, line, source)
}

/// Line `line` of `index` does not fit `data` at byte `offset` (of `instance`, if known).
fn misfit(
    index: &Path,
    line: u64,
    data: &Path,
    instance: Option<u64>,
    offset: u64,
    reason: String,
) -> Error {
    at_line(
        index,
        line,
        Error::table(data, instance, Some(offset), reason),
    )
}

/// The instance offsets of `data`, taken from the text index at `index` and checked
/// against the file: the result is exactly the table [`crate::build_offset_table`]
/// builds, or an error.
///
/// Every record of `data` is read and both its CRCs checked, as `index` does. Each
/// entry must name a record start and that record's whole framed size, in file order.
/// Entries may list fillers (a DALI index of a padded file written by DALI's own
/// `tfrecord2idx` does); they are not instances and do not enter the table. Records
/// the index does not list must be fillers (an index written by
/// [`export_text_index`] leaves them out); an unlisted instance is an error, never
/// a silent skip. Errors about the index name its line.
pub fn offsets_from_text_index(
    data: &Path,
    index: &Path,
    format: TextIndexFormat,
) -> Result<Vec<u64>> {
    let text = std::fs::read(index).map_err(|e| Error::io(index, e))?;
    let entries = parse_text_index(format, &text).map_err(|e| {
        at_line(
            index,
            e.line,
            Error::invalid_argument(format!("not a {format} index: {}", e.reason)),
        )
    })?;
    let mut scanner = RecordScanner::open(data)?;
    let file_size = scanner.file_size();
    let mut offsets = Vec::with_capacity(entries.len());
    let mut next = entries.iter().peekable();
    // The line an unlisted record would have been on: the next entry's, or one past the end.
    let last_line = entries.last().map_or(0, |e| e.line);
    // The last record read: its offset.
    let mut previous = 0u64;
    loop {
        let position = scanner.position();
        let expected: Option<TextIndexEntry> = next.peek().copied().copied();
        if let Some(e) = expected.filter(|e| e.offset < position) {
            return Err(no_record_at(
                index,
                data,
                e,
                format!("no record of the file starts there: the record at byte {previous} runs to byte {position} (or the entries are out of file order)"),
            ));
        }
        let listed = expected.filter(|e| e.offset == position);
        let record = match scanner.next_record() {
            Ok(Some(record)) => record,
            Ok(None) => break,
            // Damage at a listed record is reported with its line.
            Err(err) => {
                return Err(match listed {
                    Some(e) => at_line(index, e.line, err),
                    None => err,
                })
            }
        };
        let filler = record.is_filler();
        previous = record.offset;
        match listed {
            Some(e) => {
                if e.size != record.framed_len {
                    return Err(misfit(
                        index,
                        e.line,
                        data,
                        (!filler).then_some(offsets.len() as u64),
                        e.offset,
                        format!(
                            "the index gives size {} for this record, which is {} bytes framed ({} bytes of payload + 16)",
                            e.size,
                            record.framed_len,
                            record.framed_len - tfrecord_lirs_format::framing::FRAMING_LEN
                        ),
                    ));
                }
                next.next();
            }
            None if !filler => {
                let (line, where_) = match expected {
                    Some(e) => (e.line, format!("line {} lists byte {}", e.line, e.offset)),
                    None => (last_line + 1, "the index ends before it".to_string()),
                };
                return Err(misfit(
                    index,
                    line,
                    data,
                    Some(offsets.len() as u64),
                    record.offset,
                    format!(
                        "the index does not list this instance ({where_}): an offset table built from it would silently skip it"
                    ),
                ));
            }
            None => {} // an unlisted filler
        }
        if !filler {
            if offsets.is_empty() {
                check_first_instance(data, Some(record.offset), file_size)?;
            }
            offsets.push(record.offset);
        }
    }
    if let Some(e) = next.next() {
        return Err(no_record_at(
            index,
            data,
            *e,
            format!(
                "the file ends at byte {} with no record starting there",
                scanner.file_size()
            ),
        ));
    }
    check_first_instance(data, offsets.first().copied(), scanner.file_size())?;
    Ok(offsets)
}

/// Entry `e` names byte `e.offset` of `data`, where no record starts: `why` says what
/// the file has instead.
fn no_record_at(index: &Path, data: &Path, e: TextIndexEntry, why: String) -> Error {
    misfit(
        index,
        e.line,
        data,
        None,
        e.offset,
        format!("the index lists a record at byte {}, but {why}", e.offset),
    )
}

/// Builds the offset table of `data` at `table` from a text index (see
/// [`offsets_from_text_index`]) and returns the instance count. Written atomically;
/// with `sync`, fsynced with its directory.
pub fn build_offset_table_from_text_index(
    data: &Path,
    index: &Path,
    format: TextIndexFormat,
    table: &Path,
    sync: bool,
) -> Result<u64> {
    check_table_path(data, table)?;
    let offsets = offsets_from_text_index(data, index, format)?;
    write_table(table, &offsets, sync)?;
    Ok(offsets.len() as u64)
}

/// The `(offset, framed size)` of every instance of `data`, in file order: fillers
/// left out, every record's CRCs checked.
pub fn instance_records(data: &Path) -> Result<Vec<(u64, u64)>> {
    instance_records_in(&Storage::local(), data)
}

/// [`instance_records`] of `data` through `storage` (a URL when `storage` has a file
/// system for it).
pub fn instance_records_in(storage: &Storage, data: &Path) -> Result<Vec<(u64, u64)>> {
    let mut scanner = RecordScanner::open_in(storage, data)?;
    let mut records = Vec::new();
    while let Some(record) = scanner.next_record()? {
        if !record.is_filler() {
            records.push((record.offset, record.framed_len));
        }
    }
    Ok(records)
}

/// Writes a text index of `data` at `out` for DALI or the `tfrecord` package (the
/// two formats are the same bytes, see [`crate::text_index`]): one `offset size` line
/// per instance, fillers left out, so a DALI pipeline reading a padded file through
/// it never sees a filler. Written atomically; with `sync`, fsynced with its
/// directory. Returns the instance count.
pub fn export_text_index(data: &Path, out: &Path, sync: bool) -> Result<u64> {
    export_text_index_in(&Storage::local(), data, out, sync)
}

/// [`export_text_index`] of `data` read through `storage` (a URL when `storage` has a
/// file system for it); the text index `out` is a local file (DALI and the `tfrecord`
/// package read it from local disk).
pub fn export_text_index_in(storage: &Storage, data: &Path, out: &Path, sync: bool) -> Result<u64> {
    if !storage.is_local(out) {
        return Err(Error::invalid_argument(format!(
            "{}: a text index is written to a local file (or to stdout): give a local path",
            out.display()
        )));
    }
    check_output_path(data, out, "index")?;
    let records = instance_records_in(storage, data)?;
    let text = encode_text_index(records.iter().copied());
    write_atomically(out, sync, |w| {
        w.write_all(text.as_bytes()).map_err(|e| Error::io(out, e))
    })?;
    Ok(records.len() as u64)
}
