//! Which names of a file list or a pattern's matches are data files: the rule every front
//! end shares (the engine's storage layer does the listing).
//!
//! A pattern is a path with `*`, `?` or `[` in it (the syntax of `tf.io.gfile.glob`,
//! `tf.data.Dataset.list_files` and POSIX `glob(3)`: `*` and `?` never match `/`). Its
//! matches are sorted by their bytes, so every process and every run sees the same ids;
//! a list keeps its order (the user's). Neither ever takes a file the engine writes
//! beside data for data: an offset table (`<data>.offsets`) or a write's temporary
//! file (`.lirs-tmp-…`), so indexing `train-*-of-*` a second time matches the data
//! files and not their new tables.

use std::path::{Path, PathBuf};

use crate::table_path::default_table_path;

/// The prefix of the temporary file a write puts beside its output before renaming it.
pub const TEMP_PREFIX: &str = ".lirs-tmp-";

/// Whether `path` is a pattern (has `*`, `?` or `[`).
///
/// ```
/// use tfrecord_lirs_format::file_list::is_pattern;
/// assert!(is_pattern("data/train.tfrecord-*-of-*"));
/// assert!(is_pattern("gs://b/train-?????"));
/// assert!(!is_pattern("data/train.tfrecord"));
/// ```
pub fn is_pattern(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// The most shards a sharded spec names (a bound on what a typo can ask for).
const MAX_SPEC_SHARDS: u64 = 1_000_000;

/// The files a sharded spec names: `PREFIX@N` (TFDS, Beam and ArrayRecord write N
/// shards `PREFIX-00000-of-0000N` … `PREFIX-0000{N-1}-of-0000N`, numbers of at least five
/// digits), in shard order; `None` when `path` is not one (no `@N` at its end, or
/// `N` not in `[1, 1_000_000]`).
///
/// ```
/// use tfrecord_lirs_format::file_list::sharded_spec;
/// assert_eq!(sharded_spec("d/mnist-train.tfrecord@2").unwrap(),
///            ["d/mnist-train.tfrecord-00000-of-00002", "d/mnist-train.tfrecord-00001-of-00002"]);
/// assert_eq!(sharded_spec("d/x@0"), None);
/// assert_eq!(sharded_spec("d/user@host/x"), None);
/// ```
pub fn sharded_spec(path: &str) -> Option<Vec<String>> {
    let (prefix, count) = path.rsplit_once('@')?;
    if prefix.is_empty() || count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = count
        .parse()
        .ok()
        .filter(|n| (1..=MAX_SPEC_SHARDS).contains(n))?;
    Some(
        (0..n)
            .map(|i| format!("{prefix}-{i:05}-of-{n:05}"))
            .collect(),
    )
}

/// Whether `path` names a file the engine writes beside data and never reads as data:
/// an offset table (`<data>.offsets`) or a temporary file (`.lirs-tmp-…`).
///
/// ```
/// use std::path::Path;
/// use tfrecord_lirs_format::file_list::is_derived_file;
/// assert!(is_derived_file(Path::new("d/train-00000-of-00004.offsets")));
/// assert!(is_derived_file(Path::new("d/.lirs-tmp-12ab-train.offsets")));
/// assert!(!is_derived_file(Path::new("d/train-00000-of-00004")));
/// ```
pub fn is_derived_file(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy());
    let name = name.as_deref().unwrap_or_default();
    name.ends_with(".offsets") || name.starts_with(TEMP_PREFIX)
}

/// A pattern's matches as data files: the derived files left out, sorted by bytes,
/// each once.
pub fn pattern_matches(mut matches: Vec<PathBuf>) -> Vec<PathBuf> {
    matches.retain(|p| !is_derived_file(p));
    matches.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
    matches.dedup();
    matches
}

/// A command line's list as data files, in its order: an entry that is the default
/// table of another entry (`index train-*` expanded by a shell after a first run) is
/// left out. Any other entry stays, so one named by hand is read (and a table given for
/// data is named as one by the reader's error).
pub fn list_entries(list: Vec<PathBuf>) -> Vec<PathBuf> {
    let tables: std::collections::HashSet<PathBuf> =
        list.iter().map(|p| default_table_path(p)).collect();
    list.into_iter()
        .filter(|p| !(is_derived_file(p) && tables.contains(p)))
        .collect()
}

/// The literal directory a pattern's matches are under (the part before the `/` that
/// precedes its first wildcard; "" when the first component has one): the prefix an
/// object-store listing starts from.
///
/// ```
/// use tfrecord_lirs_format::file_list::literal_dir;
/// assert_eq!(literal_dir("gs://b/d/train-*"), "gs://b/d/");
/// assert_eq!(literal_dir("gs://b/*/x"), "gs://b/");
/// assert_eq!(literal_dir("train-*"), "");
/// ```
pub fn literal_dir(pattern: &str) -> &str {
    let first = pattern.find(['*', '?', '[']).unwrap_or(pattern.len());
    match pattern[..first].rfind('/') {
        Some(slash) => &pattern[..=slash],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn matches_leave_out_tables_and_temporaries_and_are_sorted() {
        let got = pattern_matches(paths(&[
            "d/t-00001-of-00002",
            "d/t-00000-of-00002.offsets",
            "d/t-00000-of-00002",
            "d/.lirs-tmp-1-2-t-00001-of-00002",
            "d/t-00001-of-00002.offsets",
        ]));
        assert_eq!(got, paths(&["d/t-00000-of-00002", "d/t-00001-of-00002"]));
    }

    #[test]
    fn lists_keep_their_order_and_lose_only_their_own_tables() {
        let got = list_entries(paths(&["b", "a", "a.offsets", "b.offsets", "c.offsets"]));
        assert_eq!(got, paths(&["b", "a", "c.offsets"]));
    }
}
