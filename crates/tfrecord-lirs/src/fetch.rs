//! Parallel, pipelined fetching of an epoch order (after RINAS): the ids of the next
//! few windows of the order are read concurrently by a pool of I/O threads while the
//! consumer works on the current window.
//!
//! Each window (at least `window` ids, extended to the end of a page-aware unit) is cut
//! into runs of consecutive ids, the runs are spread over the pool, and each run is one
//! coalesced read ([`Reader::read_batch`]). Windows are delivered in order, and payloads
//! within a window in the order's order, so the sequence is the same as reading the
//! order one id at a time.
//!
//! Errors are per slot: when the coalesced read of a run fails, the fetch thread reads
//! that run's ids one by one, so each failed slot holds the error of its own instance
//! (naming its file and byte) and every other payload of the window is still delivered.
//! Only a failure of the machinery itself (a panic in a fetch thread, the threads gone)
//! fails a whole window, as an [`ErrorKind::Internal`](crate::ErrorKind::Internal) error.
//!
//! Unordered delivery ([`Fetcher::unordered`], RINAS's answer to high-latency storage):
//! windows are handed out as they complete, whichever of those in flight that is, so a
//! slow read holds up only its own window and the pool stays busy. Each window is
//! still whole (with [`Fetcher::exact_windows`], exactly `window` ids: one batch), so
//! an epoch is the same multiset and the same batches, in another order. Where the
//! consumer is in the order is then no longer a position but a [`Resume`] point: a
//! position and the positions after it already handed out, which a new fetcher skips
//! ([`Fetcher::skip`]): a restored iterator delivers exactly the instances not yet
//! delivered.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
#[cfg(feature = "fault-injection")]
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::order::EpochOrder;
use crate::reader::{Batch, Reader};

/// Settings of a [`Fetcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// I/O threads; 0 reads each window on the consumer's thread when it asks for it
    /// (no pool, no hand-off: the fastest for hot mapped files, where a read is a few
    /// hundred nanoseconds and a hand-off between threads costs as much).
    pub threads: usize,
    /// Ids per window, at least (a page-aware window is extended to a unit boundary).
    pub window: usize,
    /// Windows in flight ahead of the consumer (at least 1).
    pub depth: usize,
}

impl FetchOptions {
    /// Threads for `reader` when the caller has no preference: none (reads on the
    /// consumer's thread) while it reads from memory maps, else 2 (positioned reads
    /// are syscall-bound and overlap; more threads than the 2 cores TF leaves would only
    /// compete with TensorFlow's own threads).
    pub fn auto_threads(reader: &Reader) -> usize {
        if reader.is_remote() {
            // Remote storage: each read waits on the network, not a core, so
            // throughput grows with the reads in flight.
            return REMOTE_AUTO_THREADS;
        }
        if reader.is_mapped() {
            0
        } else {
            2
        }
    }
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            threads: 4,
            window: 256,
            depth: 4,
        }
    }
}

struct Job {
    window: u64,
    part: usize,
    ids: Vec<u64>,
}

struct Done {
    window: u64,
    part: usize,
    /// `Err` only for a panic while reading the part (a window-level failure).
    result: Result<PartRead>,
}

/// One part of a window as read: its payloads in part order (an empty one for each
/// failed id) and the failed ids' positions in the part with their errors.
struct PartRead {
    batch: Batch,
    failed: Vec<(usize, Error)>,
}

/// Reads `ids` into `batch` with one coalesced read; if that fails, reads them one by
/// one, so each error names its own instance and the others are still read. A failed
/// id gets an empty payload in `batch`, and its position and error are returned.
fn read_part(reader: &Reader, ids: &[u64], batch: &mut Batch) -> Vec<(usize, Error)> {
    if reader.read_batch(ids, batch).is_ok() {
        return Vec::new();
    }
    batch.clear();
    let mut failed = Vec::new();
    let mut span = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        match reader.read_span_into(id, &mut span) {
            Ok(payload) => batch.push(id, &span[payload]),
            Err(e) => {
                batch.push(id, &[]);
                failed.push((k, e));
            }
        }
    }
    failed
}

/// A window is cut into parts of at least this many ids (when it has that many): a
/// part is one hand-off to a thread and back, which costs about as much as reading a
/// few hot records.
const MIN_PART_IDS: usize = 16;

/// Threads (reads in flight) chosen for remote files when the caller has no
/// preference ([`FetchOptions::auto_threads`]).
pub const REMOTE_AUTO_THREADS: usize = 32;

/// Used batches, handed back by the consumer so the threads reuse their buffers; at
/// most `.1` are kept (more would only hold memory).
#[derive(Clone)]
struct Spares(Arc<Mutex<Vec<Batch>>>, usize);

impl Spares {
    fn take(&self) -> Batch {
        self.0
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    fn give(&self, batches: impl IntoIterator<Item = Batch>) {
        if let Ok(mut v) = self.0.lock() {
            for mut b in batches {
                if v.len() >= self.1 {
                    break;
                }
                b.clear();
                v.push(b);
            }
        }
    }
}

/// A window being fetched: its ids in order, where each payload will be, and the
/// parts that came back.
struct Pending {
    ids: Vec<u64>,
    /// The order positions of `ids`.
    positions: Vec<u64>,
    slots: Vec<(usize, usize)>,
    parts: Vec<Option<PartRead>>,
    missing: usize,
    /// A window-level failure (a panic in a fetch thread).
    error: Option<Error>,
}

/// Reads an [`EpochOrder`] window by window with a pool of threads.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..500u32 { w.write(&i.to_le_bytes())?; }
/// # w.finish()?;
/// use std::sync::Arc;
/// use tfrecord_lirs::{FetchOptions, Fetcher, OrderSpec, Reader};
/// let reader = Arc::new(Reader::open_one(&path, None, &Default::default())?);
/// let order = reader.epoch_order(&OrderSpec { seed: 1, page_aware: true, ..Default::default() })?;
/// let mut fetcher = Fetcher::new(Arc::clone(&reader), order, FetchOptions::default())?;
/// let mut n = 0;
/// while let Some(window) = fetcher.next_window() {
///     let payloads = window.result?; // Err: the window as a whole failed (a bug)
///     for i in 0..payloads.len() {
///         match payloads.get(i) {
///             Some(Ok(payload)) => assert_eq!(payload.len(), 4),
///             // Only this instance could not be read; the error names it.
///             Some(Err(e)) => eprintln!("skipped: {e}"),
///             None => unreachable!("i < len"),
///         }
///         n += 1;
///     }
/// }
/// assert_eq!(n, 500);
/// # Ok(()) }
/// ```
pub struct Fetcher {
    order: EpochOrder,
    options: FetchOptions,
    jobs: Option<mpsc::Sender<Job>>,
    /// Set on drop: the workers pass over the jobs still queued instead of reading
    /// them, so only the reads in progress (one part per thread) are waited for, not
    /// up to `depth` windows of them (seconds on remote storage).
    stopping: Arc<std::sync::atomic::AtomicBool>,
    done: mpsc::Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
    spares: Spares,
    /// Fault injection (feature `fault-injection`, tests only): while set, every job
    /// panics inside its fetch thread.
    #[cfg(feature = "fault-injection")]
    test_panic: Arc<AtomicBool>,
    pending: BTreeMap<u64, Pending>,
    /// With no threads: the reader, read on the consumer's thread.
    inline: Option<Arc<Reader>>,
    next_window: u64,
    next_deliver: u64,
    delivered: u64,
    /// Ids per part, at least: [`MIN_PART_IDS`], or 1 for remote files, where a read
    /// waits on the network and each run of consecutive ids (one coalesced request)
    /// is a part of its own, so up to `threads` requests are in flight.
    min_part_ids: usize,
    /// Windows are handed out as they complete ([`Fetcher::unordered`]).
    unordered: bool,
    /// Windows of exactly `window` ids, not extended to a unit's end.
    exact: bool,
    /// Positions handed out before this fetcher started (from a [`Resume`] point):
    /// left out of the windows.
    skip: BTreeSet<u64>,
    /// Every position below `low` is handed out, and so are those in `handed`
    /// (all but the last window's, which are in `last`).
    low: u64,
    handed: BTreeSet<u64>,
    last: Vec<u64>,
}

/// Where a consumer is in an epoch order, for a checkpoint: every position below
/// `position` and every one in `after` has been delivered, and nothing else. In order,
/// `after` is empty; with unordered delivery it holds the windows delivered ahead of a
/// slower one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resume {
    /// The first position not delivered.
    pub position: u64,
    /// Positions past `position` already delivered, ascending.
    pub after: Vec<u64>,
}

impl Fetcher {
    /// Starts the pool; fetching begins with the first `next_window`.
    pub fn new(reader: Arc<Reader>, order: EpochOrder, options: FetchOptions) -> Result<Fetcher> {
        if options.window == 0 || options.depth == 0 {
            return Err(Error::invalid_argument(format!(
                "fetch options need window and depth of at least 1, got {options:?}"
            )));
        }
        let inline = (options.threads == 0).then(|| Arc::clone(&reader));
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        // At least one: with no threads, the consumer reuses its own last batch.
        // A window's buffers come back when its consumer lets go of its payloads,
        // which can be several windows later (a caller that hands out views of them,
        // as LIRSDataset's batches do): keep enough that the steady state reuses
        // buffers instead of growing fresh ones.
        let spares = Spares(Arc::default(), options.threads.max(1) + options.depth);
        #[cfg(feature = "fault-injection")]
        let test_panic = Arc::new(AtomicBool::new(false));
        let workers = (0..options.threads)
            .map(|_| {
                let jobs = Arc::clone(&job_rx);
                let stopping = Arc::clone(&stopping);
                let done = done_tx.clone();
                let reader = Arc::clone(&reader);
                let spares = spares.clone();
                #[cfg(feature = "fault-injection")]
                let test_panic = Arc::clone(&test_panic);
                crate::pool::spawn("lirs-fetch", move || loop {
                    // The lock is held only while taking a job, never while reading.
                    let job = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return };
                    if stopping.load(std::sync::atomic::Ordering::Relaxed) {
                        continue; // the fetcher is gone: drain the queue unread
                    }
                    // A panic must not kill the thread: the other threads keep the
                    // done channel open, so the consumer would wait for this reply
                    // forever. It becomes the job's (Internal) error instead; the
                    // buffer it may have left half-written is dropped, not reused.
                    let result = catch_unwind(AssertUnwindSafe(|| {
                        #[cfg(feature = "fault-injection")]
                        if test_panic.load(Ordering::Relaxed) {
                            panic!("test panic injected into a fetch thread");
                        }
                        let mut batch = spares.take();
                        let failed = read_part(&reader, &job.ids, &mut batch);
                        PartRead { batch, failed }
                    }))
                    .map_err(|payload| {
                        Error::internal(format!(
                            "panic in a tfrecord-lirs fetch thread reading {} instances \
                                 from instance {}: {}",
                            job.ids.len(),
                            job.ids.first().copied().unwrap_or_default(),
                            panic_message(payload.as_ref())
                        ))
                    });
                    let sent = done.send(Done {
                        window: job.window,
                        part: job.part,
                        result,
                    });
                    if sent.is_err() {
                        return;
                    }
                })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::invalid_argument(format!("cannot start fetch threads: {e}")))?;
        let delivered = order.position();
        let min_part_ids = if reader.is_remote() { 1 } else { MIN_PART_IDS };
        let low = order.position();
        Ok(Fetcher {
            order,
            options,
            jobs: Some(job_tx),
            stopping,
            done: done_rx,
            workers,
            spares,
            #[cfg(feature = "fault-injection")]
            test_panic,
            pending: BTreeMap::new(),
            inline,
            next_window: 0,
            next_deliver: 0,
            delivered,
            min_part_ids,
            unordered: false,
            exact: false,
            skip: BTreeSet::new(),
            low,
            handed: BTreeSet::new(),
            last: Vec::new(),
        })
    }

    /// Hands windows out as they complete instead of in order (see the module docs).
    /// With no threads (reads on the consumer's thread) there is nothing to reorder.
    pub fn unordered(mut self) -> Fetcher {
        self.unordered = true;
        self
    }

    /// Cuts windows of exactly `window` ids (the last one may be shorter), not
    /// extended to the end of a page-aware unit: with unordered delivery, each
    /// window is then one batch of the in-order sequence.
    pub fn exact_windows(mut self) -> Fetcher {
        self.exact = true;
        self
    }

    /// Leaves out the positions `after` of a [`Resume`] point (already delivered);
    /// the order must be positioned at its `position`. Positions before the order's
    /// position are ignored.
    pub fn skip(mut self, after: impl IntoIterator<Item = u64>) -> Fetcher {
        let low = self.low;
        self.skip.extend(after.into_iter().filter(|&p| p >= low));
        self.handed.extend(self.skip.iter().copied());
        self
    }

    /// Where the consumer is, having used all but the last `unserved` payloads of the
    /// last window handed out.
    pub fn resume(&self, unserved: usize) -> Resume {
        let served = self.last.len().saturating_sub(unserved);
        let mut done: BTreeSet<u64> = self.handed.clone();
        done.extend(self.last[..served].iter().copied());
        let mut position = self.low;
        while done.remove(&position) {
            position += 1;
        }
        Resume {
            position,
            after: done.into_iter().filter(|&p| p > position).collect(),
        }
    }

    /// The next window of the order: its ids and their positions, without skipped
    /// positions; `None` at the end of the order.
    fn cut_window(&mut self) -> Option<(Vec<u64>, Vec<u64>)> {
        loop {
            let start = self.order.position();
            let mut ids = Vec::with_capacity(self.options.window);
            let taken = if self.exact {
                self.order.next_batch(self.options.window, &mut ids)
            } else {
                self.order.next_window(self.options.window, &mut ids)
            };
            if taken == 0 {
                return None;
            }
            let mut positions: Vec<u64> = (start..start + ids.len() as u64).collect();
            if !self.skip.is_empty() {
                let keep: Vec<bool> = positions.iter().map(|p| !self.skip.remove(p)).collect();
                let mut k = keep.iter();
                ids.retain(|_| *k.next().unwrap_or(&true));
                let mut k = keep.iter();
                positions.retain(|_| *k.next().unwrap_or(&true));
                if ids.is_empty() {
                    continue;
                }
            }
            return Some((ids, positions));
        }
    }

    /// Records that the window at `positions` is handed out (the previous one is then
    /// used up).
    fn hand_out(&mut self, positions: Vec<u64>) {
        let previous = std::mem::replace(&mut self.last, positions);
        // In order (the usual case, and the hot path) the previous window is the run of
        // positions from `low` (positions ascend): no set needed.
        let run = previous.len() as u64;
        if self.handed.is_empty()
            && previous.first() == Some(&self.low)
            && previous.last().is_some_and(|&p| p + 1 == self.low + run)
        {
            self.low += run;
            return;
        }
        self.handed.extend(previous);
        while self.handed.remove(&self.low) {
            self.low += 1;
        }
    }

    /// Ids handed out so far in this epoch (failed windows included).
    pub fn position(&self) -> u64 {
        self.delivered
    }

    /// Fault injection (feature `fault-injection`, tests only; absent from normal
    /// builds): while `on`, every job taken by a fetch thread panics inside that
    /// thread, so tests can prove such a panic reaches the consumer as an
    /// [`ErrorKind::Internal`](crate::ErrorKind::Internal) error instead of a hang.
    #[cfg(feature = "fault-injection")]
    pub fn set_test_panic(&self, on: bool) {
        self.test_panic.store(on, Ordering::Relaxed);
    }

    /// Ids in this shard's epoch.
    pub fn len(&self) -> u64 {
        self.order.len()
    }

    /// Whether the epoch is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Queues windows until `depth` are in flight or the order is exhausted.
    fn submit(&mut self) {
        if self.jobs.is_none() {
            return;
        }
        while self.pending.len() < self.options.depth {
            let Some((ids, positions)) = self.cut_window() else {
                return;
            };
            let Some(jobs) = &self.jobs else { return };
            let most = self
                .options
                .threads
                .min(ids.len().div_ceil(self.min_part_ids));
            let (parts, slots) = split_runs(&ids, most);
            let window = self.next_window;
            self.next_window += 1;
            let count = parts.len();
            for (part, part_ids) in parts.into_iter().enumerate() {
                // A closed channel means the workers are gone; the wait below reports it.
                let _ = jobs.send(Job {
                    window,
                    part,
                    ids: part_ids,
                });
            }
            self.pending.insert(
                window,
                Pending {
                    ids,
                    positions,
                    slots,
                    parts: (0..count).map(|_| None).collect(),
                    missing: count,
                    error: None,
                },
            );
        }
    }

    /// The next window: its ids and their payloads, each read or failed on its own
    /// (see [`Payloads::get`]); `Err` only when the window as a whole failed (a panic in
    /// a fetch thread, the threads gone: [`ErrorKind::Internal`](crate::ErrorKind::Internal)).
    /// `None` at the end of the epoch.
    pub fn next_window(&mut self) -> Option<Window> {
        if let Some(reader) = &self.inline {
            return self.next_window_inline(&Arc::clone(reader));
        }
        self.submit();
        let mut head = self.next_deliver;
        loop {
            if self.unordered {
                // The first complete window in flight, if any.
                match self.pending.iter().find(|(_, p)| p.missing == 0) {
                    Some((&w, _)) => {
                        head = w;
                        break;
                    }
                    None if self.pending.is_empty() => return None,
                    None => head = self.pending.keys().next().copied().unwrap_or(head),
                }
            } else {
                match self.pending.get(&head) {
                    None => return None,
                    Some(p) if p.missing == 0 => break,
                    Some(_) => {}
                }
            }
            let Ok(done) = self.done.recv() else {
                // Every thread is gone (cannot happen while they catch panics).
                // This window fails and is passed: each later window fails the same
                // way and the epoch still ends.
                let (ids, positions) = self
                    .pending
                    .remove(&head)
                    .map(|p| (p.ids, p.positions))
                    .unwrap_or_default();
                self.next_deliver += 1;
                self.delivered += ids.len() as u64;
                self.hand_out(positions);
                return Some(Window {
                    ids,
                    result: Err(Error::internal(
                        "tfrecord-lirs fetch threads stopped unexpectedly",
                    )),
                });
            };
            if let Some(p) = self.pending.get_mut(&done.window) {
                p.missing = p.missing.saturating_sub(1);
                match (done.result, p.parts.get_mut(done.part)) {
                    (Ok(read), Some(slot)) => *slot = Some(read),
                    (Ok(_), None) => {
                        p.error.get_or_insert(Error::internal(format!(
                            "fetch thread answered for part {} of a window of {} parts",
                            done.part,
                            p.parts.len()
                        )));
                    }
                    (Err(e), _) => {
                        p.error.get_or_insert(e);
                    }
                }
            }
        }
        // Present: the loop above only breaks when the head window is complete.
        let window = self.pending.remove(&head)?;
        self.next_deliver += 1;
        self.delivered += window.ids.len() as u64;
        self.hand_out(window.positions);
        let result = match window.error {
            Some(e) => {
                self.spares
                    .give(window.parts.into_iter().flatten().map(|r| r.batch));
                Err(e)
            }
            None => Ok(self.assemble(window.parts, window.slots)),
        };
        self.submit();
        Some(Window {
            ids: window.ids,
            result,
        })
    }

    /// The payloads of a window from its parts (all present) and where each slot is.
    fn assemble(&self, parts: Vec<Option<PartRead>>, slots: Vec<(usize, usize)>) -> Payloads {
        let mut batches = Vec::with_capacity(parts.len());
        // (part, index in part) -> error, for the rare parts with failed ids.
        let mut part_errors = BTreeMap::new();
        for (p, read) in parts.into_iter().flatten().enumerate() {
            for (j, e) in read.failed {
                part_errors.insert((p, j), e);
            }
            batches.push(read.batch);
        }
        let failed = if part_errors.is_empty() {
            Vec::new()
        } else {
            slots
                .iter()
                .enumerate()
                .filter_map(|(k, at)| Some((k, part_errors.remove(at)?)))
                .collect()
        };
        Payloads {
            parts: Parts::Scattered { batches, slots },
            failed,
            spares: self.spares.clone(),
        }
    }

    /// [`next_window`](Fetcher::next_window) with no pool: the window is read here, in
    /// order, into one reused batch.
    fn next_window_inline(&mut self, reader: &Reader) -> Option<Window> {
        let (ids, positions) = self.cut_window()?;
        self.next_window += 1;
        self.next_deliver += 1;
        self.delivered += ids.len() as u64;
        self.hand_out(positions);
        #[cfg(feature = "fault-injection")]
        if self.test_panic.load(Ordering::Relaxed) {
            return Some(Window {
                ids,
                result: Err(Error::internal(
                    "test panic injected into a fetch thread (inline fetch)",
                )),
            });
        }
        let mut batch = self.spares.take();
        let failed = read_part(reader, &ids, &mut batch);
        let payloads = Payloads {
            parts: Parts::InOrder(batch),
            failed,
            spares: self.spares.clone(),
        };
        Some(Window {
            ids,
            result: Ok(payloads),
        })
    }

    /// The next window's payloads, in order, copied into one [`Batch`] (or the error of
    /// its first failed slot); `None` at the end of the epoch.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        let window = self.next_window()?;
        Some(window.result.and_then(|p| p.into_batch(&window.ids)))
    }
}

/// One window of an epoch order, as fetched.
#[derive(Debug)]
pub struct Window {
    /// The ids of the window, in order.
    pub ids: Vec<u64>,
    /// Their payloads (each read or failed on its own), or the error that failed the
    /// whole window (always [`ErrorKind::Internal`](crate::ErrorKind::Internal)).
    pub result: Result<Payloads>,
}

/// The payloads of one window where the fetch threads put them (no copy into one
/// buffer); slot `i` is the window's `i`-th id: its payload, or the error reading it.
pub struct Payloads {
    parts: Parts,
    /// (slot, error) of each slot whose read failed, by slot; usually empty.
    failed: Vec<(usize, Error)>,
    spares: Spares,
}

/// Where the payloads of a window are.
enum Parts {
    /// One batch holding the window's payloads in window order (read on the
    /// consumer's thread).
    InOrder(Batch),
    /// Batches read by the fetch threads; slot `i` is `batches[slots[i].0]`, payload
    /// `slots[i].1`.
    Scattered {
        batches: Vec<Batch>,
        slots: Vec<(usize, usize)>,
    },
}

impl Payloads {
    /// Number of slots (the window's ids).
    pub fn len(&self) -> usize {
        match &self.parts {
            Parts::InOrder(batch) => batch.len(),
            Parts::Scattered { slots, .. } => slots.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slot `i`: the payload of the window's `i`-th id, or the error reading that
    /// instance (naming its file, id and byte); `None` if `i` is out of range.
    pub fn get(&self, i: usize) -> Option<std::result::Result<&[u8], &Error>> {
        if !self.failed.is_empty() {
            if let Ok(k) = self.failed.binary_search_by_key(&i, |&(slot, _)| slot) {
                return Some(Err(&self.failed[k].1));
            }
        }
        let payload = match &self.parts {
            Parts::InOrder(batch) => batch.get(i),
            Parts::Scattered { batches, slots } => {
                let &(p, j) = slots.get(i)?;
                batches.get(p)?.get(j)
            }
        };
        payload.map(Ok)
    }

    /// The slots that failed, in window order, with their errors.
    pub fn failures(&self) -> impl ExactSizeIterator<Item = (usize, &Error)> + '_ {
        self.failed.iter().map(|(slot, e)| (*slot, e))
    }

    /// The payloads copied into one [`Batch`] with `ids`, the window's ids; the error of
    /// the first failed slot if any failed.
    pub fn into_batch(mut self, ids: &[u64]) -> Result<Batch> {
        if !self.failed.is_empty() {
            return Err(self.failed.swap_remove(0).1);
        }
        let mut out = Batch::default();
        for (i, &id) in ids.iter().enumerate() {
            match self.get(i) {
                Some(Ok(payload)) => out.push(id, payload),
                _ => break,
            }
        }
        Ok(out)
    }
}

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payloads")
            .field("len", &self.len())
            .field("failed", &self.failed.len())
            .finish()
    }
}

impl Drop for Payloads {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.parts, Parts::InOrder(Batch::default())) {
            Parts::InOrder(batch) => self.spares.give([batch]),
            Parts::Scattered { batches, .. } => self.spares.give(batches),
        }
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.stopping
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.jobs = None; // workers see the closed channel and exit
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// The text of a panic payload (a `&str` or `String` message, as `panic!` makes).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Cuts a window into at most `parts` id lists, each a set of whole runs of consecutive
/// ids (sorted), balanced by count. Also returns where each position of `ids` lands:
/// (list, index in the list). One part is the window as it is (the read finds its runs
/// itself), without sorting it.
fn split_runs(ids: &[u64], parts: usize) -> (Vec<Vec<u64>>, Vec<(usize, usize)>) {
    if parts <= 1 {
        return (vec![ids.to_vec()], (0..ids.len()).map(|k| (0, k)).collect());
    }
    let mut by_id: Vec<usize> = (0..ids.len()).collect();
    by_id.sort_unstable_by_key(|&k| ids[k]);
    let target = ids.len().div_ceil(parts.max(1));
    let mut out: Vec<Vec<u64>> = Vec::new();
    let mut slots = vec![(0, 0); ids.len()];
    let mut current = Vec::new();
    let mut prev: Option<u64> = None;
    for &k in &by_id {
        let id = ids[k];
        let run_continues = prev.is_some_and(|p| id == p || id == p + 1);
        if !run_continues && current.len() >= target {
            out.push(std::mem::take(&mut current));
        }
        slots[k] = (out.len(), current.len());
        current.push(id);
        prev = Some(id);
    }
    if !current.is_empty() {
        out.push(current);
    }
    (out, slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_runs_whole() {
        let ids = [9, 3, 4, 5, 1, 10, 11, 20];
        let (parts, slots) = split_runs(&ids, 3);
        let all: Vec<u64> = parts.iter().flatten().copied().collect();
        assert_eq!(all, vec![1, 3, 4, 5, 9, 10, 11, 20]);
        for p in &parts {
            assert!(!p.is_empty());
        }
        // 3,4,5 stay together; so do 9,10,11.
        assert!(parts.iter().any(|p| p.windows(3).any(|w| w == [3, 4, 5])));
        assert!(parts.iter().any(|p| p.windows(3).any(|w| w == [9, 10, 11])));
        // Every position points at its own id.
        for (k, &(p, j)) in slots.iter().enumerate() {
            assert_eq!(parts[p][j], ids[k]);
        }
        // One part: the window as it is.
        let (parts, slots) = split_runs(&ids, 1);
        assert_eq!(parts, vec![ids.to_vec()]);
        for (k, &(p, j)) in slots.iter().enumerate() {
            assert_eq!(parts[p][j], ids[k]);
        }
        let (parts, slots) = split_runs(&[], 4);
        assert!(parts.is_empty() && slots.is_empty());
        // A repeated id gets a slot of its own.
        let (parts, slots) = split_runs(&[7, 7, 2], 2);
        assert_eq!(parts.iter().flatten().filter(|&&i| i == 7).count(), 2);
        assert_ne!(slots[0], slots[1]);
    }
}
