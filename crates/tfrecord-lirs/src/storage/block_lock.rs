//! The lock on one block of a cache directory (see
//! [`block_cache`](crate::storage::block_cache)): one process fetches a block while the
//! others wait for it. The sweep removes an object directory only while it holds every
//! block's lock (see [`BlockLock::try_acquire_all`]); a lock taken on a `LOCK` file that
//! is no longer the directory's is refused, so a lock held is always the current one.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// The lock on one block of an object directory: an OFD lock on byte `i` of its `LOCK`
/// file, released when dropped (the descriptor is closed). OFD locks belong to the open
/// file, so threads of one process exclude each other as processes do.
pub(crate) struct BlockLock {
    _file: File,
}

impl BlockLock {
    /// The lock of byte `i` (`len` 1), or of every byte from `i` on (`len` 0).
    fn lock_args(i: u64, len: libc::off_t) -> libc::flock {
        // SAFETY: `flock` is a plain C struct of integers; all zeros is a valid value.
        let mut l: libc::flock = unsafe { std::mem::zeroed() };
        l.l_type = libc::F_WRLCK as libc::c_short;
        l.l_whence = libc::SEEK_SET as libc::c_short;
        l.l_start = i as libc::off_t;
        l.l_len = len;
        l
    }

    /// `file` locked, if it is still `dir`'s `LOCK`: the sweep may have removed the
    /// directory (renamed away, then deleted) while this process waited, and a lock on
    /// the old file excludes no one. `NotFound` then: the caller makes the directory
    /// again and retries.
    fn current(dir: &Path, file: File) -> io::Result<BlockLock> {
        let held = file.metadata()?;
        match fs::metadata(dir.join("LOCK")) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => {
                Ok(BlockLock { _file: file })
            }
            Ok(_) | Err(_) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} was removed while its lock was awaited", dir.display()),
            )),
        }
    }

    fn open(dir: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join("LOCK"))
    }

    /// Waits for block `i`'s lock; `NotFound` if the directory is gone (or was removed
    /// meanwhile).
    pub(crate) fn acquire(dir: &Path, i: u64) -> io::Result<BlockLock> {
        let file = Self::open(dir)?;
        let args = Self::lock_args(i, 1);
        loop {
            // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
            let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLKW, &args) };
            if r == 0 {
                return Self::current(dir, file);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Block `i`'s lock if no one holds it.
    pub(crate) fn try_acquire(dir: &Path, i: u64) -> io::Result<Option<BlockLock>> {
        Self::try_lock(dir, Self::lock_args(i, 1))
    }

    /// Every block's lock at once, if no one holds any: then no process is between
    /// taking a block's lock and renaming its block into place (the sweep's condition
    /// for removing the directory).
    pub(crate) fn try_acquire_all(dir: &Path) -> io::Result<Option<BlockLock>> {
        Self::try_lock(dir, Self::lock_args(0, 0))
    }

    fn try_lock(dir: &Path, args: libc::flock) -> io::Result<Option<BlockLock>> {
        let file = Self::open(dir)?;
        // SAFETY: fcntl on a descriptor we own, with a pointer to a live `flock`.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &args) };
        if r == 0 {
            return Self::current(dir, file).map(Some);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(None),
            _ => Err(e),
        }
    }
}
