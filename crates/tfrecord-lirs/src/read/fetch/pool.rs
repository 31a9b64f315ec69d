//! The pooled strategy of a [`Fetcher`](super::Fetcher): windows in flight, their parts
//! queued to the fetch threads, completed windows delivered in order or as they
//! complete.

use std::collections::BTreeMap;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::{Error, Result};

use super::parts::{assemble, split_runs, PartRead};
use super::payloads::Spares;
use super::requests::Requests;
use super::schedule::{Cut, DeferredIds, FetchSchedule};
use super::workers::{Done, Job, Threads};
use super::{FetchOptions, Window, ONE_RECORD_GROUP};
use crate::read::reader::Reader;

/// What reads a pool's parts: fetch threads, or requests on object storage's runtime.
pub(super) enum Workers {
    Threads(Threads),
    Requests(Requests),
}

impl Workers {
    /// Queues `group` (see [`Threads::send`]).
    pub fn send(&self, group: Vec<Job>) {
        match self {
            Workers::Threads(t) => t.send(group),
            Workers::Requests(r) => r.send(group),
        }
    }

    /// The parts of the next group read (see [`Threads::recv`]).
    pub fn recv(&self) -> Option<Vec<Done>> {
        match self {
            Workers::Threads(t) => t.recv(),
            Workers::Requests(r) => r.recv(),
        }
    }
}

/// A window being fetched by the pool: its ids and positions, where each payload
/// will be, and the parts that came back.
pub(super) struct Pending {
    pub(super) cut: Cut,
    /// The ids, left to compute (by the fetch thread, or by the consumer while it
    /// waits, or when the thread failed first).
    pub(super) deferred: Option<DeferredIds>,
    pub(super) slots: Vec<(usize, usize)>,
    pub(super) parts: Vec<Option<PartRead>>,
    pub(super) missing: usize,
    /// A window-level failure (a panic in a fetch thread).
    pub(super) error: Option<Error>,
}

/// The pooled strategy: windows in flight and the threads reading them.
pub(super) struct Pool {
    pub(super) workers: Workers,
    pub(super) pending: BTreeMap<u64, Pending>,
    pub(super) threads: usize,
    pub(super) depth: usize,
    pub(super) next_window: u64,
    pub(super) next_deliver: u64,
    /// Ids per part, at least: [`MIN_PART_IDS`](super::parts::MIN_PART_IDS), or 1 for remote files, where a read
    /// waits on the network and each run of consecutive ids (one coalesced request)
    /// is a part of its own, so up to `threads` requests are in flight.
    pub(super) min_part_ids: usize,
    /// Windows are handed out as they complete ([`Fetcher::unordered`](super::Fetcher::unordered)).
    pub(super) unordered: bool,
    /// Whether the schedule has no window left to cut: the last one cut is then the
    /// order's last.
    pub(super) cut_all: bool,
    /// More windows are queued only once at most this many are in flight (see
    /// [`ONE_RECORD_GROUP`](super::ONE_RECORD_GROUP)).
    pub(super) refill_at: usize,
    /// Jobs per group sent to one thread (see [`ONE_RECORD_GROUP`](super::ONE_RECORD_GROUP)).
    pub(super) group_jobs: usize,
}

impl Pool {
    /// The pool of a fetch over `reader` with `options`: requests on object storage's
    /// runtime where `ranged` ([`Reader::reads_ranged`]), else fetch threads.
    pub(super) fn new(
        reader: &Arc<Reader>,
        spares: &Spares,
        options: FetchOptions,
        (ranged, min_part_ids): (bool, usize),
        #[cfg(feature = "fault-injection")] test_panic: &Arc<AtomicBool>,
    ) -> Result<Pool> {
        let one_record = options.window == 1 && !ranged;
        let workers = if ranged {
            Workers::Requests(Requests::new(
                reader,
                spares,
                options.threads,
                (options.window, options.depth),
                #[cfg(feature = "fault-injection")]
                test_panic,
            ))
        } else {
            Workers::Threads(Threads::start(
                options.threads,
                reader,
                spares,
                #[cfg(feature = "fault-injection")]
                test_panic,
            )?)
        };
        Ok(Pool {
            workers,
            pending: BTreeMap::new(),
            // One part per window for requests: its runs are all in flight at once.
            threads: if ranged { 1 } else { options.threads },
            depth: options.depth,
            next_window: 0,
            next_deliver: 0,
            min_part_ids,
            unordered: false,
            cut_all: false,
            refill_at: if one_record {
                options
                    .depth
                    .saturating_sub(ONE_RECORD_GROUP * options.threads)
            } else if ranged {
                usize::MAX
            } else {
                options.depth - 1
            },
            group_jobs: if one_record { ONE_RECORD_GROUP } else { 1 },
        })
    }

    /// Windows in flight at most.
    pub(super) fn max_windows(&self) -> usize {
        match &self.workers {
            Workers::Requests(r) => r.max_windows,
            Workers::Threads(_) => self.depth,
        }
    }

    /// Requests in flight now (object storage; 0 for fetch threads).
    pub(super) fn requests_in_flight(&self) -> usize {
        match &self.workers {
            Workers::Requests(r) => r.in_flight(),
            Workers::Threads(_) => 0,
        }
    }

    /// Whether another window goes in flight: below `depth`, or, for requests, while
    /// it keeps more of them in flight (up to their most windows).
    fn wants_window(&self) -> bool {
        let n = self.pending.len();
        match &self.workers {
            Workers::Threads(_) => n < self.depth,
            Workers::Requests(r) => n < self.depth || (n < r.max_windows && r.wants_more()),
        }
    }

    /// Queues windows until `depth` are in flight (see [`wants_window`](Self::wants_window))
    /// or the schedule is exhausted.
    pub(super) fn submit(&mut self, schedule: &mut FetchSchedule) {
        if self.pending.len() > self.refill_at {
            return;
        }
        let mut group = Vec::new();
        while self.wants_window() {
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
    pub(super) fn next_window(
        &mut self,
        schedule: &mut FetchSchedule,
        spares: &Spares,
    ) -> Option<Window> {
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
            let requests = matches!(self.workers, Workers::Requests(_));
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
            if requests {
                // Requests came in: start the next ones while waiting for this window.
                self.submit(schedule);
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
    pub(super) fn complete_ids(&mut self) {
        if let Some(deferred) = &self.deferred {
            self.cut.ids = deferred.ids().to_vec();
        }
    }
}
