//! Random access through offset tables (spec §1 `TFRecordLIRS.read(instance id)`): the
//! [`Reader`] and its I/O. The spec's stateful API is in `params`, where instances are
//! in `layout`, table checks against the data in `verify`.
//!
//! This file is the core every read shares: the reader's state, opening it, and a
//! batch's entry; beside it `options.rs` (what a reader is opened with), `spans.rs`
//! (ids to spans, single reads), `io_stats.rs` (what its reads are counted as),
//! `orders.rs` (its epoch orders). A batch is read by one strategy over that core (as ripgrep's
//! searcher has one per input kind): `mapped.rs` (memory copies out of mapped files),
//! `copied.rs` (positioned reads, coalesced), `concurrent.rs` (many reads in flight on
//! remote storage), `ranged.rs` (requests in flight on object storage's runtime, no
//! thread each), chosen in `strategy.rs`; `decode.rs` decodes and checks a span for
//! all of them.

mod concurrent;
mod copied;
mod decode;
mod identity;
mod io_stats;
mod mapped;
mod options;
mod orders;
mod ranged;
mod spans;
mod strategy;

use decode::SpanCrc;
pub use options::ReaderOptions;
pub(crate) use strategy::{choose, Request, Strategy};
pub use strategy::{
    ADAPTIVE_IN_FLIGHT, COLD_AUTO_THREADS, REMOTE_AUTO_IN_FLIGHT, REMOTE_AUTO_THREADS,
};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::{self, Padding, PageSize, HEADER_LEN};
use tfrecord_lirs_format::layout::BadSpan;
use tfrecord_lirs_format::table_path::default_table_path;

use crate::advice::{self, Stamp};
use crate::read::batch::{Batch, SpanBuf, SpareBatches};
use crate::read::missing_table::open_table;
use crate::read::stats::{IoStats, Tally};
use crate::read::table_check::{bad_span_error, check_table, tail_error, walk_tail};
use crate::storage::local::{self, Backend};
use crate::storage::table_files::{FileLayout, Layout};
use crate::storage::ReadAt;
use crate::storage::Storage;

/// How a [`Reader::read_batch_unless_stopped`] ended (unless it failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchRead {
    /// Every id was read into the batch.
    Complete,
    /// Given up on request before the next read: the batch is empty, not data.
    Abandoned,
}

/// [`Reader::read_span_into`] reads spans up to this long whole, in one positioned read;
/// of a longer span it reads only the record (a large instance, or a damaged table).
const MAX_WHOLE_SPAN_READ: u64 = 1 << 20;

/// A record's span of at least this many bytes is read by `pread` in pieces of
/// [`CHECKED_READ_PIECE`], the payload's CRC fed each piece right after its read, while
/// the piece is in the core's cache: the kernel's copy of one long read leaves the end
/// of its destination out of cache, so a CRC after the whole read reads the payload
/// from memory a second time. Measured on the 2-core bench host (2,000 x 1 MiB records,
/// hot cache, one thread, 4 epochs, 4 interleaved rounds): the CRC after whole reads
/// took 0.35-0.37 s of user CPU, fed 128 KiB pieces 0.14-0.19 s (system time the same);
/// 100 KB records are still in cache after a whole read (0.16-0.18 s either way).
const CHECKED_READ_MIN_SPAN: u64 = 256 * 1024;
/// See [`CHECKED_READ_MIN_SPAN`]: well inside a core's L2 cache (2 MiB here).
const CHECKED_READ_PIECE: usize = 128 * 1024;

/// Spans of at least this many bytes have their payload's CRC checked in the copy out
/// of a map ([`framing::copy_check_payload`]): such a payload is not in cache, and the
/// check on its own would read it from memory a second time. A smaller record is in
/// the L1 cache after its CRC, so checking first (as the footer is fetched) costs the
/// same.
const FUSED_COPY_MIN_SPAN: u64 = 4096;
/// The mapped batch path prefetches the records this many positions ahead of the one
/// it decodes, and their offset-table entries [`PREFETCH_TABLE_AHEAD`] ahead: the order
/// is known, so the cache misses of later records overlap the work on this one.
const PREFETCH_RECORDS_AHEAD: usize = 16;
/// See [`PREFETCH_RECORDS_AHEAD`].
const PREFETCH_TABLE_AHEAD: usize = 48;
/// Of each record ahead, at most this many bytes are prefetched (a cache line each).
const PREFETCH_RECORD_BYTES: u64 = 1024;

/// Joined spans bigger than this are read separately by [`Reader::read_batch`].
pub const MAX_COALESCED_READ: u64 = 1 << 20;

struct OpenFile {
    data_path: PathBuf,
    table_path: PathBuf,
    src: Box<dyn ReadAt>,
    /// Size and mtime at open (local files): a failed read tells a changed file from damage.
    opened: Option<Stamp>,
    /// One bit per page: touched since the last reset.
    touched: Vec<AtomicU64>,
    /// Long spans are read in pieces ([`CHECKED_READ_MIN_SPAN`]) from local files read
    /// through the page cache: not a URL (a request each) nor `O_DIRECT` (a device read).
    reads_in_pieces: bool,
}

/// A set of TFRecord files with offset tables, one global id space, read at random.
/// `Send + Sync`: share it between threads with an `Arc`.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d.tfrecord");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..10u8 { w.write(&[i; 30])?; }
/// # w.finish()?;
/// let reader = tfrecord_lirs::Reader::open_one(&path, None, &Default::default())?;
/// assert_eq!(reader.len(), 10);
/// assert_eq!(reader.read(3)?, vec![3u8; 30]);
/// # Ok(()) }
/// ```
pub struct Reader {
    layout: Arc<Layout>,
    files: Vec<OpenFile>,
    /// Where the files are (the options' storage): which are local, and so can be
    /// stat'ed when a read fails.
    storage: Storage,
    verify_payload_crc: bool,
    /// What may follow an instance's record in its span ([`ReaderOptions::trust_table`]).
    padding: Padding,
    reads: AtomicU64,
    bytes_read: AtomicU64,
    page_reads: AtomicU64,
    /// The fetch buffers kept between the fetches over this reader (see
    /// [`SpareBatches`]).
    spare_batches: SpareBatches,
    /// The adaptive limit of requests in flight the last fetch over this reader ended
    /// at (0: none yet): the next fetch starts there, not from the bottom again.
    in_flight_learned: AtomicUsize,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Reader>();
};

impl Reader {
    /// Opens one data file with its table (`<data>.offsets` when `table` is `None`).
    pub fn open_one(data: &Path, table: Option<&Path>, options: &ReaderOptions) -> Result<Reader> {
        let table = table.map_or_else(|| default_table_path(data), Path::to_path_buf);
        Reader::open(&[(data.to_path_buf(), table)], options)
    }

    /// Opens `(data, table)` pairs; ids run through the files in list order.
    ///
    /// Validates each table at open in O(1) (its entries are not read whole): a
    /// multiple of 8 bytes, a first offset of 0, a last one below the file size, and a
    /// valid record at the first and the last offset (a table of at most
    /// [`TABLE_IN_MEMORY_MAX_BYTES`](crate::local::TABLE_IN_MEMORY_MAX_BYTES), held in memory, is also
    /// checked whole for strictly increasing offsets). Every instance read checks its
    /// own entry against the next one and the file size, so reading every instance
    /// checks the whole table; a bad entry is an error of that read naming the table,
    /// the instance and the byte. With [`ReaderOptions::trust_table`] the first offset
    /// may be past 0, the bytes before it being padding records.
    pub fn open(files: &[(PathBuf, PathBuf)], options: &ReaderOptions) -> Result<Reader> {
        let page = PageSize::checked(options.page_size)?;
        let mut layouts = Vec::with_capacity(files.len());
        let mut open = Vec::with_capacity(files.len());
        let mut first_id = 0u64;
        // The default backend judges the files together against the memory.
        let files_bytes = options.storage.local_bytes(files.iter().map(|f| &*f.0));
        for (data, table_path) in files {
            // The data file is opened first, so that a missing one is reported as such;
            // the default backend then maps that same open file if its records are small.
            // A URL goes through the storage's file system, with the default backend only.
            // A directory, a table or compressed data given as data is named as such
            // before any advice about its table.
            let stamp = Stamp::of(&options.storage, data);
            let opened = options
                .storage
                .open_deferred(data, options.backend, options.mmap_opt_in)
                .map_err(|e| advice::diagnose(&options.storage, data, e))?;
            // The table is opened where it lies, not read whole: only its length, first
            // and last entries are looked at here (O(1) per file); every other entry is
            // checked when its span is read. A missing one may be built (`index_missing`).
            let (table_path, table) = open_table(
                &options.storage,
                options.index_missing,
                (data, table_path),
                opened.version(),
            )?;
            let table_path = &table_path;
            let src = opened.with_records(table.len(), Some(files_bytes), options.page_aware);
            let size = src.size();
            let layout = FileLayout {
                table,
                table_path: table_path.clone(),
                size,
                first_id,
            };
            check_table(data, table_path, &layout, &*src, options.padding()).map_err(|e| {
                advice::table_mismatch(&options.storage, (data, table_path), &layout, &*src, e)
            })?;
            first_id += layout.len();
            let pages = size.div_ceil(page.get());
            let reads_in_pieces = options.storage.is_local(data) && !src.bypasses_page_cache();
            open.push(OpenFile {
                data_path: data.clone(),
                table_path: table_path.clone(),
                src,
                opened: stamp,
                touched: (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
                reads_in_pieces,
            });
            layouts.push(layout);
        }
        Ok(Reader {
            layout: Arc::new(Layout::new(layouts, page)),
            files: open,
            storage: options.storage.clone(),
            verify_payload_crc: options.verify_payload_crc,
            padding: options.padding(),
            reads: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            page_reads: AtomicU64::new(0),
            spare_batches: SpareBatches::default(),
            in_flight_learned: AtomicUsize::new(0),
        })
    }

    /// Instances across all files.
    pub fn len(&self) -> u64 {
        self.layout.len()
    }

    /// Whether any file is a URL read through its storage's file system
    /// ([`crate::remote`]): high-latency storage, where many reads in flight pay (a URL
    /// a local tier serves from local disk is not).
    pub fn is_remote(&self) -> bool {
        self.files
            .iter()
            .any(|f| !self.storage.is_local(&f.data_path) && !f.src.served_locally())
    }

    /// Whether any file is a URL a local tier (`cache_dir`) serves from local disk.
    pub(crate) fn served_by_tier(&self) -> bool {
        self.files
            .iter()
            .any(|f| !self.storage.is_local(&f.data_path) && f.src.served_locally())
    }

    /// The adaptive limit of requests in flight the last fetch over this reader ended
    /// at, if one has ended (object storage): where the next one starts.
    pub fn learned_in_flight(&self) -> Option<usize> {
        Some(self.in_flight_learned.load(Ordering::Relaxed)).filter(|&n| n > 0)
    }

    pub(crate) fn learn_in_flight(&self, limit: usize) {
        self.in_flight_learned.store(limit, Ordering::Relaxed);
    }

    /// Whether batches are read from memory maps now (the mmap backend, or the
    /// default backend while its leases hold).
    pub fn is_mapped(&self) -> bool {
        self.files.iter().all(|f| f.src.map_view().is_some())
    }

    /// The fetch buffers kept for reuse by every fetch over this reader.
    pub(crate) fn spare_batches(&self) -> &SpareBatches {
        &self.spare_batches
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.layout.len() == 0
    }

    /// The layout (offsets and units).
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// The data files, in id order.
    pub fn data_paths(&self) -> impl ExactSizeIterator<Item = &Path> {
        self.files.iter().map(|f| f.data_path.as_path())
    }

    /// The data file holding global `id`, and the id's byte offset in it.
    pub fn location(&self, id: u64) -> Result<(&Path, u64)> {
        self.check_id(id)?;
        let (f, i) = self.layout.locate(id);
        let (start, _) = self.span(f, i, id)?;
        Ok((&self.files[f].data_path, start))
    }

    /// Reads the payloads of `ids` into `out` (replacing its contents), in the order of
    /// `ids`. Runs of consecutive ids in one file are fetched with one read of their
    /// joined spans (at most [`MAX_COALESCED_READ`] bytes), so a page-aware unit of a
    /// padded file costs one page read.
    pub fn read_batch(&self, ids: &[u64], out: &mut Batch) -> Result<()> {
        // Nothing stops it: it is always read in full.
        self.read_batch_unless_stopped(ids, out, &AtomicBool::new(false))
            .map(|_| ())
    }

    /// [`read_batch`](Reader::read_batch), given up between two of its reads once
    /// `stop` is set: then `out` is left empty and the outcome is
    /// [`BatchRead::Abandoned`], never a batch. A fetch being dropped sets it, so that
    /// its threads stop within one read (on remote storage a part is one request per
    /// run, in sequence: 64 requests of 50 ms made a drop wait 3.5 s), not one part.
    pub(crate) fn read_batch_unless_stopped(
        &self,
        ids: &[u64],
        out: &mut Batch,
        stop: &AtomicBool,
    ) -> Result<BatchRead> {
        out.clear();
        let mut tally = Tally::default();
        let result = match self.map_views() {
            // Mapped reads are memory copies (a page fault at worst), not requests.
            Some(maps) => self
                .read_batch_mapped(ids, &maps, out, &mut tally)
                .map(|()| BatchRead::Complete),
            None => self.read_batch_copied(ids, out, &mut tally, stop),
        };
        self.add(tally);
        if !matches!(result, Ok(BatchRead::Complete)) {
            out.clear(); // no half-filled batch
        }
        result
    }
}
