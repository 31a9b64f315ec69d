//! I/O backends: positioned reads of byte ranges. The crate's `unsafe` is here and in
//! the `leased` module (the lease-guarded map of [`AutoFile`]).
//!
//! * [`AutoFile`] (default): `pread(2)`, plus, where the kernel grants a read lease, a
//!   memory map that is revoked before any writer or truncation can touch the file
//!   (see [`AutoFile`]): hot small records are decoded in place, with no syscall each.
//! * [`PreadFile`]: `pread(2)` through the page cache. A file truncated while
//!   it is open gives a clean error on the next read.
//! * [`MmapFile`] (opt-in): memory-mapped. Faster on hot data, but **hazard**: if another
//!   process truncates the file while it is mapped, touching the lost pages raises
//!   `SIGBUS` and kills the process. Use it only for files nobody modifies while you read.
//! * [`DirectFile`] (opt-in): `O_DIRECT`, page-aligned reads into aligned buffers that
//!   bypass the page cache, so random reads of padded files stop pulling unused
//!   neighbours into memory. Needs a filesystem that supports `O_DIRECT` (not tmpfs).

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
}

/// A mapped file, readable while this view lives (see [`ReadAt::map_view`]).
pub struct MapView<'a>(View<'a>);

enum View<'a> {
    Plain(&'a [u8]),
    /// Inside a leased map; the file's first `.1` bytes.
    Leased(crate::leased::Entered<'a>, usize),
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

/// Hints the CPU to load the cache line holding `value` (a software prefetch: it never
/// faults, and costs one instruction). Used where the order of future reads is known.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache; the pointer comes from a reference,
    // and SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            value as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
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

/// Alignment that the destination of a copy out of the page cache should share with
/// the file offset it is read from: the kernel copies with `rep movsb`, which on some
/// CPUs (measured on AMD EPYC) runs ~4.5x slower when source and destination differ
/// modulo a cache line (a `Vec`'s heap buffer is typically 16 bytes into one).
pub const COPY_ALIGN: usize = 64;

/// How many bytes to skip at address `addr` so that a read of file offset `offset`
/// lands on the same position within a cache line as its source ([`COPY_ALIGN`]).
pub fn copy_pad(addr: usize, offset: u64) -> usize {
    let want = (offset % COPY_ALIGN as u64) as usize;
    (want + COPY_ALIGN - addr % COPY_ALIGN) % COPY_ALIGN
}

/// Which I/O backend a reader uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// [`AutoFile`] (default): `pread(2)` plus a lease-guarded map for files of small
    /// records; as safe as `pread` if the file changes underneath.
    #[default]
    Auto,
    /// `pread(2)` only (safe if the file changes underneath).
    Pread,
    /// Memory map (opt-in; see the module docs for the `SIGBUS` hazard).
    Mmap,
    /// `O_DIRECT`: bypasses the page cache (for padded files on SSDs).
    Direct,
}

impl Backend {
    /// The backend that opens the file the same way, without mapping it.
    pub fn without_map(self) -> Backend {
        match self {
            Backend::Auto => Backend::Pread,
            other => other,
        }
    }
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

/// Copies what `bytes` holds from `offset` into `buf`; returns how much (0 past the end).
fn copy_out(bytes: &[u8], buf: &mut [u8], offset: u64) -> usize {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let n = buf.len().min(bytes.len() - start);
    buf[..n].copy_from_slice(&bytes[start..start + n]);
    n
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

/// Alignment of `O_DIRECT` offsets, lengths and buffers: covers 512 B and 4 KiB
/// logical blocks.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed heap buffer aligned to [`DIRECT_ALIGN`].
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(DIRECT_ALIGN), DIRECT_ALIGN)
            .expect("valid layout")
    }

    fn new(len: usize) -> AlignedBuf {
        let layout = AlignedBuf::layout(len);
        // SAFETY: the layout has a non-zero size (at least DIRECT_ALIGN).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            len: layout.size(),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points to `len` initialized (zeroed) bytes owned by `self`, and the
        // `&mut self` borrow makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), AlignedBuf::layout(self.len)) }
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
            let mut got = 0;
            while got < span {
                match self.file.read_at(&mut aligned[got..], start + got as u64) {
                    Ok(0) => break, // end of file inside the last block
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let skip = (offset - start) as usize;
            let n = got.saturating_sub(skip).min(buf.len());
            buf[..n].copy_from_slice(&aligned[skip..skip + n]);
            Ok(n)
        })
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// Records longer than this on average are not mapped by [`AutoFile`]: one `pread` per
/// record costs little next to copying it, and mapped pages would count in the
/// process's resident memory.
pub const AUTO_MAP_MAX_MEAN_RECORD: u64 = 16 * 1024;

/// The default backend: positioned reads with `pread(2)`, and, when the kernel grants
/// a read lease on the file, a memory map besides (see the `leased` module).
///
/// While the lease is held nobody can open the file for writing or truncate it: such a
/// process blocks until a watcher thread notices (within a few milliseconds), revokes
/// the map (waiting for readers inside it to finish their current batch), and releases
/// the lease. From then on every read goes through `pread`, which reports a truncated
/// file as an error. So mapped reads never see bytes change or disappear (no `SIGBUS`).
#[derive(Debug)]
pub struct AutoFile {
    pread: PreadFile,
    map: Option<std::sync::Arc<crate::leased::LeasedMap>>,
}

impl AutoFile {
    /// Opens `path`; maps it (under a lease) only if it holds records of at most
    /// [`AUTO_MAP_MAX_MEAN_RECORD`] bytes on average (`records` of them) and a lease can
    /// be had.
    pub fn open(path: &Path, records: u64) -> Result<AutoFile> {
        let pread = PreadFile::open(path)?;
        let small = records > 0 && pread.size / records <= AUTO_MAP_MAX_MEAN_RECORD;
        let map = if small {
            crate::leased::LeasedMap::open(path)
        } else {
            None
        };
        Ok(AutoFile { pread, map })
    }

    /// Whether reads can currently use the map (false once it was revoked).
    pub fn is_mapped(&self) -> bool {
        self.map.as_ref().is_some_and(|m| !m.is_revoked())
    }
}

impl ReadAt for AutoFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // From the map while it holds (no syscall), else through pread.
        match self.map_view() {
            Some(map) => Ok(copy_out(&map, buf, offset)),
            None => self.pread.read_at(buf, offset),
        }
    }

    fn size(&self) -> u64 {
        self.pread.size
    }

    fn map_view(&self) -> Option<MapView<'_>> {
        let entered = self.map.as_ref()?.enter()?;
        // The map was made under the lease, at least as long as the size seen at open
        // (the file cannot have shrunk since); only that prefix is served.
        let size = usize::try_from(self.pread.size).ok()?;
        if entered.len() < size {
            return None;
        }
        Some(MapView(View::Leased(entered, size)))
    }
}

/// Opens `path` with `backend`; `records` (the table's length) lets [`Backend::Auto`]
/// decide whether mapping pays.
/// A URL (see [`crate::remote`]) is opened through the registered file system.
pub fn open_with_records(path: &Path, backend: Backend, records: u64) -> Result<Box<dyn ReadAt>> {
    if let Some(src) = crate::remote::open_if_url(path)? {
        return Ok(src);
    }
    Ok(match backend {
        Backend::Auto => Box::new(AutoFile::open(path, records)?),
        other => open(path, other)?,
    })
}

/// Opens `path` with `backend` (for [`Backend::Auto`], as if its records were small).
/// A URL (see [`crate::remote`]) is opened through the registered file system.
pub fn open(path: &Path, backend: Backend) -> Result<Box<dyn ReadAt>> {
    if let Some(src) = crate::remote::open_if_url(path)? {
        return Ok(src);
    }
    Ok(match backend {
        Backend::Auto => Box::new(AutoFile::open(path, 1)?),
        Backend::Pread => Box::new(PreadFile::open(path)?),
        Backend::Mmap => Box::new(MmapFile::open(path)?),
        Backend::Direct => Box::new(DirectFile::open(path)?),
    })
}

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
    use std::os::fd::AsRawFd;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let pages = size.div_ceil(page);
    if size == 0 {
        return Ok((0, 0));
    }
    // SAFETY: a fresh private read-only mapping of `size` bytes of a file we hold open;
    // it is only passed to mincore (never dereferenced) and unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(Error::io(path, io::Error::last_os_error()));
    }
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
    fn direct_reads_unaligned_ranges_and_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let src = match DirectFile::open(&path) {
            Ok(s) => s,
            Err(e) => panic!("O_DIRECT unsupported where tests run: {e}"),
        };
        for (off, len) in [
            (0usize, 10usize),
            (4090, 12),
            (5000, 9000),
            (19_990, 10),
            (0, 20_000),
        ] {
            let mut buf = vec![0u8; len];
            read_exact_at(&src, &mut buf, off as u64).unwrap();
            assert_eq!(buf, data[off..off + len], "{off}+{len}");
        }
        let mut buf = [0u8; 8];
        assert_eq!(src.read_at(&mut buf, 19_996).unwrap(), 4);
        assert_eq!(src.read_at(&mut buf, 20_000).unwrap(), 0);
    }

    #[test]
    fn page_cache_can_be_dropped_and_measured() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let _ = std::fs::read(&path).unwrap();
        let (cached, pages) = cached_pages(&path).unwrap();
        assert_eq!(pages, 256);
        assert!(cached > 0);
        drop_from_page_cache(&path).unwrap();
        let (after, _) = cached_pages(&path).unwrap();
        assert!(after < cached, "{after} of {pages} still cached");
    }

    #[test]
    fn backends_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
        for backend in [Backend::Pread, Backend::Mmap, Backend::Direct] {
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
