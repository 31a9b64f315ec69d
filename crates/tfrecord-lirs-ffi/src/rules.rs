//! The option rules the kernels take, through the core's ([`core::options`], where
//! every rule is decided once; Python reaches the same rules through its extension):
//! the I/O backend names, TensorFlow's signed shard pair, and the offset-table path of
//! each file of a [`ReaderConfig`] (a LIRSDataset's fetch settings are the core's
//! `CursorOptions::dataset`).

use std::path::PathBuf;

use tfrecord_lirs as core;

use crate::{path_of, FfiError, FfiResult, ReaderConfig, WalkConfig};

/// The I/O backend named `name` ([`core::options::backend`]).
pub fn parse_backend(name: &str) -> FfiResult<core::Backend> {
    Ok(core::options::backend(name)?)
}

/// Checks `num_shards` and `shard_index` as a caller gives them (either may be unknown
/// yet, e.g. a tensor Python cannot see into); returns them as the core's u64 pair
/// (an unknown one as 1 shard / index 0).
pub fn check_shard(num_shards: Option<i64>, shard_index: Option<i64>) -> FfiResult<(u64, u64)> {
    Ok(core::options::signed_shard(num_shards, shard_index)?)
}

/// Whether a LIRSDataset of `walk` may read parts of its epoch that a coordinator
/// hands out (tf.data service's `distributed_epoch`, `ShardingPolicy.DYNAMIC`): every
/// worker must walk the same order of the whole epoch, so the seed pair is fixed,
/// there is one shard (the coordinator shards) and no elastic resume state; page-aware
/// parts end at unit ends, so their last batches are short and `drop_remainder`
/// would drop records inside the epoch.
pub fn check_parts(walk: &WalkConfig, seed: i64, seed2: i64, epoch_state: bool) -> FfiResult<()> {
    const WHAT: &str = "LIRSDataset read in splits (tf.data service distributed_epoch or \
                        ShardingPolicy.DYNAMIC)";
    if seed == 0 && seed2 == 0 {
        return Err(FfiError::invalid(format!(
            "{WHAT} needs a fixed seed: every worker must walk the same order, so give \
             seed= (or tf.random.set_seed)"
        )));
    }
    if walk.num_shards != 1 || walk.shard_index != 0 {
        return Err(FfiError::invalid(format!(
            "{WHAT} reads the whole epoch and the dispatcher shards it: num_shards must be \
             1 and shard_index 0, got num_shards={} shard_index={}",
            walk.num_shards, walk.shard_index
        )));
    }
    if walk.shard_remainder != "keep" {
        return Err(FfiError::invalid(format!(
            "{WHAT} takes shard_remainder 'keep', got '{}'",
            walk.shard_remainder
        )));
    }
    if epoch_state {
        return Err(FfiError::invalid(format!(
            "{WHAT} cannot resume an epoch_state (elastic resume is for num_shards workers)"
        )));
    }
    if walk.page_aware && walk.batch_size > 0 && walk.drop_remainder {
        return Err(FfiError::invalid(format!(
            "{WHAT}: page-aware splits end at page units, so their last batches are short; \
             drop_remainder would drop records inside the epoch (batch after the service, \
             or set page_aware=False)"
        )));
    }
    Ok(())
}

/// The parts an epoch of `len` instances of `walk` is read in (see [`check_parts`]).
pub fn epoch_parts(walk: &WalkConfig, len: u64) -> core::EpochParts {
    let batch = usize::try_from(walk.batch_size).unwrap_or(0);
    core::EpochParts::new(len, batch, walk.page_aware)
}

/// [`core::options::shard`].
pub fn check_shard_u64(num_shards: u64, shard_index: u64) -> FfiResult<()> {
    Ok(core::options::shard(num_shards, shard_index)?)
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

/// Checks a page size as a caller gives it (the op's signed `page_size` attr): the
/// core's rule ([`core::options::signed_page_size`]).
pub fn check_page_size(page_size: i64) -> FfiResult<u64> {
    Ok(core::options::signed_page_size(page_size)?)
}

/// The order version a TensorFlow attr (a signed integer) names: the core's rule.
pub fn order_version_of(number: i64) -> FfiResult<core::OrderVersion> {
    let number = u64::try_from(number).unwrap_or(0);
    Ok(core::options::order_version(number)?)
}

/// LIRSDataset's `deterministic` attr: "true" (in order), "false" (unordered) or
/// "default" (`None`: as the pipeline's `tf.data.Options().deterministic` says)
/// ([`core::options::deterministic`]).
pub fn parse_deterministic(deterministic: &str) -> FfiResult<Option<bool>> {
    Ok(core::options::deterministic(deterministic)?)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            index_missing: true,
            cache_dir: Vec::new(),
            cache_bytes: -1,
            page_aware: false,
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
