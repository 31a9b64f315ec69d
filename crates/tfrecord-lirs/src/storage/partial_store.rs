//! The store of partially augmented samples (data refurbishing, `docs/FORMAT.md` §7.1):
//! in this process's memory, or in a directory that every DataLoader/Grain worker
//! process, a restarted job and a concurrent second job can share.
//!
//! The store is a memo. Its entries are keyed by the [`StoreIdentity`] (dataset, partial
//! function and its version, seed), the id and the generation; since the partial
//! augmentation's seed is derived from `(seed, id, generation)`, a missing, stale, torn
//! or corrupt entry is recomputed to the same output: [`PartialStore::get`] never
//! serves a wrong entry and never fails, it returns `None`.
//!
//! On disk: `<root>/<namespace>/` per identity (`namespace` = the CRC-64/NVME of the
//! identity's text, 16 hex digits; an `IDENTITY` file in it holds the text and is
//! checked at open), one file per entry `<id>.<generation>`: magic `LIRSPAR1`, then
//! namespace, id, generation and payload length (u64 little-endian each), the payload,
//! and the CRC-32C of everything before it (u32). Each entry is written to a temporary
//! file and renamed into place, so a reader (of any process) sees a whole entry or
//! none, and a killed writer leaves at most a temporary file (never an entry that
//! verifies). One file per entry rather than a key-value database: entries are whole
//! samples (kilobytes to megabytes) written once and read a few times, which a file
//! system's rename already makes atomic across processes with no lock and no
//! dependency. Measured against LMDB (`heed` 0.22, one committed transaction per put, as
//! concurrent workers would need) on the loaded 2-core dev machine, µs per entry, files
//! / LMDB: 2 KB put 578–2558 / 3311–4596, get 18–22 / 0.4; 150 KB put 2094–4546 /
//! 1125–11448, get 60–70 / 20–25. LMDB reads faster (a memory map), but a get is far
//! below the partial augmentation it saves (milliseconds), while LMDB adds one writer
//! lock for every worker process, a fixed map size and a C dependency.
//!
//! Bounded store-wide: a store holds at most `capacity` bytes of entries. On disk every
//! process counts in one ledger (`partial_ledger.rs`); in memory the store is the
//! process's own. A put over the bound first evicts entries of generations older than
//! its own, oldest first (down to 7/8 of the bound, so the next eviction is an eighth
//! of the bound away): an older generation is needed only by a job behind this one. A
//! put that still does not fit, or that meets a full disk (`ENOSPC`/`EDQUOT`), is not
//! stored (counted in [`StoreStats::unstored`]): the next use recomputes instead.
//! Generations are otherwise kept: a second job on the same store, behind the first,
//! uses them (the read layer's `Refurbisher` decides what to store and keep).
//! Jobs sharing a directory while they run compute each entry once: [`PartialStore::fetch`]
//! claims a missing entry before the caller computes it (`partial_claim.rs`).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tfrecord_lirs_format::error::{Error, Result};

use super::partial_claim::{self as claim, Claim, Claimed};
use super::partial_identity::{self as entry, StoreIdentity};
use super::partial_ledger::{
    self as ledger, is_full, low_water, Ledger, NoRoom, WriteError, LEDGER_FILE, TEMP_PREFIX,
};

const IDENTITY_FILE: &str = "IDENTITY";
/// Names temporary files apart within this process (every store in it: two stores of
/// one directory in one process must not make the same name).
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A look-up of [`PartialStore::fetch`].
#[derive(Debug)]
pub enum Fetch {
    /// The stored bytes.
    Stored(Vec<u8>),
    /// A miss: compute the entry and put it, then drop the claim (if one was had:
    /// other processes wait for it).
    Compute(Option<Claim>),
}

/// A store's counters: `bytes` is the store's (every process's, on disk), the others
/// this process's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Bytes of entries held (on disk: the ledger's count, which may over-count until
    /// the next scan; see `docs/FORMAT.md` §7.1).
    pub bytes: u64,
    /// Gets that found a verified entry.
    pub hits: u64,
    /// Gets that found no entry.
    pub misses: u64,
    /// Gets that found a torn, corrupt or foreign entry (removed, then a miss).
    pub corrupt: u64,
    /// Entries computed on a refresh (stored unless [`StoreStats::unstored`]).
    pub refreshes: u64,
    /// Entries computed after a miss on a reuse (a lost entry computed again).
    pub recomputes: u64,
    /// Puts not stored: over capacity or a full disk.
    pub unstored: u64,
    /// Entries of older generations removed to make room under the bound.
    pub evicted: u64,
    /// Refreshes served from the store: computed by another member of the store (a
    /// concurrent or earlier job, or this one before a restart), not by this process.
    pub shared: u64,
    /// Misses that found another process's claim on the entry and waited for it.
    pub waits: u64,
    /// Claims taken over from a holder that died before storing its entry.
    pub taken_over: u64,
}

#[derive(Default)]
struct Counters {
    /// The memory store's bytes (a disk store's are the ledger's).
    bytes: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    refreshes: AtomicU64,
    recomputes: AtomicU64,
    unstored: AtomicU64,
    evicted: AtomicU64,
    shared: AtomicU64,
    waits: AtomicU64,
    taken_over: AtomicU64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

enum Place {
    Memory(Mutex<HashMap<(u64, u64), Vec<u8>>>),
    Disk(PathBuf),
}

/// The store of partially augmented samples of one [`StoreIdentity`].
pub struct PartialStore {
    place: Place,
    namespace: u64,
    /// The identity's text (the `IDENTITY` file's).
    identity: String,
    capacity: u64,
    counters: Counters,
    /// `(generation, bytes)` of the last eviction that found no room for that
    /// generation: while the count has not dropped, a put of it skips the scan.
    no_room: NoRoom,
}

impl std::fmt::Debug for PartialStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.place {
            Place::Memory(_) => "memory".to_string(),
            Place::Disk(dir) => dir.display().to_string(),
        };
        f.debug_struct("PartialStore")
            .field("place", &place)
            .field("namespace", &format_args!("{:016x}", self.namespace))
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl PartialStore {
    /// A store in this process's memory, of at most `capacity` bytes.
    pub fn memory(identity: &StoreIdentity, capacity: u64) -> PartialStore {
        PartialStore::new(Place::Memory(Mutex::default()), identity, capacity)
    }

    fn new(place: Place, identity: &StoreIdentity, capacity: u64) -> PartialStore {
        PartialStore {
            place,
            namespace: identity.namespace(),
            identity: identity.text(),
            capacity,
            counters: Counters::default(),
            no_room: NoRoom::default(),
        }
    }

    /// The store of `identity` under the directory `root` (created if missing), of at
    /// most `capacity` bytes (the bound of every process's entries in it). Refuses a
    /// directory that is itself one identity's namespace, or a namespace whose
    /// `IDENTITY` is another's. Removes the temporary files killed writers left.
    pub fn open_dir(root: &Path, identity: &StoreIdentity, capacity: u64) -> Result<PartialStore> {
        if root.join(IDENTITY_FILE).exists() {
            return Err(Error::invalid_argument(format!(
                "{} is one dataset's part of a partial store; give its parent directory",
                root.display()
            )));
        }
        let dir = root.join(format!("{:016x}", identity.namespace()));
        let store = PartialStore::new(Place::Disk(dir.clone()), identity, capacity);
        let text = identity.text();
        let id_path = dir.join(IDENTITY_FILE);
        match fs::read_to_string(&id_path) {
            Ok(found) if found == text => {}
            Ok(found) => {
                return Err(Error::invalid_argument(format!(
                "the partial store {} was written for another dataset, partial function or seed \
                     ({found:?}, not {text:?})",
                dir.display()
            )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => store.make_dir(&dir)?,
            Err(e) => return Err(Error::io(&id_path, e)),
        }
        // The ledger exists from here on (counted by a scan if new).
        ledger::sweep_temps_now_and_then(&dir).map_err(|e| Error::io(&dir.join(LEDGER_FILE), e))?;
        Ok(store)
    }

    /// Makes the namespace directory and its `IDENTITY` (at open, or again after a
    /// user removed it mid-run).
    fn make_dir(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        self.write_atomic(&dir.join(IDENTITY_FILE), self.identity.as_bytes())?;
        Ok(())
    }

    /// The directory of this store's entries (`None` in memory).
    pub fn dir(&self) -> Option<&Path> {
        match &self.place {
            Place::Disk(dir) => Some(dir),
            Place::Memory(_) => None,
        }
    }

    /// Whether the store is this process's own (in memory): no other job uses it.
    pub fn is_private(&self) -> bool {
        matches!(self.place, Place::Memory(_))
    }

    /// The path of entry `(id, generation)` (`None` in memory).
    pub fn entry_path(&self, id: u64, generation: u64) -> Option<PathBuf> {
        self.dir().map(|dir| dir.join(format!("{id}.{generation}")))
    }

    /// The counters (see [`StoreStats`]); on disk `bytes` is read from the ledger (0
    /// if it cannot be read).
    pub fn stats(&self) -> StoreStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let bytes = match &self.place {
            Place::Memory(_) => get(&c.bytes),
            Place::Disk(dir) => Ledger::lock(dir).map(|l| l.bytes).unwrap_or(0),
        };
        StoreStats {
            bytes,
            hits: get(&c.hits),
            misses: get(&c.misses),
            corrupt: get(&c.corrupt),
            refreshes: get(&c.refreshes),
            recomputes: get(&c.recomputes),
            unstored: get(&c.unstored),
            evicted: get(&c.evicted),
            shared: get(&c.shared),
            waits: get(&c.waits),
            taken_over: get(&c.taken_over),
        }
    }

    /// The stored partial output of `(id, generation)`, `None` when there is none that
    /// verifies (a torn or corrupt entry is removed). Never an error: the caller
    /// recomputes.
    pub fn get(&self, id: u64, generation: u64) -> Option<Vec<u8>> {
        let found = self.find(id, generation);
        let c = &self.counters;
        add(if found.is_some() { &c.hits } else { &c.misses }, 1);
        found
    }

    /// The stored output of `(id, generation)`, or a claim to compute it (`docs/FORMAT.md`
    /// §7.1): on a miss in a directory, this process claims the entry, or waits for
    /// the process that holds the claim and then reads what it stored, or takes the
    /// claim over if that process died. Counted as one get (and a wait, a take-over).
    /// Never an error: when no claim can be had the caller computes without one.
    pub fn fetch(&self, id: u64, generation: u64) -> Fetch {
        self.fetch_waiting(id, generation, true)
            .expect("a fetch that waits has an outcome")
    }

    /// As [`PartialStore::fetch`], but `None` (uncounted) where `fetch` would wait for
    /// another process's claim: a caller that must not block its thread then calls
    /// `fetch` from one that may.
    pub fn try_fetch(&self, id: u64, generation: u64) -> Option<Fetch> {
        self.fetch_waiting(id, generation, false)
    }

    fn fetch_waiting(&self, id: u64, generation: u64, wait: bool) -> Option<Fetch> {
        let dir = match &self.place {
            Place::Disk(dir) => dir,
            Place::Memory(_) => return Some(self.counted(self.find(id, generation), None)),
        };
        let path = claim::claim_path(dir, id, generation);
        let temp = self.temp_path(&path);
        let most = if wait {
            claim::CLAIM_WAIT
        } else {
            Duration::ZERO
        };
        loop {
            if let Some(found) = self.find(id, generation) {
                return Some(self.counted(Some(found), None));
            }
            let waited = || {
                if wait {
                    add(&self.counters.waits, 1)
                }
            };
            let claim = match claim::claim(&path, &temp, most, waited) {
                Ok(Claimed::Mine(claim)) => claim,
                Ok(Claimed::TakenOver(claim)) => {
                    add(&self.counters.taken_over, 1);
                    claim
                }
                Ok(Claimed::Released) => continue,
                Ok(Claimed::GaveUp) if !wait => return None,
                Ok(Claimed::GaveUp) | Err(_) => return Some(self.counted(None, None)),
            };
            // Stored by a holder that finished between the look-up and the claim?
            let found = self.find(id, generation);
            return Some(self.counted(found, Some(claim)));
        }
    }

    fn counted(&self, found: Option<Vec<u8>>, claim: Option<Claim>) -> Fetch {
        match found {
            Some(payload) => {
                add(&self.counters.hits, 1);
                Fetch::Stored(payload)
            }
            None => {
                add(&self.counters.misses, 1);
                Fetch::Compute(claim)
            }
        }
    }

    /// A get, uncounted but for a corrupt entry.
    fn find(&self, id: u64, generation: u64) -> Option<Vec<u8>> {
        let found = match &self.place {
            Place::Memory(map) => {
                let map = map.lock().unwrap_or_else(|p| p.into_inner());
                map.get(&(id, generation)).cloned().map(Ok)
            }
            Place::Disk(_) => {
                let path = self.entry_path(id, generation)?;
                let mut file = fs::File::open(&path).ok()?;
                let mut bytes = Vec::new();
                let read = file.read_to_end(&mut bytes).and_then(|_| file.metadata());
                match read.map(|m| (entry::decode(self.namespace, id, generation, bytes), m)) {
                    Ok((Some(payload), _)) => Some(Ok(payload)),
                    Ok((None, m)) => Some(Err((path, m.ino()))),
                    Err(_) => None,
                }
            }
        };
        match found? {
            Ok(payload) => Some(payload),
            Err((path, ino)) => {
                add(&self.counters.corrupt, 1);
                // Unless another process has replaced it with a good entry meanwhile.
                if fs::metadata(&path).is_ok_and(|m| m.ino() == ino) {
                    self.remove_file(&path);
                }
                None
            }
        }
    }

    /// Counts a refresh served from the store (see [`StoreStats::shared`]).
    pub fn count_shared(&self) {
        add(&self.counters.shared, 1);
    }

    /// Counts one partial output computed: on a refresh, or (`recompute`) after a miss.
    pub fn count_computed(&self, recompute: bool) {
        add(
            if recompute {
                &self.counters.recomputes
            } else {
                &self.counters.refreshes
            },
            1,
        );
    }

    /// Counts one partial output not stored (the caller decided it is not needed).
    pub fn count_unstored(&self) {
        add(&self.counters.unstored, 1);
    }

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
    fn remove_file(&self, path: &Path) {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if fs::remove_file(path).is_ok() {
            if let Some(dir) = self.dir() {
                self.release(dir, size);
            }
        }
    }

    /// A temporary file's path beside `path`, this process's only.
    fn temp_path(&self, path: &Path) -> PathBuf {
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
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> std::result::Result<(), WriteError> {
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
