//! Offset table files on storage: opened without being read whole, read whole, and
//! written atomically (the format itself, parsing and encoding, is
//! [`tfrecord_lirs_format::table`]'s); and the [`Layout`] of the tables opened.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian};

use crate::error::{Error, Result};
use tfrecord_lirs_format::table::{check_increasing, check_whole_entries};

use crate::storage::kill_point::kill_point;
use crate::storage::local::OffsetTable;
use crate::storage::{Place, Storage};

/// Where every instance of every file is, the tables read where they lie
/// ([`OffsetTable`]): the format's layout over this storage's tables.
pub type Layout = tfrecord_lirs_format::layout::Layout<OffsetTable>;

/// One data file's part of a [`Layout`].
pub(crate) type FileLayout = tfrecord_lirs_format::layout::FileLayout<OffsetTable>;

/// Opens the table at `path` through `storage` without reading it whole (see
/// [`OffsetTable`]): a local table is mapped (or read on demand), a URL's is read in
/// blocks on demand (one ranged read per block, a few blocks cached). Checks at open what costs O(1): the table is whole entries; a table
/// small enough to be held in memory is also checked whole for increasing entries. The
/// entries of a larger one are checked as they are used. `data` (if known) is named
/// in the missing-table hint.
pub(crate) fn open_table_of(
    storage: &Storage,
    path: &Path,
    data: Option<&Path>,
) -> Result<OffsetTable> {
    let table = match storage.place(path)? {
        Place::Local(local) => {
            OffsetTable::open_local(local).map_err(|e| Error::table_io(path, data, e))?
        }
        Place::Remote(fs, url) => {
            let src = fs.open_read(url).map_err(|e| match e.kind() {
                std::io::ErrorKind::Unsupported | std::io::ErrorKind::InvalidInput => {
                    crate::storage::remote::error(path, e)
                }
                _ => Error::table_io(path, data, e),
            })?;
            // A table a local tier maps is read from that map, as a local one.
            let src = match OffsetTable::mapped_source(src) {
                Ok(table) => return finish_open(path, table),
                Err(src) => src,
            };
            if src.size() <= crate::storage::local::table_in_memory_max_bytes() {
                let mut bytes = vec![0u8; src.size() as usize];
                crate::storage::local::read_exact_at(&*src, &mut bytes, 0)
                    .map_err(|e| Error::table_io(path, data, e))?;
                OffsetTable::in_memory(parse_table(path, &bytes)?)
            } else {
                OffsetTable::read_in_blocks(src)
            }
        }
    };
    finish_open(path, table)
}

/// The checks of [`open_table_of`] that cost O(1) (and, for a table in memory, the
/// whole table's).
fn finish_open(path: &Path, table: OffsetTable) -> Result<OffsetTable> {
    let damaged = |e| Error::damaged_table_bytes(path, e);
    check_whole_entries(table.byte_len()).map_err(damaged)?;
    if table.is_in_memory() {
        if let Some(entries) = table.view() {
            check_increasing(&entries).map_err(damaged)?;
        }
    }
    Ok(table)
}

/// `bytes` of the offset table at `path` as its entries: a multiple of 8 bytes,
/// strictly increasing (docs/FORMAT.md §3); the error names the table.
pub fn parse_table(path: &Path, bytes: &[u8]) -> Result<Vec<u64>> {
    tfrecord_lirs_format::table::parse_table(bytes).map_err(|e| Error::damaged_table_bytes(path, e))
}

/// Reads and parses the table at `path`. A missing table is an error of kind
/// `NotFound` whose remedy is to build it ([`Remedy::BuildTable`](crate::Remedy)), for
/// the data file `path` names without `.offsets`.
pub fn read_table(path: &Path) -> Result<Vec<u64>> {
    read_table_of(&Storage::local(), path, None)
}

/// [`read_table`] for the table of data file `data` (named in the missing-table hint).
pub fn read_table_for(data: &Path, table: &Path) -> Result<Vec<u64>> {
    read_table_for_in(&Storage::local(), data, table)
}

/// [`read_table_for`] through `storage`: either path may be a URL when `storage` has a
/// file system for it (the table is fetched whole, once: for tools such as the CLI,
/// which use every entry; readers open tables without reading them whole instead).
pub fn read_table_for_in(storage: &Storage, data: &Path, table: &Path) -> Result<Vec<u64>> {
    read_table_of(storage, table, Some(data))
}

/// [`read_table`] through `storage`; `data` (if known) is named in the missing-table
/// hint.
pub(crate) fn read_table_of(
    storage: &Storage,
    path: &Path,
    data: Option<&Path>,
) -> Result<Vec<u64>> {
    let bytes = storage.read_all(path).map_err(|e| match e {
        crate::storage::remote::ReadAllError::Io(e) => Error::table_io(path, data, e),
        crate::storage::remote::ReadAllError::Other(e) => e,
    })?;
    parse_table(path, &bytes)
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A temporary file in `path`'s directory (so it can be renamed over `path`),
/// deleted if dropped. Created with mode 0o666 minus the umask, like any new file
/// (tempfile's own default, 0600, would survive the rename).
pub(crate) fn temp_file_beside(path: &Path) -> Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent_dir(path);
    tempfile::Builder::new()
        .prefix(".lirs-tmp-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| {
            // tempfile's message names its random file name, which means nothing to
            // the user: name the directory, with the OS's word on it if it has one.
            let why = match std::fs::metadata(dir) {
                Err(dir_error) => dir_error,
                Ok(_) => std::io::Error::from(e.kind()),
            };
            Error::io(
                path,
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create a file in {}: {why}", dir.display()),
                ),
            )
        })
}

/// fsyncs the directory holding `path`, so that a rename into it (or a removal from
/// it) survives a power failure.
pub(crate) fn sync_parent_dir(path: &Path) -> Result<()> {
    let dir = parent_dir(path);
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Whether `a` and `b` name the same file: the same (device, inode) if both exist,
/// else the same canonical path (a file that does not exist yet is placed by its
/// directory's canonical path). Catches `x` vs `./x`, symlinks and hard links.
pub(crate) fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return (ma.dev(), ma.ino()) == (mb.dev(), mb.ino());
    }
    let canonical = |p: &Path| -> Option<PathBuf> {
        if let Ok(c) = p.canonicalize() {
            return Some(c);
        }
        Some(parent_dir(p).canonicalize().ok()?.join(p.file_name()?))
    };
    match (canonical(a), canonical(b)) {
        (Some(ca), Some(cb)) => ca == cb,
        _ => a == b,
    }
}

/// Refuses to write the table of `data` to `table` when they are the same file (the
/// table would replace the data).
pub(crate) fn check_table_path(data: &Path, table: &Path) -> Result<()> {
    check_output_path(data, table, "table")
}

/// Refuses to write `what` (a table, an index) about `data` to `out` when they are the
/// same file (it would replace the data).
pub(crate) fn check_output_path(data: &Path, out: &Path, what: &str) -> Result<()> {
    if same_file(data, out) {
        return Err(Error::invalid_argument(format!(
            "the {what} path {} is the data file {}: writing the {what} would replace the data",
            out.display(),
            data.display()
        )));
    }
    Ok(())
}

/// The buffer of [`write_atomically`]'s writer, and the piece [`write_table_with`]
/// encodes at a time (a multiple of 8 and of `io::COPY_ALIGN`).
const TABLE_WRITE_BUFFER: usize = 1 << 20;

/// Writes a file atomically: a temporary file in the same directory, renamed over
/// `path` only once complete, so a crash never leaves a partial file under `path`.
/// With `sync`, the file is fsynced before the rename and its directory after it, so
/// once this returns the file survives a power failure. Nothing is renamed if `fill`
/// fails; its error is returned as it is (an I/O error writing names `path`).
pub(crate) fn write_atomically<T>(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut BufWriter<&std::fs::File>) -> Result<T>,
) -> Result<T> {
    let tmp = temp_file_beside(path)?;
    let filled = {
        let mut w = BufWriter::with_capacity(TABLE_WRITE_BUFFER, tmp.as_file());
        let filled = fill(&mut w)?;
        w.flush().map_err(|e| Error::io(path, e))?;
        filled
    };
    kill_point("table-written");
    if sync {
        tmp.as_file().sync_all().map_err(|e| Error::io(path, e))?;
    }
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    kill_point("table-renamed");
    if sync {
        sync_parent_dir(path)?;
    }
    Ok(filled)
}

/// Writes `offsets` as a table file at `path`, atomically: a temporary file beside it,
/// renamed over `path` once complete, so never a partial table under `path`. With `sync`, the table and its directory are
/// fsynced, so it is durable once this returns. A URL is written through its file
/// system (see [`crate::remote::Durability`]) when `storage` has one.
pub fn write_table(path: &Path, offsets: &[u64], sync: bool) -> Result<()> {
    write_table_in(&Storage::local(), path, offsets, sync)
}

/// [`write_table`] through `storage`.
pub(crate) fn write_table_in(
    storage: &Storage,
    path: &Path,
    offsets: &[u64],
    sync: bool,
) -> Result<()> {
    write_table_with(storage, path, sync, |add| add(offsets))
}

/// [`write_table`] for a table whose entries come in order, in pieces, while it is
/// written: `fill` hands each piece to the function it gets (whose errors name
/// `path`). Nothing is renamed over `path` if `fill` fails; its error is returned.
pub(crate) fn write_table_with<T>(
    storage: &Storage,
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut dyn FnMut(&[u64]) -> Result<()>) -> Result<T>,
) -> Result<T> {
    // Encoded a piece at a time into one reused buffer: a buffer for the whole table
    // would be fresh memory, one page fault per 4 KiB of it (measured: ~10 ms of
    // `index`'s serial tail for 2 M entries). Whole pieces are the writer's buffer's
    // size, so they go to the file directly, each from where the copy into the page
    // cache is cache-line aligned, which on some CPUs is several times faster (see
    // `io::COPY_ALIGN`).
    if let Place::Remote(fs, _) = storage.place(path)? {
        // Through the URL's file system, whole, as atomically as its scheme allows.
        let mut bytes = Vec::new();
        let filled = fill(&mut |entries: &[u64]| {
            bytes.extend(entries.iter().flat_map(|offset| offset.to_le_bytes()));
            Ok(())
        })?;
        crate::storage::remote::write_whole(&**fs, path, &bytes)?;
        return Ok(filled);
    }
    let mut buf = vec![0u8; TABLE_WRITE_BUFFER + crate::storage::local::COPY_ALIGN];
    let at = crate::storage::local::copy_pad(buf.as_ptr() as usize, 0);
    let piece = &mut buf[at..at + TABLE_WRITE_BUFFER];
    write_atomically(path, sync, |w| {
        let mut used = 0;
        let filled = fill(&mut |mut entries: &[u64]| {
            kill_point("table-entries");
            while !entries.is_empty() {
                let room = (TABLE_WRITE_BUFFER - used) / 8;
                let (now, rest) = entries.split_at(room.min(entries.len()));
                LittleEndian::write_u64_into(now, &mut piece[used..used + now.len() * 8]);
                used += now.len() * 8;
                if used == TABLE_WRITE_BUFFER {
                    w.write_all(piece).map_err(|e| Error::io(path, e))?;
                    used = 0;
                }
                entries = rest;
            }
            Ok(())
        })?;
        w.write_all(&piece[..used])
            .map_err(|e| Error::io(path, e))?;
        Ok(filled)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfrecord_lirs_format::table::encode_table;

    #[test]
    fn table_round_trip_is_exactly_n_le_u64() {
        let offsets = [0u64, 17, 4096, 1 << 40];
        let bytes = encode_table(&offsets);
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[8..16], &17u64.to_le_bytes());
        let p = Path::new("t");
        assert_eq!(parse_table(p, &bytes).unwrap(), offsets);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.offsets");
        write_table(&path, &offsets, true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert_eq!(read_table(&path).unwrap(), offsets);
        // Nothing but the table is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
