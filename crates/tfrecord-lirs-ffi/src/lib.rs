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
//! This file holds the bridge's declarations (cxx builds it into
//! `tfrecord-lirs-ffi/src/lib.rs.h`, which `tf_op/` includes); what they do is split by
//! job:
//! - `status.rs`: errors as a code and a message, the caller's [`Status`], and the
//!   panic guards ([`guard`]; see that file for the error and panic protocol);
//! - `reader.rs`: where paths are, the shared reader, batch reads, the filler check;
//! - `dataset.rs`: a LIRSDataset, its checked arguments and the policy TensorFlow
//!   asks about (cardinality, element shape, delivery order);
//! - `cursor.rs`: one iteration's cursor, its elements, batches and checkpoint values;
//! - `checkpoint.rs`: where a restored or resumed walk starts (today's and older
//!   checkpoints, epoch states);
//! - `seeds.rs`: TensorFlow's seed pair in the core's terms, and which seed and epoch
//!   an iteration orders with;
//! - [`op_config`], [`rules`], [`elastic`], [`reader_cache`]: the kernels' values read
//!   into configs, the option rules, the TensorFlow states of elastic resume, and
//!   the readers shared between ops.

mod checkpoint;
mod cursor;
mod dataset;
pub mod elastic;
#[cfg(feature = "fault-injection")]
pub mod fault_injection;
pub mod op_config;
mod reader;
pub mod reader_cache;
mod refurbish;
mod remedy;
pub mod rules;
mod seeds;
mod status;
#[cfg(test)]
mod test_support;
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

    /// What a refurbish lookup found (`RefurbishStep::lookup`).
    #[derive(Debug)]
    #[repr(u8)]
    enum RefurbishFound {
        /// A miss: the payload is the record; compute, then keep (the step holds the
        /// claim until then).
        Compute = 0,
        /// The payload is the stored partial output.
        Stored = 1,
        /// Another process holds the claim: look up again with `wait`, from a thread
        /// that may block.
        Busy = 2,
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

    /// The seeds of a LIRSDataset iteration: the pair it drew from its seed generator
    /// (or an epoch state's, for elastic resume), and the generator's
    /// `num_random_samples` after drawing it.
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
        /// The samples a newly made seed generator of this dataset skips before its
        /// first draw (`start_epoch`'s iterations).
        fn first_random_samples(self: &LirsDataset) -> i64;
        /// Whether this iteration is the one that starts from the dataset's epoch
        /// state (only the first is): then `seeds` are that state's.
        fn take_epoch_state(self: &LirsDataset, seeds: &mut IterationSeeds) -> bool;
        /// Starts an iteration with the (`seed`, `seed2`) of `seeds` (and the seed
        /// generator's `num_random_samples` after drawing them: which iteration it is),
        /// from the epoch state when `take_epoch_state` said so.
        fn start(
            self: &LirsDataset,
            seeds: &IterationSeeds,
            unordered: bool,
            from_epoch_state: bool,
            status: &mut Status,
        ) -> Result<Box<DatasetCursor>>;
        /// How many splits (parts of the epoch) the dataset is read in under a
        /// coordinator's split provider, after checking that it may be: `seed`,
        /// `seed2` as the op was given them (a fixed pair is required).
        fn split_count(
            self: &LirsDataset,
            seed: i64,
            seed2: i64,
            status: &mut Status,
        ) -> Result<i64>;
        /// Starts reading split `part` of the epoch of an iteration with `seeds`.
        fn start_part(
            self: &LirsDataset,
            seeds: &IterationSeeds,
            unordered: bool,
            part: i64,
            status: &mut Status,
        ) -> Result<Box<DatasetCursor>>;
        /// The cursor of a `save_part` checkpoint (its seeds, split and position).
        fn restore_part(
            self: &LirsDataset,
            unordered: bool,
            saved: &[u8],
            status: &mut Status,
        ) -> Result<Box<DatasetCursor>>;
        /// The state of an iteration read in splits before its first split: its seeds.
        fn save_no_part(self: &LirsDataset, seeds: &IterationSeeds) -> Vec<u8>;
        /// The seeds of a `save_part` or `save_no_part` state into `seeds`; whether
        /// it holds a split (then `restore_part` restores its cursor).
        fn part_state_seeds(
            self: &LirsDataset,
            saved: &[u8],
            seeds: &mut IterationSeeds,
            status: &mut Status,
        ) -> Result<bool>;
        /// What a cursor of `start_part` delivered, with its seeds and split.
        fn save_part(
            self: &DatasetCursor,
            num_random_samples: i64,
            status: &mut Status,
        ) -> Result<Vec<u8>>;
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

        /// The refurbish step of `tfrecord_lirs.refurbish` (docs/FORMAT.md §7.2):
        /// schedule, store and reader, shared by every op of the same attrs.
        type RefurbishStep;
        /// The step of the refurbish ops' attrs `args` over `files` and their `tables`
        /// (see `refurbish::open_refurbish_step`).
        fn open_refurbish_step(
            args: &Vec<NamedValue>,
            files: &Vec<FilePath>,
            tables: &Vec<FilePath>,
            status: &mut Status,
        ) -> Result<Box<RefurbishStep>>;
        /// The uses of `epoch` in delivery order: ids, refresh (0 or 1), generations.
        fn epoch_uses(
            self: &RefurbishStep,
            epoch: i64,
            ids: &mut Vec<i64>,
            refresh: &mut Vec<u8>,
            generation: &mut Vec<i64>,
            status: &mut Status,
        ) -> Result<()>;
        /// Whether `(id, generation)` is stored (`payload`: its bytes), to compute
        /// (`payload`: the record of `id`; the step holds the claim until `keep`), or
        /// claimed by another process (`wait`: wait for it instead); the seeds go to
        /// the two 2-value slices.
        #[allow(clippy::too_many_arguments)]
        fn lookup(
            self: &RefurbishStep,
            id: i64,
            generation: i64,
            epoch: i64,
            wait: bool,
            payload: &mut Vec<u8>,
            partial_seed: &mut [i64],
            final_seed: &mut [i64],
            status: &mut Status,
        ) -> Result<RefurbishFound>;
        /// A use whose lookup said `Compute`, until its keep: dropped without
        /// `kept` (its partial failed), it releases the claim of `(id, generation)`.
        type RefurbishPending;
        fn pending(self: &RefurbishStep, id: i64, generation: i64) -> Box<RefurbishPending>;
        /// The keep of a pending use ran.
        fn kept(self: &RefurbishPending);
        /// Counts and (unless no use will come) stores an output computed at `epoch`,
        /// then releases the claim of `(id, generation)` the step holds.
        fn keep(
            self: &RefurbishStep,
            id: i64,
            generation: i64,
            epoch: i64,
            refresh: bool,
            payload: &[u8],
            status: &mut Status,
        ) -> Result<bool>;
    }
}

pub use cursor::{BatchView, DatasetCursor};
pub use dataset::{open_dataset_config, LirsDataset};
pub use ffi::{
    ErrorCode, FilePath, IterationSeeds, NamedValue, ProcessIoTotals, RefurbishFound, StateBytes,
    Status,
};
pub use op_config::{CursorCheckpoint, CursorConfig, DatasetConfig, ReaderConfig, WalkConfig};
pub use reader::{open_reader, path_of, storage, LirsReader};
pub use seeds::DatasetSeeds;
pub use status::{guard, guard_poisoning, ok_status, FfiError, FfiResult};

// The bridge's free functions, where the generated code (`ffi`) looks for them.
use checkpoint::combine_shard_states;
use dataset::{checkpoint_keys, open_dataset};
use reader::{is_filler, open_reader_for_op, process_io_totals};
use refurbish::{open_refurbish_step, RefurbishPending, RefurbishStep};
