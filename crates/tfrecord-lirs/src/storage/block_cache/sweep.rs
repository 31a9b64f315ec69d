//! The sweep of a cache directory: the bound kept, and the temporary files of writers
//! that are gone deleted (see [`BlockCache::sweep`]).

use std::fs::{self, File};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use super::{BlockCache, LOCK, TEMP_PREFIX};
use crate::storage::block_lock::BlockLock;

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
            for (_, _, len, path) in blocks {
                if total <= target {
                    break;
                }
                if fs::remove_file(&path).is_ok() {
                    total -= len;
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                }
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
