//! The lock on one block of a cache directory (see
//! [`block_cache`](crate::storage::block_cache)): one process fetches a block while the
//! others wait for it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// The lock on one block of an object directory: an OFD lock on byte `i` of its `LOCK`
/// file, released when dropped (the descriptor is closed). OFD locks belong to the open
/// file, so threads of one process exclude each other as processes do.
pub(crate) struct BlockLock {
    _file: File,
}

impl BlockLock {
    fn lock_args(i: u64) -> libc::flock {
        // SAFETY: `flock` is a plain C struct of integers; all zeros is a valid value.
        let mut l: libc::flock = unsafe { std::mem::zeroed() };
        l.l_type = libc::F_WRLCK as libc::c_short;
        l.l_whence = libc::SEEK_SET as libc::c_short;
        l.l_start = i as libc::off_t;
        l.l_len = 1;
        l
    }

    fn open(dir: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("LOCK"))
    }

    /// Waits for block `i`'s lock.
    pub(crate) fn acquire(dir: &Path, i: u64) -> io::Result<BlockLock> {
        let file = Self::open(dir)?;
        let args = Self::lock_args(i);
        loop {
            // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
            let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &args) };
            if r == 0 {
                return Ok(BlockLock { _file: file });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Block `i`'s lock if no one holds it.
    pub(crate) fn try_acquire(dir: &Path, i: u64) -> io::Result<Option<BlockLock>> {
        let file = Self::open(dir)?;
        let args = Self::lock_args(i);
        // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &args) };
        if r == 0 {
            return Ok(Some(BlockLock { _file: file }));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(None),
            _ => Err(e),
        }
    }
}
