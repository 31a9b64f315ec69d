//! The opt-in memory-map backend, reachable only through [`MmapOptIn`], whose
//! constructor is `unsafe`: a mapped file changed or truncated by anyone while it is
//! mapped is undefined behaviour (a `&[u8]` changing underneath) or a `SIGBUS`, and no
//! check (CRCs included) can make that sound. [`AutoFile`](super::AutoFile) is the safe
//! way to read from a map.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};

use super::copy_out;
use crate::storage::ReadAt;

/// The caller's promise that makes the [`Mmap`](super::Backend::Mmap) backend sound:
/// proof, required by [`MmapFile::open`] and by
/// [`ReaderOptions::mmap_opt_in`](crate::ReaderOptions::mmap_opt_in), that the hazard
/// was accepted on purpose.
///
/// ```
/// use tfrecord_lirs::{local::MmapOptIn, Backend, ReaderOptions};
/// let options = ReaderOptions {
///     backend: Backend::Mmap,
///     // SAFETY: the files are written once, before this process starts, and nothing
///     // writes or truncates them while they are read.
///     mmap_opt_in: Some(unsafe { MmapOptIn::new() }),
///     ..Default::default()
/// };
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MmapOptIn(());

impl MmapOptIn {
    /// Accepts the memory-map backend's hazard.
    ///
    /// # Safety
    /// No process (this one included) may write to, or truncate, a file read through
    /// the memory-map backend while a reader that mapped it lives. Writing makes bytes
    /// the reader borrows change underneath it (undefined behaviour); truncating makes
    /// touching the lost pages raise `SIGBUS`, which kills the process.
    pub unsafe fn new() -> MmapOptIn {
        MmapOptIn(())
    }
}

/// The memory-map backend (opt-in: see [`MmapOptIn`]).
#[derive(Debug)]
pub struct MmapFile {
    map: Option<memmap2::Mmap>,
}

impl MmapFile {
    /// Maps `path` read-only; `opt_in` is the caller's promise that nobody changes or
    /// truncates the file while it is mapped.
    pub fn open(path: &Path, opt_in: MmapOptIn) -> Result<MmapFile> {
        let MmapOptIn(()) = opt_in;
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if size == 0 {
            return Ok(MmapFile { map: None });
        }
        // SAFETY: a read-only *shared* mapping (memmap2 passes MAP_SHARED), so it sees
        // every change another process makes to the file. It is sound only while nobody
        // writes or truncates the file: exactly what the holder of `opt_in` promised
        // (`MmapOptIn::new` is `unsafe` and documents it).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Ok(MmapFile { map: Some(map) })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl ReadAt for MmapFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        Ok(copy_out(self.bytes(), buf, offset))
    }

    fn size(&self) -> u64 {
        self.bytes().len() as u64
    }

    fn mapped(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
}
