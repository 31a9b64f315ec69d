//! Offset tables read where they lie, not loaded whole: a large local table is mapped
//! under a read lease (the [`leased`](super::leased) map the default backend uses for
//! data, so a table truncated or rewritten under it is revoked before the kernel lets
//! that happen, never a `SIGBUS`) and shared through the page cache by every process
//! on the host that reads it; a revoked map, or a table no lease can be had on, is read
//! with positioned reads, entry by entry; a small table is held in memory. A table read
//! through a file system ([`remote`](crate::remote): object storage, TensorFlow's file
//! systems) is read in blocks on demand, the blocks kept in a small bounded cache.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::leased::{Entered, LeasedMap};
use super::{read_exact_at, PreadFile};
use crate::storage::ReadAt;

/// Tables of at most this many bytes are read into memory at open rather than mapped:
/// 64 KiB (8,192 entries) cost one read, while a map costs a lease, a second open file
/// and a poll of the lease watcher (~50 us of its interval per lease) for as long as the
/// table is open. 1,000 such files hold at most 64 MiB.
pub const TABLE_IN_MEMORY_MAX_BYTES: u64 = 64 * 1024;

/// The bound [`OffsetTable::open_local`] and the reader use: [`TABLE_IN_MEMORY_MAX_BYTES`]
/// unless [`set_table_in_memory_max_bytes`] changed it.
static IN_MEMORY_MAX_BYTES: AtomicU64 = AtomicU64::new(TABLE_IN_MEMORY_MAX_BYTES);

/// For fuzzing and tests only: tables of at most `bytes` are held in memory (and checked
/// whole at open) from now on, in this whole process, instead of
/// [`TABLE_IN_MEMORY_MAX_BYTES`] (0: every non-empty table is mapped, or read in
/// blocks, and checked as it is read). Returns the bound before.
#[doc(hidden)]
pub fn set_table_in_memory_max_bytes(bytes: u64) -> u64 {
    IN_MEMORY_MAX_BYTES.swap(bytes, Ordering::Relaxed)
}

/// Tables of at most this many bytes are held in memory (see
/// [`TABLE_IN_MEMORY_MAX_BYTES`]).
pub fn table_in_memory_max_bytes() -> u64 {
    IN_MEMORY_MAX_BYTES.load(Ordering::Relaxed)
}

/// Entries per block of a table read in blocks ([`OffsetTable::read_in_blocks`]): 64 KiB,
/// one ranged read. A page-aware unit's entries (a page's worth of instances) are in
/// one block, so a unit costs one table read at most.
pub const TABLE_BLOCK_ENTRIES: u64 = 8192;

/// Blocks of one table read in blocks that are kept: 16 × 64 KiB = 1 MiB per table,
/// the least recently used dropped first.
pub const TABLE_CACHED_BLOCKS: usize = 16;

/// The entries of one offset table (little-endian `u64`s), wherever they are kept.
/// Every entry is read through [`OffsetTable::view`] (a slice, while the table is
/// mapped or in memory) or [`OffsetTable::read_into`]; nothing here checks that the
/// entries make sense: the reader checks those it uses.
pub struct OffsetTable {
    /// Whole entries: the table's bytes / 8 (a partial last entry is not one).
    len: u64,
    /// The table file's size in bytes.
    byte_len: u64,
    store: Store,
}

enum Store {
    /// Held in memory.
    Memory(Vec<u64>),
    /// Mapped under a read lease; read with `pread` of the map's own open file once
    /// the map is revoked (one open file per table).
    Leased(Arc<LeasedMap>),
    /// Read with positioned reads (no lease to be had).
    Read(Box<dyn ReadAt>),
    /// A source that maps itself ([`ReadAt::mapped`]: an object a local tier holds),
    /// its map's bytes the entries.
    Mapped(Box<dyn ReadAt>),
    /// Read in blocks of [`TABLE_BLOCK_ENTRIES`] through `src`, the last
    /// [`TABLE_CACHED_BLOCKS`] used kept.
    Blocks {
        src: Box<dyn ReadAt>,
        cache: Mutex<BlockCache>,
    },
}

/// The blocks of a table read in blocks that are kept, with when each was last used.
#[derive(Default)]
struct BlockCache {
    /// (block index, its entries, last use).
    blocks: Vec<(u64, Arc<[u64]>, u64)>,
    clock: u64,
}

impl BlockCache {
    fn get(&mut self, block: u64) -> Option<Arc<[u64]>> {
        self.clock += 1;
        let clock = self.clock;
        let found = self.blocks.iter_mut().find(|(b, _, _)| *b == block)?;
        found.2 = clock;
        Some(Arc::clone(&found.1))
    }

    fn put(&mut self, block: u64, entries: Arc<[u64]>) {
        self.clock += 1;
        if self.blocks.iter().any(|(b, _, _)| *b == block) {
            return;
        }
        if self.blocks.len() >= TABLE_CACHED_BLOCKS {
            if let Some(oldest) = (0..self.blocks.len()).min_by_key(|&i| self.blocks[i].2) {
                self.blocks.swap_remove(oldest);
            }
        }
        self.blocks.push((block, entries, self.clock));
    }
}

impl std::fmt::Debug for OffsetTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.store {
            Store::Memory(_) => "memory",
            Store::Leased(_) => "leased map",
            Store::Read(_) => "positioned reads",
            Store::Mapped(_) => "the source's map",
            Store::Blocks { .. } => "blocks",
        };
        f.debug_struct("OffsetTable")
            .field("len", &self.len)
            .field("store", &kind)
            .finish()
    }
}

/// An offset table's entries as a slice, valid while this view lives (see
/// [`OffsetTable::view`]).
pub struct TableView<'a>(ViewOf<'a>);

enum ViewOf<'a> {
    Memory(&'a [u64]),
    /// Inside the leased map (`_inside` keeps it mapped and unchanged), its first
    /// entries as words.
    Leased {
        _inside: Entered<'a>,
        words: &'a [u64],
    },
}

impl std::ops::Deref for TableView<'_> {
    type Target = [u64];
    #[inline]
    fn deref(&self) -> &[u64] {
        match &self.0 {
            ViewOf::Memory(words) => words,
            ViewOf::Leased { words, .. } => words,
        }
    }
}

impl OffsetTable {
    /// A table held in memory.
    pub fn in_memory(entries: Vec<u64>) -> OffsetTable {
        OffsetTable {
            len: entries.len() as u64,
            byte_len: entries.len() as u64 * 8,
            store: Store::Memory(entries),
        }
    }

    /// Opens the local table at `path`: read into memory if it is at most
    /// [`TABLE_IN_MEMORY_MAX_BYTES`], else mapped under a read lease, else (no lease)
    /// read entry by entry on demand.
    pub fn open_local(path: &Path) -> io::Result<OffsetTable> {
        let file = File::open(path)?;
        let byte_len = file.metadata()?.len();
        let len = byte_len / 8;
        if byte_len <= table_in_memory_max_bytes() {
            let mut bytes = vec![0u8; byte_len as usize];
            let pread = PreadFile::from_file(file, byte_len);
            read_exact_at(&pread, &mut bytes, 0)?;
            let entries = bytes
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            return Ok(OffsetTable {
                len,
                byte_len,
                store: Store::Memory(entries),
            });
        }
        // The lease is held by the open file description, which the duplicate shares:
        // `file` itself is closed once the map holds its duplicate.
        let map = file
            .try_clone()
            .ok()
            .and_then(LeasedMap::from_file)
            // The map was taken under the lease and can only be longer than the size
            // seen before it if the table grew meanwhile: its first `len` entries are
            // the ones served.
            .filter(|map| {
                map.enter()
                    .is_some_and(|inside| inside.len() as u64 >= byte_len)
            });
        let store = match map {
            Some(map) => Store::Leased(map),
            None => Store::Read(Box::new(PreadFile::from_file(file, byte_len))),
        };
        Ok(OffsetTable {
            len,
            byte_len,
            store,
        })
    }

    /// A table read through `src` (e.g. an object read through its file system), entry
    /// by entry on demand.
    pub fn read_from(src: Box<dyn ReadAt>) -> OffsetTable {
        let byte_len = src.size();
        OffsetTable {
            len: byte_len / 8,
            byte_len,
            store: Store::Read(src),
        }
    }

    /// A table read from `src`'s own map ([`ReadAt::mapped`]), or `src` itself back
    /// if it has none.
    pub fn mapped_source(
        src: Box<dyn ReadAt>,
    ) -> std::result::Result<OffsetTable, Box<dyn ReadAt>> {
        let byte_len = src.size();
        match src.mapped() {
            Some(bytes) if words_of(bytes, byte_len / 8).is_some() => Ok(OffsetTable {
                len: byte_len / 8,
                byte_len,
                store: Store::Mapped(src),
            }),
            _ => Err(src),
        }
    }

    /// A table read through `src` in blocks on demand (see [`TABLE_BLOCK_ENTRIES`],
    /// [`TABLE_CACHED_BLOCKS`]): for a high-latency source (an object in a bucket),
    /// where a read per entry would cost a request each.
    pub fn read_in_blocks(src: Box<dyn ReadAt>) -> OffsetTable {
        let byte_len = src.size();
        OffsetTable {
            len: byte_len / 8,
            byte_len,
            store: Store::Blocks {
                src,
                cache: Mutex::new(BlockCache::default()),
            },
        }
    }

    /// Whole entries.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The table file's size in bytes (not a multiple of 8 in a damaged table).
    pub fn byte_len(&self) -> u64 {
        self.byte_len
    }

    /// Whether the entries are held in memory (a small table).
    pub fn is_in_memory(&self) -> bool {
        matches!(self.store, Store::Memory(_))
    }

    /// Whether the entries are read from a map now (false once the map was revoked).
    pub fn is_mapped(&self) -> bool {
        matches!(&self.store, Store::Leased(map) if !map.is_revoked())
    }

    /// The entries as a slice while the view lives, if they are in memory, or mapped
    /// now on a little-endian host (a map's bytes are the entries there).
    #[inline]
    pub fn view(&self) -> Option<TableView<'_>> {
        match &self.store {
            Store::Memory(words) => Some(TableView(ViewOf::Memory(words))),
            Store::Leased(map) => leased_words(map.enter(), self.len),
            Store::Mapped(src) => src
                .mapped()
                .and_then(|bytes| words_of(bytes, self.len))
                .map(|words| TableView(ViewOf::Memory(words))),
            Store::Read(_) | Store::Blocks { .. } => None,
        }
    }

    /// Entry `i`.
    pub fn get(&self, i: u64) -> io::Result<u64> {
        let mut one = [0u64; 1];
        self.read_into(i, &mut one)?;
        Ok(one[0])
    }

    /// Fills `out` with the entries from `first` on; reading past the last entry is an
    /// [`UnexpectedEof`](io::ErrorKind::UnexpectedEof) error (so is a table that shrank
    /// since it was opened).
    pub fn read_into(&self, first: u64, out: &mut [u64]) -> io::Result<()> {
        let end = first.checked_add(out.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "entries {first}..+{} of a table of {} entries",
                    out.len(),
                    self.len
                ),
            ));
        }
        let revoked;
        let src: &dyn ReadAt = match &self.store {
            Store::Memory(words) => {
                let at = first as usize;
                out.copy_from_slice(&words[at..at + out.len()]);
                return Ok(());
            }
            Store::Leased(map) => match leased_words(map.enter(), self.len) {
                Some(view) => {
                    let at = first as usize;
                    out.copy_from_slice(&view[at..at + out.len()]);
                    return Ok(());
                }
                None => {
                    revoked = RevokedMap(map.file());
                    &revoked
                }
            },
            Store::Mapped(src) => match self.view() {
                Some(view) => {
                    let at = first as usize;
                    out.copy_from_slice(&view[at..at + out.len()]);
                    return Ok(());
                }
                None => &**src,
            },
            Store::Read(src) => &**src,
            Store::Blocks { src, cache } => {
                return self.read_blocks(&**src, cache, first, out);
            }
        };
        let mut bytes = [0u8; 8 * 64];
        let mut done = 0usize;
        while done < out.len() {
            let n = (out.len() - done).min(64);
            let buf = &mut bytes[..n * 8];
            read_exact_at(src, buf, (first + done as u64) * 8)?;
            for (slot, b) in out[done..done + n].iter_mut().zip(buf.chunks_exact(8)) {
                *slot = u64::from_le_bytes(b.try_into().unwrap_or_default());
            }
            done += n;
        }
        Ok(())
    }
}

/// The open file of a revoked map, read with `pread`.
struct RevokedMap<'a>(&'a File);

impl ReadAt for RevokedMap<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self.0, buf, offset)
    }

    fn size(&self) -> u64 {
        self.0.metadata().map_or(0, |m| m.len())
    }
}

/// How the format's layout reads a table's entries (the inherent methods, wherever
/// the table lies).
impl tfrecord_lirs_format::layout::Offsets for OffsetTable {
    type Error = io::Error;
    type View<'a> = TableView<'a>;

    fn len(&self) -> u64 {
        OffsetTable::len(self)
    }

    #[inline]
    fn view(&self) -> Option<TableView<'_>> {
        OffsetTable::view(self)
    }

    fn get(&self, i: u64) -> io::Result<u64> {
        OffsetTable::get(self, i)
    }

    fn read_into(&self, first: u64, out: &mut [u64]) -> io::Result<()> {
        OffsetTable::read_into(self, first, out)
    }
}

impl OffsetTable {
    /// [`OffsetTable::read_into`] for a table read in blocks: each block `out` overlaps
    /// from the cache, or read whole (one read) and kept.
    fn read_blocks(
        &self,
        src: &dyn ReadAt,
        cache: &Mutex<BlockCache>,
        first: u64,
        out: &mut [u64],
    ) -> io::Result<()> {
        let mut done = 0usize;
        while done < out.len() {
            let at = first + done as u64;
            let block = at / TABLE_BLOCK_ENTRIES;
            // A poisoned lock only means another reader panicked mid-update: the cache
            // holds whole blocks or none, so it is still right.
            let cached = cache.lock().unwrap_or_else(|e| e.into_inner()).get(block);
            let entries = match cached {
                Some(entries) => entries,
                None => {
                    let lo = block * TABLE_BLOCK_ENTRIES;
                    let n = (self.len - lo).min(TABLE_BLOCK_ENTRIES) as usize;
                    let mut bytes = vec![0u8; n * 8];
                    read_exact_at(src, &mut bytes, lo * 8)?;
                    let entries: Arc<[u64]> = bytes
                        .chunks_exact(8)
                        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                        .collect();
                    cache
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .put(block, Arc::clone(&entries));
                    entries
                }
            };
            let from = (at % TABLE_BLOCK_ENTRIES) as usize;
            let n = (entries.len() - from).min(out.len() - done);
            out[done..done + n].copy_from_slice(&entries[from..from + n]);
            done += n;
        }
        Ok(())
    }
}

/// The first `len` entries of the map `inside` as words, if the host is little-endian
/// and the map is aligned for `u64` (a map starts on a page, so it is).
#[inline]
fn leased_words(inside: Option<Entered<'_>>, len: u64) -> Option<TableView<'_>> {
    let inside = inside?;
    if cfg!(target_endian = "big") {
        return None;
    }
    let bytes_len = usize::try_from(len).ok()?.checked_mul(8)?;
    if inside.len() < bytes_len || inside.as_ptr().align_offset(std::mem::align_of::<u64>()) != 0 {
        return None;
    }
    // SAFETY: the pointer is 8-aligned (checked above) and the map holds at least
    // `bytes_len` bytes (checked above), readable for as long as `inside` keeps this
    // reader inside the map, i.e. as long as the view that owns both lives (the words
    // are handed out only through `Deref` on the view, so no borrow of them outlives
    // it); while inside, the lease keeps every writer and truncation of the table
    // blocked, so the bytes do not change. Every bit pattern is a valid `u64`, and on
    // this little-endian host the table's little-endian entries are its words.
    let words = unsafe { std::slice::from_raw_parts(inside.as_ptr().cast::<u64>(), bytes_len / 8) };
    Some(TableView(ViewOf::Leased {
        _inside: inside,
        words,
    }))
}

/// The first `len` entries of a table whose bytes are `bytes` (a map), as words;
/// `None` on a big-endian host, or if they are short or not 8-aligned.
fn words_of(bytes: &[u8], len: u64) -> Option<&[u64]> {
    if cfg!(target_endian = "big") {
        return None;
    }
    let bytes_len = usize::try_from(len).ok()?.checked_mul(8)?;
    if bytes.len() < bytes_len || bytes.as_ptr().align_offset(std::mem::align_of::<u64>()) != 0 {
        return None;
    }
    // SAFETY: the pointer is 8-aligned and `bytes` holds at least `bytes_len` bytes
    // (both checked above), borrowed for the result's lifetime; every bit pattern is a
    // valid `u64`, and on this little-endian host the table's entries are its words.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<u64>(), bytes_len / 8) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, entries: impl IntoIterator<Item = u64>) {
        let bytes: Vec<u8> = entries.into_iter().flat_map(u64::to_le_bytes).collect();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_large_table_is_mapped_and_read_as_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.offsets");
        let n = TABLE_IN_MEMORY_MAX_BYTES / 8 * 3 + 5;
        write(&path, (0..n).map(|i| i * 40));
        let table = OffsetTable::open_local(&path).unwrap();
        assert_eq!(table.len(), n);
        assert!(table.is_mapped(), "{table:?}: no lease on our own file?");
        let view = table.view().expect("mapped, little-endian");
        assert_eq!(view.len() as u64, n);
        assert_eq!(view[n as usize - 1], (n - 1) * 40);
        let mut some = [0u64; 100];
        table.read_into(n - 100, &mut some).unwrap();
        assert_eq!(some[99], (n - 1) * 40);
        let past = table.read_into(n - 1, &mut [0u64; 2]).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_small_table_is_in_memory_and_a_partial_entry_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.offsets");
        let mut bytes: Vec<u8> = [0u64, 30, 60]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&path, bytes).unwrap();
        let table = OffsetTable::open_local(&path).unwrap();
        assert_eq!((table.len(), table.byte_len()), (3, 27));
        assert!(!table.is_mapped());
        assert_eq!(&*table.view().unwrap(), &[0, 30, 60]);
        assert_eq!(table.get(2).unwrap(), 60);
    }

    /// A table truncated under its map: the truncation waits for the watcher to revoke
    /// the map (no `SIGBUS`), then entries are read with `pread`, and those that are
    /// gone are an `UnexpectedEof` error.
    #[test]
    fn a_table_truncated_while_mapped_reads_as_an_error_not_a_signal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.offsets");
        let n = TABLE_IN_MEMORY_MAX_BYTES / 8 * 4;
        write(&path, (0..n).map(|i| i * 17));
        let table = OffsetTable::open_local(&path).unwrap();
        assert!(table.is_mapped());
        // Blocks until the lease is broken and the map revoked.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(8 * 10)
            .unwrap();
        assert!(!table.is_mapped());
        assert!(table.view().is_none());
        assert_eq!(table.get(9).unwrap(), 9 * 17);
        let gone = table.get(n - 1).unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::UnexpectedEof);
    }

    /// Counts the reads of a source.
    struct Counted(PreadFile, Arc<std::sync::atomic::AtomicUsize>);

    impl ReadAt for Counted {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.read_at(buf, offset)
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
    }

    #[test]
    fn a_table_read_in_blocks_reads_each_block_once_while_it_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.offsets");
        let n = TABLE_BLOCK_ENTRIES * (TABLE_CACHED_BLOCKS as u64 + 4) + 7;
        write(&path, (0..n).map(|i| i * 5));
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let src = Counted(PreadFile::open(&path).unwrap(), Arc::clone(&reads));
        let table = OffsetTable::read_in_blocks(Box::new(src));
        assert_eq!(table.len(), n);
        assert!(table.view().is_none());
        // Every entry, one at a time: one read per block.
        for i in 0..n {
            assert_eq!(table.get(i).unwrap(), i * 5);
        }
        let blocks = n.div_ceil(TABLE_BLOCK_ENTRIES) as usize;
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), blocks);
        // A range across a block boundary, from blocks still cached: no read.
        let mut two = [0u64; 2];
        table.read_into(n - 8, &mut two).unwrap();
        table
            .read_into(TABLE_BLOCK_ENTRIES * 19 - 1, &mut two)
            .unwrap();
        assert_eq!(
            two,
            [
                (TABLE_BLOCK_ENTRIES * 19 - 1) * 5,
                TABLE_BLOCK_ENTRIES * 19 * 5
            ]
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), blocks);
        // Block 0 was dropped (least recently used): read again.
        assert_eq!(table.get(3).unwrap(), 15);
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), blocks + 1);
        let past = table.get(n).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_table_read_from_a_source_reads_entries_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.offsets");
        write(&path, (0..1000).map(|i| i * 3));
        let src = PreadFile::open(&path).unwrap();
        let table = OffsetTable::read_from(Box::new(src));
        assert!(table.view().is_none());
        let mut out = vec![0u64; 300];
        table.read_into(650, &mut out).unwrap();
        assert_eq!((out[0], out[299]), (650 * 3, 949 * 3));
    }
}
