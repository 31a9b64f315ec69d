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
mod parts;
mod payloads;
mod pool;
mod requests;
mod schedule;
mod workers;

use std::sync::atomic::AtomicBool;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use ledger::{DeliveredLedger, Resume};
use parts::{read_part, Abandoned, MIN_PART_IDS};
use payloads::{Parts, Spares};
pub use payloads::{Payloads, Window};
use pool::Pool;
pub use schedule::{Cut, FetchSchedule, OrderSource, ORDER_VERSION_1};

use crate::error::{Error, Result};

use crate::read::batch::Batch;
use crate::read::reader::{choose, Reader, Request, Strategy};

pub use crate::read::reader::{ADAPTIVE_IN_FLIGHT, COLD_AUTO_THREADS};

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
    /// Threads for `reader` when the caller has no preference, as the one read-strategy
    /// selector decides for a stream: [`ADAPTIVE_IN_FLIGHT`] requests on object
    /// storage, [`REMOTE_AUTO_THREADS`](crate::REMOTE_AUTO_THREADS) on other remote
    /// storage, none (reads on the consumer's thread) while it reads from memory maps,
    /// [`COLD_AUTO_THREADS`] for files read cold, else 2 (positioned reads of cached
    /// pages are syscall-bound and overlap; more threads than the 2 cores TF leaves
    /// would only compete with TensorFlow's own threads).
    pub fn auto_threads(reader: &Reader) -> usize {
        match choose(reader, Request::Stream) {
            Strategy::OnThisThread => 0,
            Strategy::Threads(n) | Strategy::Ranged(n) => n,
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
    Pooled(Box<Pool>),
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
        // Object storage: each window is one part, its runs requests in flight on the
        // storage's runtime, `threads` of them at once (no thread each); else fetch
        // threads, as many as the selector allows for the reads in flight asked for.
        let (ranged, threads) = match choose(&*reader, Request::StreamOf(options.threads)) {
            Strategy::OnThisThread => (false, 0),
            Strategy::Threads(n) => (false, n),
            Strategy::Ranged(n) => (true, n),
        };
        let mut options = options;
        options.threads = threads;
        let min_part_ids = if reader.is_remote() { 1 } else { MIN_PART_IDS };
        // Each window is read into one buffer per part (one with no threads).
        let parts_per_window = if ranged {
            1
        } else {
            options
                .threads
                .min(options.window.div_ceil(min_part_ids))
                .max(1)
        };
        let mut spares = Spares {
            pool: reader.spare_batches().clone(),
            keep: batches_to_keep(parts_per_window, options, 1),
        };
        #[cfg(feature = "fault-injection")]
        let test_panic = Arc::new(AtomicBool::new(false));
        let (delivery, options) = if options.threads == 0 {
            (Delivery::Inline(Arc::clone(&reader)), options)
        } else {
            let pool = Pool::new(
                &reader,
                &spares,
                options,
                (ranged, min_part_ids),
                #[cfg(feature = "fault-injection")]
                &test_panic,
            )?;
            // Buffers for every window the pool may have in flight.
            let options = FetchOptions {
                depth: pool.max_windows(),
                ..options
            };
            spares.keep = batches_to_keep(parts_per_window, options, 1);
            (Delivery::Pooled(Box::new(pool)), options)
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

    /// Requests in flight now on object storage (0 where fetch threads read).
    pub fn requests_in_flight(&self) -> usize {
        match &self.delivery {
            Delivery::Pooled(pool) => pool.requests_in_flight(),
            Delivery::Inline(_) => 0,
        }
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

#[cfg(test)]
mod tests {
    use super::parts::split_runs;
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
