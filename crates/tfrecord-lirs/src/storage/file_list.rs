//! The one rule for the files a front end is given: a list of paths, patterns among them
//! (`tf.io.gfile.glob`'s syntax), local or URLs. Patterns are expanded here (local
//! directories by the `glob` crate, URLs by the storage's file system); which names are
//! data files and in which order is the pure rule of
//! [`file_list`](tfrecord_lirs_format::file_list).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use tfrecord_lirs_format::file_list::{self, is_pattern};

use crate::storage::{remote, Place, Storage};

/// The data files `inputs` name, in id order: each path as given, each pattern
/// replaced by its matches (sorted, offset tables and temporary files left out), each
/// sharded spec `PREFIX@N` by its N shards ([`file_list::sharded_spec`]). A
/// pattern that matches no data file, or an empty `inputs`, is
/// [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) naming it. A path with wildcard
/// characters that exists as it is, is a path. A table given in a list stays, and the
/// reader names it as a table; a command line's arguments, which a shell expanded, go
/// through [`expand_shell_files`] instead.
///
/// ```
/// use std::path::PathBuf;
/// use tfrecord_lirs::{expand_files, ErrorKind, Storage};
/// let dir = tempfile::tempdir().unwrap();
/// for name in ["t-00001-of-00002", "t-00000-of-00002", "t-00000-of-00002.offsets"] {
///     std::fs::write(dir.path().join(name), b"").unwrap();
/// }
/// let pattern = dir.path().join("t-*-of-*");
/// let files = expand_files(&Storage::local(), &[pattern]).unwrap();
/// let names: Vec<_> = files.iter().map(|f| f.file_name().unwrap()).collect();
/// assert_eq!(names, ["t-00000-of-00002", "t-00001-of-00002"]);
/// let none = expand_files(&Storage::local(), &[dir.path().join("v-*")]).unwrap_err();
/// assert_eq!(none.kind(), ErrorKind::NotFound);
/// ```
pub fn expand_files(storage: &Storage, inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    if inputs.is_empty() {
        return Err(Error::no_match(Path::new("")));
    }
    let mut files = Vec::with_capacity(inputs.len());
    let mut listed = Vec::new();
    for input in inputs {
        if let Some(shards) = input
            .to_str()
            .and_then(file_list::sharded_spec)
            .filter(|_| storage.what_exists(input).is_none())
        {
            listed.extend(shards.into_iter().map(PathBuf::from));
            continue;
        }
        match input.to_str().filter(|s| is_pattern(s)) {
            Some(pattern) if storage.what_exists(input).is_none() => {
                files.append(&mut listed);
                let matches = file_list::pattern_matches(matches(storage, pattern)?);
                if matches.is_empty() {
                    return Err(Error::no_match(input));
                }
                files.extend(matches);
            }
            _ => listed.push(input.clone()),
        }
    }
    files.append(&mut listed);
    Ok(files)
}

/// [`expand_files`] for a command line's arguments: an entry that is another entry's
/// default table is left out too, since a shell expanded `train-*` into the data files
/// and, after a first `index`, their tables (`index` and `verify` over the same `-*-of-*`
/// twice).
pub fn expand_shell_files(storage: &Storage, inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    expand_files(storage, inputs).map(file_list::list_entries)
}

/// Every path `pattern` matches (derived files included).
fn matches(storage: &Storage, pattern: &str) -> Result<Vec<PathBuf>> {
    let path = Path::new(pattern);
    match storage.place(path)? {
        Place::Remote(fs, url) => fs
            .glob(url)
            .map(|urls| urls.into_iter().map(PathBuf::from).collect())
            .map_err(|e| remote::error(path, e)),
        Place::Local(_) => {
            let options = glob::MatchOptions {
                require_literal_separator: true,
                ..glob::MatchOptions::new()
            };
            let paths = glob::glob_with(pattern, options)
                .map_err(|e| Error::invalid_argument(format!("{pattern}: not a pattern ({e})")))?;
            paths
                .map(|entry| {
                    entry.map_err(|e| {
                        let path = e.path().to_path_buf();
                        Error::io(&path, e.into())
                    })
                })
                .filter(|p| p.as_ref().map_or(true, |p| !p.is_dir()))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn touch(dir: &Path, names: &[&str]) {
        for name in names {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
    }

    fn names(files: &[PathBuf]) -> Vec<String> {
        files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn patterns_match_data_files_sorted_and_never_tables() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "t-00002-of-00003",
                "t-00000-of-00003",
                "t-00001-of-00003",
                "t-00000-of-00003.offsets",
                "t-00001-of-00003.offsets",
                ".lirs-tmp-7-0-t-00002-of-00003.offsets",
            ],
        );
        std::fs::create_dir(dir.path().join("t-dir-of-x")).unwrap();
        let got = expand_files(&Storage::local(), &[dir.path().join("t-*-of-*")]).unwrap();
        assert_eq!(
            names(&got),
            ["t-00000-of-00003", "t-00001-of-00003", "t-00002-of-00003"]
        );
        // `?` and `[...]` as tf.io.gfile.glob, `*` not across `/`.
        let got = expand_files(&Storage::local(), &[dir.path().join("t-0000[02]-of-?????")]);
        assert_eq!(
            names(&got.unwrap()),
            ["t-00000-of-00003", "t-00002-of-00003"]
        );
        let parent = dir.path().parent().unwrap().join("*-of-00003");
        let err = expand_files(&Storage::local(), &[parent]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn a_pattern_or_list_of_nothing_is_not_found_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), &["a.offsets"]);
        let pattern = dir.path().join("a*");
        let err = expand_files(&Storage::local(), std::slice::from_ref(&pattern)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(err.file(), Some(pattern.as_path()));
        assert!(err.to_string().contains("no data file matches"), "{err}");
        let err = expand_files(&Storage::local(), &[]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(err.to_string().contains("no files given"), "{err}");
    }

    #[test]
    fn lists_keep_their_order_and_a_shells_drop_their_own_tables() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), &["b", "a", "a.offsets"]);
        let list = ["b", "a", "a.offsets"].map(|n| dir.path().join(n));
        let got = expand_files(&Storage::local(), &list).unwrap();
        assert_eq!(names(&got), ["b", "a", "a.offsets"]);
        let got = expand_shell_files(&Storage::local(), &list).unwrap();
        assert_eq!(names(&got), ["b", "a"]);
        // A list and a pattern together: each in its place.
        let mixed = [dir.path().join("b"), dir.path().join("[a]")];
        assert_eq!(
            names(&expand_files(&Storage::local(), &mixed).unwrap()),
            ["b", "a"]
        );
    }

    #[test]
    fn a_name_with_wildcards_that_exists_is_a_path() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), &["odd[1].tfrecord"]);
        let odd = dir.path().join("odd[1].tfrecord");
        let got = expand_files(&Storage::local(), std::slice::from_ref(&odd)).unwrap();
        assert_eq!(got, [odd]);
    }

    #[test]
    fn a_sharded_spec_names_its_shards_and_a_file_of_that_name_is_a_path() {
        let dir = tempfile::tempdir().unwrap();
        touch(
            dir.path(),
            &[
                "m.tfrecord-00000-of-00002",
                "m.tfrecord-00001-of-00002",
                "n@2",
            ],
        );
        let spec = dir.path().join("m.tfrecord@2");
        let got = expand_files(&Storage::local(), &[spec]).unwrap();
        assert_eq!(
            names(&got),
            ["m.tfrecord-00000-of-00002", "m.tfrecord-00001-of-00002"]
        );
        let named = dir.path().join("n@2");
        let got = expand_files(&Storage::local(), std::slice::from_ref(&named)).unwrap();
        assert_eq!(got, [named]);
    }
}
