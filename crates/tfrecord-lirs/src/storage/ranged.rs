//! Ranged reads in flight without a thread each: a source that can
//! ([`ReadAt::ranged`](crate::storage::local::ReadAt::ranged), object storage through
//! `cloud`) starts the reads of many byte ranges as requests on the storage's own
//! runtime and calls back once they are all in, on one of that runtime's threads. The
//! caller never sees the runtime: it hands over ranges and a callback, and holds a
//! [`ReadScope`], which bounds its requests in flight and cancels them when dropped.

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    limit: usize,
    /// Requests started and not yet answered.
    in_flight: Arc<AtomicUsize>,
    /// Requests asked for and not yet answered (in flight, or waiting their turn).
    unanswered: Arc<AtomicUsize>,
    #[cfg(feature = "object-store")]
    pub(crate) permits: Arc<tokio::sync::Semaphore>,
    #[cfg(feature = "object-store")]
    pub(crate) tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    #[cfg(not(feature = "object-store"))]
    #[allow(dead_code)]
    tasks: Mutex<Vec<()>>,
}

impl ReadScope {
    /// A scope of at most `limit` requests in flight (at least 1).
    pub fn new(limit: usize) -> ReadScope {
        let limit = limit.max(1);
        ReadScope {
            limit,
            in_flight: Arc::new(AtomicUsize::new(0)),
            unanswered: Arc::new(AtomicUsize::new(0)),
            #[cfg(feature = "object-store")]
            permits: Arc::new(tokio::sync::Semaphore::new(limit)),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// The most requests in flight at once.
    pub fn limit(&self) -> usize {
        self.limit
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
        if tasks.len() >= 2 * self.limit.max(64) {
            tasks.retain(|t| !t.is_finished());
        }
        tasks.push(task);
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
            .field("limit", &self.limit)
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
    use super::merge_ranges;

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
