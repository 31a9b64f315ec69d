//! What a [`Reader`](crate::Reader) read: [`IoStats`]; what every reader of this
//! process read: [`process_io_totals`].

use std::sync::atomic::{AtomicU64, Ordering};

/// A thread's not yet published [`IoStats`] counts.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) reads: u64,
    pub(crate) bytes: u64,
    pub(crate) pages: u64,
}

/// Counters of what a reader read (for benchmarks and page tests). With the mmap
/// backend there are no read calls: a "read" is one record decoded from the map, and
/// its bytes and pages are those of the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    /// Positioned reads issued.
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Pages touched, summed over reads (a read spanning 2 pages counts 2).
    pub page_reads: u64,
    /// Distinct pages touched since the last reset.
    pub distinct_pages: u64,
    /// Pages the data files span.
    pub data_pages: u64,
}

/// Reads and bytes of every [`Reader`](crate::Reader) of this process since it
/// started: what left storage, whoever asked. Never reset, so a caller measures a span
/// by the difference of two calls; this is how a test counts the storage reads behind
/// several consumers (e.g. trainers sharing one tf.data service job) when the readers
/// are created inside a framework and not reachable one by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessIoTotals {
    /// Positioned reads issued (with the mmap backend: records decoded from the map).
    pub reads: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

static PROCESS_READS: AtomicU64 = AtomicU64::new(0);
static PROCESS_BYTES: AtomicU64 = AtomicU64::new(0);

/// Adds a published tally to the process totals.
pub(crate) fn add_to_process_totals(tally: &Tally) {
    PROCESS_READS.fetch_add(tally.reads, Ordering::Relaxed);
    PROCESS_BYTES.fetch_add(tally.bytes, Ordering::Relaxed);
}

/// The totals over every reader of this process since it started (see
/// [`ProcessIoTotals`]).
///
/// ```
/// let before = tfrecord_lirs::process_io_totals();
/// // ... read ...
/// let after = tfrecord_lirs::process_io_totals();
/// assert!(after.bytes_read >= before.bytes_read);
/// ```
pub fn process_io_totals() -> ProcessIoTotals {
    ProcessIoTotals {
        reads: PROCESS_READS.load(Ordering::Relaxed),
        bytes_read: PROCESS_BYTES.load(Ordering::Relaxed),
    }
}
