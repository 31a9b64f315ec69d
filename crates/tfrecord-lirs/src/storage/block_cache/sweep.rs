//! The sweep of a cache directory: the bound kept, the temporary files of writers that
//! are gone deleted, and the directory of an object whose last block was evicted
//! removed (see [`BlockCache::sweep`]).

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::{BlockCache, LOCK, TEMP_PREFIX};
use crate::storage::block_lock::BlockLock;

/// The name an object directory is renamed to, in its URL's directory, to be deleted:
/// `.gone-<k>-<pid>` (one sweeper at a time; a killed one's is deleted by the next).
const GONE_PREFIX: &str = ".gone-";

impl BlockCache {
    /// Sweeps the directory now (see the parent module's docs): temporary files of writers that
    /// are gone are deleted, then the least recently used blocks until the total is
    /// within 90% of the bound. Returns the room left, or `None` if another process is
    /// sweeping (then this one sweeps at its next write).
    pub fn sweep(&self) -> Option<u64> {
        let max = self.max_bytes.load(Ordering::Relaxed);
        let lock = File::create(self.root.join(LOCK)).ok()?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return None;
        }
        // (last use, block index, bytes, path): ties of a coarse clock go to the lower
        // block, which a sequential reader used first.
        let mut blocks: Vec<(SystemTime, u64, u64, PathBuf)> = Vec::new();
        for url_dir in read_dirs(&self.root) {
            for obj_dir in read_dirs(&url_dir) {
                if is_gone(&obj_dir) {
                    let _ = fs::remove_dir_all(&obj_dir);
                    continue;
                }
                for entry in fs::read_dir(&obj_dir).into_iter().flatten().flatten() {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    let Ok(meta) = entry.metadata() else { continue };
                    if let Some(rest) = name.strip_prefix(TEMP_PREFIX) {
                        sweep_temp(&obj_dir, rest, &entry.path());
                    } else if let Ok(i) = name.parse::<u64>() {
                        let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        blocks.push((used, i, meta.len(), entry.path()));
                    }
                }
            }
        }
        let mut total: u64 = blocks.iter().map(|b| b.2).sum();
        if total > max {
            let target = max / 10 * 9;
            blocks.sort_by_key(|b| (b.0, b.1));
            let mut emptied = BTreeSet::new();
            for (_, _, len, path) in blocks {
                if total <= target {
                    break;
                }
                if fs::remove_file(&path).is_ok() {
                    total -= len;
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                    emptied.extend(path.parent().map(Path::to_path_buf));
                }
            }
            for obj_dir in emptied {
                remove_if_blockless(&obj_dir);
            }
        }
        // The lock is released when `lock` is closed.
        Some(max.saturating_sub(total))
    }
}

/// The subdirectories of `dir`.
fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Removes the object directory `obj_dir` if it holds no block (its `IDENTITY`, its
/// `LOCK`, temporary files of `IDENTITY`s or of writers that are gone, nothing a reader
/// can use). Only while no one holds any block's lock: a writer holds its block's from
/// before its temporary file exists until the block is renamed into place, so none is
/// writing a block. The directory is renamed away first, so its path is at once either
/// the whole directory or nothing: a writer that finds nothing (making `IDENTITY`, or
/// taking a lock, which it checks is the directory's current `LOCK`) makes it again.
fn remove_if_blockless(obj_dir: &Path) {
    let Ok(Some(all)) = BlockLock::try_acquire_all(obj_dir) else {
        return;
    };
    let holds_a_block = fs::read_dir(obj_dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().parse::<u64>().is_ok());
    let (Some(url_dir), Some(name)) = (obj_dir.parent(), obj_dir.file_name()) else {
        return;
    };
    if holds_a_block {
        return;
    }
    let gone = url_dir.join(format!(
        "{GONE_PREFIX}{}-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    if fs::rename(obj_dir, &gone).is_ok() {
        drop(all);
        let _ = fs::remove_dir_all(&gone);
        // The URL's directory too if that left it empty (no `CURRENT`): a writer
        // that made it a moment ago finds it gone and makes it again.
        let _ = fs::remove_dir(url_dir);
    }
}

fn is_gone(dir: &Path) -> bool {
    dir.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(GONE_PREFIX))
}

/// Deletes the temporary file `path` (`.tmp-<rest>`) of `obj_dir` if its writer is
/// gone: a block's writer holds that block's lock while its temporary file exists,
/// so a lock that can be taken means no one will rename it.
fn sweep_temp(obj_dir: &Path, rest: &str, path: &Path) {
    let Some(block) = rest.split('-').next().and_then(|b| b.parse::<u64>().ok()) else {
        // CURRENT's and IDENTITY's are written without a lock, in an instant: left
        // to their writer unless clearly stale (an hour).
        let stale = fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if stale {
            let _ = fs::remove_file(path);
        }
        return;
    };
    if let Ok(Some(_lock)) = BlockLock::try_acquire(obj_dir, block) {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, SystemTime};

    use super::super::{identity_text, BlockCache, CachedBlocks, IDENTITY};
    use super::*;

    fn object(cache: &BlockCache, url: &str, size: u64) -> CachedBlocks {
        cache.object(url, &identity_text(url, size, "v1"), size)
    }

    /// Block 0 of `obj` through `cache`, its bytes `fill` (fetched if missing).
    fn read_block(cache: &BlockCache, obj: &CachedBlocks, fill: u8) -> Vec<u8> {
        let len = obj.block_len(0);
        let block = cache
            .block(obj, 0, |b| {
                b.fill(fill);
                Ok(())
            })
            .unwrap();
        let mut buf = vec![0u8; len as usize];
        block.read(&mut buf, 0, len).unwrap();
        buf
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_directory_of_an_object_whose_last_block_is_evicted_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open_alone(dir.path(), 1 << 30).unwrap();
        let (old, new) = (
            object(&cache, "s3://b/old", 1000),
            object(&cache, "s3://b/new", 10),
        );
        cache.record("s3://b/old", old.identity());
        read_block(&cache, &old, 1);
        read_block(&cache, &new, 2);
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        File::open(old.dir.join("0"))
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
        // A bound of 100 bytes: the old object's block goes, the new one's stays.
        cache.max_bytes.store(100, Ordering::Relaxed);
        assert!(cache.sweep().is_some());
        assert_eq!(cache.stats().evicted, 1);
        assert!(!old.dir.exists(), "{:?}", names(&old.dir));
        // The URL's recorded identity stays (its directory is removed once empty).
        assert_eq!(names(old.dir.parent().unwrap()), ["CURRENT"]);
        assert_eq!(names(&new.dir), ["0", IDENTITY, LOCK]);
        // A writer that made the directory before (this process) makes it again.
        cache.max_bytes.store(1 << 30, Ordering::Relaxed);
        cache.open_lock().clear();
        old.checked[0].store(false, Ordering::Relaxed);
        assert_eq!(read_block(&cache, &old, 3), vec![3u8; 1000]);
        assert_eq!(names(&old.dir), ["0", IDENTITY, LOCK]);
        assert_eq!(cache.stats().unstored, 0);
    }

    #[test]
    fn a_writer_holding_a_block_lock_keeps_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open_alone(dir.path(), 1 << 30).unwrap();
        let obj = object(&cache, "s3://b/x", 10);
        read_block(&cache, &obj, 1);
        let writing = BlockLock::acquire(&obj.dir, 5).unwrap();
        cache.max_bytes.store(1, Ordering::Relaxed);
        assert!(cache.sweep().is_some());
        assert_eq!(cache.stats().evicted, 1);
        assert_eq!(names(&obj.dir), [IDENTITY, LOCK]);
        drop(writing);
    }

    #[test]
    fn a_writer_racing_the_removal_of_its_directory_keeps_every_block() {
        // Two values of one directory, as two processes: one writes block 0 of an
        // object again and again, the other sweeps to a bound of 1 byte (so removes
        // the directory each time it evicts the block), until it has evicted 50.
        let dir = tempfile::tempdir().unwrap();
        let writer = BlockCache::open_alone(dir.path(), 1 << 30).unwrap();
        let sweeper = BlockCache::open_alone(dir.path(), 1).unwrap();
        let obj = object(&writer, "s3://b/x", 10);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Stops the sweeper however this thread ends.
                struct Stop<'a>(&'a AtomicBool);
                impl Drop for Stop<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, Ordering::Relaxed);
                    }
                }
                let _stop = Stop(&stop);
                let mut round = 0u8;
                while sweeper.stats().evicted < 50 {
                    round = round.wrapping_add(1);
                    writer.open_lock().clear();
                    obj.checked[0].store(false, Ordering::Relaxed);
                    let got = read_block(&writer, &obj, round);
                    // Its own bytes, or (found on disk) a block an earlier round wrote;
                    // kept (a block not kept would never be evicted: stop here).
                    assert!(got.iter().all(|&b| b == got[0]), "{got:?}");
                    assert_eq!(writer.stats().unstored, 0, "{:?}", writer.stats());
                }
            });
            while !stop.load(Ordering::Relaxed) {
                sweeper.sweep();
            }
        });
        assert!(sweeper.stats().evicted >= 50);
        // The object's directories, if its block was written after the last eviction;
        // no empty directory, nothing renamed away left.
        let url_dir = obj.dir.parent().unwrap();
        if url_dir.exists() {
            assert_eq!(
                names(url_dir),
                [obj.dir.file_name().unwrap().to_string_lossy()]
            );
            assert_eq!(names(&obj.dir), ["0", IDENTITY, LOCK]);
        }
        let w = writer.stats();
        assert_eq!((w.unstored, w.damaged), (0, 0), "{w:?}");
        assert!(w.fetched >= 50, "{w:?}");
    }
}
