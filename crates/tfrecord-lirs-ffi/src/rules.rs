//! The option rules of the op library and the Python package, decided here once: the
//! I/O backend names, the shard check, the offset-table path of each file and the fit
//! syntax (a LIRSDataset's fetch settings are the core's `CursorOptions::dataset`). The kernels reach them through the
//! cxx bridge, Python through the C ABI ([`crate::c_api`]); neither repeats them.
//!
//! The option rules themselves are the core's ([`core::options`]); this module adds
//! what only the foreign callers need: TensorFlow's signed integers, the default table
//! of each file and the fit syntax of the Python API.

use std::path::PathBuf;

use tfrecord_lirs as core;

use crate::{path_of, FfiError, FfiResult, ReaderConfig};

/// The I/O backend named `name` ([`core::options::backend`]).
pub fn parse_backend(name: &str) -> FfiResult<core::Backend> {
    Ok(core::options::backend(name)?)
}

/// Checks `num_shards` and `shard_index` as a caller gives them (either may be unknown
/// yet, e.g. a tensor Python cannot see into); returns them as the core's u64 pair
/// (an unknown one as 1 shard / index 0).
pub fn check_shard(num_shards: Option<i64>, shard_index: Option<i64>) -> FfiResult<(u64, u64)> {
    if let Some(n) = num_shards.filter(|&n| n < 0) {
        return Err(FfiError::invalid(format!(
            "num_shards must be >= 1, got {n}"
        )));
    }
    if let Some(i) = shard_index.filter(|&i| i < 0) {
        return Err(FfiError::invalid(format!(
            "shard_index must be >= 0, got {i}"
        )));
    }
    // Both non-negative now: the rule is the core's (an unknown index checks as 0).
    let n = num_shards.map_or(1, |n| n.unsigned_abs());
    let i = shard_index.map_or(0, |i| i.unsigned_abs());
    if num_shards.is_some() {
        check_shard_u64(n, i)?;
    }
    Ok((n, i))
}

/// Checks a page size as a caller gives it (the signed `page_size` argument of Python
/// and the op): the core's rule ([`core::options::page_size`]), worded with the
/// argument's name.
pub fn check_page_size(page_size: i64) -> FfiResult<u64> {
    u64::try_from(page_size)
        .ok()
        .and_then(|bytes| core::options::page_size(bytes).ok())
        .map(core::PageSize::get)
        .ok_or_else(|| {
            FfiError::invalid(format!(
                "page_size must be a power of two from {} to {} bytes, got {page_size}",
                core::format::MIN_PAGE_SIZE,
                core::format::MAX_PAGE_SIZE
            ))
        })
}

/// [`core::options::shard`].
pub fn check_shard_u64(num_shards: u64, shard_index: u64) -> FfiResult<()> {
    Ok(core::options::shard(num_shards, shard_index)?)
}

/// The offset table of `data` when none is given (the core's convention).
pub fn default_table_path(data: &[u8]) -> PathBuf {
    core::default_table_path(&path_of(data))
}

/// The (data, table) pairs of `config`: `tables` is empty (every file's default table)
/// or one per file, where an empty path also means the default.
pub fn file_pairs(config: &ReaderConfig) -> FfiResult<Vec<(PathBuf, PathBuf)>> {
    let files: Vec<PathBuf> = config.files.iter().map(|f| path_of(&f.bytes)).collect();
    let tables: Vec<Option<PathBuf>> = config
        .tables
        .iter()
        .map(|t| Some(path_of(&t.bytes)))
        .collect();
    Ok(core::options::data_and_tables(&files, &tables)?)
}

/// The placement `pad` is asked for: a fixed one, or chosen by the file's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadFit {
    /// This placement ([`parse_fit`]).
    Fixed(core::Fit),
    /// `"auto"`: [`core::pad_file_auto`].
    Auto,
}

/// The placement named `fit` for `pad`: "auto" or what [`parse_fit`] takes.
pub fn parse_pad_fit(fit: &str) -> FfiResult<PadFit> {
    match fit {
        "auto" => Ok(PadFit::Auto),
        _ => parse_fit(fit).map(PadFit::Fixed),
    }
}

/// Checks LIRSDataset's `compression_type` as TFRecordDataset takes it (None or "":
/// uncompressed). A GZIP or ZLIB stream cannot be read at random: the error says how to
/// get a file that can (`pad` decompresses as it reads).
pub fn check_compression_type(compression_type: &str) -> FfiResult<()> {
    match compression_type {
        "" => Ok(()),
        "GZIP" | "ZLIB" => Err(FfiError::invalid(format!(
            "compression_type={compression_type:?}: LIRSDataset reads records at random, which a {compression_type} stream does not allow; write an uncompressed padded copy with its table once, `tfrecord-lirs pad FILE OUT` (Python: tfrecord_lirs.pad(FILE, OUT)), which decompresses as it reads, and read that"
        ))),
        other => Err(FfiError::invalid(format!(
            "compression_type must be None, \"\", \"GZIP\" or \"ZLIB\" (as for TFRecordDataset), got {other:?}"
        ))),
    }
}

/// Checks LIRSDataset's `buffer_size` (bytes; `None` when not given) as
/// TFRecordDataset takes it: at least 0. Reads are per record (positioned reads of
/// each record's span, or a memory map), so there is no stream buffer to size; the
/// read-ahead is `num_parallel_reads` threads over fetch windows.
pub fn check_buffer_size(buffer_size: Option<i64>) -> FfiResult<()> {
    match buffer_size {
        Some(b) if b < 0 => Err(FfiError::invalid(format!(
            "buffer_size must be >= 0 bytes or None, got {b}"
        ))),
        _ => Ok(()),
    }
}

/// LIRSDataset's `deterministic` attr: "true" (in order), "false" (unordered) or
/// "default" (`None`: as the pipeline's `tf.data.Options().deterministic` says).
pub fn parse_deterministic(deterministic: &str) -> FfiResult<Option<bool>> {
    match deterministic {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        "default" => Ok(None),
        other => Err(FfiError::invalid(format!(
            "deterministic must be \"true\", \"false\" or \"default\", got {other:?}"
        ))),
    }
}

/// The placement policy named `fit`: "next", "best" (the core's default window,
/// [`core::Fit::BEST`]) or `"best:<window>"` (checked by
/// [`core::options::best_fit_lookahead`]).
pub fn parse_fit(fit: &str) -> FfiResult<core::Fit> {
    Ok(core::options::fit(fit)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes() {
        for ok in [512, 4096, 65536, 16 << 20] {
            assert_eq!(check_page_size(ok).unwrap(), ok as u64);
        }
        for bad in [0, -4096, 100, 1000, 256, 32 << 20, i64::MIN] {
            let message = check_page_size(bad).unwrap_err().to_string();
            assert!(
                message.contains("page_size must be a power of two from 512 to 16777216")
                    && message.contains(&bad.to_string()),
                "{message}"
            );
        }
    }

    #[test]
    fn backends() {
        for (name, backend) in [
            ("auto", core::Backend::Auto),
            ("pread", core::Backend::Pread),
            ("mmap", core::Backend::Mmap),
            ("direct", core::Backend::Direct),
        ] {
            assert_eq!(parse_backend(name).unwrap(), backend);
        }
        for bad in ["", "MMAP", "io_uring"] {
            let e = parse_backend(bad).unwrap_err();
            assert!(e.message.starts_with("unknown I/O backend"), "{e}");
        }
    }

    #[test]
    fn shards() {
        assert_eq!(check_shard(Some(2), Some(1)).unwrap(), (2, 1));
        assert_eq!(check_shard(Some(3), None).unwrap(), (3, 0));
        assert_eq!(check_shard(None, Some(4)).unwrap(), (1, 4));
        for (n, i, want) in [
            (
                Some(0),
                Some(0),
                "shard_index must be in [0, num_shards), got shard_index=0 num_shards=0",
            ),
            (Some(-2), None, "num_shards must be >= 1, got -2"),
            (None, Some(-1), "shard_index must be >= 0, got -1"),
            (
                Some(2),
                Some(2),
                "shard_index must be in [0, num_shards), got shard_index=2 num_shards=2",
            ),
        ] {
            assert_eq!(check_shard(n, i).unwrap_err().message, want);
        }
        assert!(check_shard_u64(0, 0).is_err());
        assert!(check_shard_u64(2, 1).is_ok());
    }

    #[test]
    fn fits() {
        assert_eq!(parse_fit("next").unwrap(), core::Fit::Next);
        assert_eq!(parse_fit("best").unwrap(), core::Fit::BEST);
        assert_eq!(
            parse_fit("best:7").unwrap(),
            core::Fit::Best { lookahead: 7 }
        );
        for bad in ["", "worst", "best:", "best:0", "best:-1", "best:x"] {
            assert!(parse_fit(bad).unwrap_err().message.contains("fit"), "{bad}");
        }
    }

    #[test]
    fn tfrecord_dataset_arguments() {
        check_compression_type("").unwrap();
        for kind in ["GZIP", "ZLIB"] {
            let e = check_compression_type(kind).unwrap_err();
            assert!(
                e.message.contains("tfrecord-lirs pad FILE OUT") && e.message.contains(kind),
                "{e}"
            );
        }
        let e = check_compression_type("gzip").unwrap_err();
        assert!(
            e.message.starts_with("compression_type must be None"),
            "{e}"
        );
        check_buffer_size(None).unwrap();
        check_buffer_size(Some(0)).unwrap();
        check_buffer_size(Some(1 << 20)).unwrap();
        assert!(check_buffer_size(Some(-1)).is_err());
        assert_eq!(parse_pad_fit("auto").unwrap(), PadFit::Auto);
        assert_eq!(
            parse_pad_fit("best:3").unwrap(),
            PadFit::Fixed(core::Fit::Best { lookahead: 3 })
        );
        assert!(parse_fit("auto")
            .unwrap_err()
            .message
            .contains("pad() takes it"));
    }

    #[test]
    fn pairs_and_default_tables() {
        let config = |files: &[&str], tables: &[&str]| ReaderConfig {
            files: files
                .iter()
                .map(|f| crate::FilePath {
                    bytes: f.as_bytes().to_vec(),
                })
                .collect(),
            tables: tables
                .iter()
                .map(|f| crate::FilePath {
                    bytes: f.as_bytes().to_vec(),
                })
                .collect(),
            page_size: 4096,
            verify_payload_crc: true,
            backend: "auto".into(),
            trust_table: false,
        };
        let pairs = file_pairs(&config(&["a", "b"], &["", "t"])).unwrap();
        assert_eq!(
            pairs,
            vec![
                (PathBuf::from("a"), PathBuf::from("a.offsets")),
                (PathBuf::from("b"), PathBuf::from("t"))
            ]
        );
        assert!(file_pairs(&config(&["a", "b"], &["t"])).is_err());
        assert_eq!(file_pairs(&config(&[], &[])).unwrap(), vec![]);
        assert!(file_pairs(&config(&[], &["t"])).is_err());
    }
}
