//! # tfrecord-lirs
//!
//! Random access and full-range shuffling for TFRecord files: LIRS (*Lightweight
//! Implementation of Random Shuffling*). Instead of a shuffle buffer that only mixes
//! neighbours, every epoch is a fresh permutation of instance ids, and each instance is
//! read straight from the file through an **offset table**.
//!
//! * [`format`](mod@format): the TFRecord framing and filler records (pure, no I/O).
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

// The layers: the pure format, storage (the one place allowed `unsafe`), reading,
// writing, inspection. The error type, the option rules and the thread helpers serve all.
mod error;
pub mod format;
mod inspect;
pub mod options;
mod pool;
mod read;
mod storage;
mod write;

pub use format::{example, text_index};
pub use inspect::many;
pub use read::advice;
#[cfg(feature = "object-store")]
pub use storage::cloud;
pub use storage::local as io;
pub use storage::remote;

// Crate-internal short paths to the modules of the layers.
use format::{layout, order, order_v2, table};
use inspect::{interop, verify};
use read::{batch, compress, cursor, elastic, fetch, loader, reader, scan, stats};
use write::writer;

pub use batch::Batch;
pub use compress::Compression;
pub use cursor::{BatchView, CursorOptions, CursorState, DatasetCursor};
pub use elastic::{EpochProgress, ShardProgress};
pub use error::{Error, ErrorKind, Location, Result};
pub use fetch::{
    panic_message, Cut, DeliveredLedger, FetchOptions, FetchSchedule, Fetcher, OrderSource,
    Payloads, PositionIds, Resume, Window, ORDER_VERSION_1, REMOTE_AUTO_THREADS,
};
pub use format::table_path::default_table_path;
pub use format::{Fit, PageSize};
pub use interop::{
    build_offset_table_from_text_index, export_text_index, export_text_index_in, instance_records,
    instance_records_in, offsets_from_text_index,
};
pub use io::{Backend, MmapOptIn};
pub use layout::Layout;
pub use loader::{compose_shards, DatasetLoader, LoaderOptions, LoaderState, WalkIdentity};
pub use order::{EpochOrder, OrderParams, OrderVersion};
pub use order_v2::{ids_per_unit, OrderV2};
pub use read::sampler::{Sampler, SamplerSource};
pub use read::tfrecord_lirs::TFRecordLIRS;
pub use reader::{Reader, ReaderOptions, MAX_COALESCED_READ};
pub use scan::{scan_offsets, RecordScanner, ScannedRecord};
pub use stats::{process_io_totals, IoStats, ProcessIoTotals};
pub use storage::Storage;
pub use table::{
    encode_table, parse_table, read_table, read_table_for, read_table_for_in, write_table,
    OffsetTableBuilder,
};
pub use verify::{inspect, inspect_in, inspect_with, inspect_with_progress, Inspection};
pub use writer::{
    build_offset_table, build_offset_table_in, build_offset_table_with, check_pad_output, pad,
    pad_file, pad_file_auto, pad_file_from_table, pad_file_with, pad_file_with_progress, AutoFit,
    PadOptions, PadRequest, PadSummary, PaddedWriter, Record, TFRecordWriter,
};
