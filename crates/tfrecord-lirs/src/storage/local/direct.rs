//! The `O_DIRECT` backend: page-aligned reads into aligned buffers that bypass the page
//! cache.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};

use crate::storage::ReadAt;

/// Alignment of `O_DIRECT` offsets, lengths and buffers: covers 512 B and 4 KiB
/// logical blocks.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed heap buffer whose usable part starts on a [`DIRECT_ALIGN`] boundary: a
/// `Vec` over-allocated by one alignment unit, of which the aligned window is used (safe
/// code; the few KiB of slack are per thread, see `DIRECT_BUF`).
struct AlignedBuf {
    bytes: Vec<u8>,
    /// Where the aligned window starts in `bytes`.
    skip: usize,
    /// Usable bytes from `skip`, a multiple of [`DIRECT_ALIGN`].
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let len = len.max(1).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let bytes = vec![0u8; len + DIRECT_ALIGN];
        let skip = bytes.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuf { bytes, skip, len }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.skip..self.skip + self.len]
    }
}

thread_local! {
    /// Each thread reuses one aligned buffer, grown as needed.
    static DIRECT_BUF: std::cell::RefCell<Option<AlignedBuf>> = const { std::cell::RefCell::new(None) };
}

/// The `O_DIRECT` backend.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    size: u64,
}

impl DirectFile {
    /// Opens `path` with `O_DIRECT`.
    pub fn open(path: &Path) -> Result<DirectFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| {
                let e = if e.raw_os_error() == Some(libc::EINVAL) {
                    io::Error::new(
                        e.kind(),
                        "the filesystem does not support O_DIRECT (use the pread backend)",
                    )
                } else {
                    e
                };
                Error::io(path, e)
            })?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Ok(DirectFile { file, size })
    }

    /// Reads `file` of `size` bytes, already open with `O_DIRECT`.
    pub(crate) fn from_file(file: File, size: u64) -> DirectFile {
        DirectFile { file, size }
    }
}

impl ReadAt for DirectFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if buf.is_empty() || offset >= self.size {
            return Ok(0);
        }
        let align = DIRECT_ALIGN as u64;
        let start = offset / align * align;
        let end = (offset + buf.len() as u64).min(self.size).div_ceil(align) * align;
        let span = (end - start) as usize;
        DIRECT_BUF.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|b| b.len < span) {
                *slot = Some(AlignedBuf::new(span));
            }
            let aligned = &mut slot.as_mut().expect("just set").as_mut_slice()[..span];
            // A short count only at the end of file, inside the last block.
            let got = super::read_full_at(&self.file, aligned, start)?;
            let skip = (offset - start) as usize;
            let n = got.saturating_sub(skip).min(buf.len());
            buf[..n].copy_from_slice(&aligned[skip..skip + n]);
            Ok(n)
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn bypasses_page_cache(&self) -> bool {
        true
    }

    fn reads_cold(&self) -> bool {
        true
    }
}
