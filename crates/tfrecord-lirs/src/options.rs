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

pub mod argument;
pub mod defaults;
pub mod guard;
pub mod integer;
pub mod shape;

use std::path::{Path, PathBuf};

use crate::error::{Error, Remedy, Result};
use tfrecord_lirs_format::fit::Fit;
use tfrecord_lirs_format::framing::PageSize;
use tfrecord_lirs_format::order::OrderVersion;
use tfrecord_lirs_format::table_path::default_table_path;

use crate::compress::Compression;
use crate::storage::local::Backend;

/// The local tier of URL reads (a [`BlockCache`]) the arguments ask for: the directory
/// `dir` if given (and not empty), else the one the environment variable
/// [`TFRECORD_LIRS_CACHE_DIR`](defaults::CACHE_DIR_ENV) names (if set and not empty),
/// else none; bounded by `bytes` ([`defaults::CACHE_BYTES`] if `None`, at least 1).
/// `bytes` given without a directory is an error (a bound on nothing).
///
/// [`BlockCache`]: crate::storage::block_cache::BlockCache
pub fn cache(
    dir: Option<&Path>,
    bytes: Option<u64>,
) -> Result<Option<std::sync::Arc<crate::storage::block_cache::BlockCache>>> {
    let from_env = || std::env::var_os(defaults::CACHE_DIR_ENV).map(PathBuf::from);
    let dir = match dir.filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => Some(dir.to_path_buf()),
        None => from_env().filter(|d| !d.as_os_str().is_empty()),
    };
    match (dir, bytes) {
        (Some(dir), bytes) => crate::storage::block_cache::BlockCache::open(
            &dir,
            bytes.unwrap_or(defaults::CACHE_BYTES),
        )
        .map(Some),
        (None, None) => Ok(None),
        (None, Some(_)) => Err(Error::invalid_argument(format!(
            "cache_bytes is given but no cache_dir (nor {}): give the directory to bound",
            defaults::CACHE_DIR_ENV
        ))),
    }
}

/// The op's `cache_bytes` attr (a signed integer): -1 is "not given" (`None`: the
/// default of [`cache`]), another negative number an error; the bound itself (at least
/// 1) is checked by [`cache`], as for every front end.
///
/// ```
/// use tfrecord_lirs::options;
/// assert_eq!(options::signed_cache_bytes(-1)?, None);
/// assert_eq!(options::signed_cache_bytes(1 << 20)?, Some(1 << 20));
/// assert!(options::signed_cache_bytes(-2).is_err());
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn signed_cache_bytes(bytes: i64) -> Result<Option<u64>> {
    if bytes == defaults::OP_CACHE_BYTES {
        return Ok(None);
    }
    u64::try_from(bytes).map(Some).map_err(|_| {
        Error::invalid_argument(format!(
            "cache_bytes must be at least 1 (or -1: not given), got {bytes}"
        ))
    })
}

/// A page size: a power of two from [`MIN_PAGE_SIZE`](crate::format::MIN_PAGE_SIZE) to
/// [`MAX_PAGE_SIZE`](crate::format::MAX_PAGE_SIZE) bytes.
pub fn page_size(bytes: u64) -> Result<PageSize> {
    Ok(PageSize::checked(bytes)?)
}

/// Shard `shard_index` of `num_shards`: `num_shards >= 1` and `shard_index < num_shards`
/// (the orders' rule, [`OrderParams::check_shard`](crate::OrderParams::check_shard)).
pub fn shard(num_shards: u64, shard_index: u64) -> Result<()> {
    Ok(tfrecord_lirs_format::order::check_shard(
        num_shards,
        shard_index,
    )?)
}

/// What shards do with the remainder of the instances: "keep", "drop" or "pad"
/// ([`ShardRemainder`]).
///
/// [`ShardRemainder`]: tfrecord_lirs_format::shard_remainder::ShardRemainder
pub fn shard_remainder(
    name: &str,
) -> Result<tfrecord_lirs_format::shard_remainder::ShardRemainder> {
    Ok(tfrecord_lirs_format::shard_remainder::ShardRemainder::from_name(name)?)
}

/// The shard of a front end and what its shards do with the remainder, from the
/// arguments given (`None`: not given) and the data-parallel process group the
/// process is in (`(world_size, rank)` of PyTorch's initialised `torch.distributed`,
/// `None` outside one), as `DistributedSampler` takes them: an argument given wins;
/// in a group, `num_shards` is the world size, `shard_index` the rank and the
/// remainder "pad" (every rank the same count, so no rank waits for another at a
/// collective); outside one, the defaults. Checked.
///
/// ```
/// use tfrecord_lirs::options::process_group_shard;
/// use tfrecord_lirs::format::shard_remainder::ShardRemainder;
/// assert_eq!(process_group_shard(None, None, None, Some((2, 1)))?, (2, 1, ShardRemainder::Pad));
/// assert_eq!(process_group_shard(Some(4), Some(3), Some("keep"), Some((2, 1)))?,
///            (4, 3, ShardRemainder::Keep));
/// assert_eq!(process_group_shard(None, None, None, None)?, (1, 0, ShardRemainder::Keep));
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn process_group_shard(
    num_shards: Option<u64>,
    shard_index: Option<u64>,
    remainder: Option<&str>,
    group: Option<(u64, u64)>,
) -> Result<(
    u64,
    u64,
    tfrecord_lirs_format::shard_remainder::ShardRemainder,
)> {
    let (world, rank, rule) = match group {
        Some((world, rank)) => (world, rank, defaults::PROCESS_GROUP_SHARD_REMAINDER),
        None => (
            defaults::NUM_SHARDS,
            defaults::SHARD_INDEX,
            defaults::SHARD_REMAINDER,
        ),
    };
    let (n, i) = (num_shards.unwrap_or(world), shard_index.unwrap_or(rank));
    shard(n, i)?;
    Ok((n, i, shard_remainder(remainder.unwrap_or(rule))?))
}

/// A number of shards alone (its index not known yet): at least 1.
pub fn num_shards(num_shards: u64) -> Result<u64> {
    shard(num_shards, 0).map(|()| num_shards)
}

/// The placement named `name`, the syntax the Python package and the op library take:
/// `"next"`, `"best"` (the default lookahead) or `"best:<window>"`. `"auto"` chooses by
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
            let lookahead = name
                .strip_prefix("best:")
                .and_then(|w| w.parse::<u64>().ok())
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "fit must be 'next', 'best' or 'best:<window>', got {name:?}"
                    ))
                })?;
            best_fit_lookahead(lookahead)
        }
    }
}

/// A best-fit lookahead of `records` pending instances (at least 1): the
/// [`Fit`] it selects. Next-fit is [`Fit::Next`], never a lookahead of 0.
pub fn best_fit_lookahead(records: u64) -> Result<Fit> {
    if records == 0 {
        return Err(Error::invalid_argument(
            "the best-fit lookahead ('best:<window>', --window) must hold at least 1 record",
        ));
    }
    let lookahead = usize::try_from(records).map_err(|_| {
        Error::invalid_argument(format!("best-fit lookahead {records} is too large"))
    })?;
    Ok(Fit::Best { lookahead })
}

/// A page size as the foreign callers give it (the signed `page_size` argument of
/// Python and the TensorFlow op): [`page_size`]'s rule, worded with the argument's name.
pub fn signed_page_size(page_size: i64) -> Result<u64> {
    let bytes = u64::try_from(page_size).map_err(|_| PageSize::refused(page_size))?;
    self::page_size(bytes).map(PageSize::get)
}

/// tf.data's `SHARD_HINT`: a placeholder for the number of shards.
const SHARD_HINT: i64 = -1;

/// What a caller's shard pair asks for ([`shard_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardRequest {
    /// Shard `.1` of `.0` (an unknown value as 1 shard / index 0).
    Fixed(u64, u64),
    /// tf.data's `SHARD_HINT` for both: the number of workers and this worker's
    /// index, filled in where tf.data rewrites `Dataset.shard(SHARD_HINT, SHARD_HINT)`
    /// (`ShardingPolicy.HINT` of tf.data service, `AutoShardPolicy.HINT`).
    Hint,
}

/// `num_shards` and `shard_index` as LIRSDataset takes them (either may be unknown
/// yet): `SHARD_HINT` for num_shards, with shard_index `SHARD_HINT` or not given,
/// asks for the worker's shard under HINT sharding; any other pair is
/// [`signed_shard`]'s rule.
pub fn shard_request(num_shards: Option<i64>, shard_index: Option<i64>) -> Result<ShardRequest> {
    match (num_shards, shard_index) {
        (Some(SHARD_HINT), None | Some(SHARD_HINT)) => Ok(ShardRequest::Hint),
        (Some(SHARD_HINT), Some(i)) => Err(Error::invalid_argument(format!(
            "shard_index must be SHARD_HINT (-1) too when num_shards is \
             tf.data.experimental.SHARD_HINT, got {i}: tf.data fills in both, the \
             number of workers and this worker's index"
        ))),
        (_, Some(SHARD_HINT)) => Err(Error::invalid_argument(
            "shard_index is tf.data.experimental.SHARD_HINT (-1) but num_shards is not: \
             give num_shards=SHARD_HINT as well (tf.data fills in both), or a shard index \
             >= 0",
        )),
        _ => signed_shard(num_shards, shard_index).map(|(n, i)| ShardRequest::Fixed(n, i)),
    }
}

/// `num_shards` and `shard_index` as the foreign callers give them (signed; either may
/// be unknown yet, e.g. a tensor Python cannot see into): [`shard`]'s rule; the pair
/// as u64s (an unknown one as 1 shard / index 0).
pub fn signed_shard(num_shards: Option<i64>, shard_index: Option<i64>) -> Result<(u64, u64)> {
    if num_shards == Some(SHARD_HINT) {
        // The op takes the numbers: LIRSDataset turns SHARD_HINT into a pipeline that
        // tf.data's HINT sharding fills in ([`shard_request`]); -1 reaching a reader
        // would otherwise mean "every worker reads everything".
        return Err(Error::invalid_argument(
            "num_shards must be >= 1, got -1 (tf.data.experimental.SHARD_HINT): a reader \
             takes the number of shards; LIRSDataset(num_shards=SHARD_HINT, \
             shard_index=SHARD_HINT) reads the worker's shard under tf.data's HINT \
             sharding (tf.data service ShardingPolicy.HINT)",
        ));
    }
    if let Some(n) = num_shards.filter(|&n| n < 0) {
        return Err(Error::invalid_argument(format!(
            "num_shards must be >= 1, got {n}"
        )));
    }
    if let Some(i) = shard_index.filter(|&i| i < 0) {
        return Err(Error::invalid_argument(format!(
            "shard_index must be >= 0, got {i}"
        )));
    }
    // Both non-negative now: the rule is [`shard`]'s (an unknown index checks as 0).
    let n = num_shards.map_or(1, |n| n.unsigned_abs());
    let i = shard_index.map_or(0, |i| i.unsigned_abs());
    if num_shards.is_some() {
        shard(n, i)?;
    }
    Ok((n, i))
}

/// The placement `pad` is asked for: a fixed one, or chosen by the file's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadFit {
    /// This placement ([`fit`]).
    Fixed(Fit),
    /// `"auto"`: [`crate::pad_file_auto`].
    Auto,
}

/// The placement named `name` for `pad`: "auto" or what [`fit`] takes.
pub fn pad_fit(name: &str) -> Result<PadFit> {
    match name {
        "auto" => Ok(PadFit::Auto),
        _ => fit(name).map(PadFit::Fixed),
    }
}

/// LIRSDataset's `compression_type` as TFRecordDataset takes it ("": uncompressed). A
/// GZIP or ZLIB stream cannot be read at random: the error says how to get a file that
/// can (its remedy: `pad` decompresses as it reads).
pub fn compression_type(compression_type: &str) -> Result<()> {
    let compressed = |kind: &'static str| {
        Err(Error::invalid_argument(format!(
            "compression_type={kind:?}: LIRSDataset reads records at random, which a {kind} stream does not allow"
        ))
        .with_remedy(Remedy::Pad {
            data: "FILE".into(),
            compression: kind,
        }))
    };
    match compression_type {
        "" => Ok(()),
        "GZIP" => compressed("GZIP"),
        "ZLIB" => compressed("ZLIB"),
        other => Err(Error::invalid_argument(format!(
            "compression_type must be None, \"\", \"GZIP\" or \"ZLIB\" (as for TFRecordDataset), got {other:?}"
        ))),
    }
}

/// LIRSDataset's `buffer_size` (bytes; `None` when not given) as TFRecordDataset takes
/// it: at least 0. Reads are per record (positioned reads of each record's span, or a
/// memory map), so there is no stream buffer to size; the read-ahead is
/// `num_parallel_reads` threads over fetch windows.
pub fn buffer_size(buffer_size: Option<i64>) -> Result<()> {
    match buffer_size {
        Some(b) if b < 0 => Err(Error::invalid_argument(format!(
            "buffer_size must be >= 0 bytes or None, got {b}"
        ))),
        _ => Ok(()),
    }
}

/// Instances per batch: at least 1.
///
/// ```
/// use tfrecord_lirs::options;
/// assert_eq!(options::batch_size(8)?, 8);
/// assert_eq!(options::batch_size(0).unwrap_err().to_string(), "batch_size must be >= 1, got 0");
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn batch_size(batch_size: i64) -> Result<usize> {
    usize::try_from(batch_size)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| {
            Error::invalid_argument(format!("batch_size must be >= 1, got {batch_size}"))
        })
}

/// Fetch threads: -1 (also `tf.data.AUTOTUNE`) chooses automatically (`None`), else at
/// least 1.
///
/// What the number means (it is not `TFRecordDataset`'s count of files read at once):
/// a dataset reads its order in *windows* (about 384 KiB of data, at least one batch,
/// at most 32 MiB; a record of 96 KB or more, unbatched, is a window of its own), a
/// few windows ahead of the consumer; each window is cut into parts, and each fetch
/// thread reads one part at a time with one positioned read per record. So the data
/// read ahead is bounded by the windows, not by this number, and more threads only pay
/// where reads wait on a device or the network: the automatic choice is 1 over
/// memory-mapped files, 2 with positioned reads of cached files,
/// [`COLD_AUTO_THREADS`](crate::COLD_AUTO_THREADS) for files read cold (beyond the
/// memory this process may use, or `O_DIRECT`), 32 (or the adaptive limit) for URLs.
/// On warm local files, threads beyond the cores this process has compete with the
/// training's own threads (a framework's reader-thread count is not the right value).
///
/// ```
/// use tfrecord_lirs::options;
/// assert_eq!(options::num_parallel_reads(-1)?, None);
/// assert_eq!(options::num_parallel_reads(4)?, Some(4));
/// assert!(options::num_parallel_reads(0).is_err());
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn num_parallel_reads(num_parallel_reads: i64) -> Result<Option<usize>> {
    match num_parallel_reads {
        -1 => Ok(None),
        n if n >= 1 => usize::try_from(n)
            .map(Some)
            .map_err(|_| Error::invalid_argument(format!("num_parallel_reads {n} is too large"))),
        n => Err(Error::invalid_argument(format!(
            "num_parallel_reads must be >= 1 or -1 (automatic), got {n}"
        ))),
    }
}

/// LIRSDataset's `deterministic` as the op takes it: `"true"` (in order), `"false"`
/// (unordered) or `"default"` (`None`: as the pipeline's
/// `tf.data.Options().deterministic` says).
pub fn deterministic(name: &str) -> Result<Option<bool>> {
    match name {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        "default" => Ok(None),
        other => Err(Error::invalid_argument(format!(
            "deterministic must be \"true\", \"false\" or \"default\", got {other:?}"
        ))),
    }
}

/// LIRSDataset's arguments as Python gives them: `batch_size` (`None`: elements are
/// single records; else [`batch_size`]'s rule), `num_parallel_reads`
/// ([`num_parallel_reads`]'s rule; -1 is also `tf.data.AUTOTUNE`), and, when both are
/// known, as many offset tables given as files (`tables` `None`: not given, the
/// default tables).
pub fn dataset_arguments(
    batch_size: Option<i64>,
    num_parallel_reads: i64,
    files: Option<u64>,
    tables: Option<u64>,
) -> Result<()> {
    if let Some(b) = batch_size {
        self::batch_size(b)?;
    }
    self::num_parallel_reads(num_parallel_reads)?;
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
pub fn order_version(number: u64) -> Result<OrderVersion> {
    Ok(OrderVersion::from_number(number)?)
}

/// A reuse factor as a front end gives it (a number): a whole number `>= 1`
/// (`docs/FORMAT.md` §7: a fractional one is refused).
pub fn reuse_factor(number: f64) -> Result<u64> {
    Ok(tfrecord_lirs_format::refurbish::reuse_factor_from_f64(
        number,
    )?)
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
            ((Some(0), -1, None, None), "batch_size must be >= 1, got 0"),
            (
                (None, 0, None, None),
                "num_parallel_reads must be >= 1 or -1 (automatic), got 0",
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

    #[test]
    fn foreign_callers_signed_and_tensorflow_options() {
        assert_eq!(signed_page_size(4096).unwrap(), 4096);
        for bad in [0, -4096, 100, 32 << 20, i64::MIN] {
            let e = signed_page_size(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(
                e.to_string().contains(&format!(
                    "page_size must be a power of two from 512 to 16777216 bytes, got {bad}"
                )) && e.to_string().contains(&bad.to_string()),
                "{e}"
            );
        }
        assert_eq!(signed_shard(Some(2), Some(1)).unwrap(), (2, 1));
        assert_eq!(signed_shard(None, Some(4)).unwrap(), (1, 4));
        assert_eq!(
            signed_shard(Some(-2), None).unwrap_err().to_string(),
            "num_shards must be >= 1, got -2"
        );
        assert_eq!(
            signed_shard(None, Some(-1)).unwrap_err().to_string(),
            "shard_index must be >= 0, got -1"
        );
        assert!(signed_shard(Some(2), Some(2)).is_err());
        let hint = signed_shard(Some(-1), Some(0)).unwrap_err().to_string();
        assert!(
            hint.contains("SHARD_HINT") && hint.contains("ShardingPolicy.HINT"),
            "{hint}"
        );
        assert_eq!(
            shard_request(Some(-1), Some(-1)).unwrap(),
            ShardRequest::Hint
        );
        assert_eq!(shard_request(Some(-1), None).unwrap(), ShardRequest::Hint);
        assert_eq!(
            shard_request(None, None).unwrap(),
            ShardRequest::Fixed(1, 0)
        );
        assert_eq!(
            shard_request(Some(3), Some(2)).unwrap(),
            ShardRequest::Fixed(3, 2)
        );
        let index = shard_request(Some(-1), Some(1)).unwrap_err().to_string();
        assert!(index.contains("must be SHARD_HINT (-1) too") && index.contains("got 1"));
        let number = shard_request(Some(2), Some(-1)).unwrap_err().to_string();
        assert!(number.contains("num_shards is not"), "{number}");
        assert!(shard_request(Some(2), Some(2)).is_err());
        assert_eq!(pad_fit("auto").unwrap(), PadFit::Auto);
        assert_eq!(
            pad_fit("best:3").unwrap(),
            PadFit::Fixed(Fit::Best { lookahead: 3 })
        );
        assert!(pad_fit("worst").is_err());
        compression_type("").unwrap();
        for kind in ["GZIP", "ZLIB"] {
            let e = compression_type(kind).unwrap_err();
            assert!(
                matches!(e.remedy(), Some(Remedy::Pad { compression, .. }) if *compression == kind),
                "{e}"
            );
            assert!(e.to_string().contains(kind), "{e}");
        }
        assert!(compression_type("gzip")
            .unwrap_err()
            .to_string()
            .starts_with("compression_type must be None"));
        assert_eq!(
            deterministic(defaults::DATASET_DETERMINISTIC).unwrap(),
            None
        );
        assert_eq!(deterministic("false").unwrap(), Some(false));
        assert!(deterministic("False").is_err());
        buffer_size(None).unwrap();
        buffer_size(Some(0)).unwrap();
        assert!(buffer_size(Some(-1)).is_err());
    }
}
