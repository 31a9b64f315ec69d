//! The `pread(2)` backend.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};

use crate::storage::ReadAt;

/// The `pread(2)` backend: reads through the page cache. A file truncated while it is
/// open gives a clean error on the next read.
#[derive(Debug)]
pub struct PreadFile {
    file: File,
    size: u64,
}

impl PreadFile {
    /// Opens `path` for positioned reads.
    pub fn open(path: &Path) -> Result<PreadFile> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(PreadFile { file, size })
    }

    /// Reads the open `file` of `size` bytes.
    pub(crate) fn from_file(file: File, size: u64) -> PreadFile {
        PreadFile { file, size }
    }

    /// The open file.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// The open file, given up.
    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

impl ReadAt for PreadFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn size(&self) -> u64 {
        self.size
    }
}
