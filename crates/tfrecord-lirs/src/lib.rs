//! # tfrecord-lirs
//!
//! Random access and full-range shuffling for TFRecord files: LIRS (*Lightweight
//! Implementation of Random Shuffling*). Instead of a shuffle buffer that only mixes
//! neighbours, every epoch is a fresh permutation of instance ids, and each instance is
//! read straight from the file through an **offset table**.
//!
//! * [`format`](mod@format): the TFRecord framing and filler records (pure, no I/O:
//!   the `tfrecord-lirs-format` crate, re-exported).
//! * [`OffsetTableBuilder`], [`build_offset_table`]: the offset table (N little-endian
//!   `u64` record starts), built while writing or by scanning an existing file.
//! * [`TFRecordWriter`], [`PaddedWriter`], [`pad_file`]: page-aligned writing, so no
//!   small instance straddles a page and page-aware shuffling reads each page once.
//! * [`text_index`], [`build_offset_table_from_text_index`], [`export_text_index`]:
//!   the text indexes of NVIDIA DALI and the `tfrecord` Python package, read (checked
//!   against the file) and written.
//! * [`Storage`], [`remote`]: where paths are: local files, and files named by URLs
//!   (`gs://`, `ram://`, …) through the file system the embedding program passes in a
//!   [`Storage`] (the TensorFlow op passes TensorFlow's).
//! * [`Reader`], [`TFRecordLIRS`]: random access, epoch orders (instance-based or
//!   page-aware, sharded, version-stable), I/O statistics.
//! * [`Fetcher`]: an order's windows read ahead by a pool of threads;
//!   [`DatasetCursor`]: the epoch walk of a dataset front end (batches, the error
//!   policy, unordered delivery, checkpoint state as [`CursorState`]).
//!
//! # The layers
//!
//! Each layer uses only the ones below it (`tests/layers.rs` checks the imports against
//! this list, in this order):
//!
//! 1. **format**, the crate [`tfrecord_lirs_format`]: framing, fillers, offset tables as
//!    bytes, the layout of a set of files, the epoch orders, text indexes, and its own
//!    small errors (which rule was broken). Pure: no file I/O; a table's entries come
//!    through its `Offsets` trait.
//! 2. [`remedy`], `error` and `pool`: what a user can do about an error; the one
//!    [`Error`] (its kinds, the mapping of I/O errors onto them, the format crate's
//!    errors turned into it with the file they are about); the crate's threads (named,
//!    with their panics caught).
//! 3. `storage`: where bytes are: local files (the one place allowed `unsafe`), files
//!    named by URLs, table files read and written.
//! 4. `compress`, `scan`, `advice`: compressed input, the record scanner and the advice
//!    an error gives, used by reading and writing alike.
//! 5. [`options`]: the rules of the front ends' arguments.
//! 6. `read`: the reader, the fetch pool, the dataset cursor, the loader.
//! 7. `write`: the page-aligned writers, `pad`, the table builds.
//! 8. `inspect`: `verify`/`info`, text indexes of other readers, many files at once.
//!
//! Every `use` names the module where the thing lives; the re-exports below are for
//! users only.
//!
//! ```
//! use tfrecord_lirs::{PaddedWriter, PadOptions, TFRecordLIRS};
//! # fn main() -> tfrecord_lirs::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("train.tfrecord");
//! let mut writer = PaddedWriter::create(&path, &PadOptions::default())?;
//! for i in 0..1000u32 {
//!     writer.write(format!("instance {i}").as_bytes())?;
//! }
//! writer.finish()?; // writes train.tfrecord and train.tfrecord.offsets
//!
//! let mut dataset = TFRecordLIRS::open(&path, None)?.with_seed(42);
//! dataset.shuffle_order(false)?;
//! let first: Vec<u8> = dataset.next().unwrap()?;
//! assert!(first.starts_with(b"instance "));
//! assert_eq!(dataset.read(7)?, b"instance 7");
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![deny(unsafe_code)]

// The layers, lowest first (the list `tests/layers.rs` checks): the pure format (its
// own crate), remedies and the error, the threads, storage (the one place allowed `unsafe`), what reading and
// writing share, the option rules, reading, writing, inspection.
pub mod advice;
mod compress;
mod error;
mod inspect;
pub mod options;
pub mod pad_args;
mod pool;
mod read;
pub mod remedy;
mod scan;
mod storage;
mod write;

// For users only: the crate's public API, as it has been.
pub mod format;
pub use inspect::many;
pub use pool::panic_message;
pub use storage::block_cache;
pub use storage::cached_fs;
#[cfg(feature = "object-store")]
pub use storage::cloud;
#[cfg(feature = "conformance")]
pub use storage::conformance;
pub use storage::local;
pub use storage::ranged;
pub use storage::remote;
pub use tfrecord_lirs_format::{example, text_index};

pub use compress::Compression;
pub use error::{Error, ErrorKind, Location, Remedy, Result};
pub use inspect::interop::{
    build_offset_table_from_text_index, export_text_index, export_text_index_in, instance_records,
    instance_records_in, offsets_from_text_index,
};
pub use inspect::verify::{inspect, inspect_in, inspect_with, inspect_with_progress, Inspection};
pub use read::batch::Batch;
pub use read::cursor::options::CursorOptions;
pub use read::cursor::parts::{EpochParts, PARTS_PER_EPOCH};
pub use read::cursor::state::CursorState;
pub use read::cursor::view::BatchView;
pub use read::cursor::walk::DatasetCursor;
#[allow(deprecated)]
pub use read::elastic::{EpochProgress, EpochState, ShardProgress, ShardState};
pub use read::epoch_walks::EpochWalks;
pub use read::fetch::{
    Cut, DeliveredLedger, FetchOptions, FetchSchedule, Fetcher, OrderSource, Payloads, Resume,
    Window, ADAPTIVE_IN_FLIGHT, COLD_AUTO_THREADS, ORDER_VERSION_1,
};
pub use read::loader::{
    compose_shards, DatasetLoader, LoaderOptions, LoaderState, WalkIdentity, WorkerSplit,
};
pub use read::missing_table::tables_built_on_open;
pub use read::reader::{
    Reader, ReaderOptions, MAX_COALESCED_READ, REMOTE_AUTO_IN_FLIGHT, REMOTE_AUTO_THREADS,
};
pub use read::refurbish::{Lookup, Partial, Refurbisher};
pub use read::refurbish_sampler::{RefurbishSampler, RefurbishSamplerState};
pub use read::sampler::{Sampler, SamplerSource, SamplerState};
pub use read::stats::{process_io_totals, IoStats, ProcessIoTotals};
pub use read::tfrecord_lirs::TFRecordLIRS;
pub use read::worker_epochs::WorkerEpochs;
pub use scan::{scan_offsets, RecordScanner, ScannedRecord};
pub use storage::file_list::{expand_files, expand_shell_files};
pub use storage::local::{Backend, MmapOptIn};
pub use storage::partial_claim::{Claim, CLAIM_WAIT};
pub use storage::partial_identity::{store_dataset_id, StoreIdentity};
pub use storage::partial_store::{Fetch, PartialStore, StoreStats};
pub use storage::table_files::{
    parse_table, read_table, read_table_for, read_table_for_in, write_table, Layout,
};
pub use storage::{FileStat, MapView, ReadAt, Storage};
pub use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
pub use tfrecord_lirs_format::fit::Fit;
pub use tfrecord_lirs_format::framing::PageSize;
pub use tfrecord_lirs_format::order::{EpochOrder, OrderParams, OrderVersion, PositionIds};
pub use tfrecord_lirs_format::order_v2::{ids_per_unit, OrderV2};
pub use tfrecord_lirs_format::refurbish::{
    final_seed, partial_seed, stateless_seed_pair, EpochSchedule, RefurbishParams,
    RefurbishSchedule, Use, REFURBISH_SCHEDULE_VERSION,
};
pub use tfrecord_lirs_format::seed_pair::{seed_from_pair, SeedRule, DEFAULT_GRAPH_SEED};
pub use tfrecord_lirs_format::table::encode_table;
pub use tfrecord_lirs_format::table_path::default_table_path;
pub use write::index::{
    build_offset_table, build_offset_table_in, build_offset_table_with, index_file_in, Indexed,
};
pub use write::pad::{
    check_pad_output, pad, pad_file, pad_file_auto, pad_file_from_table, pad_file_with,
    pad_file_with_progress, AutoFit, PadRequest,
};
pub use write::table_builder::OffsetTableBuilder;
pub use write::writer::{PadOptions, PadSummary, PaddedWriter, Record, TFRecordWriter};
