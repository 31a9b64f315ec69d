//! Blocks missing from the cache fetched as requests on the storage's runtime
//! ([`RangedRead`], object storage), no thread waiting on each: how `cached_fs` reads
//! the cold blocks of an object read by requests. The guarantees are those of
//! [`BlockCache::block`]: one fetch of a block at a time on the machine (the same lock,
//! held from the request's start until the block is whole in the directory, written
//! with its CRC through a temporary file), and in this process one request per block
//! however many reads wait on it.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::{Block, BlockCache, CachedBlocks, BLOCK_SIZE};
use crate::storage::ranged::{RangedRead, ReadScope};

/// What a read waiting on a block gets: the block, or why it could not be had.
pub(crate) type BlockDone = Box<dyn FnOnce(io::Result<Block>) + Send>;

/// The blocks being fetched as requests, by (url hash, identity hash, block), and the
/// reads waiting on each.
#[derive(Default)]
pub(super) struct Pending(Mutex<HashMap<(u64, u64, u64), Vec<BlockDone>>>);

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64, u64), Vec<BlockDone>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BlockCache {
    /// Block `i` of `obj` to `done`: from the directory if some process has it, else
    /// fetched from `src` by one request counted against `scope`, and kept. `done` is
    /// called once, on this thread or a storage thread; if the request is cancelled
    /// (its scope dropped) with `done` waiting, with an `Interrupted` error. While
    /// another process fetches the block, this thread waits for it, as a reader thread
    /// of [`block`](Self::block) would.
    pub(crate) fn fetch_block(
        self: &Arc<Self>,
        obj: &Arc<CachedBlocks>,
        i: u64,
        src: &dyn RangedRead,
        scope: &ReadScope,
        done: BlockDone,
    ) {
        if let Some(block) = self.local_block(obj, i) {
            return done(Ok(block));
        }
        let key = obj.block_key(i);
        {
            let mut pending = self.pending.lock();
            if let Some(waiting) = pending.get_mut(&key) {
                return waiting.push(done);
            }
            pending.insert(key, vec![done]);
        }
        let waiting = Waiting {
            cache: Arc::clone(self),
            key,
            woken: false,
        };
        let lock = match self.lock_block(obj, i) {
            Ok(lock) => {
                if let Some(block) = self.fetched_meanwhile(obj, i) {
                    return waiting.wake(Ok(block));
                }
                Ok(lock)
            }
            // The directory cannot be used: fetched, served, not kept.
            Err(e) => Err(e.to_string()),
        };
        let len = obj.block_len(i);
        let start = i * BLOCK_SIZE;
        let range = start..start + len;
        let (cache, obj) = (Arc::clone(self), Arc::clone(obj));
        src.read_ranges(
            std::slice::from_ref(&range),
            scope,
            Box::new(move |got| {
                let block = got.and_then(|bytes| match bytes {
                    [bytes] if bytes.len() as u64 == len => Ok(match lock {
                        Ok(lock) => {
                            let mut kept = Vec::with_capacity(len as usize + 4);
                            kept.extend_from_slice(bytes);
                            kept.resize(len as usize + 4, 0);
                            cache.store(&obj, i, kept, lock)
                        }
                        Err(why) => {
                            cache.stats.fetched.fetch_add(1, Ordering::Relaxed);
                            cache.say_unstored(&obj.dir, &io::Error::other(why));
                            Block::Bytes(Arc::from(*bytes))
                        }
                    }),
                    _ => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("block {i} of {} came back short", obj.dir.display()),
                    )),
                });
                waiting.wake(block);
            }),
        );
    }
}

/// The reads waiting on one block's request: woken once, with the block or the error;
/// dropped unwoken (the request cancelled), with an `Interrupted` error.
struct Waiting {
    cache: Arc<BlockCache>,
    key: (u64, u64, u64),
    woken: bool,
}

impl Waiting {
    fn wake(mut self, got: io::Result<Block>) {
        self.wake_all(got);
    }

    fn wake_all(&mut self, got: io::Result<Block>) {
        self.woken = true;
        // Taken out first: a read woken here may ask for the block again.
        let waiting = self.cache.pending.lock().remove(&self.key);
        for done in waiting.unwrap_or_default() {
            done(match &got {
                Ok(block) => Ok(block.clone()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.woken {
            self.wake_all(Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "the request for a block of cache_dir was cancelled",
            )));
        }
    }
}
