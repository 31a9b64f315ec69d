//! What a [`Reader`] counts of its reads ([`IoStats`]): reads, bytes, pages touched.

use super::*;

impl Reader {
    /// Counts one read of `len` bytes at `start` of file `f`: pages in the shared
    /// bitmap, totals in `tally` (added to the shared counters once per call of a
    /// public read method, so threads do not contend on them per record).
    pub(super) fn note(&self, tally: &mut Tally, f: usize, start: u64, len: u64) {
        let page = self.layout.page_size();
        tally.reads += 1;
        tally.bytes += len;
        tally.pages += page.pages_touched(start, len);
        if len > 0 {
            let touched = &self.files[f].touched;
            for p in page.page_of(start)..=page.page_of(start + len - 1) {
                touched[(p / 64) as usize].fetch_or(1 << (p % 64), Ordering::Relaxed);
            }
        }
    }

    pub(super) fn add(&self, tally: Tally) {
        if tally.reads > 0 {
            self.reads.fetch_add(tally.reads, Ordering::Relaxed);
            self.bytes_read.fetch_add(tally.bytes, Ordering::Relaxed);
            self.page_reads.fetch_add(tally.pages, Ordering::Relaxed);
            crate::read::stats::add_to_process_totals(&tally);
        }
    }

    /// What was read since the last [`reset_io_stats`](Reader::reset_io_stats).
    pub fn io_stats(&self) -> IoStats {
        let page = self.layout.page_size().get();
        IoStats {
            reads: self.reads.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            page_reads: self.page_reads.load(Ordering::Relaxed),
            distinct_pages: self
                .files
                .iter()
                .flat_map(|f| &f.touched)
                .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
                .sum(),
            data_pages: self
                .layout
                .files()
                .iter()
                .map(|f| f.size.div_ceil(page))
                .sum(),
        }
    }

    /// Zeroes the I/O counters (e.g. at the start of an epoch).
    pub fn reset_io_stats(&self) {
        self.reads.store(0, Ordering::Relaxed);
        self.bytes_read.store(0, Ordering::Relaxed);
        self.page_reads.store(0, Ordering::Relaxed);
        for w in self.files.iter().flat_map(|f| &f.touched) {
            w.store(0, Ordering::Relaxed);
        }
    }
}
