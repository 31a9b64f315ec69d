//! How a [`DatasetCursor`](super::walk::DatasetCursor) walks its epoch: [`CursorOptions`],
//! and the fetch defaults of a dataset (its windows, read-ahead and threads, measured).

use crate::error::{Error, Result};
use tfrecord_lirs_format::order::{OrderParams, OrderVersion};
use tfrecord_lirs_format::shard_remainder::ShardRemainder;

use crate::read::fetch::FetchOptions;
use crate::read::reader::Reader;

/// About how many bytes of data a dataset's fetch window spans: each window is one
/// job for a fetch thread (a hand-off and a wake-up each way) and starts its prefetch
/// pipeline cold, so windows should be long, but its buffer should stay in the fetching
/// core's L2 cache, and a batch's records keep their whole window alive. Measured with
/// batches of 256 over the bench file (mean span ~380 B, `make bench`'s data; each
/// figure a fresh process, 3-4 interleaved rounds): 64 ids 1.91-2.34 M rec/s, 1024 ids
/// (~380 KiB) 2.48-2.72 M, 4096 ids (~1.5 MiB) 2.29-2.41 M.
pub(super) const DATASET_WINDOW_BYTES: u64 = 384 * 1024;
/// The fewest ids in a dataset's window (files of large records: a window of several
/// records still spreads over the fetch threads).
pub(super) const DATASET_MIN_WINDOW: usize = 64;
/// The most ids in a dataset's window (files of tiny records).
pub(super) const DATASET_MAX_WINDOW: usize = 4096;
/// The most bytes of data a dataset's window spans when its batches are larger (large
/// records): a batch then spans several windows, and the data read ahead of the
/// consumer (`DATASET_WINDOWS_AHEAD` windows) stays a few tens of megabytes instead of
/// several batches of hundreds. Windows of whole batches of 1 MB records (256 MiB
/// each) were fresh buffers for most of an epoch of 2,000 records, which ran at 0.39x
/// the HF Arrow copy-out.
pub(super) const DATASET_MAX_WINDOW_BYTES: u64 = 32 * 1024 * 1024;
/// Windows a dataset reads ahead of its consumer.
pub(super) const DATASET_WINDOWS_AHEAD: usize = 4;
/// Fetch threads of a dataset over mapped files (where a bare [`Fetcher`](crate::read::fetch::Fetcher) reads on the
/// consumer's thread): one, so the gather of the next windows overlaps the front end's
/// own work on the thread that asks for records. Measured on the 2-core bench machine,
/// in one process (`make bench` data, median epochs, TensorFlow op): batches of 256
/// 1.6-1.8 M rec/s with one thread against 1.0-1.2 M inline; elements 1.17 M against
/// 1.02 M; two threads no better than one.
pub(super) const DATASET_MAPPED_THREADS: usize = 1;

/// The first window of a fetch (an epoch's start, a restore, a fresh fetch after a
/// failed window) holds one batch, or this many unbatched records (the smallest window
/// a dataset has anyway); the windows after it double up to the dataset's window.
/// Measured at 10^9 one-byte records (one file, 25 GB, mapped, order v2, batches of 256,
/// K = 1 and 64, 2 rounds): first batch 0.14-0.35 s behind a first window of one batch
/// against 1.7-12.1 s behind one of 4,096 ids with the page cache as the write left it,
/// 2.4-3.4 s against 12.7-14.6 s with the files' pages dropped.
pub(super) const DATASET_FIRST_WINDOW_UNBATCHED: usize = DATASET_MIN_WINDOW;

/// Ids in the first window of a fetch with batches of `batch_size` (0: unbatched); see
/// [`DATASET_FIRST_WINDOW_UNBATCHED`].
pub(super) fn first_window(batch_size: usize) -> usize {
    if batch_size > 0 {
        batch_size
    } else {
        DATASET_FIRST_WINDOW_UNBATCHED
    }
}

/// Unbatched datasets of records spanning at least this many bytes on average fetch
/// each record as a window of its own, so that a front end can hand the record out
/// as a view of its fetch buffer ([`DatasetCursor::last_element_view`](super::walk::DatasetCursor::last_element_view)) instead of
/// copying it: holding the view pins that record's bytes and nothing else. Below it a
/// copy costs less than a fetch hand-off per record.
pub(super) const ELEMENT_VIEW_MIN_SPAN: u64 = 96 * 1024;
/// Records in flight ahead of the consumer when each is a window of its own (see
/// [`ELEMENT_VIEW_MIN_SPAN`]): two of the fetch's groups per thread with two threads,
/// so each thread has a group queued while it reads one.
pub(super) const ELEMENT_VIEW_RECORDS_AHEAD: usize = 16;

/// How a [`DatasetCursor`](super::walk::DatasetCursor) walks its epoch. Start from [`CursorOptions::dataset`],
/// which decides the fetch defaults, then set the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CursorOptions {
    /// The order: seed, epoch, page-aware or not, shard.
    pub order: OrderParams,
    /// The order algorithm (docs/FORMAT.md §5; a checkpoint restores only into the
    /// version it was taken with).
    pub order_version: OrderVersion,
    /// Fetch threads, window and read-ahead.
    pub fetch: FetchOptions,
    /// Instances per batch; 0: single instances ([`DatasetCursor::next_element`](super::walk::DatasetCursor::next_element)).
    pub batch_size: usize,
    /// Drop a batch smaller than `batch_size` instead of handing it out.
    pub drop_remainder: bool,
    /// Hand windows out as they complete (RINAS): the same multiset (and, batched,
    /// the same batches) in another order; a slow read holds up only its window.
    pub unordered: bool,
    /// What the shards do with the remainder (equal shards for data-parallel ranks;
    /// docs/FORMAT.md §5.5).
    pub shard_remainder: ShardRemainder,
}

impl CursorOptions {
    /// The options of a dataset over `reader` now, as its front ends give the
    /// arguments: `batch_size` (0: unbatched; negative is an error) and
    /// `num_parallel_reads` (-1: automatic, else at least 1). Automatic threads are
    /// [`FetchOptions::auto_threads`], but at least one (see `DATASET_MAPPED_THREADS`);
    /// windows span about `DATASET_WINDOW_BYTES` of data, at least one batch, except
    /// that unbatched records of at least `ELEMENT_VIEW_MIN_SPAN` bytes on average
    /// (local files, fetch threads) are each a window of their own. The
    /// order is left at its default (seed 0, epoch 0, shard 0 of 1, not page-aware),
    /// ordered, without `drop_remainder`.
    pub fn dataset(
        reader: &Reader,
        batch_size: i64,
        num_parallel_reads: i64,
    ) -> Result<CursorOptions> {
        let batch_size = usize::try_from(batch_size).map_err(|_| {
            Error::invalid_argument(format!("batch_size must be >= 0, got {batch_size}"))
        })?;
        let threads = match num_parallel_reads {
            -1 => match FetchOptions::auto_threads(reader) {
                0 => DATASET_MAPPED_THREADS,
                n => n,
            },
            n if n >= 1 => usize::try_from(n).map_err(|_| {
                Error::invalid_argument(format!("num_parallel_reads {n} is too large"))
            })?,
            n => {
                return Err(Error::invalid_argument(format!(
                    "num_parallel_reads must be >= 1 or -1 (automatic), got {n}"
                )))
            }
        };
        let one_record_windows = batch_size == 0
            && threads > 0
            && !reader.is_remote()
            && reader.layout().mean_span_bytes() >= ELEMENT_VIEW_MIN_SPAN;
        let (window, depth) = if one_record_windows {
            (1, ELEMENT_VIEW_RECORDS_AHEAD)
        } else {
            (dataset_window(reader, batch_size), DATASET_WINDOWS_AHEAD)
        };
        Ok(CursorOptions {
            order: OrderParams::default(),
            order_version: OrderVersion::V1,
            fetch: FetchOptions {
                threads,
                window,
                depth,
            },
            batch_size,
            drop_remainder: false,
            unordered: false,
            shard_remainder: ShardRemainder::Keep,
        })
    }

    /// Whether each fetch window is exactly one batch (unordered batches).
    pub(super) fn exact_windows(&self) -> bool {
        self.unordered && self.batch_size > 0
    }
}

/// The ids per fetch window of a dataset over `reader` with batches of `batch` (0:
/// none): about [`DATASET_WINDOW_BYTES`] of data, within
/// [`DATASET_MIN_WINDOW`]..=[`DATASET_MAX_WINDOW`] ids, and at least one batch unless
/// that spans more than [`DATASET_MAX_WINDOW_BYTES`]. Remote files keep the smallest
/// windows: there a window is many requests, and with unordered delivery a slow one
/// holds up its whole window.
pub(super) fn dataset_window(reader: &Reader, batch: usize) -> usize {
    if reader.is_remote() {
        return DATASET_MIN_WINDOW.max(batch);
    }
    let mean = reader.layout().mean_span_bytes().max(1);
    let ids_within = |bytes: u64| usize::try_from(bytes / mean).unwrap_or(DATASET_MAX_WINDOW);
    let window = ids_within(DATASET_WINDOW_BYTES)
        .clamp(DATASET_MIN_WINDOW, DATASET_MAX_WINDOW)
        .max(batch);
    window.min(ids_within(DATASET_MAX_WINDOW_BYTES).max(1))
}
