//! The checks of an offset table against its data file that the
//! [`Reader`](crate::Reader) makes at open and on reads (and `verify` makes too).

use std::path::Path;

use crate::error::{Error, Remedy, Result};
use tfrecord_lirs_format::framing::{self, FrameError, Padding, HEADER_LEN};
use tfrecord_lirs_format::layout::BadSpan;

use crate::storage::local;
use crate::storage::table_files::FileLayout;
use crate::storage::ReadAt;

/// Most records [`walk_tail`] looks at: a tail of more fillers than this was not written
/// by a LIRS writer (which puts at most a few in a span), and is not checked further.
const MAX_TAIL_PROBES: usize = 4096;

/// Checks with small positioned reads that the bytes `[from, end)` of `src` are
/// padding records of kind `padding`; `on_read(at, len)` is told of each read. Returns
/// the offset and reason of the first record that is not, if any.
pub(crate) fn walk_tail(
    src: &dyn ReadAt,
    from: u64,
    end: u64,
    padding: Padding,
    mut on_read: impl FnMut(u64, u64),
) -> std::io::Result<Option<(u64, framing::TailError)>> {
    let mut probe = [0u8; framing::FILLER_PROBE_LEN];
    let mut at = from;
    for _ in 0..MAX_TAIL_PROBES {
        if at >= end {
            break;
        }
        let available = end - at;
        let len = (available as usize).min(probe.len());
        local::read_exact_at(src, &mut probe[..len], at)?;
        on_read(at, len as u64);
        match padding.framed_len(&probe[..len], available) {
            Ok(framed) => at += framed,
            Err(e) => return Ok(Some((at, e))),
        }
    }
    Ok(None)
}

/// The error for bytes at `at` inside instance `id`'s span that are not filler.
pub(crate) fn tail_error(
    (data, table): (&Path, &Path),
    id: u64,
    (start, end): (u64, u64),
    at: u64,
    e: framing::TailError,
) -> Error {
    match e {
        framing::TailError::Frame(frame @ FrameError::LengthCrc { .. }) => {
            Error::frame(data, Some(id), at, frame)
        }
        framing::TailError::Frame(frame) => Error::table(
            table,
            Some(id),
            Some(at),
            format!(
                "the bytes at {at} in instance {id}'s span [{start}, {end}) of {} are not a record that ends inside the span ({frame}): the table does not match the data file",
                data.display()
            ),
        ),
        framing::TailError::NotFiller { framed_len } => Error::table(
            table,
            Some(id),
            Some(at),
            format!(
                "byte {at} of {} starts a record of {framed_len} bytes that is not a filler, inside instance {id}'s span [{start}, {end}): the table does not index it (an entry missing, records appended after indexing, or another file's table)",
                data.display()
            ),
        )
        .with_remedy(Remedy::RebuildOrTrustTable {
            data: data.to_path_buf(),
            table: table.to_path_buf(),
        }),
    }
}

/// The rule for whether `offsets` (the table at `table`) can describe the data file
/// `data` of `size` bytes, read through `src`, before any instance's record is looked
/// at. The [`Reader`](crate::Reader) applies it at open and [`inspect_with`](crate::inspect_with) before its
/// scan, so the two never disagree on it:
///
/// - a compressed file is named as such, whatever its table;
/// - an empty table describes only an empty file, in both padding modes: a file with
///   bytes but no entries is a table built for another (or an empty) file, not zero
///   instances and padding (a LIRS writer writes no filler without an instance, and
///   trusted padding belongs to the instances around it);
/// - with [`Padding::Fillers`] the first entry is byte 0 (spans tile the file);
///   with [`Padding::Opaque`] it may be later, the bytes before it being padding;
/// - the last entry lies before the end of the file (of a table that has one at or
///   past it, the first such entry, found by bisection, is named).
///
/// `first_id` is the global id of the table's entry 0 (errors name global ids). The
/// table's `n` entries are read through `entry` (a few of them: O(log n)).
pub(crate) fn check_table_shape(
    (data, table): (&Path, &Path),
    (n, entry): (u64, &dyn Fn(u64) -> Result<u64>),
    size: u64,
    first_id: u64,
    src: &dyn ReadAt,
    padding: Padding,
) -> Result<()> {
    let mut head = [0u8; HEADER_LEN];
    let head_len = (size as usize).min(HEADER_LEN);
    if local::read_exact_at(src, &mut head[..head_len], 0).is_ok() {
        if let Some(kind) = framing::compressed_head(&head[..head_len]) {
            return Err(Error::compressed(data, kind));
        }
    }
    if n == 0 {
        if size > 0 {
            return Err(Error::table(
                table,
                None,
                None,
                format!(
                    "the table is empty but {} holds {size} bytes (its record at byte 0 is not indexed)",
                    data.display(),
                ),
            )
            .with_remedy(Remedy::IndexOrRepad {
                data: data.to_path_buf(),
                table: table.to_path_buf(),
            }));
        }
        return Ok(());
    }
    let first = entry(0)?;
    // Spans tile the file from byte 0. A table whose first entry is elsewhere (entries
    // missing at the front, another file's table) would silently shift every id; a
    // trusted table may start later, after padding.
    if first != 0 && padding == Padding::Fillers {
        let err = Error::table(
            table,
            Some(first_id),
            Some(first),
            format!(
                "instance 0 of {} must start at byte 0, but the table puts it at byte {first}: the table does not match the data file (entries missing at the front?)",
                data.display(),
            ),
        );
        return Err(match starts_with_records(src, first.min(size)) {
            true => err.with_remedy(Remedy::TrustTable),
            false => err,
        });
    }
    if entry(n - 1)? >= size {
        // Entries increase (or a read of them reports where they do not): the first
        // one past the end is where they cross it.
        let (mut lo, mut hi) = (0u64, n - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry(mid)? >= size {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return Err(past_end((data, table), size, first_id + lo, entry(lo)?));
    }
    Ok(())
}

/// Validates a table against its data file without reading the whole file:
/// [`check_table_shape`], then the first and the last instance's records, the padding
/// after the last one and, in a trusted table, before the first (the spans between
/// are checked when read).
pub(crate) fn check_table(
    data: &Path,
    table: &Path,
    layout: &FileLayout,
    src: &dyn ReadAt,
    padding: Padding,
) -> Result<()> {
    let entry = |i: u64| {
        layout
            .table
            .get(i)
            .map_err(|e| Error::io(&layout.table_path, e))
    };
    check_table_shape(
        (data, table),
        (layout.len(), &entry),
        layout.size,
        layout.first_id,
        src,
        padding,
    )?;
    let n = layout.len();
    if n == 0 {
        return Ok(());
    }
    for i in [0, n - 1] {
        let (start, end) = match layout.span(i).map_err(|e| Error::io(table, e))? {
            Ok(span) => span,
            Err(bad) => {
                let id = layout.first_id + i;
                return Err(bad_span_error((data, table), layout.size, id, bad));
            }
        };
        let mut header = [0u8; HEADER_LEN];
        let checked = local::read_exact_at(src, &mut header, start)
            .map_err(|_| FrameError::Truncated {
                needed: HEADER_LEN as u64,
                available: end - start,
            })
            .and_then(|_| framing::decode_header(&header))
            .and_then(|len| {
                let framed = framing::framed_len(len);
                if framed > end - start {
                    Err(FrameError::Truncated {
                        needed: framed,
                        available: end - start,
                    })
                } else {
                    Ok(framed)
                }
            });
        let framed = match checked {
            Ok(framed) => framed,
            Err(e) => {
                if start == 0 {
                    if let Some(kind) = framing::compressed_head(&header) {
                        return Err(Error::compressed(data, kind));
                    }
                }
                return Err(Error::table(
                    table,
                    Some(layout.first_id + i),
                    Some(start),
                    format!(
                        "does not match {}: no valid record of that instance's span starts at byte {start} ({e})",
                        data.display()
                    ),
                ));
            }
        };
        // The last span runs to the end of the file: records appended after indexing, or
        // entries missing at the end, would otherwise never be read or reported.
        if i == n - 1 {
            let id = layout.first_id + i;
            let found = walk_tail(src, start + framed, end, padding, |_, _| {})
                .map_err(|e| Error::io(data, e))?;
            if let Some((at, e)) = found {
                return Err(tail_error((data, table), id, (start, end), at, e));
            }
        }
    }
    // A trusted table's first instance may follow padding: it must be records too.
    let first = entry(0)?;
    if first > 0 {
        let found = walk_tail(src, 0, first, padding, |_, _| {}).map_err(|e| Error::io(data, e))?;
        if let Some((at, e)) = found {
            return Err(Error::table(
                table,
                Some(layout.first_id),
                Some(at),
                format!(
                    "the bytes at {at} of {}, before instance 0 at byte {}, are not padding records ({}): the table does not match the data file",
                    data.display(),
                    first,
                    match e {
                        framing::TailError::Frame(frame) => frame.to_string(),
                        framing::TailError::NotFiller { framed_len } =>
                            format!("a record of {framed_len} bytes that is not a filler"),
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// The error for instance `id`'s span (in data file `data` of `size` bytes, table
/// `table`) being one the table gets wrong: names the table, the instance whose entry
/// is wrong and its byte.
pub(crate) fn bad_span_error(
    (data, table): (&Path, &Path),
    size: u64,
    id: u64,
    bad: BadSpan,
) -> Error {
    match bad {
        BadSpan::NotIncreasing { start, next } => {
            let bad = tfrecord_lirs_format::table::not_increasing(id, start, next);
            Error::damaged_table_bytes(table, bad)
        }
        BadSpan::PastEnd { end } => past_end((data, table), size, id + 1, end),
        BadSpan::StartPastEnd { start } => past_end((data, table), size, id, start),
    }
}

/// The error for instance `id`'s entry, `offset`, lying at or past the end of `data`
/// (`size` bytes).
fn past_end((data, table): (&Path, &Path), size: u64, id: u64, offset: u64) -> Error {
    Error::table(
        table,
        Some(id),
        Some(offset),
        format!(
            "offset {offset} lies at or past the end of {} ({size} bytes): the table does not match the data file",
            data.display(),
        ),
    )
}

/// Whether the bytes `[0, end)` of `src` are whole records (any payload): the padding
/// another tool may put before a first instance.
fn starts_with_records(src: &dyn ReadAt, end: u64) -> bool {
    matches!(walk_tail(src, 0, end, Padding::Opaque, |_, _| {}), Ok(None))
}
