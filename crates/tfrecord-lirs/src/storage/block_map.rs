//! The blocks of one object a local tier holds, mapped one after another into one
//! contiguous read-only view (see [`block_cache`](crate::storage::block_cache)), so
//! that readers decode its records in place as from a mapped local file.
//!
//! Why mapping is sound here: a block file is written whole under a temporary name and
//! renamed into place, and is never written, truncated or extended afterwards: it is
//! only deleted (eviction, or a damaged block replaced by a new file), which leaves a
//! mapping of it intact. A process that truncates a file inside a cache directory by
//! hand would break this (as for any mapped file); the README says to leave the
//! directory to the library.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use crate::storage::block_cache::BLOCK_SIZE;

/// One object's blocks mapped contiguously; unmapped when dropped.
pub(crate) struct BlockMap {
    ptr: *mut libc::c_void,
    /// The reserved length: whole blocks.
    reserved: usize,
    /// The object's size.
    size: usize,
}

// SAFETY: the mapping is read-only and never changed while the value lives; sharing it
// between threads is sharing `&[u8]`.
unsafe impl Send for BlockMap {}
// SAFETY: as above.
unsafe impl Sync for BlockMap {}

impl BlockMap {
    /// Maps `blocks` (block `i`'s file, holding at least the block's bytes, in order)
    /// of an object of `size` (> 0) bytes.
    pub(crate) fn map(blocks: &[File], size: u64) -> io::Result<BlockMap> {
        let reserved = usize::try_from(blocks.len() as u64 * BLOCK_SIZE)
            .map_err(|_| io::Error::other("object too large to map"))?;
        let size = usize::try_from(size).map_err(|_| io::Error::other("object too large"))?;
        if size == 0 || reserved < size {
            return Err(io::Error::other("nothing to map"));
        }
        // SAFETY: a fresh private anonymous reservation, no address given: it touches
        // no existing mapping.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = BlockMap {
            ptr,
            reserved,
            size,
        };
        for (i, file) in blocks.iter().enumerate() {
            let at = i * BLOCK_SIZE as usize;
            let len = (size - at).min(BLOCK_SIZE as usize);
            // SAFETY: the address is inside the reservation made above (which this
            // value owns), page-aligned (BLOCK_SIZE is a multiple of the page size) and
            // the length stays inside it; MAP_FIXED replaces only that reserved range.
            // The file holds at least `len` bytes and is never truncated (module docs),
            // so every mapped page is backed.
            let got = unsafe {
                libc::mmap(
                    (ptr as *mut u8).add(at) as *mut libc::c_void,
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if got == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(map)
    }

    /// The object's bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `size` bytes from `ptr` are mapped readable (each block's part by
        // `map`), live as long as `self`, and never written (module docs).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.size) }
    }
}

impl Drop for BlockMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the reservation this value owns (the block mappings
        // inside it included); no slice of it outlives `self`.
        unsafe {
            libc::munmap(self.ptr, self.reserved);
        }
    }
}
