//! The refurbish step (`docs/FORMAT.md` §7.2): one use of the schedule — look the
//! partial output of `(id, generation)` up in the store; on a miss (or a torn, corrupt
//! entry) compute it with the user's partial function from the partial seed and store
//! it, unless the schedule proves no use will come; count it. Every front end (the
//! Python `Refurbisher` of PyTorch and Grain, tf.data's `refurbish`) takes this step;
//! the user's functions stay callbacks (a closure here, a Python callable there).
//!
//! Concurrent jobs on one directory store share the work: a miss is claimed before it
//! is computed, and a job that finds another's claim waits for that entry
//! ([`PartialStore::fetch`]); a claim dies with its process. Front ends whose
//! computation runs between two calls (tf.data: a lookup kernel, the graph's partial,
//! a keep kernel) take the step in two halves, [`Refurbisher::claim_lookup`] then
//! [`Refurbisher::keep_claimed`]: the claim is held by the step in between, released
//! by the keep, or with the step (its last clone dropped) if the keep never comes.
//!
//! What is kept: in a private store (this process's memory) only this job reads, so a
//! refresh retires the generation it replaces and an output whose use is the last of
//! its generation is not stored. A shared store (a directory) keeps every generation:
//! a second job on the same store (same data, seed and partial function) behind this
//! one needs the older ones, and nothing tells this job how far behind it is; the byte
//! bound evicts the oldest generations first (`PartialStore`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use tfrecord_lirs_format::refurbish::{final_seed, partial_seed, RefurbishSchedule, Use};

use crate::storage::partial_claim::Claim;
use crate::storage::partial_store::{Fetch, PartialStore};

/// A use's partial output: the stored bytes (the caller decodes them) or the value the
/// partial function computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partial<T> {
    /// Found in the store: the bytes the encoder made of it.
    Stored(Vec<u8>),
    /// Computed now (and stored, unless no use of it will come).
    Computed(T),
}

/// The first half of a two-half step ([`Refurbisher::claim_lookup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Found in the store: the bytes the encoder made of it.
    Stored(Vec<u8>),
    /// A miss: compute it, then [`Refurbisher::keep_claimed`] (the step holds its
    /// claim, if one was had, until then).
    Compute,
    /// Another process holds the claim: look up again with `wait` (from a thread that
    /// may block).
    Busy,
}

/// The refurbish step over one schedule and one store.
#[derive(Debug, Clone)]
pub struct Refurbisher {
    schedule: RefurbishSchedule,
    store: Arc<PartialStore>,
    /// The claims of two-half steps between their lookup and keep, by `(id,
    /// generation)`; dropped with the last clone of the step.
    held: Arc<Mutex<HashMap<(u64, u64), Claim>>>,
}

impl Refurbisher {
    /// The step of `schedule` over `store` (whose identity's seed should be the
    /// schedule's: the store is keyed by it).
    pub fn new(schedule: RefurbishSchedule, store: Arc<PartialStore>) -> Refurbisher {
        Refurbisher {
            schedule,
            store,
            held: Arc::default(),
        }
    }

    /// Checks that `store` can serve the step of a schedule with `reuse_factor`
    /// (`None`: unknown) in a data-loading worker process (a PyTorch `DataLoader`'s): a
    /// store in memory cannot if outputs are reused, as each worker would keep its own,
    /// lost with the worker, and reuse nothing. With `reuse_factor` 1 nothing is reused
    /// (a private store keeps nothing): any store serves.
    pub fn check_worker_process(store: &PartialStore, reuse_factor: Option<u64>) -> Result<()> {
        if !store.is_private() || reuse_factor == Some(1) {
            return Ok(());
        }
        Err(Error::invalid_argument(
            "this store of partially augmented samples is in this process's memory \
             (store=None), and it is used in a DataLoader worker process: each worker would \
             keep its own, lost with the worker, and reuse none. Give store a directory \
             (shared by every worker; under /dev/shm for memory speed), or num_workers=0",
        ))
    }

    /// The schedule.
    pub fn schedule(&self) -> &RefurbishSchedule {
        &self.schedule
    }

    /// The store.
    pub fn store(&self) -> &PartialStore {
        &self.store
    }

    /// The seed of the partial augmentation of `(id, generation)`.
    pub fn partial_seed(&self, id: u64, generation: u64) -> u64 {
        partial_seed(self.schedule.params().seed, id, generation)
    }

    /// The seed of the final augmentation of `id` at `epoch`.
    pub fn final_seed(&self, id: u64, epoch: u64) -> u64 {
        final_seed(self.schedule.params().seed, id, epoch)
    }

    /// The first half of the step: the stored output of `(id, generation)`, `None` on
    /// a miss (then compute from [`Refurbisher::partial_seed`] and [`Refurbisher::keep`]).
    /// A refresh looks too: another job with the same store identity, or this one
    /// before a restart, may have stored this generation already.
    pub fn lookup(&self, id: u64, generation: u64) -> Option<Vec<u8>> {
        self.store.get(id, generation)
    }

    /// Whether the schedule uses `(id, generation)` after `epoch`.
    pub fn used_after(&self, id: u64, generation: u64, epoch: u64) -> bool {
        epoch
            .checked_add(1)
            .and_then(|next| self.schedule.generation(id, next))
            == Some(generation)
    }

    /// The second half of the step: counts the output of `(id, generation)` computed
    /// at `epoch` (on a refresh, or recomputed after a miss) and stores `payload`
    /// unless the store is private and no use of it will come (see the module docs).
    /// Whether it was stored; a write error other than a full disk is an error.
    pub fn keep(
        &self,
        id: u64,
        generation: u64,
        epoch: u64,
        refresh: bool,
        payload: &[u8],
    ) -> Result<bool> {
        if self.store.is_private() {
            if refresh {
                if let Some(old) = self.schedule.replaced_generation(id, generation) {
                    self.store.retire(id, old);
                }
            }
            if !self.used_after(id, generation, epoch) {
                self.store.count_computed(!refresh);
                return Ok(false);
            }
        }
        self.store.put(id, generation, payload, None, !refresh)
    }

    /// The whole step for one use: the stored output, or `compute(partial_seed)` —
    /// the value and its bytes to store — kept by [`Refurbisher::keep`]. In a shared
    /// store the computation is claimed first ([`PartialStore::fetch`]): processes
    /// sharing the store compute each `(id, generation)` once, and one that finds
    /// another's claim waits for its entry.
    pub fn partial<T, E: From<Error>>(
        &self,
        id: u64,
        refresh: bool,
        generation: u64,
        epoch: u64,
        compute: impl FnOnce(u64) -> std::result::Result<(T, Vec<u8>), E>,
    ) -> std::result::Result<Partial<T>, E> {
        let fetched = self.store.fetch(id, generation);
        self.finish(
            fetched,
            Use {
                id,
                refresh,
                generation,
            },
            epoch,
            compute,
        )
    }

    /// [`Refurbisher::partial`] for a batch of uses, each with its epoch, the outputs in
    /// the batch's order; `compute(i, partial_seed)` computes use `i`. A use whose entry
    /// another process is computing is put off until the batch's other uses are done:
    /// jobs in step over one store (a sweep) then compute different uses of a batch at
    /// the same time, each reading the others' entries after, rather than all waiting
    /// for the one entry the first of them claimed.
    pub fn partials<T, E: From<Error>>(
        &self,
        uses: &[(Use, u64)],
        mut compute: impl FnMut(usize, u64) -> std::result::Result<(T, Vec<u8>), E>,
    ) -> std::result::Result<Vec<Partial<T>>, E> {
        let mut out: Vec<Option<Partial<T>>> = uses.iter().map(|_| None).collect();
        let mut later = Vec::new();
        for (i, &(u, epoch)) in uses.iter().enumerate() {
            match self.store.try_fetch(u.id, u.generation) {
                Some(fetched) => {
                    out[i] = Some(self.finish(fetched, u, epoch, |seed| compute(i, seed))?)
                }
                None => later.push(i),
            }
        }
        for i in later {
            let (u, epoch) = uses[i];
            let fetched = self.store.fetch(u.id, u.generation);
            out[i] = Some(self.finish(fetched, u, epoch, |seed| compute(i, seed))?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// The rest of the step once the store answered: the stored output, or the
    /// computed one, kept, then the claim (if any) released.
    fn finish<T, E: From<Error>>(
        &self,
        fetched: Fetch,
        u: Use,
        epoch: u64,
        compute: impl FnOnce(u64) -> std::result::Result<(T, Vec<u8>), E>,
    ) -> std::result::Result<Partial<T>, E> {
        let claim = match fetched {
            Fetch::Stored(stored) => {
                if u.refresh {
                    self.store.count_shared();
                }
                return Ok(Partial::Stored(stored));
            }
            Fetch::Compute(claim) => claim,
        };
        let (value, payload) = compute(self.partial_seed(u.id, u.generation))?;
        self.keep(u.id, u.generation, epoch, u.refresh, &payload)?;
        // Released once the entry is stored (or on an error: a waiter computes it).
        drop(claim);
        Ok(Partial::Computed(value))
    }
    /// The first half of the step in two halves: the stored output of `(id,
    /// generation)`, or `Compute` with the computation claimed as
    /// [`Refurbisher::partial`] claims it, the claim held by the step until
    /// [`Refurbisher::keep_claimed`]. `wait`: wait for another process's claim (then
    /// read its entry); without, `Busy` instead. A claim this step already holds (the
    /// same `(id, generation)` in flight in this process, a reuse that overtook its
    /// refresh across an epoch boundary) is never waited for: `Compute`, unclaimed.
    pub fn claim_lookup(&self, id: u64, generation: u64, wait: bool) -> Lookup {
        let key = (id, generation);
        let held = || self.held.lock().unwrap_or_else(|p| p.into_inner());
        let unclaimed = || match self.store.get(id, generation) {
            Some(stored) => Lookup::Stored(stored),
            None => Lookup::Compute,
        };
        if self.store.is_private() || held().contains_key(&key) {
            return unclaimed();
        }
        let fetched = if wait {
            self.store.fetch(id, generation)
        } else {
            // Under the lock: two lookups of one entry in this process never wait
            // for each other's claim.
            let mut held = held();
            if held.contains_key(&key) {
                drop(held);
                return unclaimed();
            }
            match self.store.try_fetch(id, generation) {
                Some(Fetch::Compute(Some(claim))) => {
                    held.insert(key, claim);
                    return Lookup::Compute;
                }
                Some(fetched) => fetched,
                None => return Lookup::Busy,
            }
        };
        match fetched {
            Fetch::Stored(stored) => Lookup::Stored(stored),
            Fetch::Compute(claim) => {
                if let Some(claim) = claim {
                    // Kept unless one of this step's is held already (then released).
                    held().entry(key).or_insert(claim);
                }
                Lookup::Compute
            }
        }
    }

    /// The second half of the step in two halves: [`Refurbisher::keep`], then the
    /// claim of `(id, generation)` the step holds (if any) is released, also on an
    /// error (another process then computes the entry).
    pub fn keep_claimed(
        &self,
        id: u64,
        generation: u64,
        epoch: u64,
        refresh: bool,
        payload: &[u8],
    ) -> Result<bool> {
        let kept = self.keep(id, generation, epoch, refresh, payload);
        self.release_claim(id, generation);
        kept
    }

    /// Releases the claim of `(id, generation)` the step holds, if any (a two-half
    /// step that will not keep: another process then computes the entry).
    pub fn release_claim(&self, id: u64, generation: u64) {
        let claim = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(id, generation));
        drop(claim);
    }
}
