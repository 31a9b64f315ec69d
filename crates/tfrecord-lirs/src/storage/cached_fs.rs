//! A [`FileSystem`] with a local tier: the objects it opens are read through a
//! [`BlockCache`] (the blocks some process of the machine already fetched are read from
//! local disk, the others fetched once and kept), and an object whose blocks are all
//! local is opened without any request: the identity recorded when it was first fetched
//! stands for it, so it reads with the storage unreachable. Its blocks are checked
//! once and mapped into one view (`block_map`), so readers read it as a mapped local
//! file ([`ReadAt::served_locally`], [`ReadAt::mapped`]). An object not all local
//! whose storage reads by requests (object storage) is read by requests here too
//! ([`ReadAt::ranged`]): its missing blocks are fetched as requests on the storage's
//! runtime, with no thread waiting on each.
//!
//! Cached objects are taken as immutable while all their blocks are local (as
//! gcsfuse's file cache with an unlimited metadata TTL and MosaicML Streaming's local
//! shards do). An object whose blocks are not all local is looked up (one HEAD): a new
//! size or tag is another identity, whose blocks start empty, so a rewritten object is
//! never served from the old one's blocks; a block missing later (evicted) is fetched
//! after checking that the object still has the identity it was opened with (else the
//! read fails saying the object changed). Writing, renaming or deleting a URL through
//! this file system forgets its recorded identity. An object whose file system reports
//! no tag (only a size) is not cached: its size alone cannot tell a rewrite. A pattern
//! listed is remembered, and what it matched stands for it when the storage cannot be
//! reached.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use crate::storage::block_cache::{identity_text, Block, BlockCache, CachedBlocks, BLOCK_SIZE};
use crate::storage::block_map::BlockMap;
use crate::storage::ranged::{RangedRead, RangesDone, ReadScope};
use crate::storage::remote::{Durability, FileSystem, RemoteWrite};
use crate::storage::ReadAt;

/// `inner`, with its objects' bytes kept in `cache`.
pub struct CachedFileSystem {
    inner: Arc<dyn FileSystem>,
    cache: Arc<BlockCache>,
}

impl CachedFileSystem {
    /// `inner` read through `cache`.
    pub fn new(inner: Arc<dyn FileSystem>, cache: Arc<BlockCache>) -> CachedFileSystem {
        CachedFileSystem { inner, cache }
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }
}

impl FileSystem for CachedFileSystem {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        if let Some((text, size)) = self.cache.recorded(url) {
            let blocks = Arc::new(self.cache.object(url, &text, size));
            if blocks.all_local() {
                // Mapped once every block is checked (else read block by block, which
                // fetches a damaged one again).
                let map = self.cache.block_files(&blocks).and_then(|files| {
                    let map = BlockMap::map(&files, size).ok()?;
                    self.cache
                        .check_mapped(&blocks, map.bytes(), &files)
                        .then_some(map)
                });
                return Ok(Box::new(CachedObject {
                    inner_fs: Arc::clone(&self.inner),
                    url: url.to_string(),
                    cache: Arc::clone(&self.cache),
                    blocks,
                    inner: OnceLock::new(),
                    all_local: true,
                    map,
                }));
            }
        }
        let src = self.inner.open_read(url)?;
        let Some(tag) = src.identity() else {
            return Ok(src);
        };
        let text = identity_text(url, src.size(), &tag);
        self.cache.record(url, &text);
        let blocks = Arc::new(self.cache.object(url, &text, src.size()));
        let inner = OnceLock::new();
        let _ = inner.set(src);
        Ok(Box::new(CachedObject {
            inner_fs: Arc::clone(&self.inner),
            url: url.to_string(),
            cache: Arc::clone(&self.cache),
            blocks,
            inner,
            all_local: false,
            map: None,
        }))
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        self.cache.forget(url);
        self.inner.create(url)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.cache.forget(from);
        self.cache.forget(to);
        self.inner.rename(from, to)
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        self.cache.forget(url);
        self.inner.delete(url)
    }

    fn durability(&self, url: &str) -> Durability {
        self.inner.durability(url)
    }

    /// Lists `pattern`, keeping what it matched; when the storage cannot be reached,
    /// what it matched when last listed (said on stderr), so a glob whose objects
    /// are cached opens offline as an explicit list does.
    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        match self.inner.glob(pattern) {
            Ok(urls) => {
                self.cache.remember_listing(pattern, &urls);
                Ok(urls)
            }
            Err(e) if unreachable(&e) => match self.cache.remembered_listing(pattern) {
                Some(urls) => {
                    eprintln!(
                        "tfrecord-lirs: listing {pattern} failed ({e}); using the {} URLs it \
                         matched when last listed, remembered in cache_dir {}",
                        urls.len(),
                        self.cache.root().display()
                    );
                    Ok(urls)
                }
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }
}

/// Whether a failed request says the storage could not be reached (not a refusal,
/// a missing bucket or a bad pattern, which a remembered listing must not hide).
fn unreachable(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::NotFound
            | io::ErrorKind::PermissionDenied
            | io::ErrorKind::InvalidInput
            | io::ErrorKind::InvalidData
            | io::ErrorKind::Unsupported
    )
}

/// One object read through the cache.
struct CachedObject {
    inner_fs: Arc<dyn FileSystem>,
    url: String,
    cache: Arc<BlockCache>,
    blocks: Arc<CachedBlocks>,
    /// The object in storage, opened when a block must be fetched.
    inner: OnceLock<Box<dyn ReadAt>>,
    /// Opened with every block local.
    all_local: bool,
    /// Every block, mapped (opened with every block local and whole).
    map: Option<BlockMap>,
}

impl CachedObject {
    /// The object in storage, checked to be the one whose blocks these are.
    fn inner(&self) -> io::Result<&dyn ReadAt> {
        if let Some(src) = self.inner.get() {
            return Ok(&**src);
        }
        let src = self.inner_fs.open_read(&self.url)?;
        let now = src
            .identity()
            .map(|tag| identity_text(&self.url, src.size(), &tag));
        if now.as_deref() != Some(self.blocks.identity()) {
            self.cache.forget(&self.url);
            return Err(io::Error::other(format!(
                "{}: the object changed since its blocks were kept in cache_dir {} \
                 (its size or tag is not the one recorded); read it again",
                self.url,
                self.cache.root().display()
            )));
        }
        Ok(&**self.inner.get_or_init(|| src))
    }
}

impl ReadAt for CachedObject {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if let Some(map) = &self.map {
            let bytes = map.bytes();
            let from = bytes
                .len()
                .min(usize::try_from(offset).unwrap_or(usize::MAX));
            let n = buf.len().min(bytes.len() - from);
            buf[..n].copy_from_slice(&bytes[from..from + n]);
            return Ok(n);
        }
        let size = self.blocks.size();
        let mut done = 0;
        while done < buf.len() && offset + (done as u64) < size {
            let at = offset + done as u64;
            let i = at / BLOCK_SIZE;
            let len = self.blocks.block_len(i);
            let block = self.cache.block(&self.blocks, i, |bytes| {
                crate::storage::local::read_exact_at(self.inner()?, bytes, i * BLOCK_SIZE)
            })?;
            done += block.read(&mut buf[done..], at - i * BLOCK_SIZE, len)?;
        }
        Ok(done)
    }

    fn size(&self) -> u64 {
        self.blocks.size()
    }

    fn mapped(&self) -> Option<&[u8]> {
        self.map.as_ref().map(BlockMap::bytes)
    }

    /// The identity recorded for this version of the object (its URL, size and tag):
    /// the same text in every process that reads it through this cache directory.
    fn identity(&self) -> Option<String> {
        Some(self.blocks.identity().to_string())
    }

    fn served_locally(&self) -> bool {
        self.all_local
    }

    /// Read by requests when the object in storage is and not every block was local
    /// when opened (then it is mapped): the missing blocks are fetched as requests on
    /// the storage's runtime, no thread waiting on each.
    fn ranged(&self) -> Option<&dyn RangedRead> {
        if self.map.is_some() {
            return None;
        }
        self.inner.get()?.ranged()?;
        Some(self)
    }
}

impl RangedRead for CachedObject {
    /// The blocks under `ranges` (from the directory, or fetched as requests and kept),
    /// then each range copied out of them.
    fn read_ranges(&self, ranges: &[Range<u64>], scope: &ReadScope, done: RangesDone) {
        let size = self.blocks.size();
        if let Some(r) = ranges.iter().find(|r| r.end > size || r.start > r.end) {
            return done(Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: bytes {r:?} asked of {size}", self.url),
            )));
        }
        let Some(src) = self.inner.get().and_then(|s| s.ranged()) else {
            return done(Err(io::Error::other(format!(
                "{}: not read by requests",
                self.url
            ))));
        };
        let wanted: BTreeSet<u64> = ranges
            .iter()
            .filter(|r| r.end > r.start)
            .flat_map(|r| r.start / BLOCK_SIZE..=(r.end - 1) / BLOCK_SIZE)
            .collect();
        let join = Arc::new(Mutex::new(Join {
            size,
            ranges: ranges.to_vec(),
            blocks: BTreeMap::new(),
            left: wanted.len(),
            failed: None,
            done: Some(done),
        }));
        if wanted.is_empty() {
            return Join::finish(&join);
        }
        for i in wanted {
            let join = Arc::clone(&join);
            self.cache.fetch_block(
                &self.blocks,
                i,
                src,
                scope,
                Box::new(move |got| {
                    {
                        let mut j = join.lock().unwrap_or_else(|p| p.into_inner());
                        match got {
                            Ok(block) => {
                                j.blocks.insert(i, block);
                            }
                            Err(e) => j.failed = Some(e),
                        }
                        j.left -= 1;
                        if j.left > 0 {
                            return;
                        }
                    }
                    Join::finish(&join);
                }),
            );
        }
    }
}

/// The blocks of one [`RangedRead::read_ranges`] coming in.
struct Join {
    size: u64,
    ranges: Vec<Range<u64>>,
    blocks: BTreeMap<u64, Block>,
    left: usize,
    failed: Option<io::Error>,
    done: Option<RangesDone>,
}

impl Join {
    /// Every block is in: the ranges' bytes (or the first error) to `done`.
    fn finish(join: &Mutex<Join>) {
        let mut j = join.lock().unwrap_or_else(|p| p.into_inner());
        let Some(done) = j.done.take() else { return };
        if let Some(e) = j.failed.take() {
            drop(j);
            return done(Err(e));
        }
        let read = j
            .ranges
            .iter()
            .map(|r| {
                let mut bytes = vec![0u8; (r.end - r.start) as usize];
                let mut at = r.start;
                while at < r.end {
                    let i = at / BLOCK_SIZE;
                    let len = (j.size - i * BLOCK_SIZE).min(BLOCK_SIZE);
                    let block = j
                        .blocks
                        .get(&i)
                        .ok_or_else(|| io::Error::other(format!("block {i} was not read")))?;
                    let from = (at - r.start) as usize;
                    at += block.read(&mut bytes[from..], at - i * BLOCK_SIZE, len)? as u64;
                }
                Ok(bytes)
            })
            .collect::<io::Result<Vec<Vec<u8>>>>();
        drop(j);
        match read {
            Ok(read) => {
                let slices: Vec<&[u8]> = read.iter().map(Vec::as_slice).collect();
                done(Ok(&slices))
            }
            Err(e) => done(Err(e)),
        }
    }
}
