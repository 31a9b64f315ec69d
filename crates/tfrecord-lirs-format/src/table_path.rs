//! How an offset table is named beside its data file: `<data>.offsets`.

use std::path::{Path, PathBuf};

/// The table path used when none is given: `<data>.offsets`.
///
/// ```
/// use std::path::Path;
/// assert_eq!(
///     tfrecord_lirs::default_table_path(Path::new("/d/train.tfrecord")),
///     Path::new("/d/train.tfrecord.offsets")
/// );
/// ```
pub fn default_table_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(".offsets");
    PathBuf::from(s)
}

/// The data file a table at `table` is the default table of (`FILE` when its name is not
/// `<data>.offsets`), for the commands an error suggests.
pub fn data_of_table(table: &Path) -> PathBuf {
    let name = table.as_os_str().to_string_lossy();
    match name.strip_suffix(".offsets") {
        Some(data) if !data.is_empty() => PathBuf::from(data),
        _ => PathBuf::from("FILE"),
    }
}
