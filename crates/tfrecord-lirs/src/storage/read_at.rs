//! The storage contract every source of bytes keeps, local file or URL: positioned
//! reads ([`ReadAt`]) and what a reader may ask of the source beyond them.

use std::io;

use crate::storage::local::leased;

/// A source of positioned reads, shared between threads.
pub trait ReadAt: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; may return fewer (a *short read*).
    /// Returns 0 only at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// The file size when it was opened.
    fn size(&self) -> u64;

    /// The whole file as memory, if this backend maps it: readers then decode records
    /// in place instead of copying them out first.
    fn mapped(&self) -> Option<&[u8]> {
        None
    }

    /// The whole file as memory for as long as the returned view lives, if this
    /// backend maps it now (a leased map may have been revoked since it was opened).
    fn map_view(&self) -> Option<MapView<'_>> {
        self.mapped().map(|bytes| MapView(View::Plain(bytes)))
    }

    /// The same source as one whose reads are requests started on a runtime
    /// (object storage), if it is one: many are then in flight without a thread each.
    fn ranged(&self) -> Option<&dyn crate::storage::ranged::RangedRead> {
        None
    }

    /// What the storage says identifies this version of the object (its ETag,
    /// generation or last-modified time), if it says anything: a local tier keys the
    /// bytes it keeps by it, so a rewritten object is never served from old bytes.
    fn identity(&self) -> Option<String> {
        None
    }

    /// Whether this source of a URL is read from local disk with no request (an object
    /// whose blocks a local tier holds, opened from it): readers then tune their reads
    /// as for a local file.
    fn served_locally(&self) -> bool {
        false
    }

    /// Whether reads bypass the page cache (`O_DIRECT`): each read is a device read,
    /// so a long span is read in one piece, not in several.
    fn bypasses_page_cache(&self) -> bool {
        false
    }

    /// Whether this file is read as one that does not fit in the page cache (the
    /// direct backend, or the default one's [`AutoRead::Cold`](crate::storage::local::AutoRead::Cold)): each read waits on the
    /// device, so more reads in flight pay.
    fn reads_cold(&self) -> bool {
        false
    }
}

/// A mapped file, readable while this view lives (see [`ReadAt::map_view`]).
pub struct MapView<'a>(pub(crate) View<'a>);

pub(crate) enum View<'a> {
    Plain(&'a [u8]),
    /// Inside a leased map; the file's first `.1` bytes.
    Leased(leased::Entered<'a>, usize),
}

impl std::ops::Deref for MapView<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            View::Plain(bytes) => bytes,
            View::Leased(entered, size) => &entered[..*size],
        }
    }
}
