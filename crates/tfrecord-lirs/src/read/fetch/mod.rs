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
//! A fetch can start small ([`Fetcher::ramp_up`]): its first window one batch, each
//! next one twice the last up to the configured window, so that the first batch
//! after an epoch's start or a restore waits for its own reads, not a whole window's.
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

mod ledger;
mod schedule;
mod workers;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use ledger::{DeliveredLedger, Resume};
use schedule::DeferredIds;
pub use schedule::{Cut, FetchSchedule, OrderSource, PositionIds, ORDER_VERSION_1};
pub use workers::panic_message;
use workers::{Job, Workers};

use crate::batch::SpareBatches;
use crate::error::{Error, Result};
use crate::reader::{Batch, BatchRead, Reader};

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

/// One part of a window as read: its payloads in part order (an empty one for each
/// failed id) and the failed ids' positions in the part with their errors.
struct PartRead {
    batch: Batch,
    failed: Vec<(usize, Error)>,
}

/// A part's read given up because its fetch is being dropped: no payload of it is
/// ever handed out.
struct Abandoned;

/// Reads `ids` into `batch` with one coalesced read; if that fails, reads them one by
/// one, so each error names its own instance and the others are still read. A failed
/// id gets an empty payload in `batch`, and its position and error are returned.
/// Once `stop` is set (only by a fetch being dropped) the part is given up between two
/// reads, `batch` left unusable.
fn read_part(
    reader: &Reader,
    ids: &[u64],
    batch: &mut Batch,
    stop: &AtomicBool,
) -> std::result::Result<Vec<(usize, Error)>, Abandoned> {
    match reader.read_batch_unless_stopped(ids, batch, stop) {
        Ok(BatchRead::Complete) => return Ok(Vec::new()),
        Ok(BatchRead::Abandoned) => return Err(Abandoned),
        Err(_) => {}
    }
    batch.clear();
    let mut failed = Vec::new();
    let mut span = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Err(Abandoned);
        }
        match reader.read_span_into(id, &mut span) {
            Ok(payload) => batch.push(id, &span[payload]),
            Err(e) => {
                batch.push(id, &[]);
                failed.push((k, e));
            }
        }
    }
    Ok(failed)
}

/// A window is cut into parts of at least this many ids (when it has that many): a
/// part is one hand-off to a thread and back, which costs about as much as reading a
/// few hot records.
const MIN_PART_IDS: usize = 16;

/// One-record buffers kept for reuse (see [`Fetcher::new`]): a batch of 256 viewed
/// records downstream and those in flight, so each batch reuses the last one's.
const SPARE_ONE_RECORD_BUFFERS: usize = 320;

/// The batches a fetch keeps for reuse: one per part of each window in flight and of
/// each of the `held` windows its consumer holds (more would only hold memory).
/// A window's buffers come back when its consumer lets go of its payloads, which can
/// be several windows later (a caller that hands out views of them, as LIRSDataset's
/// batches do).
fn batches_to_keep(parts_per_window: usize, options: FetchOptions, held: usize) -> usize {
    let keep = parts_per_window * (options.depth + held.max(1));
    if options.window == 1 {
        // Windows of one record are handed out downstream one by one (views of large
        // records), and a consumer holds many at once (e.g. a batch of them).
        keep.max(SPARE_ONE_RECORD_BUFFERS)
    } else {
        keep
    }
}

/// One-record windows (large records handed out one by one) go to the fetch threads in
/// groups of this many, queued once a group per thread can be (each thread reads its
/// group and hands it back at once): one by one, each record cost a wake-up of a
/// fetch thread and one of the consumer, which then preempted the fetch thread on its
/// core (`perf` sched_switch: one switch per record on each side, 100 KB records).
const ONE_RECORD_GROUP: usize = 4;

/// Threads (reads in flight) chosen for remote files when the caller has no
/// preference ([`FetchOptions::auto_threads`]).
pub const REMOTE_AUTO_THREADS: usize = 32;

/// Used batches, handed back by the consumer so the threads reuse their buffers: the
/// reader's [`SpareBatches`], shared with every other fetch over it (the next epoch's
/// too), of which this fetch keeps up to `keep` (more would only hold memory).
#[derive(Clone)]
struct Spares {
    pool: SpareBatches,
    keep: usize,
}

impl Spares {
    fn take(&self) -> Batch {
        self.pool.take()
    }

    fn give(&self, batches: impl IntoIterator<Item = Batch>) {
        self.pool.give(batches, self.keep);
    }
}

/// A window being fetched by the pool: its ids and positions, where each payload
/// will be, and the parts that came back.
struct Pending {
    cut: Cut,
    /// The ids, left to compute (by the fetch thread, or by the consumer while it
    /// waits, or when the thread failed first).
    deferred: Option<DeferredIds>,
    slots: Vec<(usize, usize)>,
    parts: Vec<Option<PartRead>>,
    missing: usize,
    /// A window-level failure (a panic in a fetch thread).
    error: Option<Error>,
}

/// Reads an epoch order ([`OrderSource`], e.g. an [`EpochOrder`](crate::EpochOrder))
/// window by window with a pool of threads.
///
/// ```
/// # fn main() -> tfrecord_lirs::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("d");
/// # let mut w = tfrecord_lirs::PaddedWriter::create(&path, &Default::default())?;
/// # for i in 0..500u32 { w.write(&i.to_le_bytes())?; }
/// # w.finish()?;
/// use std::sync::Arc;
/// use tfrecord_lirs::{FetchOptions, Fetcher, OrderParams, Reader};
/// let reader = Arc::new(Reader::open_one(&path, None, &Default::default())?);
/// let order = reader.epoch_order(&OrderParams { seed: 1, page_aware: true, ..Default::default() })?;
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
    schedule: FetchSchedule,
    delivery: Delivery,
    spares: Spares,
    /// Buffers each window is read into (one per part).
    parts_per_window: usize,
    options: FetchOptions,
    /// Ids handed out so far (failed windows included).
    delivered: u64,
    /// The windows handed out before the last one (used up), and the last one's
    /// positions.
    ledger: DeliveredLedger,
    last: Vec<u64>,
    /// Fault injection (feature `fault-injection`, tests only): while set, every job
    /// panics inside its fetch thread.
    #[cfg(feature = "fault-injection")]
    test_panic: Arc<AtomicBool>,
}

/// How windows are read: two strategies over the one schedule and bookkeeping of
/// [`Fetcher::next_window`].
enum Delivery {
    /// On the consumer's thread, when it asks (no threads).
    Inline(Arc<Reader>),
    /// By a pool of fetch threads, `depth` windows ahead.
    Pooled(Pool),
}

/// The pooled strategy: windows in flight and the threads reading them.
struct Pool {
    workers: Workers,
    pending: BTreeMap<u64, Pending>,
    threads: usize,
    depth: usize,
    next_window: u64,
    next_deliver: u64,
    /// Ids per part, at least: [`MIN_PART_IDS`], or 1 for remote files, where a read
    /// waits on the network and each run of consecutive ids (one coalesced request)
    /// is a part of its own, so up to `threads` requests are in flight.
    min_part_ids: usize,
    /// Windows are handed out as they complete ([`Fetcher::unordered`]).
    unordered: bool,
    /// Whether the schedule has no window left to cut: the last one cut is then the
    /// order's last.
    cut_all: bool,
    /// More windows are queued only once at most this many are in flight (see
    /// [`ONE_RECORD_GROUP`]).
    refill_at: usize,
    /// Jobs per group sent to one thread (see [`ONE_RECORD_GROUP`]).
    group_jobs: usize,
}

impl Fetcher {
    /// Starts the pool; fetching begins with the first `next_window`.
    pub fn new(
        reader: Arc<Reader>,
        order: impl OrderSource + 'static,
        options: FetchOptions,
    ) -> Result<Fetcher> {
        if options.window == 0 || options.depth == 0 {
            return Err(Error::invalid_argument(format!(
                "fetch options need window and depth of at least 1, got {options:?}"
            )));
        }
        let min_part_ids = if reader.is_remote() { 1 } else { MIN_PART_IDS };
        // Each window is read into one buffer per part (one with no threads).
        let parts_per_window = options
            .threads
            .min(options.window.div_ceil(min_part_ids))
            .max(1);
        let spares = Spares {
            pool: reader.spare_batches().clone(),
            keep: batches_to_keep(parts_per_window, options, 1),
        };
        #[cfg(feature = "fault-injection")]
        let test_panic = Arc::new(AtomicBool::new(false));
        let delivery = if options.threads == 0 {
            Delivery::Inline(Arc::clone(&reader))
        } else {
            Delivery::Pooled(Pool {
                workers: Workers::start(
                    options.threads,
                    &reader,
                    &spares,
                    #[cfg(feature = "fault-injection")]
                    &test_panic,
                )?,
                pending: BTreeMap::new(),
                threads: options.threads,
                depth: options.depth,
                next_window: 0,
                next_deliver: 0,
                min_part_ids,
                unordered: false,
                cut_all: false,
                refill_at: if options.window == 1 {
                    options
                        .depth
                        .saturating_sub(ONE_RECORD_GROUP * options.threads)
                } else {
                    options.depth - 1
                },
                group_jobs: if options.window == 1 {
                    ONE_RECORD_GROUP
                } else {
                    1
                },
            })
        };
        let position = order.position();
        Ok(Fetcher {
            schedule: FetchSchedule::new(Box::new(order), options.window, false),
            delivery,
            spares,
            parts_per_window,
            options,
            delivered: position,
            ledger: DeliveredLedger::new(position, []),
            last: Vec::new(),
            #[cfg(feature = "fault-injection")]
            test_panic,
        })
    }

    /// Hands windows out as they complete instead of in order (see the module docs).
    /// With no threads (reads on the consumer's thread) there is nothing to reorder.
    pub fn unordered(mut self) -> Fetcher {
        if let Delivery::Pooled(pool) = &mut self.delivery {
            pool.unordered = true;
        }
        self
    }

    /// Cuts windows of exactly `window` ids (the last one may be shorter), not
    /// extended to the end of a page-aware unit: with unordered delivery, each
    /// window is then one batch of the in-order sequence.
    pub fn exact_windows(mut self) -> Fetcher {
        self.schedule.set_exact(true);
        self
    }

    /// Starts with a window of at least `first` ids, each next one twice the last, up
    /// to the configured window ([`FetchSchedule::ramp_up`]): the first window handed
    /// out waits for about `first` reads instead of a whole window's. The ids handed
    /// out, in order, are the same; windows of exactly one batch
    /// ([`exact_windows`](Self::exact_windows)) do not ramp.
    pub fn ramp_up(mut self, first: usize) -> Fetcher {
        self.schedule.ramp_up(first);
        self
    }

    /// Keeps enough buffers for a consumer that holds up to `windows` windows handed
    /// out at once (default 1; e.g. batches of views that span several windows, one
    /// batch downstream while the next is formed), so that steady state reuses them.
    pub fn consumer_holds(mut self, windows: usize) -> Fetcher {
        self.spares.keep = batches_to_keep(self.parts_per_window, self.options, windows);
        self
    }

    /// Leaves out the positions `after` of a [`Resume`] point (already delivered);
    /// the order must be positioned at its `position`. Positions before the order's
    /// position are ignored.
    pub fn skip(mut self, after: impl IntoIterator<Item = u64>) -> Fetcher {
        self.schedule.skip(after);
        self.ledger = DeliveredLedger::new(self.ledger.position(), self.schedule.skipped());
        self
    }

    /// Where the consumer is, having used all but the last `unserved` payloads of the
    /// last window handed out.
    pub fn resume(&self, unserved: usize) -> Resume {
        let served = self.last.len().saturating_sub(unserved);
        let mut ledger = self.ledger.clone();
        ledger.deliver_all(&self.last[..served]);
        ledger.resume()
    }

    /// Ids handed out so far in this epoch (failed windows included).
    pub fn position(&self) -> u64 {
        self.delivered
    }

    /// Fault injection (feature `fault-injection`, tests only; absent from normal
    /// builds): while `on`, every job taken by a fetch thread panics inside that
    /// thread (with no threads, every window fails the same way), so tests can prove
    /// such a panic reaches the consumer as an
    /// [`ErrorKind::Internal`](crate::ErrorKind::Internal) error instead of a hang.
    #[cfg(feature = "fault-injection")]
    pub fn set_test_panic(&self, on: bool) {
        self.test_panic.store(on, Ordering::Relaxed);
    }

    /// Ids in this shard's epoch.
    pub fn len(&self) -> u64 {
        self.schedule.order().len()
    }

    /// Whether the epoch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next window: its ids and their payloads, each read or failed on its own
    /// (see [`Payloads::get`]); `Err` only when the window as a whole failed (a panic in
    /// a fetch thread, the threads gone: [`ErrorKind::Internal`](crate::ErrorKind::Internal)).
    /// `None` at the end of the epoch.
    pub fn next_window(&mut self) -> Option<Window> {
        let window = match &mut self.delivery {
            Delivery::Inline(reader) => {
                let cut = self.schedule.next_cut()?;
                #[cfg(feature = "fault-injection")]
                if self.test_panic.load(Ordering::Relaxed) {
                    return Some(self.handed_out(Window {
                        ids: cut.ids,
                        positions: cut.positions,
                        result: Err(Error::internal(
                            "test panic injected into a fetch thread (inline fetch)",
                        )),
                    }));
                }
                let mut batch = self.spares.take();
                // Read on the consumer's thread, which cannot drop the fetch meanwhile:
                // nothing stops it (were it ever abandoned, the window fails, never
                // comes out short).
                let result = match read_part(reader, &cut.ids, &mut batch, &AtomicBool::new(false))
                {
                    Ok(failed) => Ok(Payloads {
                        parts: Parts::InOrder(batch),
                        failed,
                        spares: self.spares.clone(),
                    }),
                    Err(Abandoned) => Err(Error::internal(
                        "a window read on the consumer's thread was abandoned",
                    )),
                };
                Window {
                    ids: cut.ids,
                    positions: cut.positions,
                    result,
                }
            }
            Delivery::Pooled(pool) => pool.next_window(&mut self.schedule, &self.spares)?,
        };
        Some(self.handed_out(window))
    }

    /// The bookkeeping of every window handed out, however it was read.
    fn handed_out(&mut self, window: Window) -> Window {
        self.delivered += window.ids.len() as u64;
        let previous = std::mem::replace(&mut self.last, window.positions.clone());
        self.ledger.deliver_all(&previous);
        window
    }

    /// The next window's payloads, in order, copied into one [`Batch`] (or the error of
    /// its first failed slot); `None` at the end of the epoch.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        let window = self.next_window()?;
        Some(window.result.and_then(|p| p.into_batch(&window.ids)))
    }
}

impl Pool {
    /// Queues windows until `depth` are in flight or the schedule is exhausted.
    fn submit(&mut self, schedule: &mut FetchSchedule) {
        if self.pending.len() > self.refill_at {
            return;
        }
        let mut group = Vec::new();
        while self.pending.len() < self.depth {
            // With one thread a window is one part, read in the order's order: its ids
            // are not needed to split it, and the thread computes them (when the order
            // can) instead of the consumer, whose thread is the busier one.
            let next = if self.threads == 1 {
                schedule.next_cut_deferred()
            } else {
                schedule.next_cut().map(|cut| (cut, None))
            };
            let Some((cut, deferred)) = next else {
                self.cut_all = true;
                break;
            };
            let window = self.next_window;
            self.next_window += 1;
            let (jobs, slots) = match deferred {
                Some(ref ids) => {
                    let job = Job {
                        window,
                        part: 0,
                        ids: Vec::new(),
                        deferred: Some(ids.clone()),
                    };
                    (
                        vec![job],
                        (0..cut.positions.len()).map(|k| (0, k)).collect(),
                    )
                }
                None => {
                    let most = self.threads.min(cut.ids.len().div_ceil(self.min_part_ids));
                    let (parts, slots) = split_runs(&cut.ids, most);
                    let jobs = parts.into_iter().enumerate().map(|(part, ids)| Job {
                        window,
                        part,
                        ids,
                        deferred: None,
                    });
                    (jobs.collect(), slots)
                }
            };
            let count = jobs.len();
            for job in jobs {
                group.push(job);
                if group.len() >= self.group_jobs {
                    self.workers.send(std::mem::take(&mut group));
                }
            }
            self.pending.insert(
                window,
                Pending {
                    cut,
                    deferred,
                    slots,
                    parts: (0..count).map(|_| None).collect(),
                    missing: count,
                    error: None,
                },
            );
        }
        if !group.is_empty() {
            self.workers.send(group);
        }
        // The last window may be cut into the last free slot, with no cut after it to
        // find the order exhausted: unordered delivery must still know it is the last.
        self.cut_all |= schedule.is_exhausted();
    }

    /// The next window in order, or (unordered) the first one in flight to complete.
    fn next_window(&mut self, schedule: &mut FetchSchedule, spares: &Spares) -> Option<Window> {
        self.submit(schedule);
        let mut head = self.next_deliver;
        loop {
            if self.unordered {
                // The first complete window in flight, if any; the order's last one
                // (shorter than the others when they are batches) only when it is
                // the only one left, so that only an epoch's last batch is short.
                let last = (self.cut_all && self.pending.len() > 1).then(|| self.next_window - 1);
                match self
                    .pending
                    .iter()
                    .find(|(&w, p)| p.missing == 0 && Some(w) != last)
                {
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
            // About to wait for the fetch thread: the ids of the newest window it has
            // not reached are computed here meanwhile (once, by whichever thread comes
            // first), so a consumer that waits takes that work off the busier thread.
            if let Some(deferred) = self
                .pending
                .values()
                .next_back()
                .and_then(|p| p.deferred.as_ref())
                .filter(|d| !d.is_computed())
            {
                deferred.ids();
            }
            let Some(group) = self.workers.recv() else {
                // Every thread is gone (cannot happen while they catch panics).
                // This window fails and is passed: each later window fails the same
                // way and the epoch still ends.
                let cut = self
                    .pending
                    .remove(&head)
                    .map(|mut p| {
                        p.complete_ids();
                        p.cut
                    })
                    .unwrap_or_default();
                self.next_deliver += 1;
                return Some(Window {
                    ids: cut.ids,
                    positions: cut.positions,
                    result: Err(Error::internal(
                        "tfrecord-lirs fetch threads stopped unexpectedly",
                    )),
                });
            };
            for done in group {
                let Some(p) = self.pending.get_mut(&done.window) else {
                    continue;
                };
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
        let mut window = self.pending.remove(&head)?;
        self.next_deliver += 1;
        window.complete_ids();
        let result = match window.error {
            Some(e) => {
                spares.give(window.parts.into_iter().flatten().map(|r| r.batch));
                Err(e)
            }
            None => Ok(assemble(window.parts, window.slots, spares)),
        };
        self.submit(schedule);
        Some(Window {
            ids: window.cut.ids,
            positions: window.cut.positions,
            result,
        })
    }
}

impl Pending {
    /// Fills in the window's ids if they were left to compute (computing them if its
    /// fetch thread failed first).
    fn complete_ids(&mut self) {
        if let Some(deferred) = &self.deferred {
            self.cut.ids = deferred.ids().to_vec();
        }
    }
}

/// The payloads of a window from its parts (all present) and where each slot is.
fn assemble(parts: Vec<Option<PartRead>>, slots: Vec<(usize, usize)>, spares: &Spares) -> Payloads {
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
        spares: spares.clone(),
    }
}

/// One window of an epoch order, as fetched.
#[derive(Debug)]
pub struct Window {
    /// The ids of the window, in order.
    pub ids: Vec<u64>,
    /// Their positions in the epoch order (ascending).
    pub positions: Vec<u64>,
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
    fn later_fetches_over_a_reader_reuse_its_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let reader = padded_reader(
            dir.path(),
            (0..300u32).map(|i| vec![i as u8; 1000 + i as usize]),
        );
        let options = FetchOptions {
            threads: 2,
            window: 64,
            depth: 2,
        };
        let mut kept_after = Vec::new();
        for seed in 0..3 {
            let params = crate::OrderParams {
                seed,
                ..Default::default()
            };
            let order = reader.epoch_order(&params).unwrap();
            let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options).unwrap();
            let mut seen = vec![false; 300];
            let mut first = true;
            while let Some(window) = fetcher.next_window() {
                if first {
                    // The windows in flight were read into the last epoch's buffers.
                    if let Some(&before) = kept_after.last() {
                        assert!(reader.spare_batches().len() < before);
                    }
                    first = false;
                }
                let payloads = window.result.unwrap();
                for (k, &id) in window.ids.iter().enumerate() {
                    let payload = payloads.get(k).unwrap().unwrap();
                    assert_eq!(payload, &vec![id as u8; 1000 + id as usize][..]);
                    seen[id as usize] = true;
                }
            }
            assert!(seen.iter().all(|&s| s));
            drop(fetcher);
            kept_after.push(reader.spare_batches().len());
        }
        // Each epoch hands its buffers back to the reader (no more than one fetch
        // keeps).
        let keep = batches_to_keep(2, options, 1);
        assert!(
            kept_after.iter().all(|&n| n > 0 && n <= keep),
            "{kept_after:?}"
        );
    }

    /// One-record windows go to the threads in groups: every depth (fewer windows in
    /// flight than a group, a group per thread, more) hands out the order's ids in
    /// order, each with its own payload, and a damaged record fails only its own slot.
    #[test]
    fn one_record_windows_in_groups_keep_the_order_and_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let payload = |i: u64| vec![(i % 251) as u8; 500 + i as usize];
        let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
        for i in 0..150u64 {
            w.write(&payload(i)).unwrap();
        }
        w.finish().unwrap();
        let table = crate::read_table(&crate::default_table_path(&path)).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let damaged = 77u64;
        bytes[table[damaged as usize] as usize + 12 + 9] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let reader = Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap());
        let params = crate::OrderParams {
            seed: 5,
            ..Default::default()
        };
        let mut want = Vec::new();
        let mut order = reader.epoch_order(&params).unwrap();
        while order.next_window(1, &mut want) > 0 {}
        for depth in [1, 3, ONE_RECORD_GROUP * 2, 16, 21] {
            let options = FetchOptions {
                threads: 2,
                window: 1,
                depth,
            };
            let order = reader.epoch_order(&params).unwrap();
            let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options).unwrap();
            let mut got = Vec::new();
            let mut failed = 0;
            while let Some(window) = fetcher.next_window() {
                assert_eq!(window.ids.len(), 1, "depth {depth}");
                let id = window.ids[0];
                let payloads = window.result.unwrap();
                match payloads.get(0).unwrap() {
                    Ok(p) => assert_eq!(p, &payload(id)[..], "depth {depth}, id {id}"),
                    Err(e) => {
                        assert_eq!(id, damaged, "depth {depth}: {e}");
                        assert!(e.to_string().contains("instance 77"), "{e}");
                        failed += 1;
                    }
                }
                got.push(id);
            }
            assert_eq!(got, want, "depth {depth}");
            assert_eq!(failed, 1, "depth {depth}");
        }
    }

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

    /// A fetch that ramps up hands out the same ids in the same order, each with its
    /// own payload, in windows of one batch, then twice the last, up to the window:
    /// with no threads, one (ids computed by the thread, order version 2) or several.
    #[test]
    fn a_ramped_fetch_starts_with_one_batch_and_keeps_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let reader = padded_reader(dir.path(), (0..3000u32).map(|i| i.to_le_bytes().to_vec()));
        let params = crate::OrderParams {
            seed: 3,
            ..Default::default()
        };
        for version in [crate::OrderVersion::V1, crate::OrderVersion::V2] {
            for threads in [0, 1, 2] {
                let options = FetchOptions {
                    threads,
                    window: 1024,
                    depth: 4,
                };
                let windows = |ramp: Option<usize>| {
                    let order = reader.epoch_order_with_version(&params, version).unwrap();
                    let mut fetcher = Fetcher::new(Arc::clone(&reader), order, options).unwrap();
                    if let Some(first) = ramp {
                        fetcher = fetcher.ramp_up(first);
                    }
                    let mut out = Vec::new();
                    while let Some(window) = fetcher.next_window() {
                        let payloads = window.result.unwrap();
                        for (k, &id) in window.ids.iter().enumerate() {
                            let payload = payloads.get(k).unwrap().unwrap();
                            assert_eq!(payload, (id as u32).to_le_bytes());
                        }
                        out.push(window.ids);
                    }
                    out
                };
                let steady = windows(None);
                let ramped = windows(Some(256));
                let case = format!("{version:?}, {threads} threads");
                assert_eq!(sizes_of(&steady), [1024, 1024, 952], "{case}");
                assert_eq!(sizes_of(&ramped), [256, 512, 1024, 1024, 184], "{case}");
                assert_eq!(ramped.concat(), steady.concat(), "{case}");
            }
        }
    }

    /// A reader of a padded file of `payloads` written in `dir`.
    fn padded_reader(
        dir: &std::path::Path,
        payloads: impl IntoIterator<Item = Vec<u8>>,
    ) -> Arc<Reader> {
        let path = dir.join("d");
        let mut w = crate::PaddedWriter::create(&path, &Default::default()).unwrap();
        for payload in payloads {
            w.write(&payload).unwrap();
        }
        w.finish().unwrap();
        Arc::new(Reader::open_one(&path, None, &Default::default()).unwrap())
    }

    fn sizes_of(windows: &[Vec<u64>]) -> Vec<usize> {
        windows.iter().map(Vec::len).collect()
    }
}
