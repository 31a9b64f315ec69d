//! Writes to the partial store: an entry written whole (temporary file, rename), the
//! store-wide bound kept by evicting older generations, and removal.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

use super::{add, PartialStore, Place};
use crate::storage::partial_identity as entry;
use crate::storage::partial_ledger::{
    self as ledger, is_full, low_water, Ledger, WriteError, LEDGER_FILE, TEMP_PREFIX,
};

/// Names temporary files apart within this process (every store in it: two stores of
/// one directory in one process must not make the same name).
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

impl PartialStore {
    /// Stores `payload` as `(id, generation)` and removes the id's entry of
    /// generation `over` (the one this one replaces), if any. `recompute`: the entry
    /// was computed again after a miss (counted apart from refreshes). Returns whether
    /// it was stored: over capacity (after evicting older generations) or on a full
    /// disk it is not (the next use recomputes); other write errors are errors naming
    /// the path.
    pub fn put(
        &self,
        id: u64,
        generation: u64,
        payload: &[u8],
        over: Option<u64>,
        recompute: bool,
    ) -> Result<bool> {
        if let Some(old) = over.filter(|&g| g != generation) {
            self.retire(id, old);
        }
        self.count_computed(recompute);
        let size = entry::size(payload.len());
        let stored = match &self.place {
            Place::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                let fits = self.make_room_in_memory(&mut map, generation, size);
                if fits {
                    add(&self.counters.bytes, size);
                    if let Some(old) = map.insert((id, generation), payload.to_vec()) {
                        self.sub_bytes(entry::size(old.len()));
                    }
                }
                fits
            }
            Place::Disk(dir) => self.put_file(dir, id, generation, payload, size)?,
        };
        if !stored {
            add(&self.counters.unstored, 1);
        }
        Ok(stored)
    }

    fn put_file(
        &self,
        dir: &Path,
        id: u64,
        generation: u64,
        payload: &[u8],
        size: u64,
    ) -> Result<bool> {
        let reserved = match self.reserve(dir, generation, size) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The directory was removed (a user cleaning up mid-run): make it again,
                // as `open_dir` does.
                self.make_dir(dir)?;
                self.reserve(dir, generation, size)
            }
            reserved => reserved,
        };
        // Held until the entry is written (see `ledger::reserve`).
        let writing = match reserved {
            Ok(Some(writing)) => writing,
            Ok(None) => return Ok(false),
            Err(e) if is_full(&e) => return Ok(false),
            Err(e) => return Err(Error::io(&dir.join(LEDGER_FILE), e)),
        };
        let path = self.entry_path(id, generation).expect("a disk store");
        let bytes = entry::encode(self.namespace, id, generation, payload);
        let mut written = self.write_atomic(&path, &bytes);
        if matches!(&written, Err(e) if e.1.kind() == std::io::ErrorKind::NotFound) {
            // Removed between the reservation and the write.
            written = self
                .make_dir(dir)
                .map_err(|_| WriteError(dir.to_path_buf(), std::io::ErrorKind::NotFound.into()))
                .and_then(|()| self.write_atomic(&path, &bytes));
        }
        drop(writing);
        if written.is_err() {
            self.release(dir, size);
        }
        match written {
            Ok(()) => Ok(true),
            Err(e) if e.is_full() => Ok(false),
            Err(e) => Err(e.into_error()),
        }
    }

    /// Adds `size` bytes to the ledger if they fit under the bound, after evicting
    /// entries of generations older than `generation` if they do not; the ledger, still
    /// locked, if they fit.
    fn reserve(
        &self,
        dir: &Path,
        generation: u64,
        size: u64,
    ) -> std::io::Result<Option<ledger::Writing>> {
        let (fits, evicted) = ledger::reserve(dir, self.capacity, generation, size, &self.no_room)?;
        add(&self.counters.evicted, evicted);
        Ok(fits)
    }

    /// Takes `size` bytes off the ledger (best effort: a ledger that over-counts is
    /// corrected by the next scan).
    fn release(&self, dir: &Path, size: u64) {
        if let Ok(mut ledger) = Ledger::lock(dir) {
            ledger.bytes = ledger.bytes.saturating_sub(size);
            let _ = ledger.commit();
        }
    }

    /// Whether `size` more bytes fit in the memory store, after evicting entries of
    /// generations older than `generation` if they do not.
    fn make_room_in_memory(
        &self,
        map: &mut HashMap<(u64, u64), Vec<u8>>,
        generation: u64,
        size: u64,
    ) -> bool {
        let held = self.counters.bytes.load(Ordering::Relaxed);
        if held.saturating_add(size) <= self.capacity {
            return true;
        }
        let mut older: Vec<(u64, u64)> = map
            .keys()
            .filter(|(_, g)| *g < generation)
            .map(|&(id, g)| (g, id))
            .collect();
        older.sort_unstable();
        let low = low_water(self.capacity);
        for (g, id) in older {
            if self
                .counters
                .bytes
                .load(Ordering::Relaxed)
                .saturating_add(size)
                <= low
            {
                break;
            }
            if let Some(old) = map.remove(&(id, g)) {
                self.sub_bytes(entry::size(old.len()));
                add(&self.counters.evicted, 1);
            }
        }
        self.counters
            .bytes
            .load(Ordering::Relaxed)
            .saturating_add(size)
            <= self.capacity
    }

    /// Removes entry `(id, generation)` if present (its generation is over).
    pub fn retire(&self, id: u64, generation: u64) {
        match &self.place {
            Place::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(old) = map.remove(&(id, generation)) {
                    self.sub_bytes(entry::size(old.len()));
                }
            }
            Place::Disk(_) => {
                if let Some(path) = self.entry_path(id, generation) {
                    self.remove_file(&path);
                }
            }
        }
    }

    fn sub_bytes(&self, n: u64) {
        let _ = self
            .counters
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(n))
            });
    }

    /// Removes an entry file (another process may have removed it first).
    pub(super) fn remove_file(&self, path: &Path) {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if fs::remove_file(path).is_ok() {
            if let Some(dir) = self.dir() {
                self.release(dir, size);
            }
        }
    }

    /// A temporary file's path beside `path`, this process's only.
    pub(super) fn temp_path(&self, path: &Path) -> PathBuf {
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        dir.join(format!(
            "{TEMP_PREFIX}{}-{}-{}",
            std::process::id(),
            TEMP_SEQ.fetch_add(1, Ordering::Relaxed),
            name.unwrap_or_default()
        ))
    }

    /// Writes `bytes` to a temporary file beside `path` and renames it into place.
    pub(super) fn write_atomic(
        &self,
        path: &Path,
        bytes: &[u8],
    ) -> std::result::Result<(), WriteError> {
        let temp = self.temp_path(path);
        let written = fs::File::create(&temp)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| WriteError(temp.clone(), e))
            .and_then(|()| fs::rename(&temp, path).map_err(|e| WriteError(path.to_path_buf(), e)));
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}
