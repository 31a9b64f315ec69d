//! Every user-facing default, once. The front ends take "not given" (Python's `None`,
//! an absent flag) and apply these: the PyO3 extension through `Option<…>` arguments,
//! the CLI through its flags' `default_value`s written from these constants, the
//! TensorFlow op through attrs whose defaults C++ cannot take from here (a test
//! compares them with [`TABLE`], exported to Python as `tfrecord_lirs._lirs.defaults()`).
//!
//! ```
//! use tfrecord_lirs::options::defaults;
//! assert_eq!(defaults::PAGE_SIZE, tfrecord_lirs::format::DEFAULT_PAGE_SIZE);
//! assert_eq!(defaults::get("order_version"), Some(defaults::Value::Int(1)));
//! ```

/// The page size the files were padded to (the format's default).
pub const PAGE_SIZE: u64 = tfrecord_lirs_format::framing::DEFAULT_PAGE_SIZE;
/// The epoch order algorithm: 1, the orders of every earlier release.
pub const ORDER_VERSION: u64 = 1;
/// The I/O backend: memory maps under a read lease where they pay, else pread.
pub const BACKEND: &str = "auto";
/// The placement of records in a padded file: next fit, which keeps the input order.
pub const FIT: &str = "next";
/// How an input to `pad` is compressed: detected from its first bytes.
pub const COMPRESSION: &str = "auto";
/// The shuffle seed of the TensorFlow-free front ends (the op takes TensorFlow's seeds).
pub const SEED: u64 = 0;
/// The epoch walked first.
pub const EPOCH: u64 = 0;
/// Instances are the shuffle unit; `true` shuffles whole pages.
pub const PAGE_AWARE: bool = false;
/// One shard: the whole dataset.
pub const NUM_SHARDS: u64 = 1;
/// The first (only) shard.
pub const SHARD_INDEX: u64 = 0;
/// Shards keep the remainder: lengths differ by at most one (the orders of every
/// earlier release); "drop"/"pad" give every data-parallel rank the same count.
pub const SHARD_REMAINDER: &str = "keep";
/// In a data-parallel process group (PyTorch's `torch.distributed`), shards pad, as
/// `DistributedSampler(drop_last=False)`: with "keep" one rank can run a step more
/// than another, which then waits at its collective until the group times out.
pub const PROCESS_GROUP_SHARD_REMAINDER: &str = "pad";
/// Fetch threads: -1 (also `tf.data.AUTOTUNE`) chooses automatically; on object
/// storage that is the adaptive limit of requests in flight
/// ([`ADAPTIVE_IN_FLIGHT`](crate::ADAPTIVE_IN_FLIGHT)).
pub const NUM_PARALLEL_READS: i64 = -1;
/// The adaptive limit of requests in flight starts at this many (a reader's first
/// fetch; the next ones start where the last ended): one round of answers
/// (about one latency) each doubles it while the throughput holds up, so 2,048 is
/// reached within three rounds. Started at 64, the first 4,096 records of row 15's
/// epoch took 1.2 s of its 1.7 s (lognormal latency of mean 50 ms); at 256, whole
/// epochs ran at 0.77-0.98x the pinned 2,048 (Loader, both orders and deliveries).
pub const IN_FLIGHT_START: usize = 256;
/// The adaptive limit never goes below this many requests in flight, however often
/// the storage throttles.
pub const IN_FLIGHT_MIN: usize = 8;
/// The refurbish schedule's reuse factor: 1, no reuse (every sample refreshed every
/// epoch, today's order); reuse changes what training sees, so it is asked for.
pub const REUSE_FACTOR: u64 = 1;
/// The bytes a store of partially augmented samples holds at most (8 GiB: a
/// generation of ImageNet's 1.28 M crops at 224×224×3 `uint8` is 193 GB, so a bound
/// the user raises for a real run; small sets fit).
pub const STORE_BYTES: u64 = 8 << 30;
/// The calls a refurbish map (`tfrecord_lirs.refurbish`, `augment`) keeps in flight.
/// Its uses cost unlike amounts (a reuse ~1/5 of a refresh in row 14), and the map
/// keeps the schedule's order, so a refresh holds back the reuses after it unless
/// many calls are in flight; over a store directory, a use another job is computing
/// also holds its call until that job has stored it. Both want more calls than
/// AUTOTUNE's (~the core count). Row 14's tf.data refurbish, r=3, store in memory,
/// 2 cores (2026-11-29): AUTOTUNE 2,070-2,230 images/s, 8/16/32 calls 2,630-2,830.
/// 4 tf.data jobs sharing a store directory (`benchmarks/sweep_bench.py --frontend
/// tf`): AUTOTUNE 1.87x the separate jobs' images/s (median of 3 rounds), 16 calls
/// 2.88x (median of 11); separate jobs were not slower at 16, at 64 they were.
pub const REFURBISH_NUM_PARALLEL_CALLS: i64 = 16;
/// The bytes a `cache_dir` holds at most (32 GiB: a TPU VM's or a node's local SSD
/// holds a few hundred GB; a dataset that is to stay local gets a bound the user
/// raises). Its least recently used blocks are evicted past it.
pub const CACHE_BYTES: u64 = 32 << 30;
/// The environment variable naming a `cache_dir` when no argument does (an argument
/// wins; neither: no local tier).
pub const CACHE_DIR_ENV: &str = "TFRECORD_LIRS_CACHE_DIR";
/// `cache_bytes` as the ops (LIRSDataset, LIRSRead) take it: -1, not given (Python's
/// `None`: [`CACHE_BYTES`] under a `cache_dir`, an error without one).
pub const OP_CACHE_BYTES: i64 = -1;
/// The `Loader`'s batch: the batch of the benchmarks and of the TensorFlow examples.
pub const BATCH_SIZE: i64 = 256;
/// LIRSDataset's `batch_size` as the op takes it: 0, elements are single records
/// (Python's `None`).
pub const DATASET_BATCH_SIZE: i64 = 0;
/// A last batch smaller than the batch size is delivered.
pub const DROP_REMAINDER: bool = false;
/// The offset tables are checked against the files (only fillers between entries).
pub const TRUST_TABLE: bool = false;
/// A data file without its offset table has one built on open (by `index`'s scan):
/// `false` keeps the `NotFound` error of earlier releases.
pub const INDEX_MISSING: bool = true;
/// The `Loader` delivers in order.
pub const DETERMINISTIC: bool = true;
/// LIRSDataset's `deterministic` as the op takes it: as the pipeline's
/// `tf.data.Options().deterministic` says (Python's `None`).
pub const DATASET_DETERMINISTIC: &str = "default";
/// The seed rule LIRSDataset graphs are made with (docs/FORMAT.md §5.9): an op seed
/// without a global seed orders as the TensorFlow-free front ends do.
pub const SEED_RULE: i64 = tfrecord_lirs_format::seed_pair::SeedRule::CURRENT as i64;
/// LIRSDataset's `seed_rule` attr when a graph holds none: 0, the rule of graphs saved
/// before the attr existed.
pub const OP_SEED_RULE: i64 = tfrecord_lirs_format::seed_pair::SeedRule::Fold as i64;
/// A new order every iteration, as for `Dataset.shuffle`.
pub const RESHUFFLE_EACH_ITERATION: bool = true;
/// Files worked on at once by the many-file commands: 0 chooses automatically.
pub const JOBS: u64 = 0;
/// The lookahead of best fit, in records.
pub const BEST_FIT_LOOKAHEAD: u64 = tfrecord_lirs_format::fit::Fit::DEFAULT_LOOKAHEAD as u64;

/// A default's value, as the front ends see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A flag.
    Bool(bool),
    /// A name.
    Str(&'static str),
}

/// Every default by the argument name the front ends use (Python's parameter, the op's
/// attr; `dataset_*`: LIRSDataset's op attr where it differs from the `Loader`'s).
pub const TABLE: &[(&str, Value)] = &[
    ("page_size", Value::Int(PAGE_SIZE as i64)),
    ("order_version", Value::Int(ORDER_VERSION as i64)),
    ("backend", Value::Str(BACKEND)),
    ("fit", Value::Str(FIT)),
    ("compression", Value::Str(COMPRESSION)),
    ("seed", Value::Int(SEED as i64)),
    ("epoch", Value::Int(EPOCH as i64)),
    ("start_epoch", Value::Int(EPOCH as i64)),
    ("seed_rule", Value::Int(SEED_RULE)),
    ("op_seed_rule", Value::Int(OP_SEED_RULE)),
    ("page_aware", Value::Bool(PAGE_AWARE)),
    ("num_shards", Value::Int(NUM_SHARDS as i64)),
    ("shard_index", Value::Int(SHARD_INDEX as i64)),
    ("shard_remainder", Value::Str(SHARD_REMAINDER)),
    (
        "process_group_shard_remainder",
        Value::Str(PROCESS_GROUP_SHARD_REMAINDER),
    ),
    ("num_parallel_reads", Value::Int(NUM_PARALLEL_READS)),
    ("batch_size", Value::Int(BATCH_SIZE)),
    ("reuse_factor", Value::Int(REUSE_FACTOR as i64)),
    ("store_bytes", Value::Int(STORE_BYTES as i64)),
    (
        "refurbish_num_parallel_calls",
        Value::Int(REFURBISH_NUM_PARALLEL_CALLS),
    ),
    ("cache_bytes", Value::Int(CACHE_BYTES as i64)),
    ("op_cache_bytes", Value::Int(OP_CACHE_BYTES)),
    ("dataset_batch_size", Value::Int(DATASET_BATCH_SIZE)),
    ("drop_remainder", Value::Bool(DROP_REMAINDER)),
    ("trust_table", Value::Bool(TRUST_TABLE)),
    ("index_missing", Value::Bool(INDEX_MISSING)),
    ("deterministic", Value::Bool(DETERMINISTIC)),
    ("dataset_deterministic", Value::Str(DATASET_DETERMINISTIC)),
    (
        "reshuffle_each_iteration",
        Value::Bool(RESHUFFLE_EACH_ITERATION),
    ),
    ("jobs", Value::Int(JOBS as i64)),
    ("best_fit_lookahead", Value::Int(BEST_FIT_LOOKAHEAD as i64)),
];

/// The default of argument `name` ([`TABLE`]), `None` for an argument without one.
pub fn get(name: &str) -> Option<Value> {
    TABLE.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_default_is_listed_once_and_is_valid() {
        let mut names: Vec<&str> = TABLE.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        super::super::page_size(PAGE_SIZE).unwrap();
        super::super::order_version(ORDER_VERSION).unwrap();
        super::super::backend(BACKEND).unwrap();
        super::super::fit(FIT).unwrap();
        super::super::compression(COMPRESSION).unwrap();
        super::super::shard(NUM_SHARDS, SHARD_INDEX).unwrap();
        super::super::shard_remainder(SHARD_REMAINDER).unwrap();
        super::super::best_fit_lookahead(BEST_FIT_LOOKAHEAD).unwrap();
        assert_eq!(
            super::super::signed_cache_bytes(OP_CACHE_BYTES).unwrap(),
            None
        );
        tfrecord_lirs_format::refurbish::check_reuse_factor(REUSE_FACTOR).unwrap();
        super::super::dataset_arguments(Some(BATCH_SIZE), NUM_PARALLEL_READS, None, None).unwrap();
        assert_eq!(get("page_size"), Some(Value::Int(4096)));
        assert_eq!(get("nonesuch"), None);
    }
}
