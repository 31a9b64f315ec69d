//! Where a command's files are: local files and object storage, each data file's
//! default table, and the reader options every reading command shares.

use std::path::{Path, PathBuf};
use tfrecord_lirs::{default_table_path, ReaderOptions, Storage};

use crate::report::Failure;

/// Where every path of a command is: local files, and object storage through the
/// core's `object_store` client (credentials and endpoints from the environment). The
/// CLI has no file systems of its own: the core's rule with none.
pub fn storage() -> Storage {
    Storage::with_url_file_systems(Vec::new())
}

/// The table `--out`/`--offsets` names, else `data`'s default one.
pub fn table_for(data: &Path, table: Option<PathBuf>) -> PathBuf {
    table.unwrap_or_else(|| default_table_path(data))
}

/// The reader options of `--trust-table`.
pub fn reader_options(trust_table: bool) -> ReaderOptions {
    ReaderOptions {
        trust_table,
        storage: storage(),
        ..ReaderOptions::default()
    }
}

/// The size of local file `path` for a progress bar (0 for a URL: the command's own
/// open reports a missing object).
pub fn file_size(path: &Path) -> Result<u64, Failure> {
    if !storage().is_local(path) {
        return Ok(0);
    }
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
}
