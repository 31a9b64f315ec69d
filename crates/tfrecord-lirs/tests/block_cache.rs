//! The local tier (`cache_dir`): objects read through a [`CachedFileSystem`] over a
//! store that counts every request (HEAD and ranged GET) and can refuse them all. Cold
//! then warm reads give the same bytes; a fully local object reads with every request
//! refused; a damaged block is fetched again, never served; a rewritten object is not
//! served from the old one's blocks; two readers of one object fetch each block once;
//! the byte bound evicts; a killed writer's temporary file is ignored and swept. Each
//! test has its own directory and store (a value of its own, [`BlockCache::open_alone`]
//! where a test plays several processes).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tfrecord_lirs::block_cache::{BlockCache, BLOCK_SIZE, LAYOUT_DIR};
use tfrecord_lirs::cached_fs::CachedFileSystem;
use tfrecord_lirs::remote::{Durability, FileSystem, RemoteWrite};
use tfrecord_lirs::ReadAt;

/// Objects in memory, each with a version tag; counts requests.
/// Each object's bytes and tag, by URL.
type Objects = HashMap<String, (Arc<Vec<u8>>, u64)>;

#[derive(Default)]
struct Store {
    objects: Mutex<Objects>,
    heads: AtomicU64,
    /// Every GET: (url, start).
    gets: Mutex<Vec<(String, u64)>>,
    refuse: AtomicBool,
    tags: AtomicU64,
}

impl Store {
    fn put(&self, url: &str, bytes: Vec<u8>) {
        let tag = self.tags.fetch_add(1, Ordering::Relaxed);
        self.objects
            .lock()
            .unwrap()
            .insert(url.to_string(), (Arc::new(bytes), tag));
    }

    fn current(&self, url: &str) -> io::Result<(Arc<Vec<u8>>, u64)> {
        if self.refuse.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "the store is gone",
            ));
        }
        self.objects
            .lock()
            .unwrap()
            .get(url)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, url.to_string()))
    }

    fn requests(&self) -> u64 {
        self.heads.load(Ordering::Relaxed) + self.gets.lock().unwrap().len() as u64
    }

    fn gets_of(&self, url: &str) -> Vec<u64> {
        let mut starts: Vec<u64> = self
            .gets
            .lock()
            .unwrap()
            .iter()
            .filter(|(u, _)| u == url)
            .map(|(_, s)| *s)
            .collect();
        starts.sort_unstable();
        starts
    }
}

/// An object opened (HEAD): its size and tag then; reads the object as it is now.
struct Object {
    store: Arc<Store>,
    url: String,
    size: u64,
    tag: u64,
}

impl ReadAt for Object {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let (bytes, _) = self.store.current(&self.url)?;
        self.store
            .gets
            .lock()
            .unwrap()
            .push((self.url.clone(), offset));
        let from = (offset as usize).min(bytes.len());
        let n = buf.len().min(bytes.len() - from);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        Ok(n)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn identity(&self) -> Option<String> {
        Some(format!("v{}", self.tag))
    }
}

struct Fs(Arc<Store>);

impl FileSystem for Fs {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        let (bytes, tag) = self.0.current(url)?;
        self.0.heads.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(Object {
            store: Arc::clone(&self.0),
            url: url.to_string(),
            size: bytes.len() as u64,
            tag,
        }))
    }
    fn create(&self, _: &str) -> io::Result<Box<dyn RemoteWrite>> {
        Err(io::Error::other("not written here"))
    }
    fn rename(&self, _: &str, _: &str) -> io::Result<()> {
        Err(io::Error::other("not renamed here"))
    }
    fn delete(&self, _: &str) -> io::Result<()> {
        Err(io::Error::other("not deleted here"))
    }
    fn durability(&self, _: &str) -> Durability {
        Durability::WholeObject
    }
}

const URL: &str = "s3://bucket/data/train-0.tfrecord";

/// Bytes that differ at every block (`seed` makes another object).
fn bytes(len: u64, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i.wrapping_mul(2654435761) >> 7) ^ seed.wrapping_mul(97)) as u8)
        .collect()
}

/// A cache in `dir` as a process of its own sees it, in front of `store`.
fn process(dir: &Path, store: &Arc<Store>, max_bytes: u64) -> (CachedFileSystem, Arc<BlockCache>) {
    let cache = Arc::new(BlockCache::open_alone(dir, max_bytes).unwrap());
    let fs = CachedFileSystem::new(Arc::new(Fs(Arc::clone(store))), Arc::clone(&cache));
    (fs, cache)
}

const BIG: u64 = 1 << 40;

/// The block files of `url`'s object directories under `dir`.
fn block_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let root = dir.join(LAYOUT_DIR);
    for u in std::fs::read_dir(root).unwrap().flatten() {
        if !u.path().is_dir() {
            continue;
        }
        for k in std::fs::read_dir(u.path()).unwrap().flatten() {
            if !k.path().is_dir() {
                continue;
            }
            for f in std::fs::read_dir(k.path()).unwrap().flatten() {
                if f.file_name().to_string_lossy().parse::<u64>().is_ok() {
                    found.push(f.path());
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
fn cold_then_warm_reads_the_same_bytes_and_warm_makes_no_request() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let len = 2 * BLOCK_SIZE + 12345;
    let want = bytes(len, 1);
    store.put(URL, want.clone());

    let (fs, cache) = process(dir.path(), &store, BIG);
    // Cold: a few ranges first (one block each), then the whole object.
    let src = fs.open_read(URL).unwrap();
    assert_eq!(src.size(), len);
    let mut buf = vec![0u8; 100];
    src.read_at(&mut buf, BLOCK_SIZE - 50).unwrap();
    assert_eq!(
        buf,
        want[(BLOCK_SIZE - 50) as usize..(BLOCK_SIZE + 50) as usize]
    );
    assert_eq!(fs.read_all(URL).unwrap(), want);
    // Each block was fetched once, whole and aligned.
    assert_eq!(store.gets_of(URL), [0, BLOCK_SIZE, 2 * BLOCK_SIZE]);
    assert_eq!(cache.stats().fetched, 3);
    assert_eq!(block_files(dir.path()).len(), 3);

    // Warm, in another process, with the store refusing every request.
    store.refuse.store(true, Ordering::Relaxed);
    let before = store.requests();
    let (fs, cache) = process(dir.path(), &store, BIG);
    let src = fs.open_read(URL).unwrap();
    assert_eq!(src.size(), len);
    // Served as a local file: every block mapped, in one view.
    assert!(src.served_locally());
    assert!(
        src.mapped().unwrap() == want,
        "the mapped view is the object"
    );
    let mut buf = vec![0u8; 7000];
    assert_eq!(
        src.read_at(&mut buf, 2 * BLOCK_SIZE + 12345 - 7000)
            .unwrap(),
        7000
    );
    assert_eq!(buf, want[want.len() - 7000..]);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    assert_eq!(store.requests(), before, "no HEAD and no GET");
    assert_eq!(cache.stats().fetched, 0);
    // Reads past the end read nothing.
    assert_eq!(src.read_at(&mut buf, len).unwrap(), 0);
}

#[test]
fn an_object_not_all_local_needs_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(2 * BLOCK_SIZE, 2);
    store.put(URL, want.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    let mut buf = vec![0u8; 10];
    fs.open_read(URL).unwrap().read_at(&mut buf, 0).unwrap();
    // Block 1 is not local: the open asks the store, which is gone.
    store.refuse.store(true, Ordering::Relaxed);
    let (fs, _) = process(dir.path(), &store, BIG);
    let err = fs.open_read(URL).err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
}

#[test]
fn a_damaged_block_is_fetched_again_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(2 * BLOCK_SIZE + 10, 3);
    store.put(URL, want.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    let blocks = block_files(dir.path());
    assert_eq!(blocks.len(), 3);
    // Flip a byte of block 1, and cut block 2 short (a torn write).
    let mut b1 = std::fs::read(&blocks[1]).unwrap();
    b1[1000] ^= 0x40;
    std::fs::write(&blocks[1], &b1).unwrap();
    let b2 = std::fs::read(&blocks[2]).unwrap();
    std::fs::write(&blocks[2], &b2[..b2.len() - 1]).unwrap();
    store.gets.lock().unwrap().clear();

    let (fs, cache) = process(dir.path(), &store, BIG);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    assert_eq!(store.gets_of(URL), [BLOCK_SIZE, 2 * BLOCK_SIZE]);
    assert_eq!(cache.stats().damaged, 2);
    // Replaced by whole blocks: a third process reads them with no request.
    store.refuse.store(true, Ordering::Relaxed);
    let (fs, _) = process(dir.path(), &store, BIG);
    assert_eq!(fs.read_all(URL).unwrap(), want);
}

#[test]
fn a_rewritten_object_is_not_served_from_the_old_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let old = bytes(3 * BLOCK_SIZE, 4);
    store.put(URL, old.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    // Blocks 0 and 2 kept, block 1 not: the next open asks the store.
    let src = fs.open_read(URL).unwrap();
    let mut buf = vec![0u8; 10];
    src.read_at(&mut buf, 0).unwrap();
    src.read_at(&mut buf, 2 * BLOCK_SIZE).unwrap();

    // Rewritten: same size, new tag.
    let new = bytes(3 * BLOCK_SIZE, 5);
    store.put(URL, new.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    let src = fs.open_read(URL).unwrap();
    for at in [0, 2 * BLOCK_SIZE] {
        let mut got = vec![0u8; 1000];
        src.read_at(&mut got, at).unwrap();
        assert!(got == new[at as usize..at as usize + 1000], "block at {at}");
    }
    // And a new size.
    let newer = bytes(BLOCK_SIZE + 1, 6);
    store.put(URL, newer.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    assert!(fs.read_all(URL).unwrap() == newer);
}

#[test]
fn a_block_fetched_after_a_rewrite_is_an_error_not_new_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let old = bytes(3 * BLOCK_SIZE, 11);
    store.put(URL, old.clone());
    let (fs, _) = process(dir.path(), &store, BIG);
    assert_eq!(fs.read_all(URL).unwrap(), old);
    // Block 1 damaged: opened from the cache alone (every block present), then the
    // object rewritten before this reader fetches block 1 again.
    let block1 = &block_files(dir.path())[1];
    let mut b1 = std::fs::read(block1).unwrap();
    b1[7] ^= 1;
    std::fs::write(block1, &b1).unwrap();
    let (fs, _) = process(dir.path(), &store, BIG);
    let before = store.requests();
    let src = fs.open_read(URL).unwrap();
    assert_eq!(store.requests(), before);
    assert!(src.mapped().is_none(), "not mapped with a damaged block");
    store.put(URL, bytes(3 * BLOCK_SIZE, 12));
    let mut buf = vec![0u8; 10];
    let err = src.read_at(&mut buf, BLOCK_SIZE).unwrap_err();
    assert!(err.to_string().contains("changed"), "{err}");
    // The next open asks the store and reads the new object.
    let (fs, _) = process(dir.path(), &store, BIG);
    assert_eq!(fs.read_all(URL).unwrap(), bytes(3 * BLOCK_SIZE, 12));
}

#[test]
fn two_readers_of_one_object_fetch_each_block_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(6 * BLOCK_SIZE, 7);
    store.put(URL, want.clone());
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (fs, _) = process(dir.path(), &store, BIG);
            let want = want.clone();
            std::thread::spawn(move || {
                let src = fs.open_read(URL).unwrap();
                // Both walk every block, in opposite orders half the time.
                let mut buf = vec![0u8; BLOCK_SIZE as usize];
                for i in 0..6u64 {
                    src.read_at(&mut buf, i * BLOCK_SIZE).unwrap();
                    assert_eq!(
                        buf,
                        want[(i * BLOCK_SIZE) as usize..((i + 1) * BLOCK_SIZE) as usize]
                    );
                }
            })
        })
        .collect();
    for r in readers {
        r.join().unwrap();
    }
    let starts: Vec<u64> = (0..6).map(|i| i * BLOCK_SIZE).collect();
    assert_eq!(store.gets_of(URL), starts);
}

#[test]
fn the_byte_bound_evicts_the_least_recently_used_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(5 * BLOCK_SIZE, 8);
    store.put(URL, want.clone());
    let bound = 2 * BLOCK_SIZE + BLOCK_SIZE / 2;
    let (fs, cache) = process(dir.path(), &store, bound);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    let on_disk: u64 = block_files(dir.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(on_disk <= bound, "{on_disk} > {bound}");
    assert!(cache.stats().evicted >= 3, "{:?}", cache.stats());
    // The blocks kept are the last used.
    let kept: Vec<u64> = block_files(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().parse().unwrap())
        .collect();
    assert!(kept.iter().all(|&i| i >= 3), "{kept:?}");
    // Still the same bytes (the evicted blocks fetched again).
    assert_eq!(fs.read_all(URL).unwrap(), want);
}

#[test]
fn a_killed_writers_temporary_file_is_ignored_and_swept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(BLOCK_SIZE + 5, 9);
    store.put(URL, want.clone());
    let (fs, cache) = process(dir.path(), &store, BIG);
    let mut buf = vec![0u8; 5];
    fs.open_read(URL).unwrap().read_at(&mut buf, 0).unwrap();
    let obj_dir = block_files(dir.path())[0].parent().unwrap().to_path_buf();
    // What a writer killed while writing block 1 leaves: a temporary file that would
    // even verify (the bytes and their CRC), never renamed.
    let mut torn = want[BLOCK_SIZE as usize..].to_vec();
    torn.extend(tfrecord_lirs::format::crc32c(&torn).to_le_bytes());
    let temp = obj_dir.join(".tmp-1-4000000-0");
    std::fs::write(&temp, &torn).unwrap();
    // Ignored: block 1 is fetched.
    store.gets.lock().unwrap().clear();
    assert_eq!(fs.read_all(URL).unwrap(), want);
    assert_eq!(store.gets_of(URL), [BLOCK_SIZE]);
    // Swept: no one holds block 1's lock.
    std::fs::write(&temp, &torn).unwrap();
    assert!(cache.sweep().is_some());
    assert!(!temp.exists());
    assert_eq!(block_files(dir.path()).len(), 2);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_full_disk_reads_from_the_store_without_keeping() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::default());
    let want = bytes(2 * BLOCK_SIZE + 3, 10);
    store.put(URL, want.clone());
    let (fs, cache) = process(dir.path(), &store, BIG);
    cache.set_test_disk_full(true);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    assert_eq!(cache.stats().unstored, 3);
    assert!(block_files(dir.path()).is_empty());
    // Space again: kept from now on.
    cache.set_test_disk_full(false);
    assert_eq!(fs.read_all(URL).unwrap(), want);
    assert_eq!(block_files(dir.path()).len(), 3);
}

#[test]
fn the_option_rule_argument_then_environment_then_none() {
    use tfrecord_lirs::options;
    let dir = tempfile::tempdir().unwrap();
    // No argument and (in this test binary) no variable: none. A bound alone is refused.
    if std::env::var_os(options::defaults::CACHE_DIR_ENV).is_none() {
        assert!(options::cache(None, None).unwrap().is_none());
        let err = options::cache(None, Some(5)).unwrap_err();
        assert_eq!(err.kind(), tfrecord_lirs::ErrorKind::InvalidArgument);
    }
    let cache = options::cache(Some(dir.path()), None).unwrap().unwrap();
    assert!(cache.root().starts_with(dir.path().canonicalize().unwrap()));
    let err = options::cache(Some(dir.path()), Some(0)).unwrap_err();
    assert!(err.to_string().contains("cache_bytes"), "{err}");
    // A file where the directory should be: an error naming it.
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    let err = options::cache(Some(&file), None).unwrap_err();
    assert!(err.to_string().contains("cache_dir"), "{err}");
}

mod common;

#[test]
fn a_reader_over_a_warm_cache_reads_as_from_a_local_mapped_file() {
    use tfrecord_lirs::{Reader, ReaderOptions, Storage};
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Vec<u8>> = common::kdd_sizes(20_000, 3)
        .iter()
        .enumerate()
        .map(|(i, &s)| common::payload(i, s))
        .collect();
    let (path, _) = common::write_padded(
        dir.path(),
        "d.tfrecord",
        &all,
        4096,
        tfrecord_lirs::Fit::Next,
    );
    let store = Arc::new(Store::default());
    let url = "s3://bucket/d.tfrecord";
    store.put(url, std::fs::read(&path).unwrap());
    let table = tfrecord_lirs::default_table_path(&path);
    store.put(
        "s3://bucket/d.tfrecord.offsets",
        std::fs::read(table).unwrap(),
    );
    let cache_dir = dir.path().join("cache");
    let open = || {
        let (fs, _) = process(&cache_dir, &store, BIG);
        let options = ReaderOptions {
            storage: Storage::with_file_system(Arc::new(fs)),
            ..Default::default()
        };
        Reader::open_one(Path::new(url), None, &options).unwrap()
    };
    let cold = open();
    assert!(cold.is_remote() && !cold.is_mapped());
    let ids: Vec<u64> = (0..all.len() as u64).rev().collect();
    let mut batch = tfrecord_lirs::Batch::default();
    cold.read_batch(&ids, &mut batch).unwrap();
    store.refuse.store(true, Ordering::Relaxed);
    let warm = open();
    assert!(!warm.is_remote() && warm.is_mapped());
    let mut again = tfrecord_lirs::Batch::default();
    warm.read_batch(&ids, &mut again).unwrap();
    for (k, &id) in ids.iter().enumerate() {
        assert!(again.get(k) == Some(&all[id as usize][..]), "instance {id}");
    }
}
