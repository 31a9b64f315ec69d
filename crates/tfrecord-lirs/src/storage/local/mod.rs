//! I/O backends: positioned reads of byte ranges. This module tree is the only place of
//! the crate with `unsafe` (each block with a `// SAFETY:` comment): `mod.rs` (a cache
//! prefetch hint), `mmap` (the opt-in map), `leased` (the lease-guarded map of
//! [`AutoFile`] and of large offset tables, [`OffsetTable`]) and `page_cache` (benchmark tools).
//!
//! * [`AutoFile`] (default): `pread(2)`, plus, where the kernel grants a read lease, a
//!   memory map that is revoked before any writer or truncation can touch the file
//!   (see [`AutoFile`]): hot small records are decoded in place, with no syscall each.
//! * [`PreadFile`]: `pread(2)` through the page cache. A file truncated while
//!   it is open gives a clean error on the next read.
//! * [`MmapFile`] (opt-in, through the `unsafe` [`MmapOptIn::new`]): memory-mapped.
//!   Faster on hot data, but **hazard**: if another process truncates the file while it
//!   is mapped, touching the lost pages raises `SIGBUS` and kills the process, and a
//!   write changes bytes a reader borrows (undefined behaviour). Use it only for files
//!   nobody modifies while you read.
//! * [`DirectFile`] (opt-in): `O_DIRECT`, page-aligned reads into aligned buffers that
//!   bypass the page cache, so random reads of padded files stop pulling unused
//!   neighbours into memory. Needs a filesystem that supports `O_DIRECT` (not tmpfs).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};

use crate::storage::ReadAt;

mod auto;
mod direct;
pub(crate) mod leased;
mod memory_limit;
mod mmap;
#[doc(hidden)]
pub mod page_cache;
mod pread;
mod table_map;

pub use auto::{
    choose_auto_read, page_cache_room, AutoFile, AutoInputs, AutoRead, AUTO_MAP_MAX_MEAN_RECORD,
    COLD_FILES_OVER_MEMORY, DEBUG_ENV, PAGE_CACHE_ROOM_DIVISOR,
};
pub use direct::{DirectFile, DIRECT_ALIGN};
pub use memory_limit::{memory_limit, read_memory_limit, CgroupLimit, MemoryLimit};
pub use mmap::{MmapFile, MmapOptIn};
pub use pread::PreadFile;
pub use table_map::{
    set_table_in_memory_max_bytes, table_in_memory_max_bytes, OffsetTable, TableView,
    TABLE_BLOCK_ENTRIES, TABLE_CACHED_BLOCKS, TABLE_IN_MEMORY_MAX_BYTES,
};

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

/// The read-until-full loop: calls `read(rest, at)` for the unfilled rest of `buf` at
/// file offset `at` until `buf` is full or a read returns 0 (end of file), retrying
/// interrupted reads; returns the bytes read.
fn fill(
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match read(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads `file` into `buf` from `offset` until `buf` is full or the file ends, retrying
/// short and interrupted reads; returns the bytes read (fewer only at end of file).
pub fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    fill(|rest, at| file.read_at(rest, at), buf, offset)
}

/// [`read_full_at`] for any positioned-read source (a local file through its backend,
/// or a URL through its file system).
pub fn read_full_from(src: &dyn ReadAt, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    fill(|rest, at| src.read_at(rest, at), buf, offset)
}

/// Reads `src` into `buf` until `buf` is full or the stream ends, retrying short and
/// interrupted reads; returns the bytes read (fewer only at the end of the stream).
pub fn read_full(src: &mut (impl io::Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    fill(|rest, _| src.read(rest), buf, 0)
}

/// Fills `buf` from `offset`, retrying short and interrupted reads.
/// End of file before `buf` is full is [`io::ErrorKind::UnexpectedEof`].
pub fn read_exact_at(src: &dyn ReadAt, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let got = fill(|rest, at| src.read_at(rest, at), buf, offset)?;
    if got < buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("end of file at byte {}", offset + got as u64),
        ));
    }
    Ok(())
}

/// Maps the first `len` (> 0) bytes of `file` read-only and *shared* (`MAP_SHARED`:
/// the page-cache pages themselves, so it sees every change to the file). The caller
/// owns the mapping: it dereferences it only under its own `// SAFETY:` argument and
/// unmaps it once.
fn map_shared(file: &File, len: usize) -> io::Result<*mut libc::c_void> {
    use std::os::fd::AsRawFd;
    // SAFETY: a new mapping at an address the kernel picks, so it replaces nothing of
    // ours; `file` is open for the duration of the call; nothing is dereferenced here.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(addr)
}

/// The operating system's memory page size in bytes (`sysconf(_SC_PAGESIZE)`, asked
/// once per process): 4 KiB on most x86_64 kernels, 16 or 64 KiB on some aarch64 ones,
/// where rounding to 4 KiB would make page-wise calls (`madvise`, `mincore`) miss.
pub fn os_page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        // POSIX allows -1 (no answer); 4 KiB is then the smallest page Linux has.
        usize::try_from(page)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096)
    })
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
    /// Every backend, in the order its names are listed in messages.
    pub const ALL: [Backend; 4] = [
        Backend::Auto,
        Backend::Pread,
        Backend::Mmap,
        Backend::Direct,
    ];

    /// The backend's name, as [`FromStr`](std::str::FromStr) parses it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Pread => "pread",
            Backend::Mmap => "mmap",
            Backend::Direct => "direct",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a backend name: `"auto"`, `"pread"`, `"mmap"` or `"direct"` (exactly; an
/// unset option is the caller's to map to [`Backend::default`]).
///
/// ```
/// use tfrecord_lirs::Backend;
/// assert_eq!("direct".parse::<Backend>()?, Backend::Direct);
/// let err = "fast".parse::<Backend>().unwrap_err();
/// assert_eq!(err.to_string(), r#"unknown I/O backend "fast": use "auto", "pread", "mmap" or "direct""#);
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
impl std::str::FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Backend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown I/O backend {s:?}: use \"auto\", \"pread\", \"mmap\" or \"direct\""
                ))
            })
    }
}

/// Copies what `bytes` holds from `offset` into `buf`; returns how much (0 past the end).
pub(crate) fn copy_out(bytes: &[u8], buf: &mut [u8], offset: u64) -> usize {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let n = buf.len().min(bytes.len() - start);
    buf[..n].copy_from_slice(&bytes[start..start + n]);
    n
}

/// Opens `path` with `backend`; `records` (the table's length) lets [`Backend::Auto`]
/// decide whether mapping pays. [`Backend::Mmap`] needs `mmap_opt_in` (see
/// [`MmapOptIn`]), and without it is an `InvalidArgument` error that says so.
/// `path` is a local path; [`Storage::open`](crate::Storage::open) opens URLs too.
pub fn open_with_records(
    path: &Path,
    backend: Backend,
    records: u64,
    mmap_opt_in: Option<MmapOptIn>,
) -> Result<Box<dyn ReadAt>> {
    Ok(match backend {
        Backend::Auto => Box::new(AutoFile::open(path, records)?),
        Backend::Pread => Box::new(PreadFile::open(path)?),
        Backend::Mmap => Box::new(MmapFile::open(
            path,
            mmap_opt_in.ok_or_else(mmap_needs_opt_in)?,
        )?),
        Backend::Direct => Box::new(DirectFile::open(path)?),
    })
}

/// Opens `path` with `backend` (for [`Backend::Auto`], as if its records were small;
/// [`Backend::Mmap`] needs `mmap_opt_in`, see [`open_with_records`]).
pub fn open(
    path: &Path,
    backend: Backend,
    mmap_opt_in: Option<MmapOptIn>,
) -> Result<Box<dyn ReadAt>> {
    open_with_records(path, backend, 1, mmap_opt_in)
}

/// The error for the memory-map backend chosen without its opt-in.
pub(crate) fn mmap_needs_opt_in() -> Error {
    Error::invalid_argument(
        "the mmap backend is an unsafe opt-in (a file changed or truncated while mapped is undefined behaviour or a SIGBUS): pass `unsafe { MmapOptIn::new() }` in ReaderOptions::mmap_opt_in, or use the \"auto\" backend, which maps files safely under a lease",
    )
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
    fn os_page_size_is_the_kernels_and_asked_in_one_place() {
        let out = std::process::Command::new("getconf")
            .arg("PAGESIZE")
            .output()
            .unwrap();
        let said: usize = String::from_utf8(out.stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(os_page_size(), said);
        // Every page-wise call in this tree rounds with it: none asks sysconf again or
        // assumes 4 KiB (which on a 16 or 64 KiB page kernel silently does nothing).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/storage");
        let mut stack = vec![dir];
        let mut askers = Vec::new();
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap();
                if code.contains("_SC_PAGESIZE") || code.contains("page = 4096") {
                    askers.push(path.file_name().unwrap().to_string_lossy().into_owned());
                }
            }
        }
        askers.sort();
        assert_eq!(askers, ["mod.rs"]);
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
        use page_cache::{cached_pages, drop_from_page_cache};
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
        // SAFETY: the test's own temporary files; nothing changes them while mapped.
        let opt_in = Some(unsafe { MmapOptIn::new() });
        for backend in [Backend::Pread, Backend::Mmap, Backend::Direct] {
            let src = open(&path, backend, opt_in).unwrap();
            assert_eq!(src.size(), 256);
            let mut buf = [0u8; 16];
            read_exact_at(&*src, &mut buf, 240).unwrap();
            assert_eq!(buf[15], 255);
            assert_eq!(src.read_at(&mut buf, 300).unwrap(), 0);
        }
        let empty = dir.path().join("e");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(open(&empty, Backend::Mmap, opt_in).unwrap().size(), 0);
        let refused = open(&empty, Backend::Mmap, None)
            .err()
            .expect("needs the opt-in");
        assert_eq!(refused.kind(), crate::ErrorKind::InvalidArgument);
    }
}
