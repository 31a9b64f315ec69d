//! How a read of many ids is done, decided in one place ([`choose`]) from what the
//! storage is and what is asked: every front end's batch call
//! ([`Reader::read_batch_concurrent`]: the op's, Python's `read_many`) and every
//! fetch's thread count, automatic
//! ([`FetchOptions::auto_threads`](crate::FetchOptions::auto_threads)) or asked for
//! ([`Fetcher::new`](crate::Fetcher::new)), go through it, so the same files are read
//! the same way whoever asks.

use super::Reader;

/// Threads (reads in flight) chosen for remote files when the caller has no
/// preference ([`FetchOptions::auto_threads`](crate::FetchOptions::auto_threads)), and
/// the parts of [`Reader::read_batch_concurrent`].
pub const REMOTE_AUTO_THREADS: usize = 32;

/// The most requests in flight on object storage when the caller has no preference
/// (the ceiling of the adaptive limit, [`ADAPTIVE_IN_FLIGHT`]), and those of a batch
/// read at once. Measured with
/// `Loader` over s3-bench-server, lognormal latency of mean 50 ms, 24,000 records of
/// 200-1,200 bytes (rec/s ordered / unordered): instance order 5,064 / 8,358 at 512,
/// 9,388 / 12,217 at 2,048; page-aware 8,457 / 17,103 at 512, 21,682 / 66,523 at
/// 2,048, on the client's two threads either way.
pub const REMOTE_AUTO_IN_FLIGHT: usize = 2048;

/// [`FetchOptions::threads`](crate::FetchOptions::threads) asking for the adaptive
/// limit of requests in flight on object storage, what
/// [`FetchOptions::auto_threads`](crate::FetchOptions::auto_threads) gives a reader
/// whose files are read by requests on the storage's runtime: from
/// [`IN_FLIGHT_START`](crate::options::defaults::IN_FLIGHT_START), grown while the
/// throughput holds up, up to [`REMOTE_AUTO_IN_FLIGHT`], halved when the storage
/// throttles (the rule: `storage::in_flight`). Any other number pins the limit.
pub const ADAPTIVE_IN_FLIGHT: usize = usize::MAX;

/// Threads (reads in flight) [`FetchOptions::auto_threads`](crate::FetchOptions::auto_threads)
/// gives a reader of files read cold ([`Reader::reads_cold`]): each read waits on the
/// device, not a core, and the device serves several at once. Measured on the bench
/// machine (virtio disk), random reads of ~100 KB records of a 1 GB file, evicted,
/// `O_DIRECT`, in a 300 MB memory cgroup: 7,219 rec/s with 2 reads in flight, 11,953
/// with 8.
pub const COLD_AUTO_THREADS: usize = 8;

/// What the selector asks of the storage, each asked only when the decision needs it.
pub(crate) trait Facts {
    /// Every file's reads start as requests on a runtime (object storage).
    fn ranged(&self) -> bool;
    /// Some file is read over a network (a URL not served by a local tier).
    fn remote(&self) -> bool;
    /// Every file is mapped now.
    fn mapped(&self) -> bool;
    /// Some file is read as one beyond the page cache.
    fn cold(&self) -> bool;
    /// Some file is a URL a local tier (`cache_dir`) serves from local disk.
    fn tiered(&self) -> bool;
}

impl Facts for Reader {
    fn ranged(&self) -> bool {
        self.reads_ranged()
    }
    fn remote(&self) -> bool {
        self.is_remote()
    }
    fn mapped(&self) -> bool {
        self.is_mapped()
    }
    fn cold(&self) -> bool {
        self.reads_cold()
    }
    fn tiered(&self) -> bool {
        self.served_by_tier()
    }
}

/// What is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Request {
    /// One batch of this many ids, now.
    Batch(usize),
    /// One batch of this many ids that cannot all go as requests on object storage
    /// (a span too long for one request, or checked in pieces).
    BatchWithoutRequests(usize),
    /// An order read window after window by a fetch.
    Stream,
    /// An order read by a fetch with this many reads in flight asked for (a
    /// front end's `num_parallel_reads`, or [`ADAPTIVE_IN_FLIGHT`]).
    StreamOf(usize),
}

/// How it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// On the asking thread (the fetch's consumer, or the batch's caller): memory
    /// copies out of live maps, else coalesced positioned reads (`mapped.rs`,
    /// `copied.rs`; which of the two is decided per read, as a map may be revoked).
    OnThisThread,
    /// By this many threads, each through the copied strategy (`concurrent.rs`, a
    /// fetch's workers).
    Threads(usize),
    /// As requests on the storage's runtime, at most this many in flight, no thread
    /// each (`ranged.rs`, a fetch's `requests.rs`).
    Ranged(usize),
}

/// The one decision of how ids are read, from the storage's `facts` and the `request`.
pub(crate) fn choose(facts: &impl Facts, request: Request) -> Strategy {
    match request {
        Request::Batch(_) if facts.ranged() => Strategy::Ranged(REMOTE_AUTO_IN_FLIGHT),
        Request::Batch(ids) | Request::BatchWithoutRequests(ids) => {
            if facts.remote() && ids > 1 {
                // A request waits on the network, not on a core (RINAS).
                Strategy::Threads(REMOTE_AUTO_THREADS.min(ids))
            } else {
                Strategy::OnThisThread
            }
        }
        Request::Stream => {
            if facts.ranged() {
                Strategy::Ranged(ADAPTIVE_IN_FLIGHT)
            } else if facts.remote() {
                Strategy::Threads(REMOTE_AUTO_THREADS)
            } else if facts.mapped() {
                Strategy::OnThisThread
            } else if facts.cold() {
                Strategy::Threads(COLD_AUTO_THREADS)
            } else {
                // Positioned reads of cached pages are syscall-bound and overlap; more
                // threads than the 2 cores TF leaves would only compete with TF's own.
                Strategy::Threads(2)
            }
        }
        Request::StreamOf(0) => Strategy::OnThisThread,
        Request::StreamOf(n) if facts.ranged() => Strategy::Ranged(n),
        Request::StreamOf(n) => {
            // The adaptive limit is of requests; fetch threads take the remote default.
            let n = if n == ADAPTIVE_IN_FLIGHT {
                REMOTE_AUTO_THREADS
            } else {
                n
            };
            if !facts.remote() && facts.tiered() {
                // Reads in flight asked for a URL's storage, served by the local tier
                // from its block files instead: each read waits on the local disk (or
                // copies from a map), which serves no more at once than a cold local
                // file, so more threads would only be threads.
                Strategy::Threads(n.min(COLD_AUTO_THREADS))
            } else {
                Strategy::Threads(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Clone, Copy)]
    struct Kind {
        ranged: bool,
        remote: bool,
        mapped: bool,
        cold: bool,
        tiered: bool,
    }

    impl Facts for Kind {
        fn ranged(&self) -> bool {
            self.ranged
        }
        fn remote(&self) -> bool {
            self.remote
        }
        fn mapped(&self) -> bool {
            self.mapped
        }
        fn cold(&self) -> bool {
            self.cold
        }
        fn tiered(&self) -> bool {
            self.tiered
        }
    }

    #[test]
    fn each_storage_kind_and_request_shape_has_one_strategy() {
        let local = Kind::default();
        let mapped = Kind {
            mapped: true,
            ..local
        };
        let cold = Kind {
            cold: true,
            ..local
        };
        // A URL through a file system (TensorFlow's, gfile, a block-cache miss).
        let remote = Kind {
            remote: true,
            ..local
        };
        // Object storage: every read a request on its runtime.
        let object = Kind {
            ranged: true,
            remote: true,
            ..local
        };
        // A URL served from local disk by the `cache_dir` tier (mapped when whole).
        let tier = Kind {
            tiered: true,
            mapped: true,
            ..local
        };
        use Strategy::*;
        let cases = [
            (local, Request::Batch(256), OnThisThread),
            (mapped, Request::Batch(256), OnThisThread),
            (cold, Request::Batch(256), OnThisThread),
            (remote, Request::Batch(1), OnThisThread),
            (remote, Request::Batch(5), Threads(5)),
            (remote, Request::Batch(256), Threads(REMOTE_AUTO_THREADS)),
            (object, Request::Batch(1), Ranged(REMOTE_AUTO_IN_FLIGHT)),
            (object, Request::Batch(256), Ranged(REMOTE_AUTO_IN_FLIGHT)),
            (object, Request::BatchWithoutRequests(1), OnThisThread),
            (
                object,
                Request::BatchWithoutRequests(256),
                Threads(REMOTE_AUTO_THREADS),
            ),
            (remote, Request::BatchWithoutRequests(5), Threads(5)),
            (local, Request::BatchWithoutRequests(256), OnThisThread),
            (local, Request::Stream, Threads(2)),
            (mapped, Request::Stream, OnThisThread),
            (cold, Request::Stream, Threads(COLD_AUTO_THREADS)),
            (remote, Request::Stream, Threads(REMOTE_AUTO_THREADS)),
            (object, Request::Stream, Ranged(ADAPTIVE_IN_FLIGHT)),
            (tier, Request::Stream, OnThisThread),
            // Reads in flight asked for: as asked, but through the tier no more
            // threads than a local disk serves at once.
            (local, Request::StreamOf(512), Threads(512)),
            (remote, Request::StreamOf(512), Threads(512)),
            (object, Request::StreamOf(512), Ranged(512)),
            (tier, Request::StreamOf(512), Threads(COLD_AUTO_THREADS)),
            (tier, Request::StreamOf(3), Threads(3)),
            (
                tier,
                Request::StreamOf(ADAPTIVE_IN_FLIGHT),
                Threads(COLD_AUTO_THREADS),
            ),
            (
                remote,
                Request::StreamOf(ADAPTIVE_IN_FLIGHT),
                Threads(REMOTE_AUTO_THREADS),
            ),
            (
                object,
                Request::StreamOf(ADAPTIVE_IN_FLIGHT),
                Ranged(ADAPTIVE_IN_FLIGHT),
            ),
            (tier, Request::StreamOf(0), OnThisThread),
            (object, Request::StreamOf(0), OnThisThread),
        ];
        for (facts, request, want) in cases {
            assert_eq!(choose(&facts, request), want, "{request:?}");
        }
    }
}
