//! `index`: an existing file's offset table, built by a scan of its records and
//! written atomically as the scan goes.

use std::path::Path;

use tfrecord_lirs_format::error::Result;

use crate::storage::table_files::{check_table_path, write_table_with};
use crate::storage::Storage;

/// Scans `data` (CRC-checked, fillers skipped) and writes its offset table to `table`
/// atomically; returns the instance count. The paper's location generator.
///
/// Fails (writing nothing) if `table` is `data` itself, or if `data` starts with a
/// filler record (see [`scan_offsets`](crate::scan_offsets)).
pub fn build_offset_table(data: &Path, table: &Path) -> Result<u64> {
    build_offset_table_with(data, table, false, |_| {})
}

/// [`build_offset_table`]; with `sync` the table and its directory are fsynced before
/// this returns (see [`write_table`](crate::storage::table_files::write_table)), and `progress` gets the bytes scanned so far.
pub fn build_offset_table_with(
    data: &Path,
    table: &Path,
    sync: bool,
    progress: impl FnMut(u64),
) -> Result<u64> {
    build_offset_table_in(&Storage::local(), data, table, sync, progress)
}

/// [`build_offset_table_with`] through `storage` (`data` and `table` may be URLs when
/// it has a file system).
pub fn build_offset_table_in(
    storage: &Storage,
    data: &Path,
    table: &Path,
    sync: bool,
    progress: impl FnMut(u64),
) -> Result<u64> {
    check_table_path(data, table)?;
    if let Some(misuse) = crate::advice::misuse(storage, data) {
        return Err(crate::advice::misuse_error(data, misuse));
    }
    // The offsets go to the table file as the scan puts them in order (no table held
    // in memory, no write of it all after the scan); the file is renamed over `table`
    // only once the scan has succeeded.
    write_table_with(storage, table, sync, |add| {
        crate::scan::scan_offsets_to(storage, data, progress, add)
    })
}
