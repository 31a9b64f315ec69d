//! Sequential, CRC-checked scanning of a whole TFRecord file: the paper's *location
//! generator* for sparse data, and the engine of `index`, `verify`, `info` and `pad`.
//!
//! Copying the file out of the page cache and checking CRCs cost about the same, so
//! both scans use two cores:
//!
//! * [`scan_offsets`] (`index`) splits the file into chunks that worker threads read
//!   and check in parallel, each chunk while it is still in its worker's cache. Only
//!   the walk from record to record is ordered: a worker waits until the chunk before
//!   its own has been walked (a few microseconds of work) to learn where its first
//!   record starts. Chunks are put back in file order at the end, so the first bad
//!   record in the file is the one reported, as in a one-thread scan.
//! * [`RecordScanner`] (`verify`, `info`, `pad`) hands records out one by one, in
//!   order, so it is a two-stage pipeline instead: a read-ahead thread copies the file
//!   into a small ring of recycled buffers while the calling thread parses and checks.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::compress::{self, Compression};
use crate::error::{Error, Location, Result, TRUST_TABLE_HINT};
use crate::format::{
    self, FrameError, Padding, PageSize, FOOTER_LEN, HEADER_LEN, MAX_PAGE_SIZE, MIN_PAGE_SIZE,
};
use crate::io;

/// Bytes per read of a [`RecordScanner`]: few syscalls, and a ring of them still fits
/// in cache.
const READ_CHUNK: usize = 1 << 20;
/// Buffers in the read-ahead ring: the reader may run this many chunks ahead.
const READ_AHEAD: usize = 4;
/// A record gathered across chunks keeps its buffer for the next one up to this size;
/// a bigger one (a huge record) is freed so the scanner does not hold on to it.
const CARRY_KEEP: usize = 2 * READ_CHUNK;
/// Bytes per chunk of [`scan_offsets`]: small enough to stay in a core's L2 cache from
/// the read to the CRC check (measured best at 128-256 KiB, with 1 MiB close).
const SCAN_CHUNK: usize = 256 << 10;
/// Bytes of a mapped chunk prefetched ahead of its record walk.
const WALK_PREFETCH: usize = 4096;
/// Spins a worker waits for the chunk before its own to be walked before it sleeps:
/// some tens of microseconds, a few times what a walk takes.
const SPIN_WAIT: u32 = 1000;
/// Most threads [`scan_offsets`] uses: beyond a few, memory bandwidth is the limit.
const MAX_SCAN_THREADS: usize = 4;
/// Bytes between progress reports of whole-file scans.
pub(crate) const PROGRESS_EVERY: u64 = 64 << 20;

/// One record found by a [`RecordScanner`].
#[derive(Debug)]
pub struct ScannedRecord<'a> {
    /// Byte offset of the record's length field.
    pub offset: u64,
    /// The payload (CRC-checked).
    pub payload: &'a [u8],
    /// Framed size: payload + 16.
    pub framed_len: u64,
}

impl ScannedRecord<'_> {
    /// Whether this record is a filler.
    pub fn is_filler(&self) -> bool {
        format::is_filler(self.payload)
    }
}

// ---------------------------------------------------------------------------------
// The record checks, shared by both scans so that they fail alike.

/// A bad record, found before the instance id it would have is known (the parallel
/// scan learns it only when the chunks are put back in order).
#[derive(Debug)]
enum Bad {
    /// Damaged framing at `offset`; `instance`: whether the error names the instance
    /// id (a damaged filler is not an instance).
    Frame {
        offset: u64,
        frame: FrameError,
        instance: bool,
    },
    /// The file starts like a GZIP or ZLIB stream.
    Compressed(&'static str),
    /// A read failed.
    Io(std::io::Error),
}

impl Bad {
    /// The error, given the number of instances before the bad record.
    fn into_error(self, path: &Path, instances: u64) -> Error {
        match self {
            Bad::Frame {
                offset,
                frame,
                instance,
            } => Error::frame(path, instance.then_some(instances), offset, frame),
            Bad::Compressed(format) => Error::Compressed {
                at: Location::new(path, None, Some(0)),
                format,
            },
            Bad::Io(e) => Error::io(path, e),
        }
    }
}

/// A record at `offset` cut short: it needs `needed` bytes, the file has `available`.
fn truncated(offset: u64, needed: u64, available: u64, instance: bool) -> Bad {
    Bad::Frame {
        offset,
        frame: FrameError::Truncated { needed, available },
        instance,
    }
}

/// A record's length field, copied to an 8-byte boundary: the `crc32c` crate then
/// checks it with one CRC instruction instead of byte by byte (measured: 8% off the
/// wall time of `scan_offsets`, which checks one length per ~380 bytes).
#[repr(align(8))]
struct Aligned([u8; 8]);

/// Checks the header of the record at `offset` and returns the record's framed size.
/// `head` is what has been read from `offset` on (to recognise a compressed file at
/// offset 0), `available` how many bytes that is, `file_size` the size at open.
fn check_header(
    offset: u64,
    header: &[u8; HEADER_LEN],
    head: &[u8],
    available: u64,
    file_size: u64,
) -> std::result::Result<u64, Bad> {
    let (len_bytes, stored) = header.split_at(8);
    let len_bytes = Aligned(len_bytes.try_into().expect("8 bytes"));
    let len = if format::masked_crc32c(&len_bytes.0).to_le_bytes() == stored {
        u64::from_le_bytes(len_bytes.0)
    } else {
        // The slow path, for the error: the same check, by `format`.
        format::decode_header(header).map_err(|frame| {
            // A bad header at offset 0 may be a compressed file: say so instead of
            // "CRC mismatch".
            match format::compression_magic(head).filter(|_| offset == 0) {
                Some(format) => Bad::Compressed(format),
                None => Bad::Frame {
                    offset,
                    frame,
                    instance: true,
                },
            }
        })?
    };
    let framed = format::framed_len(len);
    // Never trust the length for allocation: bound it by what the file holds (or
    // what has been read, should the file have grown).
    let left_in_file = file_size.saturating_sub(offset).max(available);
    if framed > left_in_file {
        return Err(truncated(offset, framed, left_in_file, true));
    }
    Ok(framed)
}

/// Checks the payload CRC of `record`, a whole record at `offset` whose header has
/// been checked, and returns its payload.
fn check_record(offset: u64, record: &[u8]) -> std::result::Result<&[u8], Bad> {
    let (payload, footer) = match record.split_last_chunk::<FOOTER_LEN>() {
        Some((body, footer)) if body.len() >= HEADER_LEN => (&body[HEADER_LEN..], footer),
        _ => {
            return Err(truncated(
                offset,
                format::FRAMING_LEN,
                record.len() as u64,
                true,
            ))
        }
    };
    // The CRC first, then the footer: the footer is the record's farthest cache line;
    // loading it first showed in perf as a stall on a cache miss (when another core
    // had just read the chunk), which the CRC's front-to-back walk gets prefetched.
    let computed = format::masked_crc32c(payload);
    let stored = u32::from_le_bytes(*footer);
    if computed != stored {
        return Err(Bad::Frame {
            offset,
            frame: FrameError::PayloadCrc { stored, computed },
            instance: !format::is_filler(payload),
        });
    }
    Ok(payload)
}

/// Reads into `buf` until it is full or the file ends; returns the bytes read.
fn read_full(src: &mut (impl Read + ?Sized), buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Reads into `buf` from file offset `at` until it is full or the file ends; returns
/// the bytes read.
fn read_full_at(src: &dyn io::ReadAt, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

// ---------------------------------------------------------------------------------
// RecordScanner: records one by one, with a read-ahead thread.

/// What the read-ahead thread hands the scanner, in file order.
enum Filled {
    /// A buffer whose first `.1` bytes (at least one) are the file's next bytes.
    Data(Vec<u8>, usize),
    /// The file ended.
    Eof,
    /// A read failed; nothing follows.
    Failed(std::io::Error),
}

/// The reader stage: fills recycled buffers front to back until the file ends, a read
/// fails or the scanner hangs up (its channels close, which also wakes a blocked send
/// or receive, so the thread can always be joined).
fn read_ahead(
    src: &mut (dyn Read + Send),
    chunk: usize,
    ring: usize,
    filled: SyncSender<Filled>,
    free: Receiver<Vec<u8>>,
) {
    let mut made = 0;
    loop {
        // Allocated once each (zeroed lazily by the OS), then only ever refilled.
        let mut buf = match free.try_recv() {
            Ok(buf) => buf,
            Err(TryRecvError::Empty) if made < ring => {
                made += 1;
                vec![0; chunk]
            }
            Err(TryRecvError::Empty) => match free.recv() {
                Ok(buf) => buf,
                Err(_) => return,
            },
            Err(TryRecvError::Disconnected) => return,
        };
        match read_full(src, &mut buf) {
            Ok(0) => {
                let _ = filled.send(Filled::Eof);
                return;
            }
            Ok(n) => {
                let ended = n < buf.len();
                if filled.send(Filled::Data(buf, n)).is_err() {
                    return;
                }
                if ended {
                    let _ = filled.send(Filled::Eof);
                    return;
                }
            }
            Err(e) => {
                let _ = filled.send(Filled::Failed(e));
                return;
            }
        }
    }
}

/// The running read-ahead thread and its two channels.
struct ReadAhead {
    filled: Receiver<Filled>,
    free: Sender<Vec<u8>>,
    thread: JoinHandle<()>,
}

/// Where a [`RecordScanner`]'s bytes come from.
enum Source {
    /// Plain reads on the calling thread: for a file that fits in one chunk (a thread
    /// would cost more than it saves), or when no thread could be started.
    Inline {
        src: Box<dyn Read + Send>,
        chunk: usize,
        eof: bool,
    },
    /// The read-ahead thread (`None` only while being dropped).
    Thread(Option<ReadAhead>),
}

impl Source {
    /// Reads `src`, which holds `size` bytes (`u64::MAX`: unknown, a stream).
    fn new(src: Box<dyn Read + Send>, size: u64, chunk: usize, ring: usize) -> Source {
        if ring == 0 || size < chunk as u64 {
            return Source::Inline {
                src,
                chunk: chunk.min(size as usize).max(64),
                eof: false,
            };
        }
        let (filled_tx, filled) = mpsc::sync_channel(ring);
        let (free, free_rx) = mpsc::channel();
        // Shared, so that if the thread cannot start the source is still ours.
        let slot = Arc::new(Mutex::new(Some(src)));
        let theirs = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("lirs-scan-read".into())
            .spawn(move || {
                let taken = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Some(mut src) = taken {
                    read_ahead(&mut *src, chunk, ring, filled_tx, free_rx);
                }
            });
        match spawned {
            Ok(thread) => Source::Thread(Some(ReadAhead {
                filled,
                free,
                thread,
            })),
            Err(_) => Source::Inline {
                src: slot
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .expect("the thread did not start"),
                chunk,
                eof: false,
            },
        }
    }

    /// Hands back the used buffer `done` and returns the next bytes of the file
    /// (`None` at its end) as a buffer and its valid length.
    fn next(&mut self, done: Vec<u8>) -> std::io::Result<Option<(Vec<u8>, usize)>> {
        match self {
            Source::Inline { src, chunk, eof } => {
                if *eof {
                    return Ok(None);
                }
                let mut buf = done;
                if buf.len() != *chunk {
                    buf = vec![0; *chunk];
                }
                let n = read_full(&mut **src, &mut buf)?;
                *eof = n < buf.len();
                Ok((n > 0).then_some((buf, n)))
            }
            Source::Thread(ahead) => {
                let Some(ahead) = ahead else {
                    return Ok(None);
                };
                if !done.is_empty() {
                    // Fails only if the reader has already stopped; then it needs none.
                    let _ = ahead.free.send(done);
                }
                match ahead.filled.recv() {
                    Ok(Filled::Data(buf, n)) => Ok(Some((buf, n))),
                    Ok(Filled::Eof) => Ok(None),
                    Ok(Filled::Failed(e)) => Err(e),
                    // Only if the reader died without a word: never a silent short scan.
                    Err(_) => Err(std::io::Error::other("the read-ahead thread stopped")),
                }
            }
        }
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Source::Thread(ahead) = self {
            if let Some(ReadAhead {
                filled,
                free,
                thread,
            }) = ahead.take()
            {
                // Hang up first so a reader blocked on either channel wakes and returns.
                drop(filled);
                drop(free);
                let _ = thread.join();
            }
        }
    }
}

/// Reads a TFRecord file front to back, checking both CRCs of every record.
///
/// The file is read ahead, in large chunks, by a helper thread (joined when the
/// scanner is dropped); parsing and CRC checks happen in the thread calling
/// [`next_record`](RecordScanner::next_record).
///
/// ```no_run
/// # fn main() -> tfrecord_lirs::Result<()> {
/// let mut scanner = tfrecord_lirs::RecordScanner::open("train.tfrecord".as_ref())?;
/// while let Some(record) = scanner.next_record()? {
///     println!("{} bytes at {}", record.payload.len(), record.offset);
/// }
/// # Ok(()) }
/// ```
pub struct RecordScanner {
    source: Source,
    path: PathBuf,
    file_size: u64,
    /// The current chunk: valid bytes are `chunk[..len]`, the next record starts at
    /// `chunk[pos]`, and `chunk[0]` is at file offset `chunk_offset`.
    chunk: Vec<u8>,
    len: usize,
    pos: usize,
    chunk_offset: u64,
    /// A record that runs past the end of a chunk, gathered whole.
    carry: Vec<u8>,
    /// Instances (non-filler records) returned so far: the id of the next one.
    instances: u64,
    /// For a decompressed stream: its compression, and the bytes of the file read so
    /// far. Offsets are then offsets in the decompressed stream.
    stream: Option<(Compression, Arc<AtomicU64>)>,
}

impl RecordScanner {
    /// Opens `path` for scanning.
    pub fn open(path: &Path) -> Result<RecordScanner> {
        RecordScanner::open_with(path, READ_CHUNK, READ_AHEAD)
    }

    /// [`open`](RecordScanner::open) with `chunk` bytes per read and a ring of `ring`
    /// buffers (0: no read-ahead thread). Tests use tiny chunks to put chunk
    /// boundaries everywhere.
    fn open_with(path: &Path, chunk: usize, ring: usize) -> Result<RecordScanner> {
        if crate::remote::is_url(path) {
            let src = io::open(path, io::Backend::Auto)?;
            let file_size = src.size();
            let stream = crate::remote::ReadAtStream::new(src);
            let source = Source::new(Box::new(stream), file_size, chunk.max(1), ring);
            return Ok(RecordScanner::new(path, source, file_size, None));
        }
        let src = File::open(path).map_err(|e| Error::io(path, e))?;
        let file_size = src.metadata().map_err(|e| Error::io(path, e))?.len();
        let source = Source::new(Box::new(src), file_size, chunk.max(1), ring);
        Ok(RecordScanner::new(path, source, file_size, None))
    }

    fn new(
        path: &Path,
        source: Source,
        file_size: u64,
        stream: Option<(Compression, Arc<AtomicU64>)>,
    ) -> RecordScanner {
        RecordScanner {
            source,
            path: path.to_path_buf(),
            file_size,
            chunk: Vec::new(),
            len: 0,
            pos: 0,
            chunk_offset: 0,
            carry: Vec::new(),
            instances: 0,
            stream,
        }
    }

    /// Opens `path` for scanning, decompressing it as it is read when it is GZIP or
    /// ZLIB compressed (`compression`, or detected from its first bytes with
    /// [`Compression::Auto`]). For a compressed file, record offsets (and those in
    /// errors, which say so) are offsets in the decompressed stream, and
    /// [`file_size`](RecordScanner::file_size) is unknown (`u64::MAX`).
    pub fn open_compressed(path: &Path, compression: Compression) -> Result<RecordScanner> {
        let compression = compression.resolve(path)?;
        if compression == Compression::None {
            return RecordScanner::open(path);
        }
        let (src, read) = compress::open_decompressed(path, compression)?;
        let source = Source::new(src, u64::MAX, READ_CHUNK, READ_AHEAD);
        Ok(RecordScanner::new(
            path,
            source,
            u64::MAX,
            Some((compression, read)),
        ))
    }

    /// Bytes of the file read so far: the compressed bytes for a compressed file.
    pub fn bytes_read(&self) -> u64 {
        match &self.stream {
            Some((_, read)) => read.load(Ordering::Relaxed),
            None => self.position(),
        }
    }

    /// The file being scanned.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file size at open.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// File offset of the next unread record.
    pub fn position(&self) -> u64 {
        self.chunk_offset + self.pos as u64
    }

    fn fail(&self, bad: Bad) -> Error {
        let Some((compression, _)) = &self.stream else {
            return bad.into_error(&self.path, self.instances);
        };
        // Offsets in a decompressed stream are not file offsets: say which they are.
        let name = compression.name();
        match bad {
            Bad::Frame {
                offset,
                frame,
                instance,
            } => Error::Layout {
                at: Location::new(&self.path, instance.then_some(self.instances), None),
                reason: format!("at decompressed byte {offset} of the {name} stream: {frame}"),
            },
            Bad::Io(e) => Error::io(&self.path, self.stream_error(e)),
            compressed => compressed.into_error(&self.path, self.instances),
        }
    }

    /// A read error of a decompressed stream, with where in the stream it happened.
    fn stream_error(&self, e: std::io::Error) -> std::io::Error {
        match &self.stream {
            Some((compression, _)) => std::io::Error::new(
                e.kind(),
                format!(
                    "{} stream: {e} (after decompressed byte {})",
                    compression.name(),
                    self.chunk_offset
                ),
            ),
            None => e,
        }
    }

    /// Moves on to the next chunk; `false` at the end of the file.
    fn advance(&mut self) -> Result<bool> {
        let done = std::mem::take(&mut self.chunk);
        self.chunk_offset += self.len as u64;
        self.len = 0;
        self.pos = 0;
        match self.source.next(done) {
            Ok(Some((chunk, len))) => {
                self.chunk = chunk;
                self.len = len;
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(Error::io(&self.path, self.stream_error(e))),
        }
    }

    /// The next record, or `None` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<ScannedRecord<'_>>> {
        while self.pos == self.len {
            if !self.advance()? {
                return Ok(None);
            }
        }
        let offset = self.position();
        let rest = &self.chunk[self.pos..self.len];
        let Some(header) = rest.first_chunk::<HEADER_LEN>() else {
            return self.gather(offset, None);
        };
        let available = rest.len() as u64;
        let framed = check_header(offset, header, rest, available, self.file_size)
            .map_err(|bad| self.fail(bad))?;
        if framed > available {
            return self.gather(offset, Some(framed));
        }
        // The common case: the whole record is in this chunk.
        let start = self.pos;
        self.pos += framed as usize;
        match check_record(offset, &self.chunk[start..self.pos]) {
            Ok(payload) => {
                self.instances += u64::from(!format::is_filler(payload));
                Ok(Some(ScannedRecord {
                    offset,
                    payload,
                    framed_len: framed,
                }))
            }
            Err(bad) => Err(self.fail(bad)),
        }
    }

    /// Makes room in `carry` for a record of `framed` bytes. Its length is bounded by
    /// the file size in `check_header`, but a stream's size is unknown: never reserve
    /// more than a few chunks ahead of the bytes that have actually arrived.
    fn reserve_carry(&mut self, framed: u64) {
        let want = usize::try_from(framed).unwrap_or(usize::MAX);
        let ahead = want.saturating_sub(self.carry.len()).min(16 * READ_CHUNK);
        self.carry.reserve(ahead);
    }

    /// Gathers the record at `offset`, which runs past the end of the current chunk,
    /// into `carry`. `framed` is its checked size, if its header was whole in the chunk.
    fn gather(
        &mut self,
        offset: u64,
        mut framed: Option<u64>,
    ) -> Result<Option<ScannedRecord<'_>>> {
        if self.carry.capacity() > CARRY_KEEP {
            self.carry = Vec::new();
        }
        self.carry.clear();
        self.carry
            .extend_from_slice(&self.chunk[self.pos..self.len]);
        self.pos = self.len;
        if let Some(f) = framed {
            self.reserve_carry(f);
        }
        loop {
            let want = framed.map_or(HEADER_LEN, |f| f as usize);
            if self.carry.len() == want {
                if framed.is_some() {
                    break;
                }
                let header = self.carry.first_chunk::<HEADER_LEN>().expect("12 bytes");
                let available = (self.carry.len() + self.len - self.pos) as u64;
                let f = check_header(offset, header, &self.carry, available, self.file_size)
                    .map_err(|bad| self.fail(bad))?;
                self.reserve_carry(f);
                framed = Some(f);
                continue;
            }
            if self.pos == self.len && !self.advance()? {
                // A truncated filler is not an instance.
                let filler =
                    framed.is_some() && self.carry.get(HEADER_LEN..).is_some_and(format::is_filler);
                let bad = truncated(offset, want as u64, self.carry.len() as u64, !filler);
                return Err(self.fail(bad));
            }
            let take = (want - self.carry.len()).min(self.len - self.pos);
            self.carry
                .extend_from_slice(&self.chunk[self.pos..self.pos + take]);
            self.pos += take;
        }
        match check_record(offset, &self.carry) {
            Ok(payload) => {
                self.instances += u64::from(!format::is_filler(payload));
                Ok(Some(ScannedRecord {
                    offset,
                    payload,
                    framed_len: self.carry.len() as u64,
                }))
            }
            Err(bad) => Err(self.fail(bad)),
        }
    }
}

// ---------------------------------------------------------------------------------
// scan_offsets: chunks checked in parallel.

/// Offsets of every instance (non-filler record) of `data`, CRC-checked.
/// `progress` is called with the bytes scanned so far, now and then.
///
/// A non-empty file must start with an instance: one whose first record is a filler
/// (or that holds only fillers) has no valid offset table, and is an error naming
/// byte 0.
///
/// The file is read and checked in chunks by up to 4 threads (the calling one
/// included, which is also the one calling `progress`); errors are the same as a
/// front-to-back scan's, first bad record first. The file is taken to be as long as
/// it was at open.
pub fn scan_offsets(data: &Path, progress: impl FnMut(u64)) -> Result<Vec<u64>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_SCAN_THREADS);
    scan_offsets_with(data, SCAN_CHUNK, threads, progress)
}

/// How far the walk from record to record has got: chunk `chunk` is the next to walk
/// and its first record starts at file offset `start`. Chunks after `stop_after` will
/// not be walked: an earlier chunk failed or the file ended early.
struct Walk {
    chunk: usize,
    start: u64,
    stop_after: usize,
    /// Workers asleep on [`Scan::walked`].
    sleepers: usize,
}

/// What the workers of one [`scan_offsets`] share.
struct Scan<'a> {
    src: &'a dyn io::ReadAt,
    /// The file mapped under a read lease, if the kernel granted one: chunks are then
    /// checked in place (no copy); once a writer revokes it, chunks are read with
    /// `pread` again, which sees a truncation as an early end of the file.
    map: Option<&'a crate::leased::LeasedMap>,
    file_size: u64,
    chunk: usize,
    chunks: usize,
    /// The next chunk no worker has taken yet.
    next_chunk: AtomicUsize,
    walk: Mutex<Walk>,
    walked: Condvar,
    /// `walk.chunk`, readable without the lock, for waiters to spin on.
    walked_chunk: AtomicUsize,
}

/// One chunk's result.
struct ChunkDone {
    chunk: usize,
    /// Its instance offsets (those before `bad`, if set).
    offsets: Vec<u64>,
    /// The first bad record in the chunk.
    bad: Option<Bad>,
    /// The file ended in this chunk, before the size it had at open.
    last: bool,
}

impl Scan<'_> {
    fn walk(&self) -> MutexGuard<'_, Walk> {
        // No code panics while holding the lock; if one did, the state is still sound.
        self.walk.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The start of chunk `k`'s first record, once the chunk before has been walked;
    /// `None` if chunk `k` will not be.
    fn wait_for(&self, k: usize) -> Option<u64> {
        // Workers tend to fall into step, each reading its chunk while the other does,
        // so one often waits a few microseconds for the other's walk: spin that out
        // rather than sleep and be woken (which costs more than the wait).
        for _ in 0..SPIN_WAIT {
            if self.walked_chunk.load(Ordering::Acquire) >= k {
                break;
            }
            std::hint::spin_loop();
        }
        let mut walk = self.walk();
        loop {
            if k > walk.stop_after {
                return None;
            }
            if walk.chunk == k {
                return Some(walk.start);
            }
            walk.sleepers += 1;
            walk = self
                .walked
                .wait(walk)
                .unwrap_or_else(PoisonError::into_inner);
            walk.sleepers -= 1;
        }
    }

    /// Wakes the workers waiting for the walk, if any (waking costs a syscall).
    fn wake(&self, walk: &Walk) {
        if walk.sleepers > 0 {
            self.walked.notify_all();
        }
    }

    /// Chunk `k` has been walked: the next one starts at `start`.
    fn walked_to(&self, k: usize, start: u64) {
        let mut walk = self.walk();
        walk.chunk = k + 1;
        walk.start = start;
        self.walked_chunk.store(k + 1, Ordering::Release);
        self.wake(&walk);
    }

    /// No chunk after `k` needs checking.
    fn stop_after(&self, k: usize) {
        let mut walk = self.walk();
        walk.stop_after = walk.stop_after.min(k);
        self.wake(&walk);
    }

    fn is_moot(&self, k: usize) -> bool {
        k > self.walk().stop_after
    }

    /// Takes and checks chunks until none are left, with buffers of its own, and hands
    /// each chunk's result to `done`.
    fn work(&self, mut done: impl FnMut(ChunkDone)) {
        /// If the worker panics (a bug), the others must not wait for it forever.
        struct StopOnPanic<'s, 'f>(&'s Scan<'f>);
        impl Drop for StopOnPanic<'_, '_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.stop_after(0);
                }
            }
        }
        let _guard = StopOnPanic(self);
        // A cache line more than a chunk, so that each chunk can be read to where the
        // kernel's copy is aligned like the page cache (see `io::COPY_ALIGN`).
        let mut backing = vec![0; self.chunk + io::COPY_ALIGN];
        let mut records = Vec::new();
        let mut carry = Vec::new();
        let mut instances = 0;
        loop {
            let k = self.next_chunk.fetch_add(1, Ordering::Relaxed);
            if k >= self.chunks || self.is_moot(k) {
                break;
            }
            let base = (k * self.chunk) as u64;
            let want = (self.file_size - base).min(self.chunk as u64) as usize;
            // Sized like the last chunk's, so it seldom grows.
            let mut offsets = Vec::with_capacity(instances + instances / 8 + 16);
            let pad = io::copy_pad(backing.as_ptr() as usize, base);
            let buf = &mut backing[pad..pad + want];
            let Some((bad, last)) =
                self.check_chunk(k, buf, &mut records, &mut carry, &mut offsets)
            else {
                break;
            };
            if bad.is_some() || last {
                self.stop_after(k);
            }
            instances = offsets.len();
            done(ChunkDone {
                chunk: k,
                offsets,
                bad,
                last,
            });
        }
    }

    /// Reads chunk `k` into `buf` (or, with a map, checks it in place), walks its
    /// records once the chunk before has been walked, then checks their payloads and
    /// appends the instances' offsets. Returns the first bad record and whether the
    /// file ended in this chunk, or `None` if the chunk will not be needed.
    fn check_chunk(
        &self,
        k: usize,
        buf: &mut [u8],
        records: &mut Vec<(usize, usize)>,
        carry: &mut Vec<u8>,
        offsets: &mut Vec<u64>,
    ) -> Option<(Option<Bad>, bool)> {
        let base = (k * self.chunk) as u64;
        let want = buf.len();
        let range = base as usize..base as usize + want;
        // A mapped chunk is entered only once the walk has reached it, and left when it
        // is checked: a reader inside the map never waits for another thread (which
        // could be one truncating the file, itself waiting for the map to be revoked).
        let (start, entered) = match self.map {
            Some(map) => (self.wait_for(k)?, map.enter()),
            None => (0, None),
        };
        let mapped = entered.as_deref().and_then(|m| m.get(range.clone()));
        if let (Some(e), Some(_)) = (&entered, mapped) {
            e.populate(range);
        }
        let data: &[u8] = match mapped {
            Some(bytes) => bytes,
            None => match read_full_at(self.src, buf, base) {
                Ok(n) => &buf[..n],
                // Where this chunk's records end is unknown, so no later chunk can be
                // walked.
                Err(e) => return Some((Some(Bad::Io(e)), false)),
            },
        };
        let got = data.len();
        // The file is shorter than at open: this chunk is its last.
        let last = got < want;
        let start = match self.map {
            Some(_) => start,
            None => self.wait_for(k)?,
        };
        let Some(mut pos) = start
            .checked_sub(base)
            .and_then(|rel| usize::try_from(rel).ok())
        else {
            let e = std::io::Error::other("internal error: the scan lost its place");
            self.stop_after(k);
            return Some((Some(Bad::Io(e)), false));
        };

        // Walk the headers; only this is ordered between chunks.
        records.clear();
        let mut straddler = None; // (offset, framed) of a record running past the chunk
        let mut bad = None;
        // In a map, the lines ahead of the walk are prefetched (a read would have copied
        // the chunk into the cache; here each header would stall on memory in turn).
        let prefetching = mapped.is_some();
        let mut prefetched = 0;
        while pos < data.len() {
            if prefetching {
                let ahead = (pos + WALK_PREFETCH).min(data.len());
                while prefetched < ahead {
                    io::prefetch(&data[prefetched]);
                    prefetched += 64;
                }
            }
            let offset = base + pos as u64;
            let rest = &data[pos..];
            let mut split = [0; HEADER_LEN];
            let (header, head) = match rest.first_chunk::<HEADER_LEN>() {
                Some(header) => (header, rest),
                // The header itself runs past the chunk.
                None => match read_full_at(self.src, &mut split, offset) {
                    Ok(HEADER_LEN) => (&split, &split[..]),
                    Ok(n) => {
                        bad = Some(truncated(offset, HEADER_LEN as u64, n as u64, true));
                        break;
                    }
                    Err(e) => {
                        bad = Some(Bad::Io(e));
                        break;
                    }
                },
            };
            let framed = match check_header(offset, header, head, rest.len() as u64, self.file_size)
            {
                Ok(framed) => framed,
                Err(b) => {
                    bad = Some(b);
                    break;
                }
            };
            if framed > rest.len() as u64 {
                straddler = Some((offset, framed));
                break;
            }
            records.push((pos, framed as usize));
            pos += framed as usize;
        }
        if bad.is_some() || last {
            self.stop_after(k);
        } else {
            let next = straddler.map_or(base + pos as u64, |(offset, framed)| offset + framed);
            self.walked_to(k, next);
        }

        // Check the payloads, in order, while the chunk is still in this core's cache.
        for &(pos, framed) in records.iter() {
            let offset = base + pos as u64;
            match check_record(offset, &data[pos..pos + framed]) {
                Ok(payload) if format::is_filler(payload) => {}
                Ok(_) => offsets.push(offset),
                Err(b) => return Some((Some(b), last)),
            }
        }
        if bad.is_some() {
            return Some((bad, last));
        }
        let Some((offset, framed)) = straddler else {
            return Some((None, last));
        };
        // The record running past the chunk: the part at hand, then the rest from the
        // file. `framed` was bounded by the file size in `check_header`.
        let framed = framed as usize;
        if carry.len() < framed {
            carry.resize(framed, 0);
        }
        let record = &mut carry[..framed];
        let here = &data[pos..];
        record[..here.len()].copy_from_slice(here);
        let have = match read_full_at(self.src, &mut record[here.len()..], base + got as u64) {
            Ok(n) => here.len() + n,
            Err(e) => return Some((Some(Bad::Io(e)), last)),
        };
        if have < framed {
            // A truncated filler is not an instance.
            let filler = record.get(HEADER_LEN..have).is_some_and(format::is_filler);
            let bad = truncated(offset, framed as u64, have as u64, !filler);
            return Some((Some(bad), last));
        }
        match check_record(offset, record) {
            Ok(payload) if format::is_filler(payload) => {}
            Ok(_) => offsets.push(offset),
            Err(b) => return Some((Some(b), last)),
        }
        Some((None, last))
    }
}

/// [`scan_offsets`] with `chunk` bytes per chunk and at most `threads` threads (tests
/// use tiny chunks to put chunk boundaries everywhere).
fn scan_offsets_with(
    data: &Path,
    chunk: usize,
    threads: usize,
    mut progress: impl FnMut(u64),
) -> Result<Vec<u64>> {
    // Local files with pread; URLs through their file system.
    let src = io::open(data, io::Backend::Pread)?;
    let file_size = src.size();
    let chunk = chunk.max(1);
    let chunks = usize::try_from(file_size.div_ceil(chunk as u64)).unwrap_or(usize::MAX);
    let map = if crate::remote::is_url(data) {
        None
    } else {
        crate::leased::LeasedMap::open(data)
    };
    let scan = Scan {
        src: &*src,
        map: map.as_deref(),
        file_size,
        chunk,
        chunks,
        next_chunk: AtomicUsize::new(0),
        walk: Mutex::new(Walk {
            chunk: 0,
            start: 0,
            stop_after: usize::MAX,
            sleepers: 0,
        }),
        walked: Condvar::new(),
        walked_chunk: AtomicUsize::new(0),
    };
    let mut merge = Merge {
        path: data,
        chunk: chunk as u64,
        file_size,
        offsets: Vec::new(),
        waiting: BTreeMap::new(),
        next: 0,
        end: None,
        reported: 0,
    };
    std::thread::scope(|s| {
        let (done_tx, done_rx) = mpsc::channel();
        // Chunks go to whichever worker is free, so if a thread cannot be started the
        // others simply do its share; and the calling thread, which also puts the
        // chunks back in order as they come, simply checks fewer of them.
        let helpers: Vec<_> = (1..threads.min(chunks))
            .filter_map(|i| {
                let done_tx = done_tx.clone();
                std::thread::Builder::new()
                    .name(format!("lirs-scan-{i}"))
                    .spawn_scoped(s, || {
                        scan.work(move |done| {
                            // Fails only once the caller has stopped merging.
                            let _ = done_tx.send(done);
                        })
                    })
                    .ok()
            })
            .collect();
        drop(done_tx);
        scan.work(|done| {
            merge.add(done, &mut progress);
            for done in done_rx.try_iter() {
                merge.add(done, &mut progress);
            }
        });
        // The helpers' last chunks; the channel closes when they are all done.
        for done in done_rx.iter() {
            merge.add(done, &mut progress);
        }
        for helper in helpers {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    let offsets = match merge.end {
        Some(Ok(())) => merge.offsets,
        Some(Err(e)) => return Err(e),
        // Every chunk up to the first bad one or the end comes back; anything else is
        // a bug, reported rather than turned into a short table.
        None if merge.next >= chunks => merge.offsets,
        None => {
            return Err(Error::io(
                data,
                std::io::Error::other("internal error: a chunk of the scan is missing"),
            ))
        }
    };
    // The table's spans tile the file from byte 0, so the reader and `verify` refuse a
    // table whose instance 0 is elsewhere: refuse to write one.
    if file_size > 0 && offsets.first() != Some(&0) {
        let what = if offsets.is_empty() {
            "the file holds only filler records, no instance"
        } else {
            "a filler record precedes the first instance"
        };
        return Err(Error::layout(
            data,
            None,
            0,
            format!(
                "{what}: an offset table needs instance 0 at byte 0 (its spans tile the file from byte 0), so this file cannot be indexed as it is; rewrite it with `tfrecord-lirs pad` (which drops the fillers and lays the instances out from byte 0)"
            ),
        ));
    }
    progress(file_size);
    Ok(offsets)
}

/// Puts chunk results back in file order as they come.
struct Merge<'a> {
    path: &'a Path,
    chunk: u64,
    file_size: u64,
    offsets: Vec<u64>,
    /// Results that came before an earlier chunk's.
    waiting: BTreeMap<usize, ChunkDone>,
    /// The next chunk in file order.
    next: usize,
    /// Set at the first bad record, or at an early end of the file.
    end: Option<Result<()>>,
    reported: u64,
}

impl Merge<'_> {
    fn add(&mut self, done: ChunkDone, progress: &mut impl FnMut(u64)) {
        if self.end.is_some() {
            return;
        }
        self.waiting.insert(done.chunk, done);
        while let Some(done) = self.waiting.remove(&self.next) {
            self.offsets.extend_from_slice(&done.offsets);
            self.next += 1;
            if let Some(bad) = done.bad {
                let e = bad.into_error(self.path, self.offsets.len() as u64);
                self.end = Some(Err(e));
            } else if done.last {
                self.end = Some(Ok(()));
            }
            if self.end.is_some() {
                self.waiting.clear();
                return;
            }
        }
        let scanned = (self.next as u64 * self.chunk).min(self.file_size);
        if scanned - self.reported >= PROGRESS_EVERY {
            self.reported = scanned;
            progress(scanned);
        }
    }
}

/// What a full scan of a data file (and optionally its table) found.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// Instances (non-filler records).
    pub instances: u64,
    /// Filler records.
    pub fillers: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// Bytes taken by filler records.
    pub filler_bytes: u64,
    /// Smallest instance payload, in bytes (0 when there are none).
    pub min_payload: u64,
    /// Largest instance payload, in bytes.
    pub max_payload: u64,
    /// Sum of instance payload sizes.
    pub total_payload: u64,
    /// Page sizes for which the padded-file invariants (b) and (c) hold, when the file
    /// has at least one filler and one instance (a file without fillers is reported as
    /// not padded). Smallest first. Any page larger than a small file trivially holds
    /// it whole, so this alone does not tell the page size: see
    /// [`padded_for`](Inspection::padded_for).
    pub padded_page_sizes: Vec<u64>,
    /// The page size the fillers point to: the largest power of two P from 512 bytes
    /// to 16 MiB such that every filler is one the padded writer could have written for
    /// P: it ends on a page boundary, or starts fewer than 24 bytes before one (after a
    /// large instance). `None` without fillers, or if some filler fits no page size.
    pub filler_page_size: Option<u64>,
    /// For each candidate page size, the first filler the padded writer could not have
    /// written for it: (its offset, its end).
    misfit_fillers: Vec<Option<(u64, u64)>>,
    /// For each candidate page size, how many pairs of consecutive fillers have ends a
    /// multiple of it apart (out of `filler_pairs`): the page grid of a file that
    /// fits no grid because bytes were removed or inserted.
    filler_spacing: Vec<u64>,
    filler_pairs: u64,
    /// For each candidate page size (512 B .. 16 MiB, smallest first), the first
    /// instance placed against invariants (b)/(c).
    violations: Vec<Option<Misplaced>>,
}

/// An instance placed against invariant (b) or (c) for some page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Misplaced {
    id: u64,
    offset: u64,
    framed: u64,
    span: u64,
}

/// The error for instance `m` breaking (b) or (c) at page size `p`.
fn misplaced_error(data: &Path, p: PageSize, m: Misplaced, how: &str) -> Error {
    let Misplaced {
        id,
        offset,
        framed,
        span,
    } = m;
    let why = if p.is_small(framed) {
        format!("padded-file invariant (b) broken for page size {}{how}: instance of {framed} framed bytes with span of {span} bytes crosses a page boundary", p.get())
    } else {
        format!("padded-file invariant (c) broken for page size {}{how}: instance of {framed} framed bytes does not start on a page boundary", p.get())
    };
    Error::layout(data, Some(id), offset, why)
}

impl Inspection {
    /// The page size the file is padded for, judged from its fillers: the largest page
    /// size, at most [`filler_page_size`](Inspection::filler_page_size), for which
    /// invariants (b) and (c) hold. `None` if the file has no fillers (or no
    /// instances), a filler off the 512-byte grid, or no such page size.
    ///
    /// Only page sizes every filler ends on are candidates, so a damaged padded file
    /// is not passed off as padded for some page larger than the whole file.
    pub fn padded_for(&self) -> Option<u64> {
        let limit = self.filler_page_size?;
        self.padded_page_sizes
            .iter()
            .rev()
            .find(|&&p| p <= limit)
            .copied()
    }

    /// Checks the padded-file invariants at the page size the fillers point to
    /// (`verify` without `--page-size`). `Ok(None)` for a file without fillers or
    /// instances (not padded: nothing to check); `Ok(Some(page size))` as
    /// [`padded_for`](Inspection::padded_for). Otherwise an error naming `data`:
    /// the first instance breaking (b)/(c) at
    /// [`filler_page_size`](Inspection::filler_page_size); or, when the fillers fit
    /// no page grid (bytes removed or inserted), the first instance or filler off the
    /// grid of the page size most consecutive fillers are a multiple of apart; or else
    /// the first filler not ending on a 512-byte boundary.
    pub fn check_padded(&self, data: &Path) -> Result<Option<u64>> {
        if self.fillers == 0 || self.instances == 0 {
            return Ok(None);
        }
        if let Some(p) = self.padded_for() {
            return Ok(Some(p));
        }
        let candidates: Vec<PageSize> = candidate_page_sizes().collect();
        let index_of = |p: u64| candidates.iter().position(|c| c.get() == p);
        if let Some(k) = self.filler_page_size.and_then(index_of) {
            if let Some(m) = self.violations.get(k).copied().flatten() {
                let how = " (the page size inferred from the fillers, which all end on its page boundaries)";
                return Err(misplaced_error(data, candidates[k], m, how));
            }
        }
        // The fillers fit no page grid: bytes were removed or inserted. If most
        // fillers are still a whole number of pages apart, that is the page size:
        // report the first instance or filler off its grid.
        let guess = (0..candidates.len()).rev().find(|&k| {
            self.filler_pairs > 0
                && self
                    .filler_spacing
                    .get(k)
                    .is_some_and(|&n| 2 * n > self.filler_pairs)
        });
        if let Some(k) = guess {
            let p = candidates[k];
            let how = " (the page size most fillers are spaced by)";
            let instance = self.violations.get(k).copied().flatten();
            let filler = self.misfit_fillers.get(k).copied().flatten();
            match (instance, filler) {
                (Some(m), Some((f, _))) if m.offset < f => {
                    return Err(misplaced_error(data, p, m, how))
                }
                (Some(m), None) => return Err(misplaced_error(data, p, m, how)),
                (_, Some((offset, end))) => {
                    return Err(Error::layout(
                        data,
                        None,
                        offset,
                        format!(
                            "filler record ends at byte {end}, not on a page boundary for page size {}{how}: the padded writer ends every filler on a page boundary (or starts it less than 24 bytes before one)",
                            p.get()
                        ),
                    ))
                }
                (None, None) => {}
            }
        }
        let (offset, end) = self
            .misfit_fillers
            .first()
            .copied()
            .flatten()
            .unwrap_or((0, 0));
        Err(Error::layout(
            data,
            None,
            offset,
            format!(
                "filler record ends at byte {end}, not on a 512-byte boundary: the padded writer ends every filler on a page boundary (or starts it less than 24 bytes before one), so no page size can be inferred and the padded-file invariants cannot be checked (rewrite the file with `tfrecord-lirs pad`, or give --page-size)"
            ),
        ))
    }

    /// Mean instance payload size.
    pub fn mean_payload(&self) -> f64 {
        if self.instances == 0 {
            0.0
        } else {
            self.total_payload as f64 / self.instances as f64
        }
    }
}

/// Every candidate page size, smallest first.
fn candidate_page_sizes() -> impl Iterator<Item = PageSize> {
    (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
        .filter_map(|shift| PageSize::new(1 << shift))
}

/// Whether a filler from `start` to `end` is one the padded writer could have written
/// for `page`: it ends on a page boundary (it pads to the next page), or it starts
/// fewer than 24 bytes before one (the rest of a page after a large instance is too
/// small for a filler, so the filler runs into the next page).
pub(crate) fn filler_fits_page(page: PageSize, start: u64, end: u64) -> bool {
    let p = page.get();
    end % p == 0 || (start % p != 0 && p - start % p < format::MIN_FILLER_LEN)
}

/// Whether instance `(offset, framed, span)` keeps invariants (b)/(c) for `page`.
pub(crate) fn instance_is_placed(page: PageSize, offset: u64, framed: u64, span: u64) -> bool {
    if page.is_small(framed) {
        page.pages_touched(offset, span) == 1
    } else {
        offset % page.get() == 0
    }
}

/// Scans `data`, checking every record's CRCs and, if `table` is given, that the table
/// matches the file: each entry is an instance's record start, each span holds one
/// instance followed only by fillers, and the spans tile the file. With `page`, the
/// padded-file invariants for that page size are checked too; without, see
/// [`Inspection::check_padded`] to check them at the page size the fillers point to.
pub fn inspect(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
) -> Result<Inspection> {
    inspect_with_progress(data, table, page, |_| {})
}

/// [`inspect`], calling `progress` with the bytes scanned so far now and then.
pub fn inspect_with_progress(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    progress: impl FnMut(u64),
) -> Result<Inspection> {
    inspect_with(data, table, page, Padding::Fillers, progress)
}

/// [`inspect_with_progress`] with the table trusted as `padding` says. With
/// [`Padding::Opaque`] and a table, the table is authoritative: the records at its
/// offsets are the instances, and every other record (before the first, between,
/// after the last) is padding, counted as a filler whatever its payload; every
/// record's CRCs are still checked, padding's included, and each entry must be a
/// record start that is not a LIRS filler. The page size is then inferred from the
/// padding as from fillers.
pub fn inspect_with(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    padding: Padding,
    mut progress: impl FnMut(u64),
) -> Result<Inspection> {
    let opaque = padding == Padding::Opaque && table.is_some();
    // The scanner numbers instances by counting non-filler records; with an
    // authoritative table, an instance's id is its table position instead.
    let renumber = |e: Error| match (e, table) {
        (Error::Frame { mut at, frame }, Some((_, offsets))) if opaque => {
            at.instance = at
                .offset
                .and_then(|o| offsets.binary_search(&o).ok())
                .map(|i| i as u64);
            Error::Frame { at, frame }
        }
        (e, _) => e,
    };
    let mut scanner = RecordScanner::open(data)?;
    let mut last_report = 0u64;
    let file_size = scanner.file_size();
    let mut out = Inspection {
        instances: 0,
        fillers: 0,
        file_size,
        filler_bytes: 0,
        min_payload: u64::MAX,
        max_payload: 0,
        total_payload: 0,
        padded_page_sizes: Vec::new(),
        filler_page_size: None,
        misfit_fillers: Vec::new(),
        filler_spacing: Vec::new(),
        filler_pairs: 0,
        violations: Vec::new(),
    };
    let candidates: Vec<PageSize> = candidate_page_sizes().collect();
    let mut violations: Vec<Option<Misplaced>> = vec![None; candidates.len()];
    let mut misfit_fillers: Vec<Option<(u64, u64)>> = vec![None; candidates.len()];
    let mut filler_spacing = vec![0u64; candidates.len()];
    let mut last_filler_end: Option<u64> = None;
    // The previous instance, whose span ends where the next instance starts.
    let mut open_instance: Option<(u64, u64, u64)> = None; // (id, offset, framed)
    let close = |inst: Option<(u64, u64, u64)>,
                 end: u64,
                 violations: &mut [Option<Misplaced>]|
     -> Result<()> {
        let Some((id, offset, framed)) = inst else {
            return Ok(());
        };
        // Padding after an instance is another tool's when the table is trusted (the
        // reference implementation pads before a large record up to its page, which can
        // be pages away): (b) is judged on the instance's record alone.
        let m = Misplaced {
            id,
            offset,
            framed,
            span: if opaque { framed } else { end - offset },
        };
        for (first, p) in violations.iter_mut().zip(&candidates) {
            if first.is_none() && !instance_is_placed(*p, offset, framed, m.span) {
                *first = Some(m);
            }
        }
        if let Some(p) = page {
            if !instance_is_placed(p, offset, framed, m.span) {
                return Err(misplaced_error(data, p, m, ""));
            }
        }
        Ok(())
    };
    let mut next_entry = 0usize; // index into the table of the next expected instance
    while let Some(record) = scanner.next_record().map_err(renumber)? {
        let (offset, framed) = (record.offset, record.framed_len);
        let lirs_filler = record.is_filler();
        let listed = table.is_some_and(|(_, offsets)| offsets.get(next_entry) == Some(&offset));
        let filler = if opaque { !listed } else { lirs_filler };
        if offset - last_report >= PROGRESS_EVERY {
            last_report = offset;
            progress(offset);
        }
        if filler {
            out.fillers += 1;
            out.filler_bytes += framed;
            let end = offset + framed;
            for (first, p) in misfit_fillers.iter_mut().zip(&candidates) {
                if first.is_none() && !filler_fits_page(*p, offset, end) {
                    *first = Some((offset, end));
                }
            }
            if let Some(last) = last_filler_end {
                out.filler_pairs += 1;
                for (n, p) in filler_spacing.iter_mut().zip(&candidates) {
                    *n += u64::from((end - last) % p.get() == 0);
                }
            }
            last_filler_end = Some(end);
        } else {
            let n = record.payload.len() as u64;
            out.min_payload = out.min_payload.min(n);
            out.max_payload = out.max_payload.max(n);
            out.total_payload += n;
        }
        if let Some((table_path, offsets)) = table {
            let expected = offsets.get(next_entry).copied();
            match expected {
                // Entries are visited in order, so one that is not this record's start
                // but lies before its end points into the middle of this record.
                Some(e) if e != offset && e < offset + framed => {
                    return Err(Error::table(
                        table_path,
                        Some(next_entry as u64),
                        Some(e),
                        format!(
                            "offset {e} is not a record start in {} (it lies inside the record at byte {offset}): the table does not match the data file",
                            data.display(),
                        ),
                    ));
                }
                Some(e) if e == offset => {
                    if lirs_filler {
                        return Err(Error::table(
                            table_path,
                            Some(next_entry as u64),
                            Some(e),
                            format!(
                                "offset {e} points at a filler record in {}, not an instance",
                                data.display()
                            ),
                        ));
                    }
                    next_entry += 1;
                }
                _ if !filler => {
                    let why = if next_entry == offsets.len() {
                        format!(
                            "unindexed instance: the table {} covers {} instances but the data file goes on with more records; run `tfrecord-lirs index` to rebuild it; or, {TRUST_TABLE_HINT}",
                            table_path.display(),
                            offsets.len()
                        )
                    } else {
                        format!(
                            "instance record not in the table {} (the table's next entry is byte {}); or, {TRUST_TABLE_HINT}",
                            table_path.display(),
                            offsets[next_entry]
                        )
                    };
                    return Err(Error::layout(data, None, offset, why));
                }
                _ if next_entry == 0 && !opaque => {
                    return Err(Error::layout(
                        data,
                        None,
                        offset,
                        "filler before the first instance: spans must tile the file from byte 0",
                    ));
                }
                _ => {}
            }
        }
        if !filler {
            close(open_instance, offset, &mut violations)?;
            open_instance = Some((out.instances, offset, framed));
            out.instances += 1;
        }
    }
    close(open_instance, file_size, &mut violations)?;
    progress(file_size);
    if let Some((table_path, offsets)) = table {
        if next_entry < offsets.len() {
            return Err(Error::table(
                table_path,
                Some(next_entry as u64),
                Some(offsets[next_entry]),
                format!(
                    "the table has {} entries but {} holds only {} instances",
                    offsets.len(),
                    data.display(),
                    next_entry
                ),
            ));
        }
    }
    if out.instances == 0 {
        out.min_payload = 0;
    }
    if out.fillers > 0 && out.instances > 0 {
        out.padded_page_sizes = candidates
            .iter()
            .zip(&violations)
            .filter(|(_, first)| first.is_none())
            .map(|(p, _)| p.get())
            .collect();
    }
    if out.fillers > 0 {
        out.filler_page_size = candidates
            .iter()
            .zip(&misfit_fillers)
            .filter(|(_, misfit)| misfit.is_none())
            .map(|(p, _)| p.get())
            .next_back();
    }
    out.violations = violations;
    out.misfit_fillers = misfit_fillers;
    out.filler_spacing = filler_spacing;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_records(path: &Path, payloads: &[&[u8]]) {
        let mut bytes = Vec::new();
        for p in payloads {
            format::encode_record(p, &mut bytes);
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn scans_offsets_and_skips_fillers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        format::encode_record(b"a", &mut bytes);
        format::encode_filler(30, &mut bytes);
        format::encode_record(b"bb", &mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(scan_offsets(&path, |_| {}).unwrap(), vec![0, 17 + 30]);
    }

    #[test]
    fn huge_length_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = format::encode_header(1 << 62).to_vec();
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let err = scan_offsets(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    #[test]
    fn records_larger_than_the_read_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let big = vec![7u8; READ_CHUNK + 1000];
        write_records(&path, &[b"x", &big, b"y"]);
        let mut scanner = RecordScanner::open(&path).unwrap();
        let mut sizes = Vec::new();
        while let Some(r) = scanner.next_record().unwrap() {
            sizes.push(r.payload.len());
        }
        assert_eq!(sizes, vec![1, READ_CHUNK + 1000, 1]);
    }

    #[test]
    fn gzip_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.gz");
        std::fs::write(&path, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4]).unwrap();
        let err = scan_offsets(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("GZIP"), "{err}");
    }

    /// The framing rules, checked the plain way over the whole file in memory: what
    /// every scan must match, errors included (rendered as strings).
    fn model_scan(path: &Path) -> std::result::Result<Vec<u64>, String> {
        let bytes = std::fs::read(path).unwrap();
        let (mut at, mut instances, mut offsets) = (0usize, 0u64, Vec::new());
        let err = |id: Option<u64>, at: usize, e: FrameError| {
            Err(Error::frame(path, id, at as u64, e).to_string())
        };
        while at < bytes.len() {
            let rest = &bytes[at..];
            let Some(header) = rest.first_chunk::<HEADER_LEN>() else {
                let available = rest.len() as u64;
                return err(
                    Some(instances),
                    at,
                    FrameError::Truncated {
                        needed: 12,
                        available,
                    },
                );
            };
            if let Err(e) = format::decode_header(header) {
                if let Some(format) = format::compression_magic(rest).filter(|_| at == 0) {
                    let at = Location::new(path, None, Some(0));
                    return Err(Error::Compressed { at, format }.to_string());
                }
                return err(Some(instances), at, e);
            }
            match format::decode_record(rest, true) {
                Ok(frame) => {
                    if !format::is_filler(frame.payload) {
                        offsets.push(at as u64);
                        instances += 1;
                    }
                    at += frame.framed_len as usize;
                }
                Err(e @ FrameError::PayloadCrc { .. }) => {
                    let len = rest
                        .len()
                        .min(u64::from_le_bytes(header[..8].try_into().unwrap()) as usize);
                    let filler = format::is_filler(&rest[HEADER_LEN..][..len]);
                    return err((!filler).then_some(instances), at, e);
                }
                Err(e) => return err(Some(instances), at, e),
            }
        }
        Ok(offsets)
    }

    /// Every way of scanning `path`, each with tiny chunks so records straddle them.
    fn every_scan(path: &Path) -> Vec<(String, std::result::Result<Vec<u64>, String>)> {
        let mut out = Vec::new();
        for chunk in [1, 5, 13, 64, 100, 4096, SCAN_CHUNK] {
            for threads in [1, 2, 3] {
                let got = scan_offsets_with(path, chunk, threads, |_| {});
                let name = format!("scan_offsets chunk {chunk} threads {threads}");
                out.push((name, got.map_err(|e| e.to_string())));
            }
        }
        for (chunk, ring) in [(1, 2), (7, 1), (64, 2), (64, 0), (READ_CHUNK, READ_AHEAD)] {
            let got = (|| {
                let mut scanner = RecordScanner::open_with(path, chunk, ring)?;
                let mut offsets = Vec::new();
                while let Some(record) = scanner.next_record()? {
                    // Positions and payloads as they are in the file.
                    let bytes = std::fs::read(path).unwrap();
                    let at = record.offset as usize + HEADER_LEN;
                    assert_eq!(record.payload, &bytes[at..at + record.payload.len()]);
                    if !record.is_filler() {
                        offsets.push(record.offset);
                    }
                }
                Ok::<_, Error>(offsets)
            })();
            let name = format!("RecordScanner chunk {chunk} ring {ring}");
            out.push((name, got.map_err(|e| e.to_string())));
        }
        out
    }

    fn assert_all_match_model(path: &Path) {
        let expected = model_scan(path);
        for (name, got) in every_scan(path) {
            assert_eq!(got, expected, "{name}");
        }
    }

    /// Records of many sizes (empty to several chunks long) and fillers.
    fn varied_file(path: &Path) -> Vec<u64> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..60usize {
            if i % 7 == 3 {
                format::encode_filler(24 + (i as u64 * 13) % 90, &mut bytes);
            }
            offsets.push(bytes.len() as u64);
            let len = match i % 10 {
                0 => 0,
                9 => 700 + i * 11,
                _ => (i * 37) % 150,
            };
            let payload: Vec<u8> = (0..len).map(|j| (i * 31 + j) as u8 | 1).collect();
            format::encode_record(&payload, &mut bytes);
        }
        std::fs::write(path, &bytes).unwrap();
        offsets
    }

    #[test]
    fn records_straddling_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let expected = varied_file(&path);
        assert_eq!(model_scan(&path), Ok(expected.clone()));
        for (name, got) in every_scan(&path) {
            assert_eq!(got, Ok(expected.clone()), "{name}");
        }
    }

    #[test]
    fn early_payload_crc_error_wins_over_a_later_framing_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let offsets = varied_file(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        // A payload byte of instance 5, then the length of instance 40, then cut the
        // last record short: three errors, and the first in the file must be the one.
        bytes[offsets[5] as usize + HEADER_LEN] ^= 0x40;
        bytes[offsets[40] as usize + 3] ^= 0x01;
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("payload CRC"), "{expected}");
        assert!(expected.contains("instance 5"), "{expected}");
        assert!(
            expected.contains(&format!("byte {}", offsets[5])),
            "{expected}"
        );
        assert_all_match_model(&path);
        // With only the later errors, the length CRC is the first.
        bytes[offsets[5] as usize + HEADER_LEN] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("length CRC"), "{expected}");
        assert!(
            expected.contains(&format!("byte {}", offsets[40])),
            "{expected}"
        );
        assert_all_match_model(&path);
    }

    #[test]
    fn every_truncation_and_many_flips_fail_like_a_plain_scan() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        for (i, len) in [3usize, 0, 40, 200, 17].into_iter().enumerate() {
            if i == 2 {
                format::encode_filler(40, &mut bytes);
            }
            format::encode_record(&vec![i as u8 + 1; len], &mut bytes);
        }
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert_all_match_model(&path);
        }
        for at in (0..bytes.len()).step_by(3) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            std::fs::write(&path, &flipped).unwrap();
            assert_all_match_model(&path);
        }
    }

    /// The scan checks chunks in place in a lease-guarded map: a truncation while it
    /// runs must revoke the map first (the truncating thread is not held up for the
    /// kernel's lease-break-time) and end in a table of the data as it was, or a clean
    /// error; never a crash (SIGBUS) or a hang.
    #[test]
    fn truncation_during_a_mapped_scan_is_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        let mut full = Vec::new();
        for i in 0..40_000usize {
            full.push(bytes.len() as u64);
            format::encode_record(&vec![(i % 200) as u8 + 1; 50 + i % 300], &mut bytes);
        }
        for delay_us in [0u64, 200, 1000, 3000, 10_000] {
            std::fs::write(&path, &bytes).unwrap();
            let cut = path.clone();
            let truncator = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_micros(delay_us));
                let t = std::time::Instant::now();
                let f = std::fs::OpenOptions::new().write(true).open(&cut).unwrap();
                f.set_len(bytes_len_half(&cut)).unwrap();
                t.elapsed()
            });
            let got = scan_offsets_with(&path, 16 << 10, 2, |_| {});
            let took = truncator.join().unwrap();
            assert!(
                took < std::time::Duration::from_secs(20),
                "blocked {took:?}"
            );
            match got {
                Ok(offsets) => assert!(full.starts_with(&offsets), "{delay_us}"),
                Err(e) => {
                    assert_eq!(e.kind(), crate::ErrorKind::DataLoss, "{e}");
                    assert!(e.to_string().contains("truncated"), "{e}");
                }
            }
        }

        fn bytes_len_half(path: &Path) -> u64 {
            std::fs::metadata(path).unwrap().len() / 2 + 5
        }
    }

    #[test]
    fn huge_length_at_a_chunk_boundary_does_not_allocate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut bytes = Vec::new();
        format::encode_record(&[1; 50], &mut bytes);
        bytes.extend_from_slice(&format::encode_header(1 << 62));
        bytes.extend_from_slice(&[0; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let expected = model_scan(&path).unwrap_err();
        assert!(expected.contains("truncated"), "{expected}");
        assert_all_match_model(&path);
    }

    #[test]
    fn compressed_files_are_named_with_tiny_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.z");
        std::fs::write(&path, [0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]).unwrap();
        assert!(model_scan(&path).unwrap_err().contains("ZLIB"));
        assert_all_match_model(&path);
    }

    #[test]
    fn dropping_a_scanner_part_way_stops_its_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        varied_file(&path);
        for _ in 0..20 {
            // A reader far ahead, blocked on a full ring: dropping must still return.
            let mut scanner = RecordScanner::open_with(&path, 16, 2).unwrap();
            scanner.next_record().unwrap().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn progress_is_reported_in_order_and_ends_at_the_file_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let payload = vec![5u8; 1 << 20];
        let mut bytes = Vec::new();
        for _ in 0..140 {
            format::encode_record(&payload, &mut bytes);
        }
        std::fs::write(&path, &bytes).unwrap();
        let mut seen = Vec::new();
        let offsets = scan_offsets_with(&path, 1 << 20, 2, |done| seen.push(done)).unwrap();
        assert_eq!(offsets.len(), 140);
        assert!(seen.len() >= 3, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(seen.last(), Some(&(bytes.len() as u64)));
    }
}
