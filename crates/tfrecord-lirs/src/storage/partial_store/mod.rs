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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

use super::partial_claim::Claim;
use super::partial_identity::StoreIdentity;
use super::partial_ledger::{self as ledger, Ledger, NoRoom, LEDGER_FILE};

mod lookup;
mod write;

const IDENTITY_FILE: &str = "IDENTITY";

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
        // An empty path would put the store in the working directory, where no other
        // job looks for it unless started in the same place.
        if root.as_os_str().is_empty() {
            return Err(Error::invalid_argument(
                "the store directory is an empty path: give a directory (the jobs that open \
                 the same one share it), or None for a store in this process's memory",
            ));
        }
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
}
