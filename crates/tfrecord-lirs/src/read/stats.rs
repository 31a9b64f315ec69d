//! What a [`Reader`](crate::Reader) read: [`IoStats`].

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
