//! The refurbish step for tf.data (`docs/FORMAT.md` §7.2), as the three kernels of
//! `tfrecord_lirs.refurbish` call it: an epoch's uses, a use's lookup (the stored
//! partial output, else the record to compute it from, and both seeds as TensorFlow's
//! `int64[2]`), and the keep of what the graph's `partial` computed. The step is the
//! core's [`Refurbisher`], taken in two halves (`claim_lookup`, `keep_claimed`): a
//! miss in a directory store is claimed, so jobs sharing the store compute it once,
//! and the claim is held by the step until the keep (or until the step is dropped).
//! Here its config is read from the ops' attrs, and one step (one store, its claims)
//! is shared by every kernel of the same `store_key`, so a store in memory is one
//! store for the whole pipeline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tfrecord_lirs::options::{self, defaults};
use tfrecord_lirs::{
    self as core, stateless_seed_pair, Lookup, PartialStore, RefurbishParams, RefurbishSchedule,
    Refurbisher, StoreIdentity,
};

use crate::op_config::{reader_config_of, OpArgs, READER_ATTRS};
use crate::reader::{open_reader, path_of};
use crate::status::{guard, report};
use crate::{FfiError, FfiResult, FilePath, NamedValue, RefurbishFound, Status};

/// The attrs of the refurbish ops besides the reader's.
const STEP_ATTRS: [&str; 11] = [
    "seed",
    "reuse_factor",
    "batch_size",
    "num_shards",
    "shard_index",
    "order_version",
    "store_dir",
    "store_dataset",
    "store_partial",
    "store_bytes",
    "store_key",
];

/// One pipeline's refurbish step: the schedule and store, and the reader of the
/// records a miss is computed from.
pub struct RefurbishStep {
    shared: Arc<Shared>,
}

struct Shared {
    refurbisher: Refurbisher,
    reader: Arc<core::Reader>,
}

fn non_negative(name: &str, value: i64) -> FfiResult<u64> {
    u64::try_from(value).map_err(|_| FfiError::invalid(format!("{name} must be >= 0, got {value}")))
}

/// The step of the attrs `args` over `files` and their `tables`: the one already open
/// for the same attrs (the kernels of one pipeline share it while any of them lives).
#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds rust::Vecs
pub(crate) fn open_refurbish_step(
    args: &Vec<NamedValue>,
    files: &Vec<FilePath>,
    tables: &Vec<FilePath>,
    status: &mut Status,
) -> FfiResult<Box<RefurbishStep>> {
    report(
        status,
        guard("open_refurbish_step", || {
            static STEPS: Mutex<Option<HashMap<String, Weak<Shared>>>> = Mutex::new(None);
            // The whole config is the key: a store_key names one pipeline's store, and
            // the files and options come with it. Sorted by name: each kernel gets its
            // attrs in the order of a protobuf map, which is not the same for all.
            let mut sorted: Vec<&NamedValue> = args.iter().collect();
            sorted.sort_by(|a, b| a.name.cmp(&b.name));
            let key = format!("{sorted:?}{files:?}{tables:?}");
            let mut steps = STEPS.lock().unwrap_or_else(|p| p.into_inner());
            let steps = steps.get_or_insert_with(HashMap::new);
            if let Some(shared) = steps.get(&key).and_then(Weak::upgrade) {
                return Ok(Box::new(RefurbishStep { shared }));
            }
            let shared = Arc::new(open_shared(args, files, tables)?);
            steps.retain(|_, step| step.strong_count() > 0);
            steps.insert(key, Arc::downgrade(&shared));
            Ok(Box::new(RefurbishStep { shared }))
        }),
    )
}

fn open_shared(args: &[NamedValue], files: &[FilePath], tables: &[FilePath]) -> FfiResult<Shared> {
    let known: Vec<&str> = READER_ATTRS.iter().chain(&STEP_ATTRS).copied().collect();
    let args = OpArgs::new("LIRSRefurbish", args, &known)?;
    let reader_config = reader_config_of(&args, files, tables)?;
    let reader = open_reader(&reader_config, &mut crate::ok_status())?
        .core()
        .clone();
    let batch_size = args.int("batch_size")?;
    let params = RefurbishParams {
        // The u64 seed crosses as the int64 of the same bits.
        seed: args.int("seed")? as u64,
        reuse_factor: options::reuse_factor(args.int("reuse_factor")? as f64)?,
        batch_size: u64::try_from(batch_size)
            .map_err(|_| FfiError::invalid(format!("batch_size must be >= 1, got {batch_size}")))?,
        num_shards: non_negative("num_shards", args.int("num_shards")?)?,
        shard_index: non_negative("shard_index", args.int("shard_index")?)?,
        order_version: options::order_version(non_negative(
            "order_version",
            args.int("order_version")?,
        )?)?,
    };
    let schedule = RefurbishSchedule::new(reader.len(), &params).map_err(core::Error::from)?;
    let identity = StoreIdentity {
        dataset: args.string("store_dataset")?,
        partial: args.string("store_partial")?,
        seed: params.seed,
    };
    let capacity = match args.int("store_bytes")? {
        -1 => defaults::STORE_BYTES,
        bytes => non_negative("store_bytes", bytes)?,
    };
    let dir = args.bytes("store_dir")?;
    let store = match dir.is_empty() {
        true => PartialStore::memory(&identity, capacity),
        false => PartialStore::open_dir(&path_of(&dir), &identity, capacity)?,
    };
    Ok(Shared {
        refurbisher: Refurbisher::new(schedule, Arc::new(store)),
        reader,
    })
}

impl RefurbishStep {
    /// The uses of `epoch` in delivery order (the vectors are cleared first).
    pub(crate) fn epoch_uses(
        &self,
        epoch: i64,
        ids: &mut Vec<i64>,
        refresh: &mut Vec<u8>,
        generation: &mut Vec<i64>,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("refurbish_epoch_uses", || {
                let mut walk = self
                    .shared
                    .refurbisher
                    .schedule()
                    .epoch(non_negative("epoch", epoch)?)
                    .map_err(core::Error::from)?;
                let mut uses = Vec::with_capacity(walk.len() as usize);
                walk.next_uses(walk.len() as usize, &mut uses);
                ids.clear();
                refresh.clear();
                generation.clear();
                for u in uses {
                    ids.push(u.id as i64);
                    refresh.push(u8::from(u.refresh));
                    generation.push(u.generation as i64);
                }
                Ok(())
            }),
        )
    }

    /// One use's first half: whether the store holds the partial output of `(id,
    /// generation)` (`payload` is that output's bytes), or it is to compute (`payload`
    /// is the record of `id`; the claim is held until [`RefurbishStep::keep`]), or
    /// another process holds its claim and `wait` is false (`Busy`: call again with
    /// `wait` from a thread that may block). `partial_seed` and `final_seed` (two
    /// values each) get the seeds as TensorFlow's stateless ops take them.
    #[allow(clippy::too_many_arguments)] // one use, and where its four outputs go
    pub(crate) fn lookup(
        &self,
        id: i64,
        generation: i64,
        epoch: i64,
        wait: bool,
        payload: &mut Vec<u8>,
        partial_seed: &mut [i64],
        final_seed: &mut [i64],
        status: &mut Status,
    ) -> FfiResult<RefurbishFound> {
        report(
            status,
            guard("refurbish_lookup", || {
                let step = &self.shared.refurbisher;
                let (id, generation, epoch) = (
                    non_negative("id", id)?,
                    non_negative("generation", generation)?,
                    non_negative("epoch", epoch)?,
                );
                for (out, seed) in [
                    (partial_seed, step.partial_seed(id, generation)),
                    (final_seed, step.final_seed(id, epoch)),
                ] {
                    let pair = stateless_seed_pair(seed);
                    if out.len() != pair.len() {
                        return Err(FfiError::internal("a seed output must hold 2 values"));
                    }
                    out.copy_from_slice(&pair);
                }
                Ok(match step.claim_lookup(id, generation, wait) {
                    Lookup::Stored(stored) => {
                        *payload = stored;
                        RefurbishFound::Stored
                    }
                    Lookup::Compute => {
                        // No keep follows an error: its claim goes now.
                        *payload = self
                            .shared
                            .reader
                            .read(id)
                            .inspect_err(|_| step.release_claim(id, generation))?;
                        RefurbishFound::Compute
                    }
                    Lookup::Busy => RefurbishFound::Busy,
                })
            }),
        )
    }

    /// The use of `(id, generation)` whose lookup said `Compute`, until its keep: if
    /// it is dropped without [`RefurbishPending::kept`] (the graph's partial failed, so
    /// no keep comes), the claim its lookup took is released then, not with the step
    /// (another job would wait for it until this pipeline is torn down).
    pub(crate) fn pending(&self, id: i64, generation: i64) -> Box<RefurbishPending> {
        Box::new(RefurbishPending {
            shared: self.shared.clone(),
            // Negative ids were refused by the lookup that said `Compute`.
            key: (id as u64, generation as u64),
            kept: AtomicBool::new(false),
        })
    }

    /// One use's second half: counts the output computed at `epoch` and stores
    /// `payload` unless no use of it will come (the core's rule), then releases the
    /// claim the lookup took. Whether it was stored.
    pub(crate) fn keep(
        &self,
        id: i64,
        generation: i64,
        epoch: i64,
        refresh: bool,
        payload: &[u8],
        status: &mut Status,
    ) -> FfiResult<bool> {
        report(
            status,
            guard("refurbish_keep", || {
                Ok(self.shared.refurbisher.keep_claimed(
                    non_negative("id", id)?,
                    non_negative("generation", generation)?,
                    non_negative("epoch", epoch)?,
                    refresh,
                    payload,
                )?)
            }),
        )
    }
}

/// A use between its lookup (`Compute`) and its keep ([`RefurbishStep::pending`]).
pub struct RefurbishPending {
    shared: Arc<Shared>,
    key: (u64, u64),
    kept: AtomicBool,
}

impl RefurbishPending {
    /// Its keep ran (the keep released the claim).
    pub(crate) fn kept(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }
}

impl Drop for RefurbishPending {
    fn drop(&mut self) {
        if !self.kept.load(Ordering::Relaxed) {
            let (id, generation) = self.key;
            self.shared.refurbisher.release_claim(id, generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support;

    fn args(store_key: &str, dir: &str, reuse_factor: i64) -> Vec<NamedValue> {
        let int = |name: &str, v: i64| NamedValue {
            name: name.into(),
            ints: vec![v],
            bytes: vec![],
        };
        let text = |name: &str, v: &str| NamedValue {
            name: name.into(),
            ints: vec![],
            bytes: v.as_bytes().to_vec(),
        };
        vec![
            int("page_size", 4096),
            text("backend", "auto"),
            int("trust_table", 0),
            int("index_missing", 1),
            text("cache_dir", ""),
            int("cache_bytes", -1),
            int("seed", -3),
            int("reuse_factor", reuse_factor),
            int("batch_size", 4),
            int("num_shards", 1),
            int("shard_index", 0),
            int("order_version", 1),
            text("store_dir", dir),
            text("store_dataset", "d"),
            text("store_partial", "p"),
            int("store_bytes", -1),
            text("store_key", store_key),
        ]
    }

    fn step(dir: &std::path::Path, key: &str, store: &str, r: i64) -> Box<RefurbishStep> {
        let file = test_support::write_u32_file(dir, 10, 8);
        let files = test_support::reader_config(&file, "auto").files;
        open_refurbish_step(
            &args(key, store, r),
            &files,
            &vec![],
            &mut crate::ok_status(),
        )
        .unwrap()
    }

    fn uses(step: &RefurbishStep, epoch: i64) -> (Vec<i64>, Vec<u8>, Vec<i64>) {
        let (mut ids, mut refresh, mut generation) = (vec![], vec![], vec![]);
        step.epoch_uses(
            epoch,
            &mut ids,
            &mut refresh,
            &mut generation,
            &mut crate::ok_status(),
        )
        .unwrap();
        (ids, refresh, generation)
    }

    #[test]
    fn uses_and_seeds_are_the_cores() {
        let dir = tempfile::tempdir().unwrap();
        let step = step(dir.path(), "a", "", 3);
        let params = RefurbishParams {
            seed: -3i64 as u64,
            reuse_factor: 3,
            batch_size: 4,
            num_shards: 1,
            shard_index: 0,
            order_version: options::order_version(1).unwrap(),
        };
        let schedule = RefurbishSchedule::new(10, &params).unwrap();
        let mut walk = schedule.epoch(2).unwrap();
        let mut want = vec![];
        walk.next_uses(10, &mut want);
        let (ids, refresh, generation) = uses(&step, 2);
        assert_eq!(ids, want.iter().map(|u| u.id as i64).collect::<Vec<_>>());
        assert_eq!(
            refresh,
            want.iter().map(|u| u8::from(u.refresh)).collect::<Vec<_>>()
        );
        assert_eq!(
            generation,
            want.iter().map(|u| u.generation as i64).collect::<Vec<_>>()
        );
        let (mut payload, mut p, mut f) = (vec![], [0i64; 2], [0i64; 2]);
        let found = step
            .lookup(
                7,
                0,
                3,
                false,
                &mut payload,
                &mut p,
                &mut f,
                &mut crate::ok_status(),
            )
            .unwrap();
        assert_eq!(found, RefurbishFound::Compute);
        assert_eq!(&payload[..4], &7u32.to_le_bytes()); // the record
        assert_eq!(
            p,
            stateless_seed_pair(core::partial_seed(params.seed, 7, 0))
        );
        assert_eq!(f, stateless_seed_pair(core::final_seed(params.seed, 7, 3)));
    }

    #[test]
    fn kernels_of_one_store_key_share_the_store_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let first = step(dir.path(), "k", "", 2);
        let other = step(dir.path(), "other", "", 2);
        // The same attrs in another order (as another kernel may get them).
        let file = test_support::write_u32_file(dir.path(), 10, 8);
        let files = test_support::reader_config(&file, "auto").files;
        let mut reversed = args("k", "", 2);
        reversed.reverse();
        let second =
            open_refurbish_step(&reversed, &files, &vec![], &mut crate::ok_status()).unwrap();
        let mut st = crate::ok_status();
        // An id reused at epoch 1: its epoch-0 output is stored at epoch 0.
        let (ids, refresh, _) = uses(&first, 1);
        let id = ids[refresh.iter().position(|&r| r == 0).unwrap()];
        assert!(first.keep(id, 0, 0, true, b"out", &mut st).unwrap());
        let (mut payload, mut p, mut f) = (vec![], [0i64; 2], [0i64; 2]);
        let found = second
            .lookup(id, 0, 1, false, &mut payload, &mut p, &mut f, &mut st)
            .unwrap();
        assert_eq!(found, RefurbishFound::Stored);
        assert_eq!(payload, b"out");
        let found = other
            .lookup(id, 0, 1, false, &mut payload, &mut p, &mut f, &mut st)
            .unwrap();
        assert_eq!(found, RefurbishFound::Compute);
    }

    /// Two pipelines (two jobs) on one directory: a miss is claimed from the lookup
    /// to the keep, the other finds it busy, then reads what the keep stored; a lookup
    /// whose record cannot be read releases its claim at once.
    #[test]
    fn pipelines_on_one_directory_share_through_claims() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let store = store.to_str().unwrap();
        let (a, b) = (
            step(dir.path(), "a", store, 2),
            step(dir.path(), "b", store, 2),
        );
        let mut st = crate::ok_status();
        let (mut payload, mut p, mut f) = (vec![], [0i64; 2], [0i64; 2]);
        let mut look = |s: &RefurbishStep, id, payload: &mut Vec<u8>| {
            s.lookup(id, 0, 0, false, payload, &mut p, &mut f, &mut st)
        };
        assert_eq!(look(&a, 3, &mut payload).unwrap(), RefurbishFound::Compute);
        assert_eq!(look(&b, 3, &mut payload).unwrap(), RefurbishFound::Busy);
        assert!(a
            .keep(3, 0, 0, true, b"out", &mut crate::ok_status())
            .unwrap());
        assert_eq!(look(&b, 3, &mut payload).unwrap(), RefurbishFound::Stored);
        assert_eq!(payload, b"out");
        // A lookup's claim goes with its failed read (id 99: beyond the file): the
        // other pipeline's lookup then claims it too (and fails the same way), not
        // finding it busy.
        for s in [&a, &b] {
            let err = look(s, 99, &mut payload).unwrap_err();
            assert_ne!(err.code, crate::ErrorCode::Ok);
        }
        assert_eq!(b.shared.refurbisher.store().stats().misses, 1);
    }

    /// A use whose partial fails (its pending use dropped without a keep) releases its
    /// claim at once: the other pipeline claims the entry instead of finding it busy
    /// until the first is torn down. A kept one leaves nothing to release.
    #[test]
    fn a_failed_partial_releases_its_claim() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let store = store.to_str().unwrap();
        let (a, b) = (
            step(dir.path(), "fa", store, 2),
            step(dir.path(), "fb", store, 2),
        );
        let mut st = crate::ok_status();
        let (mut payload, mut p, mut f) = (vec![], [0i64; 2], [0i64; 2]);
        let mut look = |s: &RefurbishStep, id, payload: &mut Vec<u8>| {
            s.lookup(id, 0, 0, false, payload, &mut p, &mut f, &mut st)
        };
        assert_eq!(look(&a, 3, &mut payload).unwrap(), RefurbishFound::Compute);
        let failed = a.pending(3, 0);
        assert_eq!(look(&b, 3, &mut payload).unwrap(), RefurbishFound::Busy);
        drop(failed);
        assert_eq!(look(&b, 3, &mut payload).unwrap(), RefurbishFound::Compute);
        let kept = b.pending(3, 0);
        assert!(b
            .keep(3, 0, 0, true, b"out", &mut crate::ok_status())
            .unwrap());
        kept.kept();
        drop(kept);
        assert_eq!(look(&a, 3, &mut payload).unwrap(), RefurbishFound::Stored);
        // Still `a`'s step: the pipeline is not torn down.
        drop(a);
    }

    #[test]
    fn bad_values_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let step = step(dir.path(), "e", "", 2);
        let mut st = crate::ok_status();
        let (mut payload, mut p, mut f) = (vec![], [0i64; 2], [0i64; 2]);
        let err = step
            .lookup(-1, 0, 0, false, &mut payload, &mut p, &mut f, &mut st)
            .unwrap_err();
        assert_eq!(err.code, crate::ErrorCode::InvalidArgument);
        assert!(st.message.contains("id must be >= 0"), "{}", st.message);
        let err = step
            .lookup(99, 0, 0, false, &mut payload, &mut p, &mut f, &mut st)
            .unwrap_err();
        assert_ne!(err.code, crate::ErrorCode::Ok);
        let file = test_support::write_u32_file(dir.path(), 10, 8);
        let files = test_support::reader_config(&file, "auto").files;
        let err = open_refurbish_step(&args("z", "", 0), &files, &vec![], &mut st)
            .err()
            .unwrap();
        assert!(err.message.contains("reuse_factor"), "{}", err.message);
    }
}
