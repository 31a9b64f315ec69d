//! A data file opened without its offset table ([`ReaderOptions::index_missing`]): the
//! table is built by the scan `index` makes (the same misuse checks, every record's
//! CRCs), once per file however many threads and processes open it at once, and kept
//! where it can be (docs/FORMAT.md §2, "Tables built on open"):
//!
//! 1. at the path the reader looked at (by default `<data>.offsets`), written atomically
//!    and fsynced (a temporary file in its directory, renamed), so that a crash never
//!    leaves a table under that name, let alone one that opens but lies;
//! 2. where that directory cannot be written, and for a URL (a read never writes to
//!    object storage), in the storage's `cache_dir`, as
//!    `tfrecord-lirs-tables-1/<key>.offsets`, `key` naming the file's version (a local
//!    file's path, device, inode, size and modification time; a URL's object
//!    identity), so that a changed file never meets an old table;
//! 3. else in this process's memory only (every process then scans the file itself).
//!
//! Builders of one file take a lock first (an exclusive `flock` of a local data file;
//! for a URL, the cache directory's OFD lock of its key) and look again once they hold
//! it: the second opens the table the first wrote. A lock that cannot be had (`flock`
//! on some network file systems) is done without: builders then write the same bytes,
//! each renamed atomically over the last.
//!
//! [`ReaderOptions::index_missing`]: crate::read::reader::ReaderOptions::index_missing

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Error, Result};

use crate::storage::block_cache::{hash, identity_text};
use crate::storage::block_lock::BlockLock;
use crate::storage::local::OffsetTable;
use crate::storage::table_files::{open_table_of, temp_file_beside, write_table_with};
use crate::storage::Storage;

/// The directory of a `cache_dir` that holds tables built on open.
pub(crate) const TABLES_DIR: &str = "tfrecord-lirs-tables-1";

/// Tables this process has built on open (each a scan of its data file).
static BUILT: AtomicU64 = AtomicU64::new(0);

/// How many offset tables this process has built on open so far (each one scan of its
/// data file; see
/// [`ReaderOptions::index_missing`](crate::read::reader::ReaderOptions::index_missing)): for logs, and for checking that
/// processes opening one file at once built its table once between them.
pub fn tables_built_on_open() -> u64 {
    BUILT.load(Ordering::Relaxed)
}

/// `data`'s table at `table` through `storage` (see
/// [`Reader::open`](crate::read::reader::Reader::open)), opened; if it is missing and
/// `index_missing`, built (see the module's comment): where it is then (the path its
/// errors name), and the table.
pub(crate) fn open_table(
    storage: &Storage,
    index_missing: bool,
    (data, table): (&Path, &Path),
    version: Option<(String, u64)>,
) -> Result<(PathBuf, OffsetTable)> {
    match open_table_of(storage, table, Some(data)) {
        Ok(t) => Ok((table.to_path_buf(), t)),
        // A table path named for another data file is never written for this one.
        Err(e)
            if index_missing
                && e.is_missing_table()
                && crate::advice::table_of_another_file(storage, data, table).is_none() =>
        {
            build_missing_table(storage, data, table, version)
        }
        Err(e) => Err(crate::advice::table_open_error(storage, data, table, e)),
    }
}

/// Where the table of a file opened without one is (the path its errors name) and the
/// table, opened. `table` is the path the reader looked for; `version` what the
/// storage says identifies a URL's object, and its size (`None` for a local file).
fn build_missing_table(
    storage: &Storage,
    data: &Path,
    table: &Path,
    version: Option<(String, u64)>,
) -> Result<(PathBuf, OffsetTable)> {
    let local = storage.is_local(data);
    // Written where it was looked for only on a local file system: a read never writes
    // to object storage.
    let table_local = storage.is_local(table);
    let cached = cached_table_path(storage, data, version);
    if let Some(found) = cached.as_deref().and_then(|c| open_existing(c, data)) {
        return Ok(found);
    }
    let _lock = lock(data, local, cached.as_deref());
    // Another builder may have finished while this one waited for the lock.
    if table_local {
        match open_table_of(storage, table, Some(data)) {
            Ok(t) => return Ok((table.to_path_buf(), t)),
            Err(e) if !e.is_missing_table() => {
                return Err(crate::advice::diagnose(storage, data, e))
            }
            Err(_) => {}
        }
    }
    if let Some(found) = cached.as_deref().and_then(|c| open_existing(c, data)) {
        return Ok(found);
    }
    // The checks and the scan of `index` (`build_offset_table_in`), so that a file it
    // refuses is refused here with the same error.
    if let Some(misuse) = crate::advice::misuse(storage, data) {
        return Err(crate::advice::misuse_error(data, misuse));
    }
    let scan = |add: &mut dyn FnMut(&[u64]) -> Result<()>| {
        crate::scan::scan_offsets_to(storage, data, |_| {}, add)
    };
    // Beside the data when its directory can be written (a probe file says so before
    // the scan, whose errors are the file's own).
    let beside = match table_local {
        true => temp_file_beside(table).map(drop),
        false => Err(Error::invalid_argument(
            "a URL: nothing is written to its storage",
        )),
    };
    let why = match beside {
        Ok(()) => {
            write_table_with(storage, table, true, scan)?;
            BUILT.fetch_add(1, Ordering::Relaxed);
            let t = open_table_of(storage, table, Some(data))?;
            return Ok((table.to_path_buf(), t));
        }
        Err(why) => why,
    };
    if let Some(cached) = cached {
        let dir = cached.parent().unwrap_or(Path::new("."));
        let usable = std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e));
        match usable.and_then(|()| temp_file_beside(&cached).map(drop)) {
            Ok(()) => {
                write_table_with(&Storage::local(), &cached, true, scan)?;
                BUILT.fetch_add(1, Ordering::Relaxed);
                let t = open_table_of(&Storage::local(), &cached, Some(data))?;
                if local {
                    say_where(data, &why, Some(dir));
                }
                return Ok((cached, t));
            }
            Err(e) => say_where(data, &e, None),
        }
    } else {
        say_where(data, &why, None);
    }
    let mut offsets = Vec::new();
    scan(&mut |piece| {
        offsets.extend_from_slice(piece);
        Ok(())
    })?;
    BUILT.fetch_add(1, Ordering::Relaxed);
    Ok((table.to_path_buf(), OffsetTable::in_memory(offsets)))
}

/// The table at `path` in a cache directory, if one is there and opens.
fn open_existing(path: &Path, data: &Path) -> Option<(PathBuf, OffsetTable)> {
    let t = open_table_of(&Storage::local(), path, Some(data)).ok()?;
    Some((path.to_path_buf(), t))
}

/// Where `data`'s table is kept in the storage's `cache_dir`: `None` without one, or
/// for a URL whose storage names no version of it (it could not tell a rewritten
/// object from the one its table was built for).
fn cached_table_path(
    storage: &Storage,
    data: &Path,
    version: Option<(String, u64)>,
) -> Option<PathBuf> {
    let dir = storage.cache_dir()?.join(TABLES_DIR);
    let key = if storage.is_local(data) {
        local_identity(data)?
    } else {
        let (tag, size) = version?;
        identity_text(data.to_str()?, size, &tag)
    };
    Some(dir.join(format!("{:016x}.offsets", hash(&key))))
}

/// A local file's version: its canonical path, device, inode, size and modification
/// time (a rewrite or a replacement changes at least one).
fn local_identity(data: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let path = data.canonicalize().ok()?;
    let m = std::fs::metadata(&path).ok()?;
    Some(format!(
        "tfrecord-lirs local file 1\npath={path:?}\ndev={}\nino={}\nsize={}\nmtime={}.{:09}\n",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// The lock every builder of `data`'s table takes, if it can be had.
enum Lock {
    /// An exclusive `flock` of the local data file (released when closed).
    Data(#[allow(dead_code)] std::fs::File),
    /// The cache directory's lock of a URL's key.
    Cache(#[allow(dead_code)] BlockLock),
}

fn lock(data: &Path, local: bool, cached: Option<&Path>) -> Option<Lock> {
    if local {
        // `flock` locks the open file, so threads of one process that open the data
        // file each exclude each other as processes do; it needs no write access.
        let file = std::fs::File::open(data).ok()?;
        return file.lock().ok().map(|()| Lock::Data(file));
    }
    let cached = cached?;
    let dir = cached.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    let name = cached.file_stem()?.to_str()?;
    // The key's byte of the directory's LOCK (below i64::MAX, as an offset must be).
    let byte = u64::from_str_radix(name, 16).ok()? >> 2;
    BlockLock::acquire(dir, byte).ok().map(Lock::Cache)
}

/// Says once per process where tables built on open go when they cannot be written
/// where they are looked for (`why`).
fn say_where(data: &Path, why: &Error, kept_in: Option<&Path>) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    let kept = match kept_in {
        Some(dir) => format!("kept in {}", dir.display()),
        None => "kept in this process's memory only (give a cache_dir to keep them)".into(),
    };
    eprintln!(
        "tfrecord-lirs: {} has no offset table and it cannot be written there ({why}): \
         tables built on open are {kept} (said once)",
        data.display()
    );
}
