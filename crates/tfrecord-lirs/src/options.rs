//! One validation function per user-facing option: the rules the CLI, the FFI bridge,
//! the TensorFlow op and the Python package apply to their arguments, decided here once.
//! The other layers call these and only translate the error ([`ErrorKind::InvalidArgument`]
//! with the message below) into their own error type.
//!
//! ```
//! use tfrecord_lirs::{options, Backend, Fit, ErrorKind};
//! assert_eq!(options::page_size(4096)?.get(), 4096);
//! assert_eq!(options::backend("pread")?, Backend::Pread);
//! assert_eq!(options::best_fit_lookahead(8)?, Fit::Best { lookahead: 8 });
//! assert_eq!(options::shard(4, 4).unwrap_err().kind(), ErrorKind::InvalidArgument);
//! # Ok::<(), tfrecord_lirs::Error>(())
//! ```
//!
//! [`ErrorKind::InvalidArgument`]: crate::ErrorKind::InvalidArgument

use std::path::{Path, PathBuf};

use crate::compress::Compression;
use crate::error::{Error, Result};
use crate::format::table_path::default_table_path;
use crate::format::{Fit, PageSize};
use crate::io::Backend;

/// A page size: a power of two from [`MIN_PAGE_SIZE`](crate::format::MIN_PAGE_SIZE) to
/// [`MAX_PAGE_SIZE`](crate::format::MAX_PAGE_SIZE) bytes.
pub fn page_size(bytes: u64) -> Result<PageSize> {
    PageSize::checked(bytes)
}

/// Shard `shard_index` of `num_shards`: `num_shards >= 1` and `shard_index < num_shards`
/// (the orders' rule, [`OrderParams::check_shard`](crate::OrderParams::check_shard)).
pub fn shard(num_shards: u64, shard_index: u64) -> Result<()> {
    crate::format::order::check_shard(num_shards, shard_index)
}

/// A number of shards alone (its index not known yet): at least 1.
pub fn num_shards(num_shards: u64) -> Result<u64> {
    shard(num_shards, 0).map(|()| num_shards)
}

/// The placement named `name`, the syntax the Python package and the op library take:
/// `"next"`, `"best"` (the default window) or `"best:<window>"`. `"auto"` chooses by
/// the records of a whole file, so only `pad` takes it (see the error).
///
/// ```
/// use tfrecord_lirs::{options, Fit};
/// assert_eq!(options::fit("best:8")?, Fit::Best { lookahead: 8 });
/// assert_eq!(options::fit("best")?, Fit::BEST);
/// assert!(options::fit("best:0").is_err());
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn fit(name: &str) -> Result<Fit> {
    match name {
        "auto" => Err(Error::invalid_argument(
            "fit='auto' chooses by the records of a whole file: pad() takes it, a PaddedWriter (which places records as they come) does not; give 'next' or 'best'",
        )),
        "next" => Ok(Fit::Next),
        "best" => Ok(Fit::BEST),
        _ => {
            let window = name
                .strip_prefix("best:")
                .and_then(|w| w.parse::<u64>().ok())
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "fit must be 'next', 'best' or 'best:<window>', got {name:?}"
                    ))
                })?;
            best_fit_lookahead(window)
        }
    }
}

/// A best-fit look-ahead of `records` pending instances (at least 1): the
/// [`Fit`] it selects. Next-fit is [`Fit::Next`], never a window of 0.
pub fn best_fit_lookahead(records: u64) -> Result<Fit> {
    if records == 0 {
        return Err(Error::invalid_argument(
            "the best-fit window must hold at least 1 record",
        ));
    }
    let lookahead = usize::try_from(records)
        .map_err(|_| Error::invalid_argument(format!("best-fit window {records} is too large")))?;
    Ok(Fit::Best { lookahead })
}

/// Checks LIRSDataset's arguments as Python gives them: `batch_size` (`None`: elements
/// are single records; else at least 1), `num_parallel_reads` (-1, which is also
/// `tf.data.AUTOTUNE`: automatic; else at least 1), and, when both are known, as many
/// offset tables given as files (`tables` `None`: not given, the default tables).
pub fn dataset_arguments(
    batch_size: Option<i64>,
    num_parallel_reads: i64,
    files: Option<u64>,
    tables: Option<u64>,
) -> Result<()> {
    if let Some(b) = batch_size.filter(|&b| b < 1) {
        return Err(Error::invalid_argument(format!(
            "batch_size must be a positive int or None, got {b}"
        )));
    }
    if num_parallel_reads != -1 && num_parallel_reads < 1 {
        return Err(Error::invalid_argument(format!(
            "num_parallel_reads must be a positive int, None or tf.data.AUTOTUNE, got {num_parallel_reads}"
        )));
    }
    if let (Some(files), Some(tables)) = (files, tables) {
        if tables != files {
            return Err(Error::invalid_argument(format!(
                "got {tables} offset tables for {files} files"
            )));
        }
    }
    Ok(())
}

/// An epoch order algorithm by number: 1 ([`OrderVersion::V1`], Fisher–Yates) or 2
/// ([`OrderVersion::V2`], keyed bijections in O(1) memory).
///
/// [`OrderVersion::V1`]: crate::OrderVersion::V1
/// [`OrderVersion::V2`]: crate::OrderVersion::V2
pub fn order_version(number: u64) -> Result<crate::OrderVersion> {
    crate::OrderVersion::from_number(number)
}

/// An I/O backend by name: `"auto"`, `"pread"`, `"mmap"` or `"direct"` (see
/// [`Backend`]'s `FromStr`).
pub fn backend(name: &str) -> Result<Backend> {
    name.parse()
}

/// A compression by name: `"auto"` (or empty), `"none"`, `"gzip"`, `"zlib"`, in any case
/// (see [`Compression`]'s `FromStr`).
pub fn compression(name: &str) -> Result<Compression> {
    name.parse()
}

/// The `(data file, offset table)` pairs of a dataset: `files` with `tables`, one per
/// file or none at all; a missing or empty table path means the default
/// ([`default_table_path`]). No files is an empty dataset, as for TFRecordDataset.
pub fn data_and_tables<P: AsRef<Path>>(
    files: &[P],
    tables: &[Option<P>],
) -> Result<Vec<(PathBuf, PathBuf)>> {
    if !tables.is_empty() && tables.len() != files.len() {
        return Err(Error::invalid_argument(format!(
            "got {} offset tables for {} data files (give one per file, or none)",
            tables.len(),
            files.len()
        )));
    }
    Ok(files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let file = file.as_ref();
            let table = match tables.get(i) {
                Some(Some(t)) if !t.as_ref().as_os_str().is_empty() => t.as_ref().to_path_buf(),
                _ => default_table_path(file),
            };
            (file.to_path_buf(), table)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn each_option_names_what_is_allowed() {
        for bad in [0, 511, 4095, 32 << 20] {
            let e = page_size(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().contains("power of two"), "{e}");
        }
        assert!(shard(1, 0).is_ok() && shard(3, 2).is_ok());
        for (n, i) in [(0, 0), (2, 2), (1, u64::MAX)] {
            let e = shard(n, i).unwrap_err();
            assert!(e.to_string().contains("shard_index must be in"), "{e}");
        }
        assert!(best_fit_lookahead(0)
            .unwrap_err()
            .to_string()
            .contains("at least 1 record"));
        assert_eq!(best_fit_lookahead(1).unwrap(), Fit::Best { lookahead: 1 });
    }

    #[test]
    fn dataset_arguments_as_python_gives_them() {
        assert!(dataset_arguments(None, -1, Some(2), None).is_ok());
        assert!(dataset_arguments(Some(8), 4, Some(2), Some(2)).is_ok());
        assert!(dataset_arguments(Some(1), 1, None, Some(5)).is_ok());
        for (args, words) in [
            (
                (Some(0), -1, None, None),
                "batch_size must be a positive int or None, got 0",
            ),
            (
                (None, 0, None, None),
                "num_parallel_reads must be a positive int",
            ),
            ((None, -2, None, None), "got -2"),
            (
                (None, -1, Some(2), Some(1)),
                "got 1 offset tables for 2 files",
            ),
            (
                (None, -1, Some(2), Some(0)),
                "got 0 offset tables for 2 files",
            ),
        ] {
            let (b, n, f, t) = args;
            let e = dataset_arguments(b, n, f, t).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(words), "{e}");
        }
        let e = backend("bogus").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown I/O backend \"bogus\": use \"auto\", \"pread\", \"mmap\" or \"direct\""
        );
        assert_eq!(compression("GZIP").unwrap(), Compression::Gzip);
    }

    #[test]
    fn data_files_pair_with_their_tables() {
        let none: [Option<&str>; 0] = [];
        assert_eq!(
            data_and_tables(&["a", "b"], &none).unwrap(),
            [
                ("a".into(), "a.offsets".into()),
                ("b".into(), "b.offsets".into())
            ]
        );
        assert_eq!(
            data_and_tables(&["a", "b"], &[Some("t"), Some("")]).unwrap(),
            [("a".into(), "t".into()), ("b".into(), "b.offsets".into())]
        );
        let e = data_and_tables(&["a", "b"], &[Some("t")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "got 1 offset tables for 2 data files (give one per file, or none)"
        );
        assert!(data_and_tables::<&str>(&[], &none).unwrap().is_empty());
    }
}
