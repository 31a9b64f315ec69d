//! I/O backends: positioned reads of byte ranges. The crate's only `unsafe` is here.
//!
//! * [`PreadFile`] (default): `pread(2)` through the page cache. A file truncated while
//!   it is open gives a clean error on the next read.
//! * [`MmapFile`] (opt-in): memory-mapped. Faster on hot data, but **hazard**: if another
//!   process truncates the file while it is mapped, touching the lost pages raises
//!   `SIGBUS` and kills the process. Use it only for files nobody modifies while you read.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};

/// A source of positioned reads, shared between threads.
pub trait ReadAt: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; may return fewer (a *short read*).
    /// Returns 0 only at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// The file size when it was opened.
    fn size(&self) -> u64;
}

/// Fills `buf` from `offset`, retrying short and interrupted reads.
/// End of file before `buf` is full is [`io::ErrorKind::UnexpectedEof`].
pub fn read_exact_at(src: &dyn ReadAt, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match src.read_at(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("end of file at byte {offset}"),
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Which I/O backend a reader uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// `pread(2)` (default; safe if the file changes underneath).
    #[default]
    Pread,
    /// Memory map (opt-in; see the module docs for the `SIGBUS` hazard).
    Mmap,
}

/// The `pread(2)` backend.
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
}

impl ReadAt for PreadFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// The memory-map backend.
#[derive(Debug)]
pub struct MmapFile {
    map: Option<memmap2::Mmap>,
}

impl MmapFile {
    /// Maps `path` read-only.
    pub fn open(path: &Path) -> Result<MmapFile> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if size == 0 {
            return Ok(MmapFile { map: None });
        }
        // SAFETY: the mapping is read-only and private to this struct. Mapping a file is
        // unsafe because another process may change or truncate it underneath; changed
        // bytes are caught by the CRCs, and truncation (SIGBUS) is the documented hazard
        // of this opt-in backend.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Ok(MmapFile { map: Some(map) })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl ReadAt for MmapFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let bytes = self.bytes();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.bytes().len() as u64
    }
}

/// Opens `path` with `backend`.
pub fn open(path: &Path, backend: Backend) -> Result<Box<dyn ReadAt>> {
    Ok(match backend {
        Backend::Pread => Box::new(PreadFile::open(path)?),
        Backend::Mmap => Box::new(MmapFile::open(path)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns at most `chunk` bytes per call: exercises short-read handling.
    struct Dribble {
        data: Vec<u8>,
        chunk: usize,
    }

    impl ReadAt for Dribble {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let start = (offset as usize).min(self.data.len());
            let n = buf.len().min(self.chunk).min(self.data.len() - start);
            buf[..n].copy_from_slice(&self.data[start..start + n]);
            Ok(n)
        }
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
    }

    #[test]
    fn read_exact_at_survives_short_reads_and_reports_eof() {
        let src = Dribble {
            data: (0..100u8).collect(),
            chunk: 3,
        };
        let mut buf = [0u8; 50];
        read_exact_at(&src, &mut buf, 10).unwrap();
        assert_eq!(buf[0], 10);
        assert_eq!(buf[49], 59);
        let err = read_exact_at(&src, &mut buf, 60).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn backends_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
        for backend in [Backend::Pread, Backend::Mmap] {
            let src = open(&path, backend).unwrap();
            assert_eq!(src.size(), 256);
            let mut buf = [0u8; 16];
            read_exact_at(&*src, &mut buf, 240).unwrap();
            assert_eq!(buf[15], 255);
            assert_eq!(src.read_at(&mut buf, 300).unwrap(), 0);
        }
        let empty = dir.path().join("e");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(open(&empty, Backend::Mmap).unwrap().size(), 0);
    }
}
