//! The local tier of object storage (`cache_dir`): the bytes of URL objects that were
//! read, kept on local disk in whole aligned blocks of [`BLOCK_SIZE`], shared by every
//! process of the machine that names the same directory (DataLoader and Grain workers,
//! several jobs). [`cached_fs`](crate::storage::cached_fs) puts it in front of a
//! [`FileSystem`](crate::storage::remote::FileSystem); this module is the directory.
//!
//! On disk (docs/FORMAT.md §8), under `<cache_dir>/tfrecord-lirs-cache-1/`:
//!
//! * `<u>/CURRENT`: the identity of the object at URL `u` recorded when it was first
//!   fetched (`u` = the CRC-64/NVME of the URL, 16 hex digits): the URL, the size
//!   and the store's tag (ETag, version, last-modified).
//! * `<u>/<k>/`: the blocks of that object as it was with identity `k` (the
//!   CRC-64/NVME of the identity's text): `IDENTITY` (the text), `LOCK`, and one file
//!   per block `<i>` (decimal): the block's bytes, then their CRC-32C (u32 LE). Block `i`
//!   holds bytes `i * BLOCK_SIZE ..` (the last one is shorter). A rewritten object has
//!   another identity, so its old blocks are never served for it.
//! * `<u>/LISTING`: what pattern `u` matched when last listed (`listing.rs`).
//! * `.tmp-<i>-<pid>-<seq>`: a block being written, renamed to `<i>` once whole: a
//!   reader sees a whole block or none, and a killed writer leaves only a temporary
//!   file, which no reader opens and the next sweep removes.
//!
//! Every block is checked against its CRC the first time a process uses it; a block
//! that fails (torn, damaged) is deleted and fetched again, never served. One process
//! fetches a block at a time: the fetcher holds an OFD lock on byte `i` of `LOCK`
//! (`fcntl(F_OFD_SETLKW)`), the others wait on it and then read the block it wrote.
//!
//! Bounded in bytes: after a process writes blocks worth more than the room the last
//! sweep left, it sweeps the directory (one process at a time, `flock` on the root's
//! `LOCK`): the least recently used blocks are deleted until the total is 90% of the
//! bound. A block's use is stamped as its modification time when a process first uses
//! it. What other processes wrote since a process's last sweep is counted at its next
//! one, so the bound holds to within a few blocks a process.
//!
//! A full disk (or any failure to write the directory) never fails a read: the block is
//! served from the bytes fetched, not kept, and the process says so once on stderr.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::SystemTime;

use crate::error::{Error, Result};
use tfrecord_lirs_format::framing::crc32c;

use crate::storage::block_lock::BlockLock;

mod listing;
mod requests;
mod sweep;

/// The bytes of one block. 4 MiB: a request to an object store costs its latency
/// (tens of ms at first byte) whatever its size, and 4 MiB arrive in about as long at
/// ~100 MB/s a connection, so larger blocks add little but waiting, smaller ones add
/// requests (a cold epoch fetches each block once, whatever its size); 4 MiB is also
/// the largest merged GET of `cloud`, and 256 K files a TB keep a sweep cheap.
pub const BLOCK_SIZE: u64 = 4 << 20;

/// The directory of this layout under `cache_dir` (its version: another layout gets
/// another name, so an old directory is never misread).
pub const LAYOUT_DIR: &str = "tfrecord-lirs-cache-1";

/// Opened block files a process keeps (each block is checked once a process, then read
/// with `pread`); below the common 1024-descriptor soft limit with room to spare.
const OPEN_BLOCKS: usize = 256;

const TEMP_PREFIX: &str = ".tmp-";
const CURRENT: &str = "CURRENT";
const IDENTITY: &str = "IDENTITY";
/// The root's sweep lock (`flock`).
const LOCK: &str = "LOCK";

/// A cache directory as one process uses it.
pub struct BlockCache {
    root: PathBuf,
    max_bytes: AtomicU64,
    /// Block files opened and checked: (url hash, identity hash, block).
    open: Mutex<HashMap<(u64, u64, u64), Arc<File>>>,
    /// Blocks being fetched as requests, and the reads waiting on each.
    pending: requests::Pending,
    /// Bytes this process may still write before it sweeps (`None`: never swept yet).
    room: Mutex<Option<u64>>,
    said_unstored: AtomicBool,
    temp_seq: AtomicU64,
    stats: Counters,
    /// Test builds: writes of blocks fail as on a full disk.
    #[cfg(feature = "fault-injection")]
    disk_full: AtomicBool,
}

/// What one process's cache did (for tests and benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Blocks fetched from storage (by this process).
    pub fetched: u64,
    /// Blocks found damaged (deleted, then fetched again).
    pub damaged: u64,
    /// Blocks fetched but not kept (a full disk, a directory that cannot be written).
    pub unstored: u64,
    /// Blocks deleted by this process's sweeps.
    pub evicted: u64,
}

#[derive(Default)]
struct Counters {
    fetched: AtomicU64,
    damaged: AtomicU64,
    unstored: AtomicU64,
    evicted: AtomicU64,
}

pub(crate) fn hash(text: &str) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, text.as_bytes())
}

/// The text an object's identity is kept as (`CURRENT`, `IDENTITY`).
pub(crate) fn identity_text(url: &str, size: u64, tag: &str) -> String {
    format!("tfrecord-lirs cached object 1\nurl={url:?}\nsize={size}\ntag={tag:?}\n")
}

fn size_of_identity(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("size="))
        .and_then(|s| s.parse().ok())
}

fn url_line(url: &str) -> String {
    format!("\nurl={url:?}\n")
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("root", &self.root)
            .field("max_bytes", &self.max_bytes.load(Ordering::Relaxed))
            .finish()
    }
}

impl BlockCache {
    /// The cache in directory `dir` (created if missing) holding at most `max_bytes`
    /// bytes of blocks: one value per directory in a process (a second open of the same
    /// directory shares it and takes the new bound).
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Arc<BlockCache>> {
        static OPENED: OnceLock<Mutex<HashMap<PathBuf, Weak<BlockCache>>>> = OnceLock::new();
        if max_bytes == 0 {
            return Err(Error::invalid_argument(format!(
                "cache_bytes must be at least 1 (the cache {} would hold nothing)",
                dir.display()
            )));
        }
        let root = dir.join(LAYOUT_DIR);
        fs::create_dir_all(&root).map_err(|e| {
            Error::io(
                dir,
                io::Error::new(e.kind(), format!("cannot use it as cache_dir: {e}")),
            )
        })?;
        let root = root.canonicalize().map_err(|e| Error::io(&root, e))?;
        let mut opened = OPENED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(cache) = opened.get(&root).and_then(Weak::upgrade) {
            cache.max_bytes.store(max_bytes, Ordering::Relaxed);
            return Ok(cache);
        }
        let cache = Arc::new(BlockCache::new(root.clone(), max_bytes));
        opened.retain(|_, c| c.strong_count() > 0);
        opened.insert(root, Arc::downgrade(&cache));
        Ok(cache)
    }

    /// The cache in `dir` as a value of its own, sharing nothing (open blocks,
    /// counters) with this process's other values of it: as another process sees the
    /// directory.
    pub fn open_alone(dir: &Path, max_bytes: u64) -> Result<BlockCache> {
        let shared = BlockCache::open(dir, max_bytes)?;
        Ok(BlockCache::new(shared.root.clone(), max_bytes))
    }

    fn new(root: PathBuf, max_bytes: u64) -> BlockCache {
        BlockCache {
            root,
            max_bytes: AtomicU64::new(max_bytes),
            open: Mutex::new(HashMap::new()),
            pending: requests::Pending::default(),
            room: Mutex::new(None),
            said_unstored: AtomicBool::new(false),
            temp_seq: AtomicU64::new(0),
            stats: Counters::default(),
            #[cfg(feature = "fault-injection")]
            disk_full: AtomicBool::new(false),
        }
    }

    /// Test builds: from now on block writes fail with `ENOSPC` (`full`), or not.
    #[cfg(feature = "fault-injection")]
    pub fn set_test_disk_full(&self, full: bool) {
        self.disk_full.store(full, Ordering::Relaxed);
    }

    /// The layout's directory (`<cache_dir>/tfrecord-lirs-cache-1`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This process's counters.
    pub fn stats(&self) -> CacheStats {
        let c = &self.stats;
        CacheStats {
            fetched: c.fetched.load(Ordering::Relaxed),
            damaged: c.damaged.load(Ordering::Relaxed),
            unstored: c.unstored.load(Ordering::Relaxed),
            evicted: c.evicted.load(Ordering::Relaxed),
        }
    }

    fn url_dir(&self, url: &str) -> PathBuf {
        self.root.join(format!("{:016x}", hash(url)))
    }

    /// The identity recorded for `url` and its size, if any.
    pub(crate) fn recorded(&self, url: &str) -> Option<(String, u64)> {
        let text = fs::read_to_string(self.url_dir(url).join(CURRENT)).ok()?;
        // Another URL of the same hash: not this one's.
        if !text.contains(&url_line(url)) {
            return None;
        }
        let size = size_of_identity(&text)?;
        Some((text, size))
    }

    /// Records `text` as `url`'s identity (best effort: a cache that cannot record only
    /// costs a request at the next open).
    pub(crate) fn record(&self, url: &str, text: &str) {
        if self.recorded(url).is_some_and(|(t, _)| t == text) {
            return;
        }
        let dir = self.url_dir(url);
        if fs::create_dir_all(&dir).is_ok() {
            let _ = self.write_file(&dir, CURRENT, text.as_bytes());
        }
    }

    /// Forgets `url`'s identity: its next open asks the storage (it is being written).
    pub(crate) fn forget(&self, url: &str) {
        let _ = fs::remove_file(self.url_dir(url).join(CURRENT));
    }

    /// The blocks of `url` with identity `text` and size `size`.
    pub(crate) fn object(&self, url: &str, text: &str, size: u64) -> CachedBlocks {
        let (u, k) = (hash(url), hash(text));
        let dir = self.url_dir(url).join(format!("{k:016x}"));
        let blocks = size.div_ceil(BLOCK_SIZE);
        CachedBlocks {
            dir,
            key: (u, k),
            size,
            identity: text.to_string(),
            ready: AtomicBool::new(false),
            checked: (0..blocks).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Writes `bytes` as `dir/name` through a temporary file and a rename.
    fn write_file(&self, dir: &Path, name: &str, bytes: &[u8]) -> io::Result<File> {
        let temp = dir.join(format!(
            "{TEMP_PREFIX}{name}-{}-{}",
            std::process::id(),
            self.temp_seq.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            #[cfg(feature = "fault-injection")]
            if self.disk_full.load(Ordering::Relaxed) {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&temp)?;
            file.write_all(bytes)?;
            fs::rename(&temp, dir.join(name))?;
            Ok(file)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }

    /// Block `i` of `obj`, fetched with `fetch` (which fills the block's bytes) if no
    /// process has it yet.
    pub(crate) fn block(
        &self,
        obj: &CachedBlocks,
        i: u64,
        fetch: impl FnOnce(&mut [u8]) -> io::Result<()>,
    ) -> io::Result<Block> {
        if let Some(block) = self.local_block(obj, i) {
            return Ok(block);
        }
        let len = obj.block_len(i);
        // Missing or damaged: fetched by one process at a time.
        let lock = match self.lock_block(obj, i) {
            Ok(lock) => lock,
            Err(e) => return self.unstored(&obj.dir, e, len, fetch),
        };
        if let Some(block) = self.fetched_meanwhile(obj, i) {
            return Ok(block);
        }
        let mut bytes = vec![0u8; len as usize + 4];
        fetch(&mut bytes[..len as usize])?;
        Ok(self.store(obj, i, bytes, lock))
    }

    /// Block `i` of `obj` if some process has it whole in the directory (no fetch).
    pub(crate) fn local_block(&self, obj: &CachedBlocks, i: u64) -> Option<Block> {
        let key = obj.block_key(i);
        if let Some(file) = self.open_lock().get(&key) {
            return Some(Block::File(Arc::clone(file)));
        }
        let path = obj.dir.join(i.to_string());
        let checked = &obj.checked[i as usize];
        if checked.load(Ordering::Relaxed) {
            if let Ok(file) = File::open(&path) {
                return Some(self.keep(key, file));
            }
        }
        if let Ok(Some(file)) = self.check(&path, obj.block_len(i)) {
            checked.store(true, Ordering::Relaxed);
            return Some(self.keep(key, file));
        }
        None
    }

    /// With block `i`'s lock held: the block if another process fetched it while this
    /// one waited for the lock (a damaged one is deleted, to be fetched again).
    fn fetched_meanwhile(&self, obj: &CachedBlocks, i: u64) -> Option<Block> {
        let path = obj.dir.join(i.to_string());
        match self.check(&path, obj.block_len(i)) {
            Ok(Some(file)) => {
                obj.checked[i as usize].store(true, Ordering::Relaxed);
                Some(self.keep(obj.block_key(i), file))
            }
            Ok(None) => None,
            Err(()) => {
                self.stats.damaged.fetch_add(1, Ordering::Relaxed);
                let _ = fs::remove_file(&path);
                None
            }
        }
    }

    /// Keeps block `i`'s fetched `bytes` (its length, then 4 bytes for the CRC) and
    /// releases its `lock` once the block is whole in the directory; a block that
    /// cannot be written is served from `bytes`, unkept.
    fn store(&self, obj: &CachedBlocks, i: u64, mut bytes: Vec<u8>, lock: BlockLock) -> Block {
        let len = obj.block_len(i);
        self.stats.fetched.fetch_add(1, Ordering::Relaxed);
        let crc = crc32c(&bytes[..len as usize]);
        bytes[len as usize..].copy_from_slice(&crc.to_le_bytes());
        match self.write_file(&obj.dir, &i.to_string(), &bytes) {
            Ok(file) => {
                obj.checked[i as usize].store(true, Ordering::Relaxed);
                drop(lock);
                self.wrote(len + 4);
                self.keep(obj.block_key(i), file)
            }
            Err(e) => {
                bytes.truncate(len as usize);
                self.say_unstored(&obj.dir, &e);
                Block::Bytes(bytes.into())
            }
        }
    }

    /// Block `i`'s lock in `obj`'s directory, made first if needed. A sweep removes a
    /// directory whose last block it evicted (while no block's lock is held), so a
    /// directory made before may be gone: then it is made again (a few times: each
    /// removal needs a sweep to evict the object's every block in between).
    fn lock_block(&self, obj: &CachedBlocks, i: u64) -> io::Result<BlockLock> {
        let mut attempts = 0;
        loop {
            let lock = obj
                .prepare(self)
                .and_then(|()| BlockLock::acquire(&obj.dir, i));
            match lock {
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                    attempts += 1;
                    obj.ready.store(false, Ordering::Relaxed);
                }
                other => return other,
            }
        }
    }

    /// Every block file of `obj`, each of its block's length and CRC, for mapping;
    /// `None` if one is missing (the reads that need it fetch it).
    pub(crate) fn block_files(&self, obj: &CachedBlocks) -> Option<Vec<File>> {
        (0..obj.checked.len() as u64)
            .map(|i| {
                let file = File::open(obj.dir.join(i.to_string())).ok()?;
                let len = file.metadata().ok()?.len();
                (len == obj.block_len(i) + 4).then_some(file)
            })
            .collect()
    }

    /// Checks the blocks of `obj` as mapped (`bytes`, from `files`) against their CRCs
    /// (as [`block`](Self::block) does at first use, without copying them out), and
    /// stamps them as used; `false` if one fails (then the reads go block by block,
    /// which fetches it again).
    pub(crate) fn check_mapped(&self, obj: &CachedBlocks, bytes: &[u8], files: &[File]) -> bool {
        files.iter().enumerate().all(|(i, file)| {
            let len = obj.block_len(i as u64);
            let at = i * BLOCK_SIZE as usize;
            let mut crc = [0u8; 4];
            let ok = file.read_exact_at(&mut crc, len).is_ok()
                && crc32c(&bytes[at..at + len as usize]).to_le_bytes() == crc;
            if ok {
                obj.checked[i].store(true, Ordering::Relaxed);
                let _ = file.set_modified(SystemTime::now());
            }
            ok
        })
    }

    fn open_lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64, u64), Arc<File>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `file` open for the next reads of its block (forgetting one at random when
    /// full).
    fn keep(&self, key: (u64, u64, u64), file: File) -> Block {
        let file = Arc::new(file);
        let mut open = self.open_lock();
        if open.len() >= OPEN_BLOCKS {
            if let Some(k) = open.keys().next().copied() {
                open.remove(&k);
            }
        }
        open.insert(key, Arc::clone(&file));
        Block::File(file)
    }

    /// The block file at `path` if it is whole and its CRC matches (stamped as used
    /// now); `Ok(None)` if there is none; `Err(())` if it is damaged.
    fn check(&self, path: &Path, len: u64) -> std::result::Result<Option<File>, ()> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(_) => return Ok(None),
        };
        let mut bytes = Vec::with_capacity(len as usize + 4);
        if file.read_to_end(&mut bytes).is_err() || bytes.len() as u64 != len + 4 {
            return Err(());
        }
        let (data, crc) = bytes.split_at(len as usize);
        if crc32c(data).to_le_bytes() != crc {
            return Err(());
        }
        // The access stamp eviction goes by (best effort: another user's file).
        let _ = file.set_modified(SystemTime::now());
        Ok(Some(file))
    }

    /// Serves a block fetched while the directory cannot be used (`why`), unkept.
    fn unstored(
        &self,
        dir: &Path,
        why: io::Error,
        len: u64,
        fetch: impl FnOnce(&mut [u8]) -> io::Result<()>,
    ) -> io::Result<Block> {
        let mut bytes = vec![0u8; len as usize];
        fetch(&mut bytes)?;
        self.stats.fetched.fetch_add(1, Ordering::Relaxed);
        self.say_unstored(dir, &why);
        Ok(Block::Bytes(bytes.into()))
    }

    fn say_unstored(&self, dir: &Path, why: &io::Error) {
        self.stats.unstored.fetch_add(1, Ordering::Relaxed);
        if !self.said_unstored.swap(true, Ordering::Relaxed) {
            let full = matches!(
                why.kind(),
                io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
            );
            eprintln!(
                "tfrecord-lirs: cache_dir {}: cannot keep blocks in {} ({why}){}; they are \
                 read from storage without being kept (said once)",
                self.root.display(),
                dir.display(),
                if full { ", the disk is full" } else { "" }
            );
        }
    }

    /// Counts `bytes` written; sweeps once they exceed the room the last sweep left.
    fn wrote(&self, bytes: u64) {
        let mut room = self.room.lock().unwrap_or_else(|p| p.into_inner());
        match room.as_mut() {
            Some(r) if *r >= bytes => *r -= bytes,
            _ => *room = self.sweep(),
        }
    }
}

/// A block's bytes: its checked file, or (when it could not be kept) the bytes.
#[derive(Clone)]
pub(crate) enum Block {
    File(Arc<File>),
    Bytes(Arc<[u8]>),
}

impl Block {
    /// Reads into `buf` from byte `at` of the block; returns the bytes read.
    pub(crate) fn read(&self, buf: &mut [u8], at: u64, len: u64) -> io::Result<usize> {
        let n = buf.len().min(len.saturating_sub(at) as usize);
        match self {
            Block::File(file) => file.read_exact_at(&mut buf[..n], at)?,
            Block::Bytes(bytes) => buf[..n].copy_from_slice(&bytes[at as usize..at as usize + n]),
        }
        Ok(n)
    }
}

/// The blocks of one object (one identity) in a cache.
pub(crate) struct CachedBlocks {
    dir: PathBuf,
    key: (u64, u64),
    size: u64,
    identity: String,
    /// The directory and its `IDENTITY` were made (by this process's first fetch, or
    /// again after a sweep removed them).
    ready: AtomicBool,
    /// Blocks this process has checked.
    checked: Vec<AtomicBool>,
}

impl CachedBlocks {
    /// The object's size.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The identity's text.
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    fn block_key(&self, i: u64) -> (u64, u64, u64) {
        (self.key.0, self.key.1, i)
    }

    /// The bytes of block `i`.
    pub(crate) fn block_len(&self, i: u64) -> u64 {
        (self.size - i * BLOCK_SIZE).min(BLOCK_SIZE)
    }

    /// Whether every block is in the directory (no request needed to read it).
    pub(crate) fn all_local(&self) -> bool {
        (0..self.checked.len() as u64).all(|i| self.dir.join(i.to_string()).is_file())
    }

    /// Makes the object's directory with its `IDENTITY`.
    fn prepare(&self, cache: &BlockCache) -> io::Result<()> {
        if self.ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)?;
        let id = self.dir.join(IDENTITY);
        if fs::read_to_string(&id).ok().as_deref() != Some(self.identity.as_str()) {
            cache.write_file(&self.dir, IDENTITY, self.identity.as_bytes())?;
        }
        self.ready.store(true, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_keeps_the_temporary_file_of_a_live_writer() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open_alone(dir.path(), 1 << 30).unwrap();
        let obj = cache.object("s3://b/x", &identity_text("s3://b/x", 10, "v1"), 10);
        obj.prepare(&cache).unwrap();
        let temp = obj.dir.join(".tmp-0-1-0");
        fs::write(&temp, b"half a block").unwrap();
        // Block 0's writer is alive (holds its lock): its file stays.
        let lock = BlockLock::acquire(&obj.dir, 0).unwrap();
        assert!(cache.sweep().is_some());
        assert!(temp.exists());
        // Gone: swept.
        drop(lock);
        assert!(cache.sweep().is_some());
        assert!(!temp.exists());
        // A block written meanwhile is read back whole.
        let block = cache.block(&obj, 0, |b| {
            b.copy_from_slice(b"0123456789");
            Ok(())
        });
        let mut buf = [0u8; 10];
        block.unwrap().read(&mut buf, 0, 10).unwrap();
        assert_eq!(&buf, b"0123456789");
    }
}
