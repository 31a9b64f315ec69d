//! The cxx bridge between the `tfrecord-lirs` core crate and the TensorFlow op library
//! in `tf_op/`: readers, dataset cursors (the core's [`tfrecord_lirs::DatasetCursor`]),
//! filler checks and the options the kernels validate. (Python writes, pads, indexes
//! and checks its arguments through the TensorFlow-free extension,
//! crates/tfrecord-lirs-py, over its own copy of the core.)
//!
//! Every rule the kernels need (the backend names, the shard check, the default
//! offset-table path, the fetch defaults, the error classes) is decided here or in the
//! core, once; C++ only translates.
//!
//! # Errors
//!
//! An error crosses as an [`ErrorCode`] (mapped once, from
//! [`tfrecord_lirs::Error::kind`], in [`FfiError`]'s `From`) and a message, never as a
//! text prefix to parse. cxx can carry only a string in the C++ exception it throws for
//! an `Err`, so every fallible bridge function takes the caller's [`Status`] as its last
//! argument and returns `Result<T>`: on `Err` it has first written the code and the
//! message into that `Status`, and the `rust::Error` thrown is only the signal (its
//! `what()` is the same message). The C++ side (`tf_op/lirs_status.h`) catches it and
//! turns the `Status` into an `absl::Status` with one switch. `Result` rather than a
//! returned `Status` because the constructors return `Box<T>` and cxx has no
//! `Option<Box<T>>`.
//!
//! # Panics
//!
//! No panic may unwind into C++ (that aborts the process). Every fallible entry
//! point runs its body under [`guard`], which catches the unwind and reports it as an
//! `Internal` error; the unguarded ones (`BatchView`'s, called per record) are
//! panic-free by construction.
//! A handle whose method panicked may be half-updated, so it is poisoned: every later
//! call on it fails with `Internal` (`DatasetCursor`). Panics while
//! fetching (on the core's fetch threads, or taking the next window) are caught in the
//! core's cursor, which reports them as `Internal` errors and fetches afresh. All of this needs `panic = "unwind"`, which the workspace's
//! Cargo.toml sets explicitly for every profile.
//!
//! Fault injection (the panic points the tests use to prove all of the above) exists
//! only with the cargo feature `fault-injection`: see `src/fault_injection.rs` (a
//! second bridge) and `tf_op/lirs_test_ops.cc`. The staticlib linked into the op
//! library users install is built without it, so it has no test entry point and no
//! per-call check.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tfrecord_lirs as core;

pub mod elastic;
#[cfg(feature = "fault-injection")]
pub mod fault_injection;
pub mod op_config;
pub mod reader_cache;
pub mod rules;
#[cfg(feature = "tensorflow")]
pub mod tf_fs;

#[cxx::bridge(namespace = "tfrecord_lirs::ffi")]
mod ffi {
    /// The class of an error, as TensorFlow's status codes know it (C++ maps it onto
    /// `absl::StatusCode`). The values are also the return codes of the test build's C
    /// function (`tf_op/lirs_test_ops.cc`). Never `OutOfRange`: for a dataset iterator that code means
    /// "end of sequence" and would silently truncate the data.
    #[derive(Debug)]
    #[repr(i32)]
    enum ErrorCode {
        Ok = 0,
        /// The bytes are damaged: CRC mismatch, truncation, not a record.
        DataLoss = 1,
        /// Bad arguments, or a table that does not fit its data file.
        InvalidArgument = 2,
        /// A file does not exist.
        NotFound = 3,
        /// Anything else (I/O failures, bugs, caught panics).
        Internal = 4,
        /// Access refused: file permissions, or storage refusing the credentials.
        PermissionDenied = 5,
        /// The storage did not serve the request, even after retries.
        Unavailable = 6,
    }

    /// The outcome of a bridge call: filled in by Rust when the call fails.
    #[derive(Debug)]
    struct Status {
        code: ErrorCode,
        message: String,
    }

    /// A file path as bytes (TensorFlow's strings are bytes; no UTF-8 is required).
    #[derive(Debug, Clone)]
    struct FilePath {
        bytes: Vec<u8>,
    }

    /// An op's attr or scalar input, or a checkpoint's value, by name, as C++ found
    /// it: an int or bool attr, or an int64/bool tensor, as `ints` (a bool as 0 or 1);
    /// a string attr or a scalar string tensor as `bytes`. Rust interprets it
    /// (see `op_args`); C++ knows no names but TensorFlow's own.
    #[derive(Debug, Clone)]
    struct NamedValue {
        name: String,
        ints: Vec<i64>,
        bytes: Vec<u8>,
    }

    /// Where a LIRSDataset iteration starts from an epoch state (elastic resume): the
    /// seed pair of the iteration, and the seed generator's `num_random_samples`
    /// after drawing it.
    #[derive(Debug, Clone)]
    struct IterationSeeds {
        seed: i64,
        seed2: i64,
        num_random_samples: i64,
    }

    /// Bytes of one state (a list of them crosses as a vector of these).
    #[derive(Debug, Clone)]
    struct StateBytes {
        bytes: Vec<u8>,
    }

    /// Reads and bytes of every reader of this process since it started.
    struct ProcessIoTotals {
        reads: u64,
        bytes_read: u64,
    }

    extern "Rust" {
        /// Shared, immutable reader over (data, offset table) pairs.
        type LirsReader;
        /// A LIRSDataset's reader and settings, shared by its iterators.
        type LirsDataset;
        /// One iteration's walk of its epoch (order, fetch, batches, errors,
        /// checkpoint state); not thread-safe (callers lock). Dropping it joins its
        /// fetch threads.
        type DatasetCursor;
        /// The records of one batch, where the fetch read them; immutable, so safe to
        /// share between threads (every string of a batch tensor views it).
        type BatchView;

        /// What every reader of this process read since it started (never fails).
        fn process_io_totals() -> ProcessIoTotals;
        /// The reader of a LIRSRead op: its attrs `args`, `files` and their `tables`
        /// (see `op_config::reader_config`); the one already open when the same
        /// files, unchanged, were opened with the same settings (see `reader_cache`).
        fn open_reader_for_op(
            args: &Vec<NamedValue>,
            files: &Vec<FilePath>,
            tables: &Vec<FilePath>,
            status: &mut Status,
        ) -> Result<Box<LirsReader>>;
        /// Payloads of `ids` (each >= 0), concatenated into `data`; `ends[i]` is the
        /// end offset of payload i in `data` (both vectors are cleared first). Runs of
        /// consecutive ids are fetched with one read (page-aware units).
        fn read_batch(
            self: &LirsReader,
            ids: &[i64],
            data: &mut Vec<u8>,
            ends: &mut Vec<u64>,
            status: &mut Status,
        ) -> Result<()>;
        /// The LIRSDataset of an op's attrs and scalar inputs `args`, `files` and their
        /// `tables` (see `op_config::dataset_config`): every value checked and the
        /// reader opened (shared, see `open_reader_for_op`) before any iteration.
        fn open_dataset(
            args: &Vec<NamedValue>,
            files: &Vec<FilePath>,
            tables: &Vec<FilePath>,
            status: &mut Status,
        ) -> Result<Box<LirsDataset>>;
        /// The shape of every element: `[]` (one record), `[batch_size]` (batches
        /// under `drop_remainder`) or `[-1]` (batches, the last maybe short).
        fn element_dims(self: &LirsDataset) -> Vec<i64>;
        /// Elements of every iteration (instances of the shard, or batches of them);
        /// -2 (TensorFlow's unknown) when the first iteration resumes an epoch state.
        fn cardinality(self: &LirsDataset) -> i64;
        /// Whether an iteration delivers unordered, given the pipeline's
        /// `tf.data.Options().deterministic` (1 true, 0 false, -1 unset).
        fn unordered(self: &LirsDataset, pipeline_deterministic: i32) -> bool;
        /// Whether this iteration is the one that starts from the dataset's epoch
        /// state (only the first is): then `seeds` are that state's.
        fn take_epoch_state(self: &LirsDataset, seeds: &mut IterationSeeds) -> bool;
        /// Starts an iteration with the (`seed`, `seed2`) of `seeds`, from the epoch
        /// state when `take_epoch_state` said so.
        fn start(
            self: &LirsDataset,
            seeds: &IterationSeeds,
            unordered: bool,
            from_epoch_state: bool,
            status: &mut Status,
        ) -> Result<Box<DatasetCursor>>;
        /// The keys a LIRSDataset checkpoint may hold besides `num_random_samples`
        /// (the seed generator's): today's and older checkpoints' (see
        /// `op_config::checkpoint`).
        fn checkpoint_keys() -> Vec<String>;
        /// The cursor of a checkpoint: the values `saved` under `checkpoint_keys`
        /// (those it holds), and the seed generator's `num_random_samples`. One that
        /// cannot belong to this dataset is `DataLoss`.
        fn restore(
            self: &LirsDataset,
            num_random_samples: i64,
            unordered: bool,
            saved: &Vec<NamedValue>,
            status: &mut Status,
        ) -> Result<Box<DatasetCursor>>;
        /// What the cursor delivered, as one value (the checkpoint's `shard_state`);
        /// `num_random_samples`: the seed generator's, for elastic resume.
        fn save(
            self: &DatasetCursor,
            num_random_samples: i64,
            status: &mut Status,
        ) -> Result<Vec<u8>>;
        /// The epoch state after every worker's shard state (`LIRSDataset.shard_state`),
        /// all of one iteration of one run.
        fn combine_shard_states(states: &Vec<StateBytes>, status: &mut Status) -> Result<Vec<u8>>;
        /// The next batch (empty at the end of the epoch), for `batch_size` > 0. An
        /// error passes its record's position; the batch keeps the records read so
        /// far for the next call. Its records may be viewed however long they are held.
        fn next_batch(self: &mut DatasetCursor, status: &mut Status) -> Result<Box<BatchView>>;
        /// Steps to the next record, for `batch_size` 0: false at the end of the epoch.
        /// An error passes its record's position.
        fn next_element(self: &mut DatasetCursor, status: &mut Status) -> Result<bool>;
        /// The record `next_element` stepped to (empty after an error or at the end);
        /// valid until the cursor steps again.
        fn element(self: &DatasetCursor) -> &[u8];
        /// Whether that record may be viewed however long it is held: when it pins only
        /// its own bytes (a large record's fetch window holds it alone). Otherwise copy
        /// it: a view would keep its whole window alive, e.g. in a downstream shuffle
        /// buffer.
        fn element_may_view(self: &DatasetCursor) -> bool;
        /// That record as a batch of one to view (empty unless `element_may_view`).
        fn element_view(self: &DatasetCursor) -> Box<BatchView>;

        /// Records in the batch.
        fn len(self: &BatchView) -> usize;
        /// Record `i`'s payload (empty out of range); valid as long as the box lives.
        fn record(self: &BatchView, i: usize) -> &[u8];

        /// Whether `record` is a filler record.
        fn is_filler(record: &[u8], status: &mut Status) -> Result<bool>;
    }
}

pub use ffi::{
    ErrorCode, FilePath, IterationSeeds, NamedValue, ProcessIoTotals, StateBytes, Status,
};
pub use op_config::{CursorCheckpoint, CursorConfig, DatasetConfig, ReaderConfig, WalkConfig};

impl From<core::ErrorKind> for ErrorCode {
    /// The one mapping of the core's error kinds onto the bridge's codes.
    fn from(kind: core::ErrorKind) -> Self {
        match kind {
            core::ErrorKind::DataLoss => ErrorCode::DataLoss,
            core::ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
            core::ErrorKind::NotFound => ErrorCode::NotFound,
            core::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
            core::ErrorKind::Unavailable => ErrorCode::Unavailable,
            core::ErrorKind::Internal => ErrorCode::Internal,
        }
    }
}

/// Error crossing the bridge: a code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub code: ErrorCode,
    pub message: String,
}

impl FfiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        FfiError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    fn to_status(&self) -> Status {
        Status {
            code: self.code,
            message: self.message.clone(),
        }
    }
}

/// The message only: the code travels in the caller's [`Status`].
impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FfiError {}

impl From<core::Error> for FfiError {
    fn from(e: core::Error) -> Self {
        FfiError::new(e.kind().into(), e.to_string())
    }
}

impl From<&core::Error> for FfiError {
    fn from(e: &core::Error) -> Self {
        FfiError::new(e.kind().into(), e.to_string())
    }
}

pub type FfiResult<T> = Result<T, FfiError>;

/// Runs `f` (the body of entry point `point`), turning a panic into an `Internal`
/// error instead of unwinding into C++ or C.
pub fn guard<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    catch(point, f).unwrap_or_else(Err)
}

/// Like [`guard`], for a method of a stateful handle: once its body panicked,
/// `*poisoned` is set and this and every later call fail with `Internal` (the
/// handle's state may be half-updated).
pub fn guard_poisoning<T>(
    point: &str,
    poisoned: &mut bool,
    f: impl FnOnce() -> FfiResult<T>,
) -> FfiResult<T> {
    if *poisoned {
        return Err(FfiError::internal(format!(
            "`{point}` on a handle that is unusable after an earlier panic in it"
        )));
    }
    catch(point, f).unwrap_or_else(|panic| {
        *poisoned = true;
        Err(panic)
    })
}

/// Writes the error of `result`, if any, into `status` (the cxx error protocol).
fn report<T>(status: &mut Status, result: FfiResult<T>) -> FfiResult<T> {
    if let Err(e) = &result {
        *status = e.to_status();
    }
    result
}

/// Runs `f`; `Err` only if it panicked (as an `Internal` error). `point` names the
/// entry point for fault injection (unused without it).
#[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
fn catch<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> Result<FfiResult<T>, FfiError> {
    catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "fault-injection")]
        fault_injection::panic_if_armed(point);
        f()
    }))
    .map_err(|payload| {
        FfiError::internal(format!(
            "panic in tfrecord-lirs (Rust): {}",
            core::panic_message(payload.as_ref())
        ))
    })
}

/// Where the op library's paths are: local files, and URLs through TensorFlow's file
/// systems (op library builds only; local files only without TensorFlow).
pub fn storage() -> core::Storage {
    #[cfg(feature = "tensorflow")]
    return tf_fs::storage();
    #[cfg(not(feature = "tensorflow"))]
    core::Storage::local()
}

/// A path from the bytes of a foreign string.
pub fn path_of(bytes: &[u8]) -> PathBuf {
    Path::new(OsStr::from_bytes(bytes)).to_path_buf()
}

pub struct LirsReader {
    inner: Arc<core::Reader>,
}

// The reader is shared by every iterator of a dataset (and by TF threads).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<core::Reader>();
    assert_send_sync::<LirsReader>();
    // A batch is read by any thread holding a tensor that views it, and dropped by
    // whichever lets go of it last.
    assert_send_sync::<BatchView>();
};
// Cursors move between TF threads (always under the iterator's mutex).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<DatasetCursor>();
};

fn process_io_totals() -> ProcessIoTotals {
    let totals = core::process_io_totals();
    ProcessIoTotals {
        reads: totals.reads,
        bytes_read: totals.bytes_read,
    }
}

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds rust::Vecs
fn open_reader_for_op(
    args: &Vec<NamedValue>,
    files: &Vec<FilePath>,
    tables: &Vec<FilePath>,
    status: &mut Status,
) -> FfiResult<Box<LirsReader>> {
    let config = report(status, op_config::reader_config(args, files, tables))?;
    open_reader(&config, status)
}

/// The reader of `config`, shared (see [`reader_cache`]); public for Rust-side tests.
pub fn open_reader(config: &ReaderConfig, status: &mut Status) -> FfiResult<Box<LirsReader>> {
    report(
        status,
        guard("open_reader", || {
            let pairs = rules::file_pairs(config)?;
            let backend = rules::parse_backend(&config.backend)?;
            let mmap_opt_in = (backend == core::Backend::Mmap).then(|| {
                // SAFETY: the user chose backend="mmap" by name; the Python (`backend=`)
                // and op (`backend` attr) documentation state its hazard (no file may be
                // written or truncated while it is mapped), which the caller thereby
                // accepts.
                unsafe { core::MmapOptIn::new() }
            });
            let options = core::ReaderOptions {
                page_size: rules::check_page_size(config.page_size)?,
                verify_payload_crc: config.verify_payload_crc,
                backend,
                trust_table: config.trust_table,
                mmap_opt_in,
                storage: storage(),
            };
            Ok(Box::new(LirsReader {
                inner: reader_cache::open_shared(&pairs, &options)?,
            }))
        }),
    )
}

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds rust::Vecs
fn open_dataset(
    args: &Vec<NamedValue>,
    files: &Vec<FilePath>,
    tables: &Vec<FilePath>,
    status: &mut Status,
) -> FfiResult<Box<LirsDataset>> {
    let config = report(status, op_config::dataset_config(args, files, tables))?;
    open_dataset_config(&config, status)
}

fn checkpoint_keys() -> Vec<String> {
    op_config::CHECKPOINT_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// The LIRSDataset of `config`: every field checked, then its reader opened; public
/// for Rust-side tests.
pub fn open_dataset_config(
    config: &DatasetConfig,
    status: &mut Status,
) -> FfiResult<Box<LirsDataset>> {
    report(
        status,
        guard("open_dataset", || {
            // Every argument is checked before any file is opened.
            rules::parse_backend(&config.reader.backend)?;
            let deterministic = rules::parse_deterministic(&config.deterministic)?;
            let epoch_seeds = if config.epoch_state.is_empty() {
                None
            } else {
                Some(epoch_state_seeds(&config.epoch_state).map_err(|e| {
                    let e = FfiError::from(e);
                    FfiError::new(e.code, format!("LIRSDataset epoch_state: {}", e.message))
                })?)
            };
            let (num_shards, shard_index) =
                rules::check_shard(Some(config.walk.num_shards), Some(config.walk.shard_index))?;
            order_version_of(config.walk.order_version)?;
            let mut st = ok_status();
            let reader = open_reader(&config.reader, &mut st)?;
            let shard_len = reader.inner.shard_len(num_shards, shard_index)?;
            core::CursorOptions::dataset(
                &reader.inner,
                config.walk.batch_size,
                config.walk.num_parallel_reads,
            )?;
            Ok(Box::new(LirsDataset {
                reader: *reader,
                config: config.clone(),
                shard_len,
                deterministic,
                epoch_seeds,
                epoch_state_taken: AtomicBool::new(false),
            }))
        }),
    )
}

/// A LIRSDataset: its checked settings and its (shared) reader.
pub struct LirsDataset {
    reader: LirsReader,
    config: DatasetConfig,
    shard_len: u64,
    /// In order (`Some(true)`), unordered (`Some(false)`), or as the pipeline says.
    deterministic: Option<bool>,
    /// The seeds of the epoch state the first iteration starts from, if any.
    epoch_seeds: Option<IterationSeeds>,
    /// Whether an iteration took the epoch state (only the first does; the next
    /// ones draw seeds as a fresh run).
    epoch_state_taken: AtomicBool,
}

impl LirsDataset {
    fn cardinality(&self) -> i64 {
        /// TensorFlow's `kUnknownCardinality`.
        const UNKNOWN: i64 = -2;
        if self.epoch_seeds.is_some() {
            // The resumed iteration is shorter than the others.
            return UNKNOWN;
        }
        let (n, b) = (self.shard_len as i64, self.config.walk.batch_size);
        match b {
            0 => n,
            _ if self.config.walk.drop_remainder => n / b,
            _ => (n + b - 1) / b,
        }
    }

    fn element_dims(&self) -> Vec<i64> {
        match self.config.walk.batch_size {
            0 => vec![],
            b if self.config.walk.drop_remainder => vec![b],
            _ => vec![-1],
        }
    }

    fn unordered(&self, pipeline_deterministic: i32) -> bool {
        // Unordered when the dataset says so, or by default when the pipeline's
        // options say deterministic=False; in order when neither says.
        let deterministic = self
            .deterministic
            .or(match pipeline_deterministic {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            })
            .unwrap_or(true);
        !deterministic
    }

    fn take_epoch_state(&self, seeds: &mut IterationSeeds) -> bool {
        match &self.epoch_seeds {
            Some(s) if !self.epoch_state_taken.swap(true, Ordering::SeqCst) => {
                *seeds = s.clone();
                true
            }
            _ => false,
        }
    }

    /// The cursor config of one iteration.
    fn cursor_config(&self, seeds: &IterationSeeds, unordered: bool) -> CursorConfig {
        CursorConfig {
            seed: seeds.seed,
            seed2: seeds.seed2,
            unordered,
            epoch_state: Vec::new(),
            walk: self.config.walk.clone(),
        }
    }

    /// Starts an iteration (public for Rust-side tests).
    pub fn start(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        from_epoch_state: bool,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let mut config = self.cursor_config(seeds, unordered);
        if from_epoch_state {
            config.epoch_state = self.config.epoch_state.clone();
        }
        let fresh = CursorCheckpoint {
            position: 0,
            has_delivered_after: false,
            delivered_after: Vec::new(),
            order_version: 0,
            shard_state: Vec::new(),
        };
        self.reader.fetch(&config, &fresh, status)
    }

    #[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds a rust::Vec
    fn restore(
        &self,
        num_random_samples: i64,
        unordered: bool,
        saved: &Vec<NamedValue>,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        let (seeds, checkpoint) = report(status, op_config::checkpoint(saved, num_random_samples))?;
        // Without seeds of its own, the checkpoint's shard_state holds them.
        let seeds = seeds.unwrap_or(IterationSeeds {
            seed: 0,
            seed2: 0,
            num_random_samples,
        });
        self.restore_checkpoint(&seeds, unordered, &checkpoint, status)
    }

    /// Restores a checkpoint's cursor (public for Rust-side tests).
    pub fn restore_checkpoint(
        &self,
        seeds: &IterationSeeds,
        unordered: bool,
        checkpoint: &CursorCheckpoint,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        // The checkpoint says where its walk started, not the dataset's epoch state.
        let seeds = if checkpoint.shard_state.is_empty() {
            seeds.clone()
        } else {
            let decoded = report(
                status,
                elastic::TfShardState::decode(&checkpoint.shard_state).map_err(FfiError::from),
            )?;
            IterationSeeds {
                seed: decoded.seeds.seed,
                seed2: decoded.seeds.seed2,
                num_random_samples: decoded.seeds.num_random_samples,
            }
        };
        self.reader
            .fetch(&self.cursor_config(&seeds, unordered), checkpoint, status)
    }
}

impl LirsReader {
    /// The shared core reader (for Rust-side users and tests).
    pub fn core(&self) -> &Arc<core::Reader> {
        &self.inner
    }

    fn read_batch(
        &self,
        ids: &[i64],
        data: &mut Vec<u8>,
        ends: &mut Vec<u64>,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("read_batch", || {
                data.clear();
                ends.clear();
                let ids = ids
                    .iter()
                    .enumerate()
                    .map(|(at, &id)| {
                        u64::try_from(id).map_err(|_| {
                            FfiError::invalid(format!(
                                "instance id must be >= 0, got {id} at index {at}"
                            ))
                        })
                    })
                    .collect::<FfiResult<Vec<u64>>>()?;
                let mut batch = core::Batch::default();
                self.inner.read_batch(&ids, &mut batch)?;
                data.reserve(batch.payload_bytes());
                for payload in batch.payloads() {
                    data.extend_from_slice(payload);
                    ends.push(data.len() as u64);
                }
                Ok(())
            }),
        )
    }

    /// Instances of a shard (public for Rust-side tests).
    pub fn shard_len(
        &self,
        num_shards: i64,
        shard_index: i64,
        status: &mut Status,
    ) -> FfiResult<u64> {
        report(
            status,
            guard("shard_len", || {
                let (n, i) = rules::check_shard(Some(num_shards), Some(shard_index))?;
                Ok(self.inner.shard_len(n, i)?)
            }),
        )
    }

    /// Checks a dataset's batching and order arguments (public for Rust-side tests).
    pub fn check_dataset(
        &self,
        batch_size: i64,
        num_parallel_reads: i64,
        order_version: i64,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("check_dataset", || {
                core::CursorOptions::dataset(&self.inner, batch_size, num_parallel_reads)?;
                order_version_of(order_version)?;
                Ok(())
            }),
        )
    }

    /// Starts an iteration at `checkpoint` (public for Rust-side tests).
    pub fn fetch(
        &self,
        config: &CursorConfig,
        checkpoint: &CursorCheckpoint,
        status: &mut Status,
    ) -> FfiResult<Box<DatasetCursor>> {
        report(
            status,
            guard("fetch", || {
                let walk = &config.walk;
                let (num_shards, shard_index) =
                    rules::check_shard(Some(walk.num_shards), Some(walk.shard_index))?;
                let mut options = core::CursorOptions::dataset(
                    &self.inner,
                    walk.batch_size,
                    walk.num_parallel_reads,
                )?;
                options.order = core::OrderParams {
                    seed: mix_seeds(config.seed, config.seed2),
                    // The seed generator gives every iteration its own seeds.
                    epoch: 0,
                    page_aware: walk.page_aware,
                    num_shards,
                    shard_index,
                };
                options.drop_remainder = walk.drop_remainder;
                options.unordered = config.unordered;
                options.order_version = order_version_of(walk.order_version)?;
                // A checkpoint's shard_state is the whole state, with where the walk
                // started; older checkpoints hold the position, the positions
                // delivered after it and the order version (version 1 when absent)
                // under their own keys, and started at the epoch's start.
                let (state, base) = if !checkpoint.shard_state.is_empty() {
                    let saved = elastic::TfShardState::decode(&checkpoint.shard_state)?;
                    (saved.shard.state, Some(saved.shard.base))
                } else {
                    let after: &[i64] = if checkpoint.has_delivered_after {
                        &checkpoint.delivered_after
                    } else {
                        &[]
                    };
                    let mut state = core::CursorState::from_signed(checkpoint.position, after)?;
                    state.order_version = match checkpoint.order_version {
                        0 => core::CursorState::start_of(options.order_version).order_version,
                        v => u32::try_from(v).map_err(|_| {
                            core::Error::data_loss(format!("checkpoint of order version {v}"))
                        })?,
                    };
                    // A new iteration starts at the dataset's epoch state, if any.
                    let base = (!config.epoch_state.is_empty())
                        .then(|| elastic::TfEpochState::decode(&config.epoch_state))
                        .transpose()?
                        .map(|epoch| epoch.progress);
                    (state, base)
                };
                let inner = match base {
                    Some(base) => core::DatasetCursor::resume(
                        Arc::clone(&self.inner),
                        options,
                        &base,
                        &state,
                    )?,
                    None => core::DatasetCursor::new(Arc::clone(&self.inner), options, &state)?,
                };
                Ok(Box::new(DatasetCursor {
                    inner,
                    seeds: (config.seed, config.seed2),
                    poisoned: false,
                }))
            }),
        )
    }
}

/// The seeds an iteration starting from `epoch_state` takes.
fn epoch_state_seeds(epoch_state: &[u8]) -> core::Result<IterationSeeds> {
    let seeds = elastic::TfEpochState::decode(epoch_state)?.seeds;
    Ok(IterationSeeds {
        seed: seeds.seed,
        seed2: seeds.seed2,
        num_random_samples: seeds.num_random_samples,
    })
}

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds a rust::Vec
fn combine_shard_states(states: &Vec<StateBytes>, status: &mut Status) -> FfiResult<Vec<u8>> {
    report(
        status,
        guard("combine_shard_states", || {
            let shards = states
                .iter()
                .map(|s| elastic::TfShardState::decode(&s.bytes))
                .collect::<core::Result<Vec<_>>>()?;
            Ok(elastic::TfEpochState::combine(&shards)?.encode())
        }),
    )
}

/// The order version a TensorFlow attr (a signed integer) names: the core's rule.
fn order_version_of(number: i64) -> FfiResult<core::OrderVersion> {
    let number = u64::try_from(number).unwrap_or(0);
    Ok(core::options::order_version(number)?)
}

pub struct DatasetCursor {
    inner: core::DatasetCursor,
    /// The iteration's (`seed`, `seed2`), for its checkpoint.
    seeds: (i64, i64),
    /// Set when a method panicked outside the core's own catch: the cursor may be
    /// half-updated.
    poisoned: bool,
}

impl DatasetCursor {
    /// The core's test panics armed as the process-wide panic points say.
    #[cfg(feature = "fault-injection")]
    fn arm_test_panics(&mut self) {
        self.inner.set_test_panics(
            fault_injection::armed("fetch_worker"),
            fault_injection::armed("next_window"),
        );
    }

    /// The checkpoint values (public for Rust-side tests).
    pub fn checkpoint(
        &self,
        seeds: &IterationSeeds,
        status: &mut Status,
    ) -> FfiResult<CursorCheckpoint> {
        report(
            status,
            guard("checkpoint", || {
                let (position, delivered_after) = self.inner.state().to_signed()?;
                let shard_state = elastic::TfShardState {
                    seeds: elastic::TfSeeds {
                        seed: seeds.seed,
                        seed2: seeds.seed2,
                        num_random_samples: seeds.num_random_samples,
                    },
                    shard: self.inner.progress(),
                };
                Ok(CursorCheckpoint {
                    position,
                    has_delivered_after: self.inner.options().unordered
                        || !delivered_after.is_empty(),
                    delivered_after,
                    order_version: i64::from(self.inner.state().order_version),
                    shard_state: shard_state.encode(),
                })
            }),
        )
    }

    /// The checkpoint's `shard_state` (public for Rust-side tests).
    pub fn save(&self, num_random_samples: i64, status: &mut Status) -> FfiResult<Vec<u8>> {
        let seeds = IterationSeeds {
            seed: self.seeds.0,
            seed2: self.seeds.1,
            num_random_samples,
        };
        Ok(self.checkpoint(&seeds, status)?.shard_state)
    }

    /// Steps to the next record (public for Rust-side tests).
    pub fn next_element(&mut self, status: &mut Status) -> FfiResult<bool> {
        #[cfg(feature = "fault-injection")]
        self.arm_test_panics();
        // Disjoint borrows: the body does not touch `poisoned`.
        let DatasetCursor {
            inner, poisoned, ..
        } = self;
        let result = guard_poisoning("next_element", poisoned, || match inner.next_element() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(FfiError::from(e)),
        });
        report(status, result)
    }

    /// The record `next_element` stepped to; empty when there is none.
    pub fn element(&self) -> &[u8] {
        self.inner.last_element().unwrap_or_default()
    }

    /// Whether the record `next_element` stepped to pins only its own bytes.
    pub fn element_may_view(&self) -> bool {
        self.inner.last_element_is_alone()
    }

    /// The record `next_element` stepped to, as a view that pins only its bytes;
    /// empty when there is none.
    pub fn element_view(&self) -> Box<BatchView> {
        Box::new(BatchView {
            inner: self.inner.last_element_view().unwrap_or_default(),
        })
    }

    /// The next batch (public for Rust-side tests).
    pub fn next_batch(&mut self, status: &mut Status) -> FfiResult<Box<BatchView>> {
        #[cfg(feature = "fault-injection")]
        self.arm_test_panics();
        let DatasetCursor {
            inner, poisoned, ..
        } = self;
        let result = guard_poisoning("next_batch", poisoned, || match inner.next_batch() {
            None => Ok(Box::default()),
            Some(Ok(batch)) => Ok(Box::new(BatchView { inner: batch })),
            Some(Err(e)) => Err(FfiError::from(e)),
        });
        report(status, result)
    }
}

/// One batch's records (see `next_batch`). Its methods are called per record, so
/// they are not guarded: panic-free by construction (lookups with `get`).
#[derive(Debug, Default)]
pub struct BatchView {
    inner: core::BatchView,
}

impl BatchView {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Record `i`; empty out of range.
    pub fn record(&self, i: usize) -> &[u8] {
        self.inner.get(i).unwrap_or_default()
    }
}

fn is_filler(record: &[u8], status: &mut Status) -> FfiResult<bool> {
    // Guarded although `is_filler` is a prefix comparison: it is cheap, and the test
    // panic point "is_filler" proves the kernel's error path.
    report(
        status,
        guard("is_filler", || Ok(core::format::is_filler(record))),
    )
}

/// Mapping from TensorFlow seeds onto the core's single u64 seed: the two int64 seeds
/// (TF's (seed, seed2) pair, or the pair a seed generator hands out for one
/// iteration) are folded with SplitMix64 so that every bit of both affects the result
/// and nearby pairs give unrelated seeds. The core's `epoch` stays 0: the seed
/// generator already gives every iteration its own pair (see
/// tf_op/lirs_dataset_op.cc).
fn mix_seeds(seed: i64, seed2: i64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    splitmix(splitmix(seed as u64) ^ (seed2 as u64))
}

/// A fresh `Status` (code `Ok`), as a caller passes one.
pub fn ok_status() -> Status {
    Status {
        code: ErrorCode::Ok,
        message: String::new(),
    }
}

/// Helpers of the crate's tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use super::{core, CursorCheckpoint, CursorConfig, FilePath, ReaderConfig, WalkConfig};

    /// A padded file `dir/d` of `n` instances of `len` bytes (at least 4), instance i
    /// starting with `i` as 4 LE bytes.
    pub fn write_u32_file(dir: &Path, n: u32, len: usize) -> PathBuf {
        let path = dir.join("d");
        let mut w = core::PaddedWriter::create(&path, &Default::default()).unwrap();
        for i in 0..n {
            let mut record = i.to_le_bytes().to_vec();
            record.resize(len.max(4), b'x');
            w.write(&record).unwrap();
        }
        w.finish().unwrap();
        path
    }

    /// A LIRSDataset iteration's cursor spec (seed pair (5, 0), one shard).
    pub fn cursor_config(batch_size: i64, num_parallel_reads: i64) -> CursorConfig {
        CursorConfig {
            seed: 5,
            seed2: 0,
            unordered: false,
            epoch_state: Vec::new(),
            walk: WalkConfig {
                page_aware: false,
                num_shards: 1,
                shard_index: 0,
                batch_size,
                drop_remainder: false,
                num_parallel_reads,
                order_version: 1,
            },
        }
    }

    /// `config` with its walk changed by `change` (for the tests that do not run with
    /// fault injection).
    #[cfg(not(feature = "fault-injection"))]
    pub fn cursor_with(
        config: &CursorConfig,
        change: impl FnOnce(&mut WalkConfig),
    ) -> CursorConfig {
        let mut config = config.clone();
        change(&mut config.walk);
        config
    }

    /// Seeds for a checkpoint's `shard_state` in tests that do not resume from it
    /// (those tests do not run with fault injection).
    #[cfg(not(feature = "fault-injection"))]
    pub fn no_seeds() -> super::IterationSeeds {
        super::IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 0,
        }
    }

    /// The checkpoint of a new iteration.
    pub fn start() -> CursorCheckpoint {
        CursorCheckpoint {
            position: 0,
            has_delivered_after: false,
            delivered_after: Vec::new(),
            order_version: 0,
            shard_state: Vec::new(),
        }
    }

    /// The config of a reader of `path` (default table) with `backend`.
    pub fn reader_config(path: &Path, backend: &str) -> ReaderConfig {
        ReaderConfig {
            files: vec![FilePath {
                bytes: path.as_os_str().as_bytes().to_vec(),
            }],
            tables: vec![],
            page_size: 4096,
            verify_payload_crc: true,
            backend: backend.into(),
            trust_table: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_code_and_fill_the_status() {
        let mut status = ok_status();
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 3, 8);
        let Err(err) = open_reader(&test_support::reader_config(&path, "io_uring"), &mut status)
        else {
            panic!("opened with an unknown backend");
        };
        assert_eq!(status.code, ErrorCode::InvalidArgument);
        assert_eq!(status.message, err.message);
        assert_eq!(err.to_string(), err.message); // no prefix in what()
        assert!(status.message.contains("backend"), "{}", status.message);
        let mut status = ok_status();
        open_reader(&test_support::reader_config(&path, "mmap"), &mut status).unwrap();
        assert_eq!(status.code, ErrorCode::Ok);
        for (kind, code) in [
            (core::ErrorKind::DataLoss, ErrorCode::DataLoss),
            (core::ErrorKind::InvalidArgument, ErrorCode::InvalidArgument),
            (core::ErrorKind::NotFound, ErrorCode::NotFound),
            (core::ErrorKind::Internal, ErrorCode::Internal),
            (
                core::ErrorKind::PermissionDenied,
                ErrorCode::PermissionDenied,
            ),
            (core::ErrorKind::Unavailable, ErrorCode::Unavailable),
        ] {
            assert_eq!(ErrorCode::from(kind), code);
        }
    }

    #[test]
    fn mix_seeds_spreads() {
        assert_ne!(mix_seeds(1, 2), mix_seeds(2, 1));
        assert_ne!(mix_seeds(0, 0), mix_seeds(0, 1));
        assert_eq!(mix_seeds(7, 9), mix_seeds(7, 9));
    }

    /// Not with `fault-injection`: its tests arm process-wide panic points that would
    /// hit this test's fetches.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn cursors_carry_each_error_and_checkpoint_in_tf_keys() {
        use super::test_support::{
            cursor_config, cursor_with, no_seeds, reader_config, start, write_u32_file,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path(), 300, 4);
        // Damage instance 7's payload (a CRC mismatch).
        let reader = core::Reader::open_one(&path, None, &Default::default()).unwrap();
        let (_, off) = reader.location(7).unwrap();
        drop(reader);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize + 12] ^= 1;
        std::fs::write(&path, bytes).unwrap();

        // Mapped (automatic: one fetch thread) and with a pool of 2 threads; single
        // records and batches of 16.
        for (backend, parallel_reads) in [("mmap", -1), ("pread", 2)] {
            let mut st = ok_status();
            let reader = open_reader(&reader_config(&path, backend), &mut st).unwrap();
            for batch_size in [0, 16] {
                let config = cursor_config(batch_size, parallel_reads);
                let mut cursor = reader.fetch(&config, &start(), &mut st).unwrap();
                let (mut seen, mut failed, mut batches) = (Vec::new(), 0, 0);
                loop {
                    let mut st = ok_status();
                    let result = if batch_size == 0 {
                        match cursor.next_element(&mut st) {
                            Ok(false) => break,
                            Ok(true) => Ok(vec![cursor.element().to_vec()]),
                            Err(e) => Err(e),
                        }
                    } else {
                        match cursor.next_batch(&mut st) {
                            Ok(b) if b.is_empty() => break,
                            Ok(b) => {
                                batches += 1;
                                assert!(b.record(b.len()).is_empty());
                                Ok((0..b.len()).map(|i| b.record(i).to_vec()).collect())
                            }
                            Err(e) => Err(e),
                        }
                    };
                    match result {
                        Ok(records) => seen.extend(records),
                        Err(e) => {
                            assert_eq!(st.code, ErrorCode::DataLoss);
                            assert!(e.message.contains("instance 7"), "{e}");
                            failed += 1;
                        }
                    }
                }
                let mut ids: Vec<u32> = seen
                    .iter()
                    .map(|p| u32::from_le_bytes(p[..4].try_into().unwrap()))
                    .collect();
                ids.sort_unstable();
                assert_eq!(ids, (0..300).filter(|&i| i != 7).collect::<Vec<_>>());
                assert_eq!(failed, 1, "{backend}");
                if batch_size > 0 {
                    // 299 records: the error costs only its own instance.
                    assert_eq!(batches, 19);
                }
                // At the end: everything delivered, in order.
                let ckpt = cursor.checkpoint(&no_seeds(), &mut st).unwrap();
                assert_eq!((ckpt.position, ckpt.has_delivered_after), (300, false));
            }
        }
        let mut st = ok_status();
        let reader = open_reader(&reader_config(&path, "auto"), &mut st).unwrap();
        // Shards are checked in Rust, with the one wording.
        let mut st = ok_status();
        assert!(reader.shard_len(2, 2, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        assert!(st
            .message
            .contains("shard_index must be in [0, num_shards)"));
        // Checkpoints: unordered cursors always write `delivered_after`; damaged
        // values are DataLoss.
        let mut config = cursor_config(0, 2);
        config.unordered = true;
        let mut cursor = reader.fetch(&config, &start(), &mut st).unwrap();
        assert!(cursor.next_element(&mut st).unwrap());
        let ckpt = cursor.checkpoint(&no_seeds(), &mut st).unwrap();
        assert!(ckpt.has_delivered_after);
        assert_eq!(
            ckpt.position + ckpt.delivered_after.len() as i64,
            1,
            "{ckpt:?}"
        );
        for (position, after, want) in [
            (-1, vec![], "negative position -1"),
            (
                5,
                vec![3],
                "delivered position 3 before the restore position 5",
            ),
            (301, vec![], "position 301 is past the end of this epoch"),
        ] {
            let bad = CursorCheckpoint {
                position,
                has_delivered_after: true,
                delivered_after: after,
                order_version: 1,
                shard_state: Vec::new(),
            };
            let mut st = ok_status();
            assert!(reader.fetch(&config, &bad, &mut st).is_err());
            assert_eq!(st.code, ErrorCode::DataLoss);
            assert!(st.message.contains(want), "{}", st.message);
        }
        // A checkpoint of one order version does not restore into the other.
        let v2 = cursor_with(&config, |w| w.order_version = 2);
        let mut st = ok_status();
        let v2_state = reader
            .fetch(&v2, &start(), &mut st)
            .unwrap()
            .checkpoint(&no_seeds(), &mut st);
        assert_eq!(v2_state.unwrap().order_version, 2);
        let v1_checkpoint = CursorCheckpoint {
            order_version: 1,
            ..start()
        };
        assert!(reader.fetch(&v2, &v1_checkpoint, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::DataLoss);
        assert!(st.message.contains("order version 1"), "{}", st.message);
        let mut st = ok_status();
        let bad_version = cursor_with(&config, |w| w.order_version = 3);
        assert!(reader.fetch(&bad_version, &start(), &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        // Bad dataset arguments are the core's.
        let mut st = ok_status();
        assert!(reader.check_dataset(-3, -1, 1, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        let mut st = ok_status();
        assert!(reader.check_dataset(0, -1, 0, &mut st).is_err());
        assert!(
            st.message.contains("order version must be 1 or 2"),
            "{}",
            st.message
        );
        assert_eq!(st.code, ErrorCode::InvalidArgument);
    }

    /// Elastic resume through the bridge: two workers' checkpoints combine into an
    /// epoch state that three workers resume from; a checkpoint of a resumed worker
    /// restores (its `shard_state` holds where the walk started) without the epoch
    /// state; every instance once.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn checkpoints_of_two_workers_resume_on_three() {
        use super::test_support::{
            cursor_config, cursor_with, reader_config, start, write_u32_file,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path(), 301, 8);
        let mut st = ok_status();
        let reader = open_reader(&reader_config(&path, "pread"), &mut st).unwrap();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 2,
        };
        let ids_of = |cursor: &mut DatasetCursor, batches: usize, out: &mut Vec<u32>| {
            let mut st = ok_status();
            for _ in 0..batches {
                let batch = cursor.next_batch(&mut st).unwrap();
                if batch.is_empty() {
                    return;
                }
                for i in 0..batch.len() {
                    out.push(u32::from_le_bytes(batch.record(i)[..4].try_into().unwrap()));
                }
            }
        };
        for order_version in [1, 2] {
            let config = |num_shards, shard_index| {
                cursor_with(&cursor_config(10, 1), |w| {
                    (w.num_shards, w.shard_index, w.order_version) =
                        (num_shards, shard_index, order_version)
                })
            };
            let (mut seen, mut states) = (Vec::new(), Vec::new());
            for k in 0..2 {
                let mut c = reader.fetch(&config(2, k), &start(), &mut st).unwrap();
                ids_of(&mut c, 3 + k as usize, &mut seen);
                states.push(StateBytes {
                    bytes: c.checkpoint(&seeds, &mut st).unwrap().shard_state,
                });
            }
            let epoch_state = combine_shard_states(&states, &mut st).unwrap();
            let iteration = epoch_state_seeds(&epoch_state).unwrap();
            assert_eq!(
                (
                    iteration.seed,
                    iteration.seed2,
                    iteration.num_random_samples
                ),
                (5, 0, 2)
            );
            for j in 0..3 {
                let resumed = CursorConfig {
                    epoch_state: epoch_state.clone(),
                    ..config(3, j)
                };
                let mut c = reader.fetch(&resumed, &start(), &mut st).unwrap();
                ids_of(&mut c, 2, &mut seen);
                let ckpt = c.checkpoint(&seeds, &mut st).unwrap();
                // Restored into the plain K'-shard spec: the walk goes on.
                let mut again = reader.fetch(&config(3, j), &ckpt, &mut st).unwrap();
                ids_of(&mut again, usize::MAX, &mut seen);
            }
            seen.sort_unstable();
            assert_eq!(
                seen,
                (0..301).collect::<Vec<u32>>(),
                "order version {order_version}"
            );
        }
        // A damaged epoch state is DataLoss; states of different iterations do not
        // combine.
        let mut st = ok_status();
        let bad = CursorConfig {
            epoch_state: b"LIRSTFE\0garbage".to_vec(),
            ..cursor_config(10, 1)
        };
        assert!(reader.fetch(&bad, &start(), &mut st).is_err());
        assert_eq!(st.code, ErrorCode::DataLoss);
        let mut st = ok_status();
        let c = reader
            .fetch(&cursor_config(10, 1), &start(), &mut st)
            .unwrap();
        let one = c.checkpoint(&seeds, &mut st).unwrap().shard_state;
        let other = c
            .checkpoint(
                &IterationSeeds {
                    seed: 6,
                    ..seeds.clone()
                },
                &mut st,
            )
            .unwrap()
            .shard_state;
        assert!(combine_shard_states(
            &vec![StateBytes { bytes: one }, StateBytes { bytes: other }],
            &mut st
        )
        .is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
    }

    /// The records' ids (each record starts with its id as 4 LE bytes) of `cursor`'s
    /// next `elements` elements, or of all of them.
    #[cfg(not(feature = "fault-injection"))]
    fn next_ids(cursor: &mut DatasetCursor, elements: Option<usize>) -> Vec<u32> {
        let mut st = ok_status();
        let mut out = Vec::new();
        for _ in 0..elements.unwrap_or(usize::MAX) {
            if cursor.inner.options().batch_size == 0 {
                if !cursor.next_element(&mut st).unwrap() {
                    break;
                }
                out.push(u32::from_le_bytes(
                    cursor.element()[..4].try_into().unwrap(),
                ));
                continue;
            }
            let view = cursor.next_batch(&mut st).unwrap();
            if view.is_empty() {
                break;
            }
            for i in 0..view.len() {
                out.push(u32::from_le_bytes(view.record(i)[..4].try_into().unwrap()));
            }
        }
        out
    }

    fn dataset_config(path: &Path, batch_size: i64) -> DatasetConfig {
        DatasetConfig {
            reader: test_support::reader_config(path, "pread"),
            walk: test_support::cursor_config(batch_size, 2).walk,
            epoch_state: Vec::new(),
            deterministic: "default".into(),
        }
    }

    /// `config` with its walk changed by `change`.
    fn dataset_with(config: &DatasetConfig, change: impl FnOnce(&mut WalkConfig)) -> DatasetConfig {
        let mut config = config.clone();
        change(&mut config.walk);
        config
    }

    /// A dataset saves its cursor as one value (`shard_state`, which holds the seeds),
    /// and restores it, and the older checkpoints' values (position, delivered_after,
    /// order_version, with the seeds from their own keys), to the same rest.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn a_dataset_saves_one_value_and_restores_it_and_older_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        for (batch_size, unordered) in [(0, false), (4, false), (4, true)] {
            let ds = open_dataset_config(&dataset_config(&path, batch_size), &mut st).unwrap();
            let seeds = IterationSeeds {
                seed: 5,
                seed2: 7,
                num_random_samples: 1,
            };
            let mut c = ds.start(&seeds, unordered, false, &mut st).unwrap();
            let first = next_ids(&mut c, Some(3));
            let state = c.save(1, &mut st).unwrap();
            let mut older = c.checkpoint(&seeds, &mut st).unwrap();
            older.shard_state.clear();
            let rest = next_ids(&mut c, None);
            assert_eq!(first.len() + rest.len(), 30);
            // The values as the kernel reads them back under checkpoint_keys().
            let named = |name: &str, ints: Vec<i64>, bytes: &[u8]| NamedValue {
                name: name.into(),
                ints,
                bytes: bytes.to_vec(),
            };
            let from_state = vec![named("shard_state", vec![], &state)];
            // The oldest checkpoints have no order_version (version 1).
            let mut older_values = vec![
                named("seed", vec![5], b""),
                named("seed2", vec![7], b""),
                named("position", vec![older.position], b""),
            ];
            if older.has_delivered_after {
                older_values.push(named("delivered_after", older.delivered_after.clone(), b""));
            }
            assert!(checkpoint_keys().iter().all(|k| k != "num_random_samples"));
            let mut again = ds.restore(0, unordered, &from_state, &mut st).unwrap();
            let mut old = ds.restore(1, unordered, &older_values, &mut st).unwrap();
            older_values.push(named("order_version", vec![1], b""));
            let old_with_version = ds.restore(1, unordered, &older_values, &mut st).unwrap();
            assert_eq!(old_with_version.inner.state(), old.inner.state());
            let (again, old) = (next_ids(&mut again, None), next_ids(&mut old, None));
            if unordered {
                let sorted = |mut v: Vec<u32>| {
                    v.sort_unstable();
                    v
                };
                assert_eq!(sorted(again.clone()), sorted(rest.clone()));
                assert_eq!(sorted(old), sorted(rest));
            } else {
                assert_eq!(again, rest);
                assert_eq!(old, rest);
            }
        }
    }

    #[test]
    fn a_dataset_checks_its_arguments_and_knows_its_cardinality() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        for (batch_size, drop_remainder, want) in [(0, false, 30), (4, false, 8), (4, true, 7)] {
            let config = dataset_with(&dataset_config(&path, batch_size), |w| {
                w.drop_remainder = drop_remainder
            });
            assert_eq!(
                open_dataset_config(&config, &mut st).unwrap().cardinality(),
                want
            );
        }
        let bad = |config: DatasetConfig, code: ErrorCode, words: &str| {
            let mut st = ok_status();
            assert!(open_dataset_config(&config, &mut st).is_err());
            assert_eq!(st.code, code);
            assert!(st.message.contains(words), "{}", st.message);
        };
        let good = dataset_config(&path, 4);
        let mut reader = good.reader.clone();
        reader.page_size = -4096;
        bad(
            DatasetConfig {
                reader,
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "page_size must be a power of two",
        );
        let mut reader = good.reader.clone();
        reader.backend = "io_uring".into();
        bad(
            DatasetConfig {
                reader,
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "backend",
        );
        bad(
            dataset_with(&good, |w| (w.num_shards, w.shard_index) = (2, 2)),
            ErrorCode::InvalidArgument,
            "shard",
        );
        bad(
            dataset_with(&good, |w| w.batch_size = -1),
            ErrorCode::InvalidArgument,
            "batch_size",
        );
        bad(
            dataset_with(&good, |w| w.order_version = 3),
            ErrorCode::InvalidArgument,
            "order version",
        );
        bad(
            DatasetConfig {
                epoch_state: b"LIRSTFE\0garbage".to_vec(),
                ..good.clone()
            },
            ErrorCode::DataLoss,
            "LIRSDataset epoch_state: ",
        );
        bad(
            DatasetConfig {
                deterministic: "no".into(),
                ..good.clone()
            },
            ErrorCode::InvalidArgument,
            "deterministic",
        );
        let unordered = |deterministic: &str, pipeline: i32| {
            let config = DatasetConfig {
                deterministic: deterministic.into(),
                ..good.clone()
            };
            open_dataset_config(&config, &mut ok_status())
                .unwrap()
                .unordered(pipeline)
        };
        for pipeline in [-1, 0, 1] {
            assert!(unordered("false", pipeline));
            assert!(!unordered("true", pipeline));
        }
        assert!(unordered("default", 0));
        assert!(!unordered("default", 1));
        assert!(!unordered("default", -1));
    }

    /// Only the first iteration of a dataset made with an epoch state starts from it;
    /// its cardinality is unknown.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn only_the_first_iteration_takes_the_epoch_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 30, 8);
        let mut st = ok_status();
        let seeds = IterationSeeds {
            seed: 5,
            seed2: 0,
            num_random_samples: 3,
        };
        let ds = open_dataset_config(&dataset_config(&path, 4), &mut st).unwrap();
        let mut taken = seeds.clone();
        assert!(!ds.take_epoch_state(&mut taken));
        let mut c = ds.start(&seeds, false, false, &mut st).unwrap();
        next_ids(&mut c, Some(2));
        let state = combine_shard_states(
            &vec![StateBytes {
                bytes: c.save(3, &mut st).unwrap(),
            }],
            &mut st,
        )
        .unwrap();
        let resumed = open_dataset_config(
            &DatasetConfig {
                epoch_state: state,
                ..dataset_config(&path, 4)
            },
            &mut st,
        )
        .unwrap();
        assert_eq!(resumed.cardinality(), -2);
        let mut taken = IterationSeeds {
            seed: 0,
            seed2: 0,
            num_random_samples: 0,
        };
        assert!(resumed.take_epoch_state(&mut taken));
        assert_eq!(
            (taken.seed, taken.seed2, taken.num_random_samples),
            (5, 0, 3)
        );
        assert!(!resumed.take_epoch_state(&mut taken));
        let mut c = resumed.start(&taken, false, true, &mut st).unwrap();
        assert_eq!(next_ids(&mut c, None).len(), 30 - 8);
    }
}
