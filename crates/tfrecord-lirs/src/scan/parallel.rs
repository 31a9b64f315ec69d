//! [`scan_offsets`]: the instance offsets of a file, its chunks checked in parallel.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::{self, HEADER_LEN};

use super::{check_header, check_record, truncated, Bad, PROGRESS_EVERY};
use crate::storage::local;
use crate::storage::{Place, Storage};

/// Bytes per chunk of [`scan_offsets`]: small enough to stay in a core's L2 cache from
/// the read to the CRC check (measured best at 128-256 KiB, with 1 MiB close).
pub(super) const SCAN_CHUNK: usize = 256 << 10;
/// Bytes of a mapped chunk prefetched ahead of its record walk.
pub(super) const WALK_PREFETCH: usize = 4096;
/// Spins a worker waits for the chunk before its own to be walked before it sleeps:
/// some tens of microseconds, a few times what a walk takes.
pub(super) const SPIN_WAIT: u32 = 1000;
/// Most threads [`scan_offsets`] uses: beyond a few, memory bandwidth is the limit.
pub(super) const MAX_SCAN_THREADS: usize = 4;

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
    let threads = crate::pool::threads_up_to(MAX_SCAN_THREADS);
    scan_offsets_with(data, SCAN_CHUNK, threads, progress)
}

/// [`scan_offsets`] handing the offsets to `sink` in file order, a chunk's at a time,
/// while the scan goes on (`index` writes them to the table file as they come, instead
/// of collecting them first). Returns the instance count. On an error the sink has
/// had the offsets before the bad record (or some of them), and the scan stops at the
/// sink's first error.
pub(crate) fn scan_offsets_to(
    storage: &Storage,
    data: &Path,
    progress: impl FnMut(u64),
    sink: impl FnMut(&[u64]) -> Result<()>,
) -> Result<u64> {
    let threads = crate::pool::threads_up_to(MAX_SCAN_THREADS);
    scan_offsets_to_with(storage, data, SCAN_CHUNK, threads, progress, sink)
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
    src: &'a dyn crate::storage::ReadAt,
    /// The file mapped under a read lease, if the kernel granted one: chunks are then
    /// checked in place (no copy); once a writer revokes it, chunks are read with
    /// `pread` again, which sees a truncation as an early end of the file.
    map: Option<&'a crate::storage::local::leased::LeasedMap>,
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
        // kernel's copy is aligned like the page cache (see `local::COPY_ALIGN`).
        let mut backing = vec![0; self.chunk + local::COPY_ALIGN];
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
            let pad = local::copy_pad(backing.as_ptr() as usize, base);
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
            None => match local::read_full_from(self.src, buf, base) {
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
                    local::prefetch(&data[prefetched]);
                    prefetched += 64;
                }
            }
            let offset = base + pos as u64;
            let rest = &data[pos..];
            let mut split = [0; HEADER_LEN];
            let (header, head) = match rest.first_chunk::<HEADER_LEN>() {
                Some(header) => (header, rest),
                // The header itself runs past the chunk.
                None => match local::read_full_from(self.src, &mut split, offset) {
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
                Ok(payload) if framing::is_filler(payload) => {}
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
        let have =
            match local::read_full_from(self.src, &mut record[here.len()..], base + got as u64) {
                Ok(n) => here.len() + n,
                Err(e) => return Some((Some(Bad::Io(e)), last)),
            };
        if have < framed {
            // A truncated filler is not an instance.
            let filler = record.get(HEADER_LEN..have).is_some_and(framing::is_filler);
            let bad = truncated(offset, framed as u64, have as u64, !filler);
            return Some((Some(bad), last));
        }
        match check_record(offset, record) {
            Ok(payload) if framing::is_filler(payload) => {}
            Ok(_) => offsets.push(offset),
            Err(b) => return Some((Some(b), last)),
        }
        Some((None, last))
    }
}

/// [`scan_offsets`] with `chunk` bytes per chunk and at most `threads` threads (tests
/// use tiny chunks to put chunk boundaries everywhere).
pub(super) fn scan_offsets_with(
    data: &Path,
    chunk: usize,
    threads: usize,
    progress: impl FnMut(u64),
) -> Result<Vec<u64>> {
    let mut offsets = Vec::new();
    scan_offsets_to_with(&Storage::local(), data, chunk, threads, progress, |some| {
        offsets.extend_from_slice(some);
        Ok(())
    })?;
    Ok(offsets)
}

/// [`scan_offsets_to`] with `chunk` bytes per chunk and at most `threads` threads.
fn scan_offsets_to_with(
    storage: &Storage,
    data: &Path,
    chunk: usize,
    threads: usize,
    mut progress: impl FnMut(u64),
    mut sink: impl FnMut(&[u64]) -> Result<()>,
) -> Result<u64> {
    // Local files with pread (and a leased map where the kernel grants one); URLs
    // through their file system.
    let (src, map) = match storage.place(data)? {
        Place::Local(path) => (
            local::open(path, local::Backend::Pread, None)?,
            crate::storage::local::leased::LeasedMap::open(path),
        ),
        Place::Remote(..) => (storage.open(data, local::Backend::Auto, 1, None)?, None),
    };
    let file_size = src.size();
    let chunk = chunk.max(1);
    let chunks = usize::try_from(file_size.div_ceil(chunk as u64)).unwrap_or(usize::MAX);
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
        sink: &mut sink,
        count: 0,
        first: None,
        waiting: BTreeMap::new(),
        next: 0,
        end: None,
        reported: 0,
    };
    let (done_tx, done_rx) = mpsc::channel();
    // Chunks go to whichever worker is free, so if a thread cannot be started the
    // others simply do its share; and the calling thread, which also puts the chunks
    // back in order as they come, simply checks fewer of them.
    let helpers: Vec<_> = (1..threads.min(chunks))
        .map(|_| {
            let done_tx = done_tx.clone();
            let scan = &scan;
            move || {
                scan.work(move |done| {
                    // Fails only once the caller has stopped merging.
                    let _ = done_tx.send(done);
                })
            }
        })
        .collect();
    drop(done_tx);
    crate::pool::with_helpers("lirs-scan", helpers, || {
        scan.work(|done| {
            merge.add(done, &mut progress);
            for done in done_rx.try_iter() {
                merge.add(done, &mut progress);
            }
            if merge.end.as_ref().is_some_and(Result::is_err) {
                scan.stop_after(0);
            }
        });
        // The helpers' last chunks; the channel closes when they are all done.
        for done in done_rx.iter() {
            merge.add(done, &mut progress);
        }
    });
    match merge.end {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(e),
        // Every chunk up to the first bad one or the end comes back; anything else is
        // a bug, reported rather than turned into a short table.
        None if merge.next >= chunks => {}
        None => {
            return Err(Error::io(
                data,
                std::io::Error::other("internal error: a chunk of the scan is missing"),
            ))
        }
    };
    // The reader and `verify` refuse a table whose instance 0 is not at byte 0: refuse
    // to write one.
    super::check_first_instance(data, merge.first, file_size)?;
    progress(file_size);
    Ok(merge.count)
}

/// Puts chunk results back in file order as they come, and hands their offsets on.
struct Merge<'a> {
    path: &'a Path,
    chunk: u64,
    file_size: u64,
    /// Takes the offsets in file order.
    sink: &'a mut dyn FnMut(&[u64]) -> Result<()>,
    /// Offsets handed to the sink so far.
    count: u64,
    /// The first of them.
    first: Option<u64>,
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
            if let Err(e) = (self.sink)(&done.offsets) {
                self.end = Some(Err(e));
                self.waiting.clear();
                return;
            }
            self.first = self.first.or(done.offsets.first().copied());
            self.count += done.offsets.len() as u64;
            self.next += 1;
            if let Some(bad) = done.bad {
                let e = bad.into_error(self.path, self.count);
                self.end = Some(Err(e));
            } else if done.last {
                self.end = Some(Ok(()));
            }
            if self.end.is_some() {
                self.waiting.clear();
                return;
            }
            // Per chunk merged, not per call: chunks that come back in a burst (a
            // helper ran ahead while this thread scanned) still report every
            // PROGRESS_EVERY bytes, whatever the threads' timing.
            let scanned = (self.next as u64 * self.chunk).min(self.file_size);
            if scanned - self.reported >= PROGRESS_EVERY {
                self.reported = scanned;
                progress(scanned);
            }
        }
    }
}
