//! The pooled strategy of a [`Fetcher`](super::Fetcher): windows in flight, their parts
//! queued to the fetch threads, completed windows delivered in order or as they
//! complete.

use std::collections::BTreeMap;

use tfrecord_lirs_format::error::Error;

use super::parts::{assemble, split_runs, PartRead};
use super::payloads::Spares;
use super::schedule::{Cut, DeferredIds, FetchSchedule};
use super::workers::{Job, Workers};
use super::Window;

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
    /// Queues windows until `depth` are in flight or the schedule is exhausted.
    pub(super) fn submit(&mut self, schedule: &mut FetchSchedule) {
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
    pub(super) fn complete_ids(&mut self) {
        if let Some(deferred) = &self.deferred {
            self.cut.ids = deferred.ids().to_vec();
        }
    }
}
