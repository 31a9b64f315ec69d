//! The default backend: `pread(2)` plus a lease-guarded map, or, for files that do not
//! fit in the memory this process may use (of large records, or walked in an order
//! that is not page-aware), reads of exactly the record from the device. The choice is [`choose_auto_read`], made once per file.

use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::error::Result;

use super::leased::LeasedMap;
use super::memory_limit::memory_limit;
use super::{copy_out, DirectFile, PreadFile};
use crate::storage::read_at::{MapView, ReadAt, View};

/// Records longer than this on average are not mapped by [`AutoFile`]: one `pread` per
/// record costs little next to copying it, and mapped pages would count in the
/// process's resident memory.
pub const AUTO_MAP_MAX_MEAN_RECORD: u64 = 16 * 1024;

/// The share of the memory this process may use ([`memory_limit`]: the machine's, or
/// its cgroup's limit if lower) that its *mapped* files may take in the page cache is
/// that memory divided by this ([`page_cache_room`]); beyond it every map is advised
/// `MADV_RANDOM` (`leased.rs`). A page fault on a map makes the kernel read around the
/// faulting page (the device's `read_ahead_kb`: 8 MB on the bench machine). That pays
/// while the mapped files fit, as a prefetch of pages a random walk reads later; beyond
/// this share the pages read around are mostly evicted before any read touches them.
/// Measured at 10^9 one-byte records (25 GB of data and table on a 24 GiB machine, one
/// file, batches of 256): with the files' pages dropped, the first batch took 2.1-3.8 s
/// with read-around (~15 GB read for the first 768 records), 0.10-0.13 s advised
/// random, and steady reads 53-89 rec/s against 4,193-5,326; advised random, a cold
/// epoch over a 250 MB file was 2.3-3.8x slower, so maps that fit keep read-around.
pub const PAGE_CACHE_ROOM_DIVISOR: u64 = 2;

/// Large records (above [`AUTO_MAP_MAX_MEAN_RECORD`]) are read [`AutoRead::Cold`] once
/// the files read together exceed the memory this process may use times this
/// fraction (numerator, denominator). The kernel's read-ahead around each random
/// `pread` fetches pages past the record; while the files fit they are a prefetch
/// (the next epoch reads from the cache), beyond that they are evicted unused.
/// Measured on the bench machine (2 cores, virtio disk, `read_ahead_kb` 8192): 10,000
/// stock records of ~100 KB (a 1 GB file, evicted first), two epochs of random orders,
/// 8 reads in flight, inside a v1 memory cgroup (rec/s epoch 1 / epoch 2, bytes fetched
/// from the disk per byte read):
///
/// | limit | `pread` | `O_DIRECT` |
/// |---|---|---|
/// | 3,000 MB | 3,293 / 13,698, 1.00 / 0.00 | 7,718 / 7,296, 1.04 / 1.04 |
/// | 1,000 MB | 6,406 / 14,154, 1.03 / 0.12 | 7,636 / 10,305, 1.04 / 1.04 |
/// | 800 MB | 6,130 / 6,745, 1.39 / 1.06 | 9,225 / 8,274, 1.04 / 1.04 |
/// | 600 MB | 4,721 / 4,225, 1.47 / 1.35 | 7,557 / 8,046, 1.04 / 1.04 |
///
/// So the crossover lies between files of 1.0x and 1.25x the limit: files beyond the
/// limit are read cold. `pread` after `POSIX_FADV_RANDOM` (the fallback without
/// `O_DIRECT`), one epoch at 300 MB: 7,847 rec/s, 1.03 bytes per byte (plain `pread`
/// 6,915, 1.28; `O_DIRECT` 11,953, 1.04).
pub const COLD_FILES_OVER_MEMORY: (u64, u64) = (1, 1);

/// The environment variable that makes the default backend say on stderr what it
/// chose for each file and why (any value but empty or `0`).
pub const DEBUG_ENV: &str = "TFRECORD_LIRS_DEBUG";

/// How [`AutoFile`] reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoRead {
    /// Small records in files that fit, or walked in a page-aware order: a memory map
    /// under a read lease (`pread` if none can be had).
    Mapped,
    /// Large records in files that fit in the page cache: `pread(2)`, with the
    /// kernel's read-ahead (later epochs read from the cache).
    Pread,
    /// Files that do not fit, of large records or walked in an order that is not
    /// page-aware: `O_DIRECT` reads of the record's blocks
    /// (no page-cache copy to evict), or, where the filesystem has no `O_DIRECT`,
    /// `pread` with read-ahead off (`POSIX_FADV_RANDOM`); more reads in flight.
    Cold,
}

impl AutoRead {
    /// The choice's name, as the debug line and `info` print it.
    pub fn name(self) -> &'static str {
        match self {
            AutoRead::Mapped => "mapped",
            AutoRead::Pread => "pread",
            AutoRead::Cold => "cold (direct reads of each record)",
        }
    }
}

/// What [`choose_auto_read`] decides from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoInputs {
    /// The file's size, in bytes.
    pub file_bytes: u64,
    /// Its records (the table's length).
    pub records: u64,
    /// The bytes of every file the reader opens together (this one included).
    pub files_bytes: u64,
    /// The memory this process may use ([`MemoryLimit::bytes`](super::MemoryLimit::bytes)),
    /// if known.
    pub memory: Option<u64>,
    /// Whether the reader walks the file in a page-aware order (whole pages of a padded
    /// file per unit), which reads whole pages through a map.
    pub page_aware: bool,
}

/// The room the page cache has for this process's files, out of `memory` (see
/// [`PAGE_CACHE_ROOM_DIVISOR`]); `None` (no bound) when memory is unknown.
pub fn page_cache_room(memory: Option<u64>) -> Option<u64> {
    memory.map(|m| m / PAGE_CACHE_ROOM_DIVISOR)
}

/// The default backend's rule: files beyond the memory this process may use
/// ([`COLD_FILES_OVER_MEMORY`]) are read [`AutoRead::Cold`], unless their records are
/// small (at most [`AUTO_MAP_MAX_MEAN_RECORD`] on average) and the reader walks them in
/// a page-aware order (whole pages of a padded file, which a map reads at a fault;
/// maps beyond [`page_cache_room`] are advised random). Files that fit are mapped for
/// small records and read with `pread` for larger ones. A random order of small
/// records beyond the memory through a map reads the device's read-around of every
/// page touched: 5-11x slower than direct reads (docs/FORMAT.md).
/// Returns the choice and a sentence saying why.
pub fn choose_auto_read(inputs: AutoInputs) -> (AutoRead, String) {
    let AutoInputs {
        file_bytes,
        records,
        files_bytes,
        memory,
        page_aware,
    } = inputs;
    if records == 0 {
        return (AutoRead::Pread, "no records".into());
    }
    let mean = file_bytes / records;
    let small = mean <= AUTO_MAP_MAX_MEAN_RECORD;
    let (num, den) = COLD_FILES_OVER_MEMORY;
    let room = memory.map(|m| m.saturating_mul(num) / den);
    let fits = room.is_none_or(|room| files_bytes <= room);
    let room = room.map_or_else(|| "unknown".to_string(), |r| r.to_string());
    let why = format!(
        "records of {mean} bytes on average, {} {AUTO_MAP_MAX_MEAN_RECORD}; files of \
         {files_bytes} bytes {} the {room} bytes of memory this process may use; {} order",
        if small { "at most" } else { "above" },
        if fits { "within" } else { "beyond" },
        if page_aware {
            "a page-aware"
        } else {
            "not a page-aware"
        },
    );
    let read = match (small, fits, page_aware) {
        (true, true, _) | (true, false, true) => AutoRead::Mapped,
        (false, true, _) => AutoRead::Pread,
        (_, false, _) => AutoRead::Cold,
    };
    (read, why)
}

/// The default backend: positioned reads with `pread(2)`, and, when the kernel grants
/// a read lease on the file, a memory map besides (see the `leased` module); for files
/// beyond the memory this process may use (but small records walked in a page-aware
/// order), `O_DIRECT` reads (see [`choose_auto_read`]).
///
/// While the lease is held nobody can open the file for writing or truncate it: such a
/// process blocks until a watcher thread notices (within a few milliseconds), revokes
/// the map (waiting for readers inside it to finish their current batch), and releases
/// the lease. From then on every read goes through `pread`, which reports a truncated
/// file as an error. So mapped reads never see bytes change or disappear (no `SIGBUS`).
#[derive(Debug)]
pub struct AutoFile {
    reads: Reads,
    map: Option<Arc<LeasedMap>>,
    choice: AutoRead,
}

#[derive(Debug)]
enum Reads {
    Pread(PreadFile),
    Direct(DirectFile),
}

impl AutoFile {
    /// Opens `path`, judged alone and walked in no page-aware order: maps it (under a
    /// lease) if [`choose_auto_read`] says so for its `records` and a lease can be had.
    pub fn open(path: &Path, records: u64) -> Result<AutoFile> {
        Ok(AutoFile::from_pread(PreadFile::open(path)?, records))
    }

    /// [`AutoFile::open`] for a file already open with `pread`: the map (if any) is made
    /// of the same open file (a duplicated descriptor), not of the path again. The file
    /// is judged on its own against the page cache room.
    pub fn from_pread(pread: PreadFile, records: u64) -> AutoFile {
        let size = pread.size();
        AutoFile::from_pread_among(pread, records, size, false)
    }

    /// [`AutoFile::from_pread`] for one of files of `files_bytes` in all read together,
    /// walked in a page-aware order or not (see [`AutoInputs::page_aware`]).
    pub fn from_pread_among(
        pread: PreadFile,
        records: u64,
        files_bytes: u64,
        page_aware: bool,
    ) -> AutoFile {
        let inputs = AutoInputs {
            file_bytes: pread.size(),
            records,
            files_bytes,
            memory: memory_limit().bytes(),
            page_aware,
        };
        let (choice, _) = choose_auto_read(inputs);
        let map = if choice == AutoRead::Mapped {
            pread.file().try_clone().ok().and_then(LeasedMap::from_file)
        } else {
            None
        };
        let reads = if choice == AutoRead::Cold {
            cold_reads(pread)
        } else {
            Reads::Pread(pread)
        };
        AutoFile { reads, map, choice }
    }

    /// Whether reads can currently use the map (false once it was revoked).
    pub fn is_mapped(&self) -> bool {
        self.map.as_ref().is_some_and(|m| !m.is_revoked())
    }

    /// How this file is read ([`choose_auto_read`]).
    pub fn choice(&self) -> AutoRead {
        self.choice
    }
}

/// The reads of a cold file: `O_DIRECT` on its open file where the filesystem allows
/// it, else `pread` with the kernel's read-ahead off.
fn cold_reads(pread: PreadFile) -> Reads {
    use std::os::fd::AsRawFd;
    let fd = pread.file().as_raw_fd();
    // SAFETY: plain fcntl calls on a descriptor this value owns; the open file
    // description is this reader's own (opened by PreadFile::open, not shared).
    let direct = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_DIRECT) == 0
    };
    if direct {
        let size = pread.size();
        return Reads::Direct(DirectFile::from_file(pread.into_file(), size));
    }
    // SAFETY: a hint on a descriptor we own; it cannot fail in a way that matters
    // (without it reads are merely read around).
    unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM) };
    Reads::Pread(pread)
}

impl ReadAt for AutoFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        // From the map while it holds (no syscall), else through pread.
        match (self.map_view(), &self.reads) {
            (Some(map), _) => Ok(copy_out(&map, buf, offset)),
            (None, Reads::Pread(pread)) => pread.read_at(buf, offset),
            (None, Reads::Direct(direct)) => direct.read_at(buf, offset),
        }
    }

    fn size(&self) -> u64 {
        match &self.reads {
            Reads::Pread(pread) => pread.size(),
            Reads::Direct(direct) => direct.size(),
        }
    }

    fn map_view(&self) -> Option<MapView<'_>> {
        let entered = self.map.as_ref()?.enter()?;
        // The map was made under the lease, at least as long as the size seen at open
        // (the file cannot have shrunk since); only that prefix is served.
        let size = usize::try_from(self.size()).ok()?;
        if entered.len() < size {
            return None;
        }
        Some(MapView(View::Leased(entered, size)))
    }

    fn bypasses_page_cache(&self) -> bool {
        matches!(self.reads, Reads::Direct(_))
    }

    fn reads_cold(&self) -> bool {
        self.choice == AutoRead::Cold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;

    fn choose(record: u64, files_bytes: u64, memory: Option<u64>) -> AutoRead {
        choose_in(record, files_bytes, memory, false)
    }

    fn choose_in(record: u64, files_bytes: u64, memory: Option<u64>, page_aware: bool) -> AutoRead {
        let records = 1000;
        choose_auto_read(AutoInputs {
            file_bytes: record * records,
            records,
            files_bytes,
            memory,
            page_aware,
        })
        .0
    }

    #[test]
    fn large_records_in_files_beyond_the_memory_are_read_cold() {
        // 1 GB of 100 KB records in a 300 MB cgroup: cold.
        assert_eq!(choose(100_000, 1000 * MB, Some(300 * MB)), AutoRead::Cold);
        // Just above the memory: cold; at it: still fits.
        assert_eq!(
            choose(100_000, 300 * MB + 1, Some(300 * MB)),
            AutoRead::Cold
        );
        assert_eq!(choose(100_000, 300 * MB, Some(300 * MB)), AutoRead::Pread);
    }

    #[test]
    fn large_records_that_fit_keep_pread_with_read_ahead() {
        assert_eq!(
            choose(100_000, 1000 * MB, Some(24_000 * MB)),
            AutoRead::Pread
        );
        // Memory unknown: no bound.
        assert_eq!(choose(100_000, u64::MAX, None), AutoRead::Pread);
    }

    #[test]
    fn small_records_that_fit_are_mapped_in_any_order() {
        for memory in [Some(24_000 * MB), None] {
            for page_aware in [false, true] {
                for record in [1, 4096, AUTO_MAP_MAX_MEAN_RECORD] {
                    let read = choose_in(record, 1000 * MB, memory, page_aware);
                    assert_eq!(read, AutoRead::Mapped, "{record} {memory:?} {page_aware}");
                }
            }
        }
        // At the memory: still fits.
        assert_eq!(choose(4096, 300 * MB, Some(300 * MB)), AutoRead::Mapped);
    }

    #[test]
    fn small_records_beyond_the_memory_are_cold_unless_the_order_is_page_aware() {
        for record in [1, 4096, AUTO_MAP_MAX_MEAN_RECORD] {
            assert_eq!(choose(record, 1000 * MB, Some(300 * MB)), AutoRead::Cold);
            assert_eq!(choose(record, 300 * MB + 1, Some(300 * MB)), AutoRead::Cold);
            // A page-aware walk reads whole pages through the map.
            assert_eq!(
                choose_in(record, 1000 * MB, Some(300 * MB), true),
                AutoRead::Mapped
            );
        }
        // Large records are cold beyond the memory in any order.
        assert_eq!(
            choose_in(
                AUTO_MAP_MAX_MEAN_RECORD + 1,
                1000 * MB,
                Some(300 * MB),
                true
            ),
            AutoRead::Cold
        );
    }

    #[test]
    fn the_reason_names_the_figures() {
        let (read, why) = choose_auto_read(AutoInputs {
            file_bytes: 100 * MB,
            records: 1000,
            files_bytes: 1000 * MB,
            memory: Some(300 * MB),
            page_aware: false,
        });
        assert_eq!(read, AutoRead::Cold);
        assert!(why.contains("100000 bytes on average"), "{why}");
        assert!(
            why.contains("beyond the 300000000 bytes of memory"),
            "{why}"
        );
        let (read, why) = choose_auto_read(AutoInputs {
            file_bytes: 4 * MB,
            records: 1000,
            files_bytes: 1000 * MB,
            memory: Some(300 * MB),
            page_aware: true,
        });
        assert_eq!(read, AutoRead::Mapped);
        assert!(why.contains("4000 bytes on average, at most"), "{why}");
        assert!(why.ends_with("; a page-aware order"), "{why}");
        let (read, why) = choose_auto_read(AutoInputs {
            file_bytes: 0,
            records: 0,
            files_bytes: 0,
            memory: None,
            page_aware: false,
        });
        assert_eq!((read, why.as_str()), (AutoRead::Pread, "no records"));
    }

    #[test]
    fn a_cold_file_reads_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let pread = PreadFile::open(&path).unwrap();
        // Three records of 100 KB among files far beyond any memory.
        let file = AutoFile::from_pread_among(pread, 3, u64::MAX, false);
        assert_eq!(file.choice(), AutoRead::Cold);
        assert!(file.reads_cold());
        assert!(!file.is_mapped());
        // The test's filesystem has O_DIRECT (see the direct backend's test).
        assert!(file.bypasses_page_cache());
        let mut buf = vec![0u8; 5000];
        super::super::read_exact_at(&file, &mut buf, 4093).unwrap();
        assert_eq!(buf, data[4093..9093]);
        assert_eq!(file.size(), 300_000);
    }

    #[test]
    fn small_records_beyond_any_memory_are_cold_but_for_a_page_aware_walk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let open = |page_aware| {
            let pread = PreadFile::open(&path).unwrap();
            // 300 records of 1 KB among files far beyond any memory.
            AutoFile::from_pread_among(pread, 300, u64::MAX, page_aware)
        };
        let cold = open(false);
        assert_eq!(cold.choice(), AutoRead::Cold);
        assert!(cold.reads_cold() && !cold.is_mapped() && cold.bypasses_page_cache());
        let mapped = open(true);
        assert_eq!(mapped.choice(), AutoRead::Mapped);
        assert!(!mapped.reads_cold() && !mapped.bypasses_page_cache());
        for file in [&cold, &mapped] {
            let mut buf = vec![0u8; 1000];
            super::super::read_exact_at(file, &mut buf, 12_345).unwrap();
            assert_eq!(buf, data[12_345..13_345]);
        }
    }
}
