//! `NativeLoader`: the core's [`DatasetLoader`] for Python's `tfrecord_lirs.Loader`.
//!
//! Types only: options (`None`: the core's default), batches (`list[bytes]`, built
//! after the GIL-free wait), and the checkpoint as a `state_dict` of plain Python
//! values (the cursor state as its encoded bytes). Every rule is the core's.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tfrecord_lirs::{
    self as core, CursorState, DatasetLoader, EpochState, LoaderOptions, LoaderState, WorkerEpochs,
};

use crate::{args, IntoPy, NativeReader};

/// The keys of a `state_dict` (torchdata's `StatefulDataLoader` convention: a dict of
/// picklable values).
const KEY_EPOCH: &str = "epoch";
const KEY_CURSOR: &str = "cursor";
const KEY_FILES: &str = "files";
/// Each file's base name (version 2 on; docs/FORMAT.md §6).
const KEY_NAMES: &str = "names";
/// The state's version: absent in version 1 (no names), 2 since names were kept, 3
/// since DataLoader workers split a shard by whole batches (before: `num_shards` and
/// `shard_index` composed with the worker, the walk of that epoch).
const KEY_VERSION: &str = "version";
/// The DataLoader workers and this one (version 3 on).
const KEY_WORKER_COUNT: &str = "worker_count";
const KEY_WORKER_INDEX: &str = "worker_index";
/// What the shards do with the remainder (version 2 on; absent: "keep").
const KEY_SHARD_REMAINDER: &str = "shard_remainder";
const STATE_VERSION: u64 = 3;
const KEY_SEED: &str = "seed";
const KEY_PAGE_AWARE: &str = "page_aware";
const KEY_NUM_SHARDS: &str = "num_shards";
const KEY_SHARD_INDEX: &str = "shard_index";
/// The epoch state an elastically resumed epoch's walk started from (bytes), or None.
const KEY_RESUMED_FROM: &str = "resumed_from";

/// Epochs of batches of a `NativeReader`'s files, walked by the core's dataset cursor.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeLoader {
    loader: Mutex<DatasetLoader>,
    /// The epochs of the copies of this loader in data-loading worker processes.
    epochs: Mutex<Option<WorkerEpochs>>,
}

#[pymethods]
impl NativeLoader {
    /// A loader over `reader`; each option left `None` takes the core's default.
    #[new]
    #[pyo3(signature = (reader, seed=None, batch_size=None, page_aware=None, deterministic=None,
        num_parallel_reads=None, num_shards=None, shard_index=None, drop_remainder=None,
        order_version=None, shard_remainder=None, process_group=None))]
    #[allow(clippy::too_many_arguments)] // the loader's options, as Python passes them
    fn new(
        py: Python<'_>,
        reader: &NativeReader,
        seed: Option<&Bound<'_, PyAny>>,
        batch_size: Option<&Bound<'_, PyAny>>,
        page_aware: Option<bool>,
        deterministic: Option<&Bound<'_, PyAny>>,
        num_parallel_reads: Option<&Bound<'_, PyAny>>,
        num_shards: Option<&Bound<'_, PyAny>>,
        shard_index: Option<&Bound<'_, PyAny>>,
        drop_remainder: Option<bool>,
        order_version: Option<&Bound<'_, PyAny>>,
        shard_remainder: Option<&str>,
        process_group: Option<(u64, u64)>,
    ) -> PyResult<Self> {
        let seed = args::count(py, "seed", seed)?;
        let batch_size = args::signed(py, "batch_size", batch_size)?;
        let num_parallel_reads = args::signed(py, "num_parallel_reads", num_parallel_reads)?;
        let deterministic = args::typed(py, "deterministic", deterministic)?;
        let num_shards = args::num_shards(py, num_shards)?;
        let shard_index = args::count(py, "shard_index", shard_index)?;
        let (num_shards, shard_index, shard_remainder) = core::options::process_group_shard(
            num_shards,
            shard_index,
            shard_remainder,
            process_group,
        )
        .py_err(py)?;
        let order_version = args::count(py, "order_version", order_version)?;
        let d = LoaderOptions::default();
        let options = LoaderOptions {
            seed: seed.unwrap_or(d.seed),
            batch_size: batch_size.unwrap_or(d.batch_size),
            page_aware: page_aware.unwrap_or(d.page_aware),
            deterministic: deterministic.unwrap_or(d.deterministic),
            num_parallel_reads: num_parallel_reads.unwrap_or(d.num_parallel_reads),
            num_shards,
            shard_index,
            drop_remainder: drop_remainder.unwrap_or(d.drop_remainder),
            order_version: order_version.unwrap_or(d.order_version),
            shard_remainder,
        };
        let loader = DatasetLoader::new(reader.reader.clone(), options).py_err(py)?;
        Ok(NativeLoader {
            loader: Mutex::new(loader),
            epochs: Mutex::new(None),
        })
    }

    /// The options in effect, as keyword arguments (for a copy in another process).
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let o = *self.lock(py)?.options();
        py_dict!(py, {
            "seed": o.seed,
            "batch_size": o.batch_size,
            "page_aware": o.page_aware,
            "deterministic": o.deterministic,
            "num_parallel_reads": o.num_parallel_reads,
            "num_shards": o.num_shards,
            "shard_index": o.shard_index,
            "drop_remainder": o.drop_remainder,
            "order_version": o.order_version,
            "shard_remainder": o.shard_remainder.name(),
        })
    }

    /// The epoch walked now, or next (in the process that made worker processes: the
    /// furthest they got).
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        let own = self.lock(py)?.epoch();
        match &*self.epochs(py)? {
            Some(epochs) if epochs.is_maker() => Ok(own.max(epochs.furthest().py_err(py)?)),
            _ => Ok(own),
        }
    }

    /// Sets the epoch the next walk walks from its start (here and in every worker
    /// process sharing its epochs).
    fn set_epoch(&self, py: Python<'_>, epoch: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch = args::count(py, "epoch", Some(epoch))?.unwrap_or_default();
        if let Some(epochs) = &*self.epochs(py)? {
            epochs.set_epoch(epoch).py_err(py)?;
        }
        self.lock(py)?.set_epoch(epoch);
        Ok(())
    }

    /// Shares this loader's epochs with the copies of it that data-loading worker
    /// processes walk (a file in memory they open): the path.
    fn share_epochs(&self, py: Python<'_>) -> PyResult<String> {
        let mut epochs = self.epochs(py)?;
        if epochs.is_none() {
            let made = WorkerEpochs::create_here().py_err(py)?;
            made.set_epoch(self.lock(py)?.epoch()).py_err(py)?;
            *epochs = Some(made);
        }
        let path = epochs
            .as_ref()
            .map(|e| e.path().to_string_lossy().into_owned());
        Ok(path.unwrap_or_default())
    }

    /// Takes the epochs another process shares (a copy of its loader unpickled here).
    fn join_epochs(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        *self.epochs(py)? = Some(WorkerEpochs::open(&path).py_err(py)?);
        Ok(())
    }

    /// Batches in each epoch of this loader's shard, all its DataLoader workers
    /// together (the same for any number of workers).
    fn batches_per_epoch(&self, py: Python<'_>) -> PyResult<u64> {
        self.lock(py)?.batches_per_epoch().py_err(py)
    }

    /// The shared epochs' path, None when not shared.
    fn epochs_path(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self
            .epochs(py)?
            .as_ref()
            .map(|e| e.path().to_string_lossy().into_owned()))
    }

    /// The worker iterating (`worker_index` of `worker_count`), then a walk begins:
    /// outside worker processes of the current epoch (from a state just loaded, if
    /// any); in a worker process of a `DataLoader` iteration whose base seed is
    /// `base_seed`, of the epoch the shared epochs give it.
    #[pyo3(signature = (worker_count, worker_index, base_seed=None))]
    fn begin(
        &self,
        py: Python<'_>,
        worker_count: u64,
        worker_index: u64,
        base_seed: Option<u64>,
    ) -> PyResult<()> {
        // The shared epochs are a few bytes of positioned I/O: read with the GIL held.
        let epoch = match (self.epochs(py)?.as_mut(), base_seed) {
            (Some(epochs), Some(seed)) => {
                let restored = self.lock(py)?.restored_epoch();
                Some(epochs.begin(worker_index, seed, restored).py_err(py)?)
            }
            _ => None,
        };
        py.detach(|| {
            let mut loader = self.lock_detached()?;
            loader.set_worker(worker_count, worker_index)?;
            match epoch {
                Some(epoch) => loader.begin_epoch(epoch),
                None => loader.begin(),
            }
        })
        .py_err(py)
    }

    /// The next batch as `list[bytes]`, `None` at the end of the epoch; waits with the
    /// GIL released.
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let next = py
            .detach(|| {
                let mut loader = self.lock_detached()?;
                loader.next_batch().transpose()
            })
            .py_err(py)?;
        next.map(|batch| PyList::new(py, batch.iter().map(|p| PyBytes::new(py, p))))
            .transpose()
    }

    /// The checkpoint as a dict: `version` (3), `epoch`, `cursor` (the cursor state's
    /// bytes) and what identifies the walk (`files`: each file's (instances, bytes);
    /// `names`: each file's base name; `seed`, `page_aware`, `num_shards`,
    /// `shard_index`, `worker_count`, `worker_index`).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if let Some(epochs) = &*self.epochs(py)? {
            // Walked by copies in worker processes, which hold the states.
            if epochs.is_maker() && epochs.walked().py_err(py)? {
                self.lock(py)?.set_walked_elsewhere();
            }
        }
        let state = py.detach(|| self.lock_detached()?.state()).py_err(py)?;
        let d = PyDict::new(py);
        d.set_item(KEY_EPOCH, state.epoch)?;
        d.set_item(KEY_CURSOR, PyBytes::new(py, &state.cursor.encode()))?;
        d.set_item(KEY_VERSION, STATE_VERSION)?;
        d.set_item(KEY_FILES, state.walk.dataset.files)?;
        d.set_item(KEY_NAMES, state.walk.dataset.names)?;
        d.set_item(KEY_SEED, state.walk.seed)?;
        d.set_item(KEY_PAGE_AWARE, state.walk.page_aware)?;
        d.set_item(KEY_NUM_SHARDS, state.walk.num_shards)?;
        d.set_item(KEY_SHARD_INDEX, state.walk.shard_index)?;
        d.set_item(KEY_SHARD_REMAINDER, state.walk.shard_remainder.name())?;
        if let core::WorkerSplit::Batches { count, index } = state.split {
            d.set_item(KEY_WORKER_COUNT, count)?;
            d.set_item(KEY_WORKER_INDEX, index)?;
        }
        let resumed_from = state.resumed_from.map(|e| PyBytes::new(py, &e.encode()));
        d.set_item(KEY_RESUMED_FROM, resumed_from)?;
        Ok(d)
    }

    /// This worker's share of the current epoch (the core's `ShardState`, as
    /// bytes) for an elastic resume with another number of workers.
    fn shard_state<'py>(
        &self,
        py: Python<'py>,
        worker_count: u64,
        worker_index: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let state = py
            .detach(|| {
                let mut loader = self.lock_detached()?;
                loader.set_worker(worker_count, worker_index)?;
                loader.shard_state()
            })
            .py_err(py)?;
        Ok(PyBytes::new(py, &state.encode()))
    }

    /// Goes on with the epoch `epoch_state` describes (the bytes of
    /// `combine_shard_states`): the next walk is this loader's shard of what it did
    /// not deliver.
    fn resume_epoch(&self, py: Python<'_>, epoch_state: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch_state = crate::args::resume_state(py, epoch_state)?;
        let epoch_state = EpochState::decode(&epoch_state).py_err(py)?;
        py.detach(|| self.lock_detached()?.resume_epoch(&epoch_state))
            .py_err(py)
    }

    /// Restores a `state_dict` (for the worker iterating, `worker_index` of
    /// `worker_count`): the next walk goes on from it.
    fn load_state_dict(
        &self,
        py: Python<'_>,
        state: &Bound<'_, PyDict>,
        worker_count: u64,
        worker_index: u64,
    ) -> PyResult<()> {
        let item = |key: &str| {
            state.get_item(key)?.ok_or_else(|| {
                crate::to_py(
                    py,
                    &core::Error::invalid_argument(format!(
                        "not a tfrecord_lirs.Loader state_dict: it has no {key:?} entry"
                    )),
                )
            })
        };
        let cursor_bytes: Vec<u8> = item(KEY_CURSOR)?.extract()?;
        let cursor = CursorState::decode(&cursor_bytes).py_err(py)?;
        let saved = LoaderState {
            walk: core::WalkIdentity {
                dataset: core::DatasetIdentity {
                    files: item(KEY_FILES)?.extract()?,
                    // Absent from version 1 states: not compared.
                    names: match state.get_item(KEY_NAMES)? {
                        Some(v) if !v.is_none() => Some(v.extract()?),
                        _ => None,
                    },
                },
                seed: item(KEY_SEED)?.extract()?,
                page_aware: item(KEY_PAGE_AWARE)?.extract()?,
                shard_remainder: match state.get_item(KEY_SHARD_REMAINDER)? {
                    Some(v) if !v.is_none() => {
                        core::options::shard_remainder(&v.extract::<String>()?).py_err(py)?
                    }
                    _ => core::format::shard_remainder::ShardRemainder::Keep,
                },
                num_shards: item(KEY_NUM_SHARDS)?.extract()?,
                shard_index: item(KEY_SHARD_INDEX)?.extract()?,
            },
            // States before version 3: each worker walked a composed shard.
            split: match (
                state.get_item(KEY_WORKER_COUNT)?,
                state.get_item(KEY_WORKER_INDEX)?,
            ) {
                (Some(count), Some(index)) if !count.is_none() && !index.is_none() => {
                    core::WorkerSplit::Batches {
                        count: count.extract()?,
                        index: index.extract()?,
                    }
                }
                _ => core::WorkerSplit::Shards,
            },
            epoch: item(KEY_EPOCH)?.extract()?,
            cursor,
            // Absent from states saved before elastic resume existed: an ordinary epoch.
            resumed_from: match state.get_item(KEY_RESUMED_FROM)? {
                Some(v) if !v.is_none() => {
                    Some(EpochState::decode(&v.extract::<Vec<u8>>()?).py_err(py)?)
                }
                _ => None,
            },
        };
        py.detach(|| {
            let mut loader = self.lock_detached()?;
            loader.set_worker(worker_count, worker_index)?;
            loader.restore(&saved)
        })
        .py_err(py)
    }
}

impl NativeLoader {
    fn epochs(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Option<WorkerEpochs>>> {
        self.epochs
            .lock()
            .map_err(|_| core::Error::internal("a Loader's epochs lock was poisoned"))
            .py_err(py)
    }

    /// The loader, for a call that holds the GIL.
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, DatasetLoader>> {
        self.lock_detached().py_err(py)
    }

    /// The loader, for a call without the GIL. A panic cannot happen while it is
    /// held (the core catches its own), so a poisoned lock is an internal error.
    fn lock_detached(&self) -> core::Result<MutexGuard<'_, DatasetLoader>> {
        self.loader
            .lock()
            .map_err(|_| core::Error::internal("a Loader was left poisoned by a panic"))
    }
}
