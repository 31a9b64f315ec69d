//! What a [`Reader`] is opened with: [`ReaderOptions`] and their defaults.

use super::*;

/// Options of a [`Reader`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Page size for page-aware units and I/O statistics (default 4096).
    pub page_size: u64,
    /// Check each payload's CRC on read (default true; the length CRC is always checked).
    pub verify_payload_crc: bool,
    /// The I/O backend (default [`Backend::Auto`]).
    pub backend: Backend,
    /// Trust the offset table (default false): instance `i` is the record at
    /// `offset[i]`, and the bytes between its end and the next entry (or the end of the
    /// file), and before `offset[0]`, are opaque padding written by another tool, e.g.
    /// the LIRS reference implementation's `'0'` records. Padding must still be valid
    /// TFRecord framing (length CRCs, records inside the span); its payload CRCs are
    /// checked by `verify`, not on reads. The default is strict: only LIRS filler
    /// records may follow an instance and the first one starts at byte 0, which catches
    /// tables missing entries.
    pub trust_table: bool,
    /// The caller's promise that makes [`Backend::Mmap`] sound (see [`local::MmapOptIn`]);
    /// without it that backend is refused. Default `None`.
    pub mmap_opt_in: Option<local::MmapOptIn>,
    /// Where the files are: local files, and URLs when it has a file system. Default
    /// [`Storage::local`].
    pub storage: Storage,
    /// Build a missing offset table on open, by the scan `index` makes, kept beside the
    /// data file, else in the storage's `cache_dir`, else in memory (default true; see
    /// `read/missing_table.rs`). False: a missing table is a `NotFound` error.
    pub index_missing: bool,
    /// The reader is walked in a page-aware order (default false): the default backend
    /// maps small records of files beyond the memory ([`local::choose_auto_read`]).
    pub page_aware: bool,
}

impl ReaderOptions {
    /// What may follow an instance's record in its span.
    pub fn padding(&self) -> Padding {
        if self.trust_table {
            Padding::Opaque
        } else {
            Padding::Fillers
        }
    }
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            page_size: framing::DEFAULT_PAGE_SIZE,
            verify_payload_crc: true,
            backend: Backend::Auto,
            trust_table: false,
            mmap_opt_in: None,
            storage: Storage::local(),
            index_missing: crate::options::defaults::INDEX_MISSING,
            page_aware: crate::options::defaults::PAGE_AWARE,
        }
    }
}
