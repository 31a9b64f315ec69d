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
    result: Result<Batch>,
}

/// A window is cut into parts of at least this many ids (when it has that many): a
/// part is one hand-off to a thread and back, which costs about as much as reading a
/// few hot records.
const MIN_PART_IDS: usize = 16;

/// Threads (reads in flight) chosen for remote files when the caller has no
/// preference ([`FetchOptions::auto_threads`]).
pub const REMOTE_AUTO_THREADS: usize = 32;

/// Used batches, handed back by the consumer so the threads reuse their buffers; at
/// most `.1` are kept (one per thread is what the steady state needs; more would only
/// hold memory).
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
    parts: Vec<Option<Batch>>,
    missing: usize,
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
///     let payloads = window.result?;
///     for i in 0..payloads.len() {
///         n += 1;
///         assert_eq!(payloads.payload(i).len(), 4);
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
    /// them, so only the reads in progress (one per thread) are waited for, not up
    /// to `depth` windows of them (seconds on remote storage).
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
            return Err(Error::InvalidArgument(format!(
                "fetch options need window and depth of at least 1, got {options:?}"
            )));
        }
        let inline = (options.threads == 0).then(|| Arc::clone(&reader));
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let spares = Spares(Arc::default(), options.threads);
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
                std::thread::Builder::new()
                    .name("lirs-fetch".into())
                    .spawn(move || loop {
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
                            reader.read_batch(&job.ids, &mut batch).map(|()| batch)
                        }))
                        .unwrap_or_else(|payload| {
                            Err(Error::Internal(format!(
                                "panic in a tfrecord-lirs fetch thread reading {} instances \
                                 from instance {}: {}",
                                job.ids.len(),
                                job.ids.first().copied().unwrap_or_default(),
                                panic_message(payload.as_ref())
                            )))
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
            .map_err(|e| Error::InvalidArgument(format!("cannot start fetch threads: {e}")))?;
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

    /// The next window: its ids, and its payloads or the first read error among them
    /// (so a caller can retry the ids one by one). `None` at the end of the epoch.
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
                // This window fails and is passed, like a failed read: each later
                // window fails the same way and the epoch still ends.
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
                    // Not the caller's fault, and retrying the ids would not help.
                    result: Err(Error::Internal(
                        "tfrecord-lirs fetch threads stopped unexpectedly".into(),
                    )),
                });
            };
            if let Some(p) = self.pending.get_mut(&done.window) {
                p.missing = p.missing.saturating_sub(1);
                match (done.result, p.parts.get_mut(done.part)) {
                    (Ok(batch), Some(slot)) => *slot = Some(batch),
                    (Ok(_), None) => {
                        p.error.get_or_insert(Error::Internal(format!(
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
        let parts: Vec<Batch> = window.parts.into_iter().flatten().collect();
        let result = match window.error {
            Some(e) => {
                self.spares.give(parts);
                Err(e)
            }
            None => Ok(Payloads {
                parts,
                slots: window.slots,
                spares: self.spares.clone(),
            }),
        };
        self.submit();
        Some(Window {
            ids: window.ids,
            result,
        })
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
                result: Err(Error::Internal(
                    "test panic injected into a fetch thread (inline fetch)".into(),
                )),
            });
        }
        let mut batch = self.spares.take();
        let result = reader.read_batch(&ids, &mut batch).map(|()| Payloads {
            parts: vec![batch],
            slots: Vec::new(),
            spares: self.spares.clone(),
        });
        Some(Window { ids, result })
    }

    /// The next window's payloads, in order, copied into one [`Batch`]; `None` at the
    /// end of the epoch.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        self.next_window()
            .map(|w| w.result.map(|p| p.to_batch(&w.ids)))
    }
}

/// One window of an epoch order, as fetched.
#[derive(Debug)]
pub struct Window {
    /// The ids of the window, in order.
    pub ids: Vec<u64>,
    /// Their payloads, or the first error reading them.
    pub result: Result<Payloads>,
}

/// The payloads of one window where the fetch threads put them (no copy into one
/// buffer); payload `i` is that of the window's `i`-th id.
pub struct Payloads {
    parts: Vec<Batch>,
    /// (part, index in part) of each payload; empty when there is one part, in order.
    slots: Vec<(usize, usize)>,
    spares: Spares,
}

impl Payloads {
    /// Number of payloads.
    pub fn len(&self) -> usize {
        match (self.slots.is_empty(), self.parts.as_slice()) {
            (true, [one]) => one.len(),
            _ => self.slots.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload `i` (empty if `i` is out of range).
    pub fn payload(&self, i: usize) -> &[u8] {
        if self.slots.is_empty() {
            return self.parts.first().and_then(|p| p.get(i)).unwrap_or(&[]);
        }
        self.slots
            .get(i)
            .and_then(|&(p, j)| self.parts.get(p)?.get(j))
            .unwrap_or(&[])
    }

    /// The payloads copied into one [`Batch`] with `ids`, the window's ids.
    pub fn to_batch(&self, ids: &[u64]) -> Batch {
        let mut out = Batch::default();
        for (i, &id) in ids.iter().enumerate().take(self.len()) {
            out.push(id, self.payload(i));
        }
        out
    }
}

impl std::fmt::Debug for Payloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payloads")
            .field("len", &self.len())
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl Drop for Payloads {
    fn drop(&mut self) {
        self.spares.give(self.parts.drain(..));
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
/// (list, index in the list).
fn split_runs(ids: &[u64], parts: usize) -> (Vec<Vec<u64>>, Vec<(usize, usize)>) {
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
        let (parts, slots) = split_runs(&[], 4);
        assert!(parts.is_empty() && slots.is_empty());
        // A repeated id gets a slot of its own.
        let (parts, slots) = split_runs(&[7, 7, 2], 2);
        assert_eq!(parts.iter().flatten().filter(|&&i| i == 7).count(), 2);
        assert_ne!(slots[0], slots[1]);
    }
}
