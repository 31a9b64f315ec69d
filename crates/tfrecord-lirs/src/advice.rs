//! The advice for a path that could not be opened, indexed or read as TFRecord data,
//! decided from what the path really is: a directory, an offset table, compressed
//! data, or a data file its table no longer matches (truncated, or rewritten since the
//! table was written), or one that changed while it was open. Every front end (CLI,
//! kernels, Python) gets the finding from here, and the remedy as a value
//! ([`Remedy`]) that it words in its own terms.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use byteorder::{ByteOrder, LittleEndian};

use crate::error::{Error, ErrorKind, Remedy};
use tfrecord_lirs_format::framing::{self, FRAMING_LEN, HEADER_LEN};
use tfrecord_lirs_format::table_path::default_table_path;

use crate::storage::local::read_exact_at;
use crate::storage::table_files::{open_table_of, FileLayout};
use crate::storage::ReadAt;
use crate::storage::Storage;

/// What a local path given as a TFRecord data file is instead, when that is the
/// mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misuse {
    /// A directory.
    Directory,
    /// An offset table: named `*.offsets`, or bytes that read as one (a first entry 0,
    /// then a record start past one framed record) rather than as a record.
    OffsetTable,
    /// A GZIP or ZLIB stream ("GZIP" or "ZLIB").
    Compressed(&'static str),
}

/// The bytes of a file's head that [`misuse`] looks at: a record header, or the first
/// two entries of an offset table.
const HEAD_LEN: usize = 16;

/// What `data` is instead of a TFRecord data file, if it is something else; `None`
/// for a file whose first bytes are a record header, an empty file with a data name,
/// a URL (not looked at: a read costs a request; `storage` tells it apart) or a path
/// that cannot be read (the caller's own error says why).
pub fn misuse(storage: &Storage, data: &Path) -> Option<Misuse> {
    let meta = storage.local_metadata(data)?;
    if meta.is_dir() {
        return Some(Misuse::Directory);
    }
    let mut head = [0u8; HEAD_LEN];
    let file = std::fs::File::open(data).ok()?;
    let len = crate::storage::local::read_full_at(&file, &mut head, 0).ok()?;
    let head = &head[..len];
    if let Some(header) = head.first_chunk::<HEADER_LEN>() {
        if framing::decode_header(header).is_ok() {
            return None;
        }
    }
    if let Some(kind) = framing::compressed_head(head) {
        return Some(Misuse::Compressed(kind));
    }
    let named_table = data.as_os_str().as_encoded_bytes().ends_with(b".offsets");
    if named_table || reads_as_table(head, meta.len()) {
        return Some(Misuse::OffsetTable);
    }
    None
}

/// Whether a file of `size` bytes starting with `head` looks like an offset table: whole
/// entries, the first 0 and the second at least one framed record further.
fn reads_as_table(head: &[u8], size: u64) -> bool {
    if !size.is_multiple_of(8) || head.len() < HEAD_LEN {
        return false;
    }
    LittleEndian::read_u64(&head[..8]) == 0 && LittleEndian::read_u64(&head[8..16]) >= FRAMING_LEN
}

/// The error for `data` given as a TFRecord data file when it is `misuse` instead.
pub fn misuse_error(data: &Path, misuse: Misuse) -> Error {
    let d = data.display();
    match misuse {
        Misuse::Directory => Error::not_a_data_file(
            data,
            format!(
                "is a directory, not a TFRecord file: give the files in it (a list, or a pattern such as `{d}/*.tfrecord*`; Python: tf.io.gfile.glob)"
            ),
        ),
        Misuse::OffsetTable => {
            let name = data.as_os_str().to_string_lossy();
            let of = match name.strip_suffix(".offsets") {
                Some(file) if !file.is_empty() => format!(" (of {file})"),
                _ => String::new(),
            };
            Error::not_a_data_file(
                data,
                format!(
                    "is an offset table{of}, not a TFRecord data file: give the data files only (a pattern that matched the tables too? match the data files, e.g. `*.tfrecord*[0-9]`, or leave out `*.offsets`)"
                ),
            )
        }
        Misuse::Compressed(kind) => Error::compressed(data, kind),
    }
}

/// `err`, which came of opening, indexing or reading `data` as a TFRecord data file,
/// replaced by the real mistake when `data` is not one (a directory, an offset table,
/// or compressed data, which comes before any advice about its table); else `err`.
pub fn diagnose(storage: &Storage, data: &Path, err: Error) -> Error {
    match misuse(storage, data) {
        Some(m) => misuse_error(data, m),
        None => err,
    }
}

/// [`diagnose`] for an input that may be compressed (`pad` decompresses it): only a
/// directory or an offset table is a mistake; `Ok` otherwise.
pub(crate) fn check_pad_input(storage: &Storage, data: &Path) -> crate::error::Result<()> {
    match misuse(storage, data) {
        Some(m @ (Misuse::Directory | Misuse::OffsetTable)) => Err(misuse_error(data, m)),
        _ => Ok(()),
    }
}

/// A file's size and modification time, as it was when opened or as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
}

impl Stamp {
    /// `path`'s stamp now (`None` for a URL or a path that cannot be stat'ed).
    pub fn of(storage: &Storage, path: &Path) -> Option<Stamp> {
        let stat = storage.stat(path)?;
        Some(Stamp {
            len: stat.len,
            modified: stat.modified,
        })
    }
}

/// The data file that `table` names as its own (`<file>.offsets`), when that is
/// another file than `data` (another file name: a table kept in another directory
/// under `data`'s name, or under its stem when no file has that name, is `data`'s), and
/// whether it exists (local files only: a URL is
/// not looked at, a look costs a request).
pub(crate) fn table_of_another_file(
    storage: &Storage,
    data: &Path,
    table: &Path,
) -> Option<(PathBuf, bool)> {
    if default_table_path(data) == table {
        return None;
    }
    let name = table.as_os_str().to_string_lossy();
    let owner = PathBuf::from(name.strip_suffix(".offsets").filter(|o| !o.is_empty())?);
    let exists = storage.local_metadata(&owner).is_some_and(|m| m.is_file());
    // The same file under another name (a link) owns this table too.
    let same_file = || match (std::fs::canonicalize(&owner), std::fs::canonicalize(data)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    // `plain.offsets` beside no `plain` is `plain.tfrecord`'s by the stem: data's own.
    let stem_of_data = || match (owner.file_name(), data.file_name()) {
        (Some(o), Some(d)) => d
            .to_string_lossy()
            .starts_with(&format!("{}.", o.to_string_lossy())),
        _ => false,
    };
    if owner.file_name() == data.file_name()
        || (exists && same_file())
        || (!exists && stem_of_data())
    {
        return None;
    }
    Some((owner, exists))
}

/// `err` about `table`, named for data file `owner` (which `exists` or not), given
/// for `data`, with that finding and the remedy that never writes `data`'s table over
/// `owner`'s: `data`'s own table at `data`'s own table path.
fn another_files_table(
    err: Error,
    data: &Path,
    table: &Path,
    (owner, exists): (&Path, bool),
) -> Error {
    let (is, by_name) = match exists {
        true => ("is the table of", " (by its name)"),
        false => ("is named as the table of", ""),
    };
    err.with_finding(format!(
        "{} {is} another data file, {}{by_name}, not of {}",
        table.display(),
        owner.display(),
        data.display(),
    ))
    .with_remedy(Remedy::OwnTable {
        data: data.to_path_buf(),
        own: default_table_path(data),
    })
}

/// `err`, from opening `table` as the offset table of `data`, with the one rule for
/// its kind ([`table_mismatch`] before the table could be opened): [`diagnose`] first;
/// then a table named for another file is the caller's mistake (InvalidArgument),
/// with advice that never writes over that file's table; missing, it stays NotFound,
/// with that advice when the other file exists (the usual advice would write `data`'s
/// table where that file's belongs).
pub(crate) fn table_open_error(storage: &Storage, data: &Path, table: &Path, err: Error) -> Error {
    let err = diagnose(storage, data, err);
    if err.file() != Some(table) || err.finding().is_some() {
        return err;
    }
    let Some((owner, exists)) = table_of_another_file(storage, data, table) else {
        return err;
    };
    let another = |err: Error| another_files_table(err, data, table, (&owner, exists));
    match err.kind() {
        ErrorKind::NotFound if exists => another(
            Error::table(table, None, None, "no such offset table").with_kind(ErrorKind::NotFound),
        ),
        ErrorKind::InvalidArgument | ErrorKind::DataLoss => {
            another(err.with_kind(ErrorKind::InvalidArgument))
        }
        _ => err,
    }
}

/// The one rule for the kind of an error that the table at `table` does not describe
/// data file `data` (see [`ErrorKind`]), decided by what the files show, with the
/// advice that fits: first whether what was passed is a mistake ([`diagnose`]: not a
/// TFRecord data file; or a table named for another file: InvalidArgument), then [`stale_table`] (the data file changed since its table was
/// written: DataLoss). `layout` is the table as opened, `src` the data file.
pub(crate) fn table_mismatch(
    storage: &Storage,
    (data, table): (&Path, &Path),
    layout: &FileLayout,
    src: &dyn ReadAt,
    err: Error,
) -> Error {
    if let Some(m) = misuse(storage, data) {
        return misuse_error(data, m);
    }
    if err.file() == Some(table) && err.finding().is_none() {
        if let Some((owner, exists)) = table_of_another_file(storage, data, table) {
            let err = err.with_kind(ErrorKind::InvalidArgument);
            return another_files_table(err, data, table, (&owner, exists));
        }
    }
    stale_table((data, table), layout, src, err)
}

/// `err` (a table that does not match data file `data` of `size` bytes, its table's
/// last entry at `last_offset`) with the advice that fits, decided by what the bytes
/// show ([`judge_change`]), never by which side is shorter: a file cut short (every
/// entry the file still reaches frames a record, and the file ends inside a record or
/// before the table's last entry) was truncated (restore it, or rebuild the table if
/// it is complete as it is); a file whose bytes at the table's entries are not
/// records was rewritten or replaced (rebuild the table). A file whose framing still
/// matches but was modified after its table was rewritten in place (a local file's
/// modification time tells). Each of these is changed data: of kind DataLoss. Local
/// files and URLs are judged alike, through `src` (the data, opened) and `layout` (its
/// table); a few small reads, on an error path only. Without any sign `err` is
/// returned as it is (the table may belong to another tool; its message says so).
/// Callers go through [`table_mismatch`], which looks for a mistake first.
fn stale_table(
    (data, table): (&Path, &Path),
    layout: &FileLayout,
    src: &dyn ReadAt,
    err: Error,
) -> Error {
    let (size, last_offset) = (layout.size, last_entry(layout));
    if err.finding().is_some()
        || !matches!(err.kind(), ErrorKind::InvalidArgument | ErrorKind::DataLoss)
    {
        return err;
    }
    let (d, t) = (data.display(), table.display());
    let (data, table) = (data.to_path_buf(), table.to_path_buf());
    let truncated = |how: String| {
        (
            format!("{d} was truncated after its table was written ({how})"),
            Remedy::RestoreOrRebuildTable {
                data: data.clone(),
                table: table.clone(),
            },
        )
    };
    let rewritten = |how: String| {
        (
            format!(
                "{d} was rewritten after its table {t} was written, or replaced by another file ({how})"
            ),
            Remedy::RebuildTable {
                data: data.clone(),
                table: table.clone(),
            },
        )
    };
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // What the bytes show is changed data, whatever kind the check that met it gave.
    let changed = |(finding, remedy): (String, Remedy)| {
        err.clone()
            .with_kind(ErrorKind::DataLoss)
            .with_finding(finding)
            .with_remedy(remedy)
    };
    match judge_change(layout, src) {
        Some(Change::Truncated { size, entry, at }) => {
            changed(truncated(match entry {
                Some((id, end)) => format!(
                    "it ends at byte {size}, inside the record of instance {id}, which the table puts at byte {at} and whose framing runs to byte {end}"
                ),
                None => format!(
                    "it ends at byte {size}, where a record ends, before the table's last record at byte {at}"
                ),
            }))
        }
        Some(Change::Replaced { id, at, why }) => changed(rewritten(format!(
            "the bytes at byte {at}, where the table puts instance {id}, {why}"
        ))),
        Some(Change::None) => match (modified(&data), modified(&table)) {
            (Some(d_time), Some(t_time)) if d_time > t_time => changed(rewritten(
                "its records are where the table says, but it was modified since".into(),
            )),
            _ => err,
        },
        // Bytes that cannot be read: the sizes are all there is.
        None => match last_offset.filter(|&last| last >= size) {
            Some(last) => changed(truncated(format!(
                "it ends at byte {size}, the table's last record starts at byte {last}"
            ))),
            None => err,
        },
    }
}

/// What the bytes of a data file show about how it changed since its table was written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Cut short at byte `size`: inside the record of `entry` (its id and framing end),
    /// or at a record's end before the table's last record (`entry` `None`, `at` that
    /// record's start).
    Truncated {
        size: u64,
        entry: Option<(u64, u64)>,
        at: u64,
    },
    /// The bytes at entry `id` (byte `at`) are not the record the table says: `why`.
    Replaced { id: u64, at: u64, why: String },
    /// Every entry the file reaches frames a record that fits: no sign in the framing.
    None,
}

/// Entries [`judge_change`] looks at, spread over the table (the first and last ones
/// always): each costs one 12-byte read, on an error path only.
const JUDGED_ENTRIES: u64 = 64;

/// The last entry of `layout`'s table, if it has one.
fn last_entry(layout: &FileLayout) -> Option<u64> {
    layout
        .len()
        .checked_sub(1)
        .and_then(|i| layout.table.get(i).ok())
}

/// What the data file read through `src` and its table (`layout`) show ([`Change`]);
/// `None` when they cannot be read.
fn judge_change(layout: &FileLayout, src: &dyn ReadAt) -> Option<Change> {
    let entry = |i: u64| layout.table.get(i).ok();
    let size = src.size();
    let n = layout.len();
    let last = entry(n.checked_sub(1)?)?;
    // Entries the file still reaches: those below `size` (entries increase).
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if entry(mid)? < size {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let reached = lo;
    let step = reached.div_ceil(JUDGED_ENTRIES).max(1);
    let mut ids: Vec<u64> = (0..reached).step_by(step as usize).collect();
    ids.extend(reached.checked_sub(1));
    ids.dedup();
    let mut last_end = None;
    for &id in &ids {
        let at = entry(id)?;
        if at + HEADER_LEN as u64 > size {
            // The file ends inside this record's header.
            return Some(Change::Truncated {
                size,
                entry: Some((id, at + HEADER_LEN as u64)),
                at,
            });
        }
        let mut header = [0u8; HEADER_LEN];
        read_exact_at(src, &mut header, at).ok()?;
        let len = match framing::decode_header(&header) {
            Ok(len) => len,
            Err(e) => {
                return Some(Change::Replaced {
                    id,
                    at,
                    why: format!("are not a record header ({e})"),
                })
            }
        };
        let end = at.saturating_add(len).saturating_add(FRAMING_LEN);
        if let Some(next) = (id + 1 < reached).then(|| entry(id + 1)).flatten() {
            if end > next {
                return Some(Change::Replaced {
                    id,
                    at,
                    why: format!(
                        "frame a record running to byte {end}, past the table's next entry at byte {next}"
                    ),
                });
            }
        }
        last_end = Some((id, end, at));
    }
    Some(match last_end {
        Some((id, end, at)) if end > size => Change::Truncated {
            size,
            entry: Some((id, end)),
            at,
        },
        _ if reached < n => Change::Truncated {
            size,
            entry: None,
            at: last,
        },
        _ => Change::None,
    })
}

/// [`diagnose`], then for an error that the table at `table` does not match data file
/// `data`, the advice of whether `data` was truncated or rewritten since the table was
/// written, with the command that rebuilds it (for callers that check a table without
/// opening a [`Reader`](crate::Reader), such as `verify`; `Reader::open` does this
/// itself).
pub fn explain(storage: &Storage, data: &Path, table: &Path, err: Error) -> Error {
    let err = diagnose(storage, data, err);
    if matches!(err.kind(), ErrorKind::NotFound) {
        return err;
    }
    // A URL is not looked at (a look costs a request).
    if !storage.is_local(data) || !storage.is_local(table) {
        return err;
    }
    let Ok(src) = storage.open_unmapped(data) else {
        return err;
    };
    let Ok(table_entries) = open_table_of(storage, table, Some(data)) else {
        return err;
    };
    let layout = FileLayout {
        table: table_entries,
        table_path: table.to_path_buf(),
        size: src.size(),
        first_id: 0,
    };
    table_mismatch(storage, (data, table), &layout, &*src, err)
}

/// `err`, from reading `data` (opened with stamp `opened`, which is now `now`),
/// replaced by the error that the file changed underneath when the stamps differ:
/// truncated (shorter now), grown, or rewritten (same size, another modification
/// time). `err` is kept as the cause in the message.
pub(crate) fn changed_underneath(
    data: &Path,
    table: &Path,
    opened: Stamp,
    now: Stamp,
    err: Error,
) -> Error {
    if opened == now {
        return err;
    }
    let how = if now.len < opened.len {
        "truncated"
    } else if now.len > opened.len {
        "grown"
    } else {
        "rewritten"
    };
    let (instance, offset) = (err.instance(), err.offset());
    let reason = format!(
        "the file changed underneath: it was {} bytes when opened and is {} bytes now ({how}{}); {}",
        opened.len,
        now.len,
        if opened.modified != now.modified {
            ", modified since"
        } else {
            ""
        },
        strip_location(&err),
    );
    Error::changed(data, instance, offset, reason).with_remedy(Remedy::Reopen {
        data: data.to_path_buf(),
        table: table.to_path_buf(),
    })
}

/// `err`'s message without its leading location (`path: instance i at byte o: `),
/// which the changed-underneath error states itself.
fn strip_location(err: &Error) -> String {
    let text = err.to_string();
    let mut prefix = match err.file() {
        Some(p) => p.display().to_string(),
        None => return text,
    };
    if let Some(i) = err.instance() {
        prefix.push_str(&format!(": instance {i}"));
    }
    if let Some(o) = err.offset() {
        prefix.push_str(&format!(" at byte {o}"));
    }
    prefix.push_str(": ");
    text.strip_prefix(&prefix)
        .map_or(text.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        framing::encode_record(payload, &mut out);
        out
    }

    #[test]
    fn names_directories_tables_and_compressed_data() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d.tfrecord");
        std::fs::write(&data, record(b"one")).unwrap();
        assert_eq!(misuse(&Storage::local(), &data), None);
        assert_eq!(
            misuse(&Storage::local(), dir.path()),
            Some(Misuse::Directory)
        );
        let e = misuse_error(dir.path(), Misuse::Directory);
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(
            e.to_string()
                .contains("is a directory, not a TFRecord file"),
            "{e}"
        );

        // A table, by its name and by its bytes.
        let table = dir.path().join("d.tfrecord.offsets");
        std::fs::write(&table, crate::encode_table(&[0])).unwrap();
        assert_eq!(misuse(&Storage::local(), &table), Some(Misuse::OffsetTable));
        let renamed = dir.path().join("t.bin");
        std::fs::write(&renamed, crate::encode_table(&[0, 19, 40])).unwrap();
        assert_eq!(
            misuse(&Storage::local(), &renamed),
            Some(Misuse::OffsetTable)
        );
        let e = misuse_error(&table, Misuse::OffsetTable);
        assert!(
            e.to_string().contains("is an offset table (of ")
                && e.to_string()
                    .contains("d.tfrecord), not a TFRecord data file"),
            "{e}"
        );
        // An empty data file is data.
        let empty = dir.path().join("empty.tfrecord");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(misuse(&Storage::local(), &empty), None);

        // GZIP, before any talk of tables.
        let gz = dir.path().join("d.gz");
        std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4]).unwrap();
        assert_eq!(
            misuse(&Storage::local(), &gz),
            Some(Misuse::Compressed("GZIP"))
        );
        let missing = Error::not_a_data_file(&gz, "stand-in");
        assert!(diagnose(&Storage::local(), &gz, missing)
            .to_string()
            .contains("GZIP-compressed"));
        assert!(check_pad_input(&Storage::local(), &gz).is_ok());
        assert!(check_pad_input(&Storage::local(), &table).is_err());
    }

    /// `n` records of `len` bytes each (payload byte `fill`), and their offsets.
    fn records(n: usize, len: usize, fill: u8) -> (Vec<u8>, Vec<u64>) {
        let (mut bytes, mut offsets) = (Vec::new(), Vec::new());
        for _ in 0..n {
            offsets.push(bytes.len() as u64);
            framing::encode_record(&vec![fill; len], &mut bytes);
        }
        (bytes, offsets)
    }

    fn set_modified(path: &Path, secs: u64) {
        let when = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn stale_tables_are_told_apart_by_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        let table = default_table_path(&data);
        let (bytes, offsets) = records(10, 100, b'a');
        std::fs::write(&table, tfrecord_lirs_format::table::encode_table(&offsets)).unwrap();
        let advice = |contents: &[u8], data_secs: u64| {
            std::fs::write(&data, contents).unwrap();
            set_modified(&table, 1_000_000);
            set_modified(&data, data_secs);
            let base = Error::not_a_data_file(&table, "does not match");
            let e = explain(&Storage::local(), &data, &table, base);
            // What the bytes show is changed data; no sign leaves the kind as it was.
            let kind = match e.finding() {
                Some(_) => ErrorKind::DataLoss,
                None => ErrorKind::InvalidArgument,
            };
            assert_eq!(e.kind(), kind, "{e}");
            let (data, table) = (data.clone(), table.clone());
            let remedy = match e.to_string().contains("truncated after") {
                true => Remedy::RestoreOrRebuildTable { data, table },
                false => Remedy::RebuildTable { data, table },
            };
            assert_eq!(e.remedy().is_some(), e.finding().is_some(), "{e}");
            if let Some(r) = e.remedy() {
                assert_eq!(r, &remedy, "{e}");
            }
            e.finding().unwrap_or_default().to_string()
        };
        // Cut by 50 bytes after indexing (newer than its table): truncated, inside the
        // last record, not "rewritten".
        let cut = advice(&bytes[..bytes.len() - 50], 2_000_000);
        assert!(
            cut.contains("was truncated after its table was written"),
            "{cut}"
        );
        assert!(cut.contains("inside the record of instance 9"), "{cut}");
        // Cut at a record's end: truncated too.
        let boundary = advice(&bytes[..offsets[5] as usize], 2_000_000);
        assert!(boundary.contains("was truncated after"), "{boundary}");
        // Replaced by a smaller file of other records: rewritten, not "truncated".
        let (smaller, _) = records(4, 150, b'b');
        let replaced = advice(&smaller, 2_000_000);
        assert!(
            replaced.contains("was rewritten after its table"),
            "{replaced}"
        );
        assert!(replaced.contains("instance 0"), "{replaced}");
        // Replaced by a larger one (even one older than the table): rewritten.
        let (larger, _) = records(30, 90, b'c');
        let larger = advice(&larger, 500_000);
        assert!(larger.contains("was rewritten after its table"), "{larger}");
        // The same framing, a payload changed after the table: rewritten in place.
        let mut changed = bytes.clone();
        changed[20] ^= 1;
        let in_place = advice(&changed, 2_000_000);
        assert!(in_place.contains("modified since"), "{in_place}");
        // No sign either way: no advice.
        assert_eq!(advice(&changed, 500_000), "");
    }

    #[test]
    fn changes_underneath_say_how() {
        let data = Path::new("d");
        let table = Path::new("d.offsets");
        let t0 = Some(SystemTime::UNIX_EPOCH);
        let t1 = Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(5));
        let opened = Stamp {
            len: 1000,
            modified: t0,
        };
        let frame = || {
            Error::frame(
                data,
                Some(3),
                600,
                framing::FrameError::Truncated {
                    needed: 500,
                    available: 0,
                },
            )
        };
        let same = changed_underneath(data, table, opened, opened, frame());
        assert!(same
            .to_string()
            .starts_with("d: instance 3 at byte 600: truncated"));
        let now = Stamp {
            len: 500,
            modified: t1,
        };
        let e = changed_underneath(data, table, opened, now, frame());
        assert_eq!(
            (e.kind(), e.instance(), e.offset()),
            (ErrorKind::DataLoss, Some(3), Some(600))
        );
        assert_eq!(
            e.to_string(),
            "d: instance 3 at byte 600: the file changed underneath: it was 1000 bytes when opened and is 500 bytes now (truncated, modified since); truncated record: needs 500 bytes, only 0 available: open it again (a new reader), and if it was rewritten on purpose, rebuild its table d.offsets first"
        );
        assert_eq!(
            e.remedy(),
            Some(&Remedy::Reopen {
                data: data.into(),
                table: table.into()
            })
        );
        let same_size = Stamp {
            len: 1000,
            modified: t1,
        };
        let e = changed_underneath(data, table, opened, same_size, frame());
        assert!(e.to_string().contains("(rewritten, modified since)"), "{e}");
    }
}
