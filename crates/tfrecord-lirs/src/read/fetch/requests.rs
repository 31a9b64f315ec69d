//! The fetch of a reader on object storage ([`Reader::reads_ranged`]): each part of a
//! window is planned on the consumer's thread and its runs started as requests on the
//! storage's runtime (no thread waits on them), at most `limit` in flight; a part comes
//! back through a channel when its last request is in and its records are checked.
//! What the ranged read leaves to positioned reads (see `Reader::read_batch_ranged`)
//! is read on the consumer's thread when it arrives, as a fetch thread would have.
//! Dropping it cancels every request in flight.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicBool;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use crate::error::Error;

use super::parts::{read_part, PartRead};
use super::payloads::Spares;
use super::workers::{part_panic, Done, Job};
use super::ADAPTIVE_IN_FLIGHT;
use crate::options::defaults::{IN_FLIGHT_MIN, IN_FLIGHT_START};
use crate::read::batch::Batch;
use crate::read::reader::{Reader, REMOTE_AUTO_IN_FLIGHT};
use crate::storage::ranged::ReadScope;

/// Ids a run of a page-aware order holds at most, about (the records that start in one
/// 4 KiB page, of small records): windows enough for `limit` requests of them are kept
/// in flight.
const IDS_PER_REQUEST: usize = 8;

/// The most bytes of windows in flight (bounds memory when records are large).
const PENDING_BYTES: u64 = 256 << 20;

/// A part back from the storage: read, or left to positioned reads (`None`).
struct Arrived {
    job: Job,
    batch: Option<Batch>,
    /// The fault injection's panic, raised where a fetch thread would raise it.
    panic: bool,
}

/// Requests in flight for one fetch.
pub(super) struct Requests {
    reader: Arc<Reader>,
    spares: Spares,
    scope: ReadScope,
    sent: mpsc::Sender<Arrived>,
    arrived: mpsc::Receiver<Arrived>,
    /// Windows in flight at most.
    pub(super) max_windows: usize,
    /// Whether the limit adapts (then the reader learns where it ended).
    adaptive: bool,
    #[cfg(feature = "fault-injection")]
    test_panic: Arc<AtomicBool>,
}

impl Drop for Requests {
    fn drop(&mut self) {
        if self.adaptive {
            self.reader.learn_in_flight(self.scope.limit());
        }
    }
}

impl Requests {
    /// Requests for `reader`, at most `limit` in flight ([`ADAPTIVE_IN_FLIGHT`]: the
    /// adaptive limit), over windows of `window` ids at least `depth` of them in flight.
    pub(super) fn new(
        reader: &Arc<Reader>,
        spares: &Spares,
        limit: usize,
        (window, depth): (usize, usize),
        #[cfg(feature = "fault-injection")] test_panic: &Arc<AtomicBool>,
    ) -> Requests {
        let (sent, arrived) = mpsc::channel();
        let adaptive = limit == ADAPTIVE_IN_FLIGHT;
        // Windows for the most requests the limit may grow to.
        let most = if adaptive {
            REMOTE_AUTO_IN_FLIGHT
        } else {
            limit
        };
        Requests {
            reader: Arc::clone(reader),
            spares: spares.clone(),
            scope: if adaptive {
                // Where the last fetch over this reader ended: an epoch after the
                // first starts at the limit the storage served, not from the bottom
                // (from 256, whole epochs ran at 0.77-0.98x a pinned 2,048).
                let start = reader.learned_in_flight().unwrap_or(IN_FLIGHT_START);
                ReadScope::adaptive(start, IN_FLIGHT_MIN, REMOTE_AUTO_IN_FLIGHT)
            } else {
                ReadScope::new(limit)
            },
            sent,
            arrived,
            max_windows: max_windows(reader, most, window, depth),
            adaptive,
            #[cfg(feature = "fault-injection")]
            test_panic: Arc::clone(test_panic),
        }
    }

    /// Whether more windows would keep more requests in flight: fewer than twice the
    /// limit are asked for and not answered (those beyond the limit wait their turn in
    /// the storage, so the next ones start the moment one is answered). Counted by
    /// request, not by window: a window waiting for its slowest request holds none of
    /// the others' places (counted by window, one slow request of a lognormal tail cut
    /// the requests in flight at 512 to a third).
    pub(super) fn wants_more(&self) -> bool {
        self.scope.unanswered() < 2 * self.scope.limit()
    }

    /// Requests in flight now.
    pub(super) fn in_flight(&self) -> usize {
        self.scope.in_flight()
    }

    /// Starts the reads of `group`'s parts.
    pub(super) fn send(&self, group: Vec<Job>) {
        for mut job in group {
            if let Some(deferred) = job.deferred.take() {
                job.ids = deferred.ids().to_vec();
            }
            #[cfg(feature = "fault-injection")]
            if self.test_panic.load(Ordering::Relaxed) {
                let _ = self.sent.send(Arrived {
                    job,
                    batch: None,
                    panic: true,
                });
                continue;
            }
            let Some(plan) = self.reader.plan_ranged(&job.ids) else {
                let _ = self.sent.send(Arrived {
                    job,
                    batch: None,
                    panic: false,
                });
                continue;
            };
            let sent = self.sent.clone();
            let reader = Arc::clone(&self.reader);
            let ids = job.ids.clone();
            self.reader.read_batch_ranged(
                ids,
                plan,
                self.spares.take(),
                &self.scope,
                Box::new(move |assembled| {
                    // Checked here, on the storage's thread, as they come in.
                    let batch = assembled.decode(&reader);
                    let _ = sent.send(Arrived {
                        job,
                        batch,
                        panic: false,
                    });
                }),
            );
        }
    }

    /// The parts that came in (at least one: waits for it); `None` never (this holds a
    /// sender), but the signature is the fetch threads'.
    pub(super) fn recv(&self) -> Option<Vec<Done>> {
        let first = self.arrived.recv().ok()?;
        let mut done = vec![self.finish(first)];
        while let Ok(more) = self.arrived.try_recv() {
            done.push(self.finish(more));
        }
        Some(done)
    }

    /// A part that came in, its positioned reads done here if it needs them.
    fn finish(&self, arrived: Arrived) -> Done {
        let Arrived { job, batch, panic } = arrived;
        let result = match batch {
            Some(batch) => Ok(PartRead {
                batch,
                failed: Vec::new(),
            }),
            None => catch_unwind(AssertUnwindSafe(|| {
                // Only the test build carries the panic point (the production
                // library must hold no trace of it: tests/test_packaging.py).
                #[cfg(feature = "fault-injection")]
                if panic {
                    panic!("test panic injected into a fetch thread");
                }
                #[cfg(not(feature = "fault-injection"))]
                let _ = panic;
                let mut batch = self.spares.take();
                // Nothing stops it: the consumer reads it now.
                read_part(&self.reader, &job.ids, &mut batch, &AtomicBool::new(false))
                    .map(|failed| PartRead { batch, failed })
                    .map_err(|_| {
                        Error::internal("a part read on the consumer's thread was abandoned")
                    })
            }))
            .unwrap_or_else(|payload| Err(part_panic(&job, payload.as_ref()))),
        };
        Done {
            window: job.window,
            part: job.part,
            result,
        }
    }
}

/// Windows in flight at most: enough for `limit` requests of [`IDS_PER_REQUEST`] ids,
/// within [`PENDING_BYTES`], and at least `depth`.
fn max_windows(reader: &Reader, limit: usize, window: usize, depth: usize) -> usize {
    let window = window.max(1);
    let by_requests = limit.saturating_mul(IDS_PER_REQUEST).div_ceil(window) + 1;
    let bytes = (window as u64).saturating_mul(reader.layout().mean_span_bytes().max(1));
    let by_bytes = usize::try_from(PENDING_BYTES / bytes.max(1)).unwrap_or(usize::MAX);
    by_requests.min(by_bytes).max(depth)
}
