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

#[cfg(test)]
mod tests {
    use std::ops::Range;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::storage::block_cache::identity_text;
    use crate::storage::ranged::RangesDone;

    /// A source whose requests are held until the test answers or cancels them
    /// (drops their callbacks, as a dropped scope does on object storage).
    #[derive(Default)]
    struct Held(Mutex<Vec<(Range<u64>, RangesDone)>>);

    impl RangedRead for Held {
        fn read_ranges(&self, ranges: &[Range<u64>], _scope: &ReadScope, done: RangesDone) {
            self.0.lock().unwrap().push((ranges[0].clone(), done));
        }
    }

    impl Held {
        fn take(&self) -> Vec<(Range<u64>, RangesDone)> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    /// What a read waiting on a block got; a guard against hanging, not a timing.
    fn got(rx: &mpsc::Receiver<io::Result<Vec<u8>>>) -> io::Result<Vec<u8>> {
        rx.recv_timeout(Duration::from_secs(120))
            .expect("a read waiting on a block was never woken")
    }

    #[test]
    fn a_cancelled_block_request_wakes_every_read_waiting_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open(dir.path(), 1 << 30).unwrap();
        let size = 1000;
        let obj = Arc::new(cache.object("s3://b/x", &identity_text("s3://b/x", size, "v1"), size));
        obj.prepare(&cache).unwrap();
        let src = Held::default();
        let scope = ReadScope::new(4);
        let (tx, rx) = mpsc::channel();
        let ask = || {
            let tx = tx.clone();
            cache.fetch_block(
                &obj,
                0,
                &src,
                &scope,
                Box::new(move |block| {
                    let bytes = block.and_then(|b| {
                        let mut buf = vec![0u8; size as usize];
                        b.read(&mut buf, 0, size).map(|_| buf)
                    });
                    tx.send(bytes).unwrap();
                }),
            )
        };
        // Three reads of block 0: one request, the other two waiting on it.
        for _ in 0..3 {
            ask();
        }
        let requests = src.take();
        assert_eq!(requests.len(), 1, "one request per block");
        assert!(
            rx.try_recv().is_err(),
            "none answered before the request is"
        );
        // Cancelled: every read is woken with a clear error.
        drop(requests);
        for _ in 0..3 {
            let e = got(&rx).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::Interrupted);
            assert!(e.to_string().contains("cancelled"), "{e}");
        }
        // Nothing is left waiting on it: a read asking again starts a request of its
        // own (the block's lock let go), and it and a read joining it get the block.
        ask();
        ask();
        let mut requests = src.take();
        assert_eq!(requests.len(), 1);
        let (range, done) = requests.pop().unwrap();
        assert_eq!(range, 0..size);
        let bytes: Vec<u8> = (0..size).map(|i| i as u8).collect();
        done(Ok(&[&bytes[..]]));
        for _ in 0..2 {
            assert_eq!(got(&rx).unwrap(), bytes);
        }
        // Kept: a later read is served from the directory, no request.
        ask();
        assert_eq!(got(&rx).unwrap(), bytes);
        assert!(src.take().is_empty());
    }
}
