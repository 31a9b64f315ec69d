//! Ranged reads in flight without a thread each: a source that can
//! ([`ReadAt::ranged`](crate::storage::ReadAt::ranged), object storage through
//! `cloud`) starts the reads of many byte ranges as requests on the storage's own
//! runtime and calls back once they are all in, on one of that runtime's threads. The
//! caller never sees the runtime: it hands over ranges and a callback, and holds a
//! [`ReadScope`], which bounds its requests in flight (a fixed number, or the adaptive
//! limit of `storage::in_flight`) and cancels them when dropped.

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(feature = "object-store")]
use super::in_flight::AdaptiveLimit;

/// What a [`RangedRead::read_ranges`] calls once: each range's bytes, in the order
/// asked, or the error of a request that failed (after the storage's retries).
pub type RangesDone = Box<dyn for<'a> FnOnce(io::Result<&'a [&'a [u8]]>) + Send>;

/// A source whose reads are requests started on a runtime (object storage).
pub trait RangedRead: Send + Sync {
    /// Starts reading `ranges` (each within the object), then calls `done` on a storage
    /// thread, unless `scope` is dropped first (then `done` is dropped uncalled and the
    /// requests are cancelled). Neighbouring ranges may be read by one request (see
    /// `cloud`'s merge gap); a range past the end of the object is an
    /// [`io::ErrorKind::UnexpectedEof`] error.
    fn read_ranges(&self, ranges: &[Range<u64>], scope: &ReadScope, done: RangesDone);
}

/// The requests of one consumer (a fetch): at most `limit` in flight at once, the rest
/// waiting their turn; all cancelled when the scope is dropped.
pub struct ReadScope {
    /// Requests started and not yet answered.
    in_flight: Arc<AtomicUsize>,
    /// Requests asked for and not yet answered (in flight, or waiting their turn).
    unanswered: Arc<AtomicUsize>,
    pub(crate) gate: Arc<Gate>,
    #[cfg(feature = "object-store")]
    pub(crate) tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    #[cfg(not(feature = "object-store"))]
    #[allow(dead_code)]
    tasks: Mutex<Vec<()>>,
}

/// What a request passes before it starts: the limit now and its permits.
pub(crate) struct Gate {
    limit: AtomicUsize,
    /// The adaptive rule and the clock it is fed, if the limit is adaptive.
    #[cfg(feature = "object-store")]
    adaptive: Option<Mutex<Adaptive>>,
    #[cfg(feature = "object-store")]
    pub(crate) permits: tokio::sync::Semaphore,
    /// Permits to take out of use as requests end: a lowered limit beyond the permits
    /// free at that moment.
    #[cfg(feature = "object-store")]
    owed: AtomicUsize,
}

#[cfg(feature = "object-store")]
struct Adaptive {
    rule: AdaptiveLimit,
    clock: std::time::Instant,
    /// The storage's count of throttled responses when last seen (from the scope's
    /// first request on: earlier ones were another scope's).
    throttled_seen: Option<u64>,
}

impl ReadScope {
    /// A scope of at most `limit` requests in flight (at least 1).
    pub fn new(limit: usize) -> ReadScope {
        ReadScope::with_gate(Gate {
            limit: AtomicUsize::new(limit.max(1)),
            #[cfg(feature = "object-store")]
            adaptive: None,
            #[cfg(feature = "object-store")]
            permits: tokio::sync::Semaphore::new(limit.max(1)),
            #[cfg(feature = "object-store")]
            owed: AtomicUsize::new(0),
        })
    }

    /// Without object storage nothing reads by requests: a fixed scope of `start`.
    #[cfg(not(feature = "object-store"))]
    pub fn adaptive(start: usize, _min: usize, _max: usize) -> ReadScope {
        ReadScope::new(start)
    }

    /// A scope whose limit adapts to the throughput (see `storage::in_flight`): `start`
    /// at first, within `[min, max]`.
    #[cfg(feature = "object-store")]
    pub fn adaptive(start: usize, min: usize, max: usize) -> ReadScope {
        let clock = std::time::Instant::now();
        let rule = AdaptiveLimit::new(start, min, max, 0);
        let limit = rule.limit();
        ReadScope::with_gate(Gate {
            limit: AtomicUsize::new(limit),
            adaptive: Some(Mutex::new(Adaptive {
                rule,
                clock,
                throttled_seen: None,
            })),
            permits: tokio::sync::Semaphore::new(limit),
            owed: AtomicUsize::new(0),
        })
    }

    fn with_gate(gate: Gate) -> ReadScope {
        ReadScope {
            in_flight: Arc::new(AtomicUsize::new(0)),
            unanswered: Arc::new(AtomicUsize::new(0)),
            gate: Arc::new(gate),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The most requests in flight at once, now.
    pub fn limit(&self) -> usize {
        self.gate.limit.load(Ordering::Relaxed)
    }

    /// Requests in flight now (started, not answered).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests asked for and not yet answered: in flight, or waiting their turn.
    pub fn unanswered(&self) -> usize {
        self.unanswered.load(Ordering::Relaxed)
    }

    /// The counters of requests in flight and unanswered, for the storage to keep.
    #[cfg(feature = "object-store")]
    pub(crate) fn counters(&self) -> (Arc<AtomicUsize>, Arc<AtomicUsize>) {
        (Arc::clone(&self.in_flight), Arc::clone(&self.unanswered))
    }

    /// Keeps `task` to cancel with the scope; forgets those already finished.
    #[cfg(feature = "object-store")]
    pub(crate) fn track(&self, task: tokio::task::AbortHandle) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if tasks.len() >= 2 * self.limit().max(64) {
            tasks.retain(|t| !t.is_finished());
        }
        tasks.push(task);
    }
}

#[cfg(feature = "object-store")]
impl Gate {
    /// A request holding `permit` was answered; `throttled` is the storage's count of
    /// throttled responses (429, 503) now. An adaptive limit takes it in, and the
    /// permits follow the limit.
    pub(crate) fn answered(&self, permit: tokio::sync::SemaphorePermit<'_>, throttled: u64) {
        if self.take_owed() {
            permit.forget();
        } else {
            drop(permit);
        }
        let Some(adaptive) = &self.adaptive else {
            return;
        };
        let (before, after) = {
            let mut a = adaptive.lock().unwrap_or_else(|p| p.into_inner());
            let now = u64::try_from(a.clock.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let was_throttled = a.throttled_seen.is_some_and(|seen| throttled > seen);
            a.throttled_seen = Some(throttled);
            let before = a.rule.limit();
            (before, a.rule.answered(now, was_throttled))
        };
        if after > before {
            // Owed permits are settled first: a raise pays back a cut not yet taken.
            let mut raise = after - before;
            while raise > 0 && self.take_owed() {
                raise -= 1;
            }
            self.permits.add_permits(raise);
        } else if after < before {
            let cut = before - after;
            let forgotten = self.permits.forget_permits(cut);
            self.owed.fetch_add(cut - forgotten, Ordering::Relaxed);
        }
        self.limit.store(after, Ordering::Relaxed);
    }

    /// A request is about to start; `throttled` is the storage's count of throttled
    /// responses now: the first one is where this scope starts counting.
    pub(crate) fn starting(&self, throttled: u64) {
        if let Some(adaptive) = &self.adaptive {
            let mut a = adaptive.lock().unwrap_or_else(|p| p.into_inner());
            a.throttled_seen.get_or_insert(throttled);
        }
    }

    /// Takes one owed permit, if any is owed.
    fn take_owed(&self) -> bool {
        self.owed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl Drop for ReadScope {
    fn drop(&mut self) {
        #[cfg(feature = "object-store")]
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}

impl std::fmt::Debug for ReadScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadScope")
            .field("limit", &self.limit())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(feature = "object-store")]
/// Requests for `ranges` (any order): ranges whose gap is at most `gap` bytes are read
/// by one request, up to `most` bytes a request (a range longer than that is a request
/// of its own). Returns each request's range, and, for each range asked, its request
/// and where in that request's bytes it starts.
pub fn merge_ranges(
    ranges: &[Range<u64>],
    gap: u64,
    most: u64,
) -> (Vec<Range<u64>>, Vec<(usize, usize)>) {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_unstable_by_key(|&k| (ranges[k].start, ranges[k].end));
    let mut requests: Vec<Range<u64>> = Vec::new();
    let mut at = vec![(0, 0); ranges.len()];
    for k in order {
        let r = &ranges[k];
        match requests.last_mut() {
            Some(last)
                if r.start <= last.end.saturating_add(gap)
                    && r.end.max(last.end) - last.start <= most =>
            {
                last.end = last.end.max(r.end);
            }
            _ => requests.push(r.clone()),
        }
        let request = requests.len() - 1;
        at[k] = (request, (r.start - requests[request].start) as usize);
    }
    (requests, at)
}

#[cfg(all(test, feature = "object-store"))]
mod tests {
    use super::{merge_ranges, ReadScope};

    #[test]
    fn an_adaptive_scope_moves_its_permits_with_the_limit() {
        let scope = ReadScope::adaptive(4, 2, 64);
        let gate = &scope.gate;
        gate.starting(0);
        assert_eq!((scope.limit(), gate.permits.available_permits()), (4, 4));
        // Four answers (a round of the limit) at once: the first round raises the limit
        // (doubled while starting), and the permits with it.
        for _ in 0..4 {
            let permit = gate.permits.try_acquire().unwrap();
            gate.answered(permit, 0);
        }
        assert_eq!((scope.limit(), gate.permits.available_permits()), (8, 8));
        // Throttled while every permit is out: halved; the permits owed are taken out of
        // use as the requests holding them end.
        let held: Vec<_> = (0..8)
            .map(|_| gate.permits.try_acquire().unwrap())
            .collect();
        let mut held = held.into_iter();
        gate.answered(held.next().unwrap(), 1);
        assert_eq!(scope.limit(), 4);
        for permit in held {
            gate.answered(permit, 1);
        }
        assert_eq!(gate.permits.available_permits(), scope.limit());
        // A fixed scope never moves.
        let fixed = ReadScope::new(3);
        for _ in 0..10 {
            let permit = fixed.gate.permits.try_acquire().unwrap();
            fixed.gate.answered(permit, 5);
        }
        assert_eq!(
            (fixed.limit(), fixed.gate.permits.available_permits()),
            (3, 3)
        );
    }

    #[test]
    fn neighbours_within_the_gap_are_one_request() {
        let ranges = [100..200, 0..50, 60..90, 5000..5100, 200..210];
        let (requests, at) = merge_ranges(&ranges, 16, 1 << 20);
        assert_eq!(requests, [0..210, 5000..5100]);
        assert_eq!(at, [(0, 100), (0, 0), (0, 60), (1, 0), (0, 200)]);
        // One byte short of the gaps (10 bytes): three requests.
        let (requests, _) = merge_ranges(&ranges, 9, 1 << 20);
        assert_eq!(requests, [0..50, 60..90, 100..210, 5000..5100]);
        // Gap 0: only touching ranges merge.
        let (requests, _) = merge_ranges(&ranges, 0, 1 << 20);
        assert_eq!(requests, [0..50, 60..90, 100..210, 5000..5100]);
        // A cap on a request's size splits.
        let (requests, _) = merge_ranges(&[0..100, 100..200, 200..300], 0, 200);
        assert_eq!(requests, [0..200, 200..300]);
        // The same range twice: one request.
        let (requests, at) = merge_ranges(&[10..20, 10..20], 0, 100);
        assert_eq!((requests.len(), &requests[0]), (1, &(10..20)));
        assert_eq!(at, [(0, 0), (0, 0)]);
    }
}
