//! Where a command's files are: local files and object storage, each data file's
//! default table, and the reader options every reading command shares.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tfrecord_lirs::block_cache::BlockCache;
use tfrecord_lirs::{default_table_path, ReaderOptions, Storage};

use crate::report::Failure;

/// The local tier `--cache-dir` (or the environment) asks for, set once by `main`.
static CACHE: OnceLock<Option<Arc<BlockCache>>> = OnceLock::new();

/// Opens the local tier of `--cache-dir`/`--cache-bytes` by the core's rule (the
/// argument, else `TFRECORD_LIRS_CACHE_DIR`, else none).
pub fn use_cache(dir: Option<&Path>, bytes: Option<u64>) -> Result<(), Failure> {
    let cache = tfrecord_lirs::options::cache(dir, bytes)?;
    let _ = CACHE.set(cache);
    Ok(())
}

/// Where every path of a command is: local files, and object storage through the
/// core's `object_store` client (credentials and endpoints from the environment),
/// through the local tier if there is one. The CLI has no file systems of its own: the
/// core's rule with none.
pub fn storage() -> Storage {
    Storage::with_url_file_systems(Vec::new()).with_cache(CACHE.get().cloned().flatten())
}

/// The table `--out`/`--offsets` names, else `data`'s default one.
pub fn table_for(data: &Path, table: Option<PathBuf>) -> PathBuf {
    table.unwrap_or_else(|| default_table_path(data))
}

/// The reader options of `--trust-table` and `--index-missing`.
pub fn reader_options(trust_table: bool, index_missing: bool) -> ReaderOptions {
    ReaderOptions {
        trust_table,
        index_missing,
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

/// The data files arguments `inputs` name: the core's rule for a command line
/// ([`tfrecord_lirs::expand_shell_files`]: a quoted pattern expanded, offset tables a
/// shell's expansion picked up left out, a pattern that matches nothing an error naming
/// it).
pub fn data_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    Ok(tfrecord_lirs::expand_shell_files(&storage(), inputs)?)
}

/// The one data file argument `input` names (a pattern must match exactly one).
pub fn data_file(input: &Path, command: &str) -> Result<PathBuf, Failure> {
    let mut files = data_files(std::slice::from_ref(&input.to_path_buf()))?;
    match files.len() {
        1 => Ok(files.remove(0)),
        n => Err(Failure::Message(format!(
            "{}: the pattern matches {n} data files; `{command}` takes one",
            input.display()
        ))),
    }
}

/// The error for `flag` (one table) given with several data files (a pattern's).
pub fn one_table_for_one_file(files: &[PathBuf], given: bool, flag: &str) -> Result<(), Failure> {
    if given && files.len() > 1 {
        return Err(Failure::Message(format!(
            "{flag} names one table, but the arguments name {} data files: give one DATA with it",
            files.len()
        )));
    }
    Ok(())
}
