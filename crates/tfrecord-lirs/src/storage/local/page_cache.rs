//! Page-cache tools for cold-cache benchmarks (`examples/lirs_bench.rs`): not part of
//! the library's API (hidden from its documentation, no stability promise).

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// Asks the kernel to drop `path`'s pages from the page cache (for cold-cache
/// benchmarks). Dirty pages are written first.
pub fn drop_from_page_cache(path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    file.sync_all().map_err(|e| Error::io(path, e))?;
    // SAFETY: a plain syscall on a file descriptor we own for the duration of the call.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(Error::io(path, io::Error::from_raw_os_error(rc)));
    }
    Ok(())
}

/// How many of `path`'s pages are in the page cache, and how many pages it has
/// (`mincore(2)` over a temporary mapping).
pub fn cached_pages(path: &Path) -> Result<(u64, u64)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
    let page = super::os_page_size();
    let pages = size.div_ceil(page);
    if size == 0 {
        return Ok((0, 0));
    }
    // Shared, so it maps the page-cache pages mincore reports on; only passed to
    // mincore, never dereferenced (so a concurrent truncation cannot fault here), and
    // unmapped below.
    let addr = super::map_shared(&file, size).map_err(|e| Error::io(path, e))?;
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` is a live mapping of `size` bytes and `vec` holds one byte per page.
    let rc = unsafe { libc::mincore(addr, size, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: unmapping exactly the mapping created above.
    unsafe { libc::munmap(addr, size) };
    if rc != 0 {
        return Err(Error::io(path, err));
    }
    Ok((
        vec.iter().filter(|&&b| b & 1 == 1).count() as u64,
        pages as u64,
    ))
}
