//! [`RecordScanner`]: records one by one, in file order, with a read-ahead thread.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::{self, HEADER_LEN};

use super::{check_header, check_record, truncated, Bad, ScannedRecord};
use crate::compress::{self, Compression};
use crate::storage::local;
use crate::storage::Storage;

/// Bytes per read of a [`RecordScanner`]: few syscalls, and a ring of them still fits
/// in cache.
pub(super) const READ_CHUNK: usize = 1 << 20;
/// Buffers in the read-ahead ring: the reader may run this many chunks ahead.
pub(super) const READ_AHEAD: usize = 4;
/// A record gathered across chunks keeps its buffer for the next one up to this size;
/// a bigger one (a huge record) is freed so the scanner does not hold on to it.
pub(super) const CARRY_KEEP: usize = 2 * READ_CHUNK;

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
        match local::read_full(src, &mut buf) {
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
        let spawned = crate::pool::spawn("lirs-scan-read", move || {
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
                let n = local::read_full(&mut **src, &mut buf)?;
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
        RecordScanner::open_in(&Storage::local(), path)
    }

    /// [`open`](RecordScanner::open) through `storage` (`path` may be a URL when it
    /// has a file system).
    pub fn open_in(storage: &Storage, path: &Path) -> Result<RecordScanner> {
        RecordScanner::open_with(storage, path, READ_CHUNK, READ_AHEAD)
    }

    /// [`open`](RecordScanner::open) with `chunk` bytes per read and a ring of `ring`
    /// buffers (0: no read-ahead thread). Tests use tiny chunks to put chunk
    /// boundaries everywhere.
    pub(super) fn open_with(
        storage: &Storage,
        path: &Path,
        chunk: usize,
        ring: usize,
    ) -> Result<RecordScanner> {
        let (src, file_size) = storage.open_stream(path)?;
        let source = Source::new(src, file_size, chunk.max(1), ring);
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
        RecordScanner::open_compressed_in(&Storage::local(), path, compression)
    }

    /// [`open_compressed`](RecordScanner::open_compressed) through `storage`.
    pub(crate) fn open_compressed_in(
        storage: &Storage,
        path: &Path,
        compression: Compression,
    ) -> Result<RecordScanner> {
        let compression = compression.resolve_in(storage, path)?;
        if compression == Compression::None {
            return RecordScanner::open_in(storage, path);
        }
        let (src, read) = compress::open_decompressed(storage, path, compression)?;
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
            } => Error::layout(
                &self.path,
                instance.then_some(self.instances),
                None,
                format!("at decompressed byte {offset} of the {name} stream: {frame}"),
            ),
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
                self.instances += u64::from(!framing::is_filler(payload));
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
                let filler = framed.is_some()
                    && self.carry.get(HEADER_LEN..).is_some_and(framing::is_filler);
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
                self.instances += u64::from(!framing::is_filler(payload));
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
