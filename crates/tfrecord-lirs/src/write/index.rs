//! `index`: an existing file's offset table, built by a scan of its records and
//! written atomically as the scan goes.

use std::path::Path;

use crate::error::Result;

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

/// What [`index_file_in`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    /// The table was built by a scan: the instance count.
    Built(u64),
    /// The table was current and left as it is: its instance count.
    Current(u64),
}

impl Indexed {
    /// The instance count.
    pub fn instances(self) -> u64 {
        match self {
            Indexed::Built(n) | Indexed::Current(n) => n,
        }
    }
}

/// `index` of the front ends ([`build_offset_table_in`] unless the table is current),
/// so that a training script that indexes at start-up costs nothing on its second
/// launch. A table is current when it was written after the data file's last change
/// (its modification time is not older) and it opens as the reader opens it: its
/// shape, and a valid record at its first and last entries, the last one ending where
/// the file ends. Anything else (a URL, whose objects have no comparable stamp here; a
/// missing, older or unopenable table) is rebuilt.
pub fn index_file_in(
    storage: &Storage,
    data: &Path,
    table: &Path,
    sync: bool,
    progress: impl FnMut(u64),
) -> Result<Indexed> {
    check_table_path(data, table)?;
    if let Some(n) = current_table(storage, data, table) {
        return Ok(Indexed::Current(n));
    }
    build_offset_table_in(storage, data, table, sync, progress).map(Indexed::Built)
}

/// The instance count of `table` if it is current for `data` (see [`index_file_in`]).
fn current_table(storage: &Storage, data: &Path, table: &Path) -> Option<u64> {
    let modified = |p: &Path| storage.local_metadata(p)?.modified().ok();
    if modified(table)? < modified(data)? {
        return None;
    }
    let options = crate::read::reader::ReaderOptions {
        storage: storage.clone(),
        // A table that vanished since the look above is rebuilt by the caller.
        index_missing: false,
        ..crate::read::reader::ReaderOptions::default()
    };
    crate::read::reader::Reader::open_one(data, Some(table), &options)
        .ok()
        .map(|reader| reader.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_index_leaves_a_current_table_and_rebuilds_a_stale_one() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("t.tfrecord");
        let mut w = crate::TFRecordWriter::create(&data).unwrap();
        for i in 0..5u8 {
            w.write(crate::Record::Instance(&[i; 10])).unwrap();
        }
        w.finish_synced(false).unwrap();
        let table = tfrecord_lirs_format::table_path::default_table_path(&data);
        let local = Storage::local();
        assert_eq!(
            index_file_in(&local, &data, &table, false, |_| {}).unwrap(),
            Indexed::Built(5)
        );
        assert_eq!(
            index_file_in(&local, &data, &table, false, |_| {}).unwrap(),
            Indexed::Current(5)
        );
        // A table cut short no longer opens: rebuilt.
        let bytes = std::fs::read(&table).unwrap();
        std::fs::write(&table, &bytes[..bytes.len() - 8]).unwrap();
        assert_eq!(
            index_file_in(&local, &data, &table, false, |_| {}).unwrap(),
            Indexed::Built(5)
        );
        // Data changed after its table: rebuilt.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .append(true)
            .open(&data)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(
            index_file_in(&local, &data, &table, false, |_| {}).unwrap(),
            Indexed::Built(5)
        );
    }
}
