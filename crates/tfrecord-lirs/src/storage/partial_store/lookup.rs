//! Look-ups in the partial store: a get that serves only an entry that verifies, and a
//! fetch that claims a missing entry (or waits for the process computing it).

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use super::{add, Fetch, PartialStore, Place};
use crate::storage::partial_claim::{self as claim, Claim, Claimed};
use crate::storage::partial_identity as entry;

impl PartialStore {
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
}
