//! `NativeRefurbishSchedule`: the core's [`RefurbishSchedule`] for Python's
//! `tfrecord_lirs.RefurbishSchedule`. Types only: an epoch as three little-endian byte
//! strings (ids u64, refresh u8, generation u64); `NativePartialStore`, the core's
//! [`PartialStore`]; and `NativeRefurbisher`, the core's refurbish step
//! ([`Refurbisher`]) with the user's partial function as a Python callable (called with
//! the GIL held). Every rule is the core's.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tfrecord_lirs::options::{self, defaults};
use tfrecord_lirs::{
    self as core, Partial, PartialStore, RefurbishParams, RefurbishSchedule, Refurbisher,
    StoreIdentity, Use,
};

use crate::IntoPy;

/// The refurbish schedule of one shard of `n` ids.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeRefurbishSchedule {
    pub(crate) schedule: RefurbishSchedule,
}

/// The entry `key` of a saved refurbish state.
pub(crate) fn saved_count(py: Python<'_>, state: &Bound<'_, PyDict>, key: &str) -> PyResult<u64> {
    match state.get_item(key)? {
        Some(v) => v.extract(),
        None => Err(core::Error::invalid_argument(format!(
            "the refurbish state has no {key}"
        )))
        .py_err(py),
    }
}

/// The schedule version and options a saved refurbish state names.
pub(crate) fn saved_schedule(
    py: Python<'_>,
    state: &Bound<'_, PyDict>,
) -> PyResult<(u64, RefurbishParams)> {
    let get = |key: &str| saved_count(py, state, key);
    let params = RefurbishParams {
        seed: get("seed")?,
        reuse_factor: get("reuse_factor")?,
        batch_size: get("batch_size")?,
        num_shards: get("num_shards")?,
        shard_index: get("shard_index")?,
        order_version: options::order_version(get("order_version")?).py_err(py)?,
    };
    Ok((get("refurbish_schedule_version")?, params))
}

/// `(ids, refresh, generation)` of `uses` as little-endian bytes.
fn use_bytes(uses: &[Use]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let ids = uses.iter().flat_map(|u| u.id.to_le_bytes()).collect();
    let refresh = uses.iter().map(|u| u8::from(u.refresh)).collect();
    let generation = uses
        .iter()
        .flat_map(|u| u.generation.to_le_bytes())
        .collect();
    (ids, refresh, generation)
}

#[pymethods]
impl NativeRefurbishSchedule {
    /// The schedule of `n` ids; each option left `None` takes the core's default.
    #[new]
    #[pyo3(signature = (n, seed=None, reuse_factor=None, batch_size=None, num_shards=None,
        shard_index=None, order_version=None))]
    #[allow(clippy::too_many_arguments)] // the schedule's options, as Python passes them
    fn new(
        py: Python<'_>,
        n: u64,
        seed: Option<u64>,
        reuse_factor: Option<f64>,
        batch_size: Option<i64>,
        num_shards: Option<u64>,
        shard_index: Option<u64>,
        order_version: Option<u64>,
    ) -> PyResult<Self> {
        let reuse_factor = match reuse_factor {
            Some(r) => options::reuse_factor(r).py_err(py)?,
            None => defaults::REUSE_FACTOR,
        };
        let batch_size = batch_size.unwrap_or(defaults::BATCH_SIZE);
        let batch_size = u64::try_from(batch_size)
            .map_err(|_| {
                core::Error::invalid_argument(format!("batch_size must be >= 1, got {batch_size}"))
            })
            .py_err(py)?;
        let params = RefurbishParams {
            seed: seed.unwrap_or(defaults::SEED),
            reuse_factor,
            batch_size,
            num_shards: num_shards.unwrap_or(defaults::NUM_SHARDS),
            shard_index: shard_index.unwrap_or(defaults::SHARD_INDEX),
            order_version: options::order_version(order_version.unwrap_or(defaults::ORDER_VERSION))
                .py_err(py)?,
        };
        let schedule = RefurbishSchedule::new(n, &params).py_err(py)?;
        Ok(NativeRefurbishSchedule { schedule })
    }

    /// The options in effect, as keyword arguments.
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.schedule.params();
        py_dict!(py, {
            "seed": p.seed,
            "reuse_factor": p.reuse_factor,
            "batch_size": p.batch_size,
            "num_shards": p.num_shards,
            "shard_index": p.shard_index,
            "order_version": p.order_version.number(),
        })
    }

    /// Ids in this shard (every epoch).
    fn len(&self) -> u64 {
        self.schedule.len()
    }

    /// Ids of every shard.
    fn total(&self) -> u64 {
        self.schedule.total()
    }

    /// The (epoch, position) of global index `index` (the core's rule: an error when
    /// the shard has no ids).
    fn locate(&self, py: Python<'_>, index: u64) -> PyResult<(u64, u64)> {
        self.schedule.locate(index).py_err(py)
    }

    /// Refreshes in `epoch`.
    fn refreshes(&self, epoch: u64) -> u64 {
        self.schedule.refreshes(epoch)
    }

    /// Checks a saved refurbish state (the core's rule): `state` holds the schedule
    /// version, the options and the position.
    fn check_state(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let (version, params) = saved_schedule(py, state)?;
        let position = saved_count(py, state, "position")?;
        self.schedule
            .check_state(version, &params, position)
            .py_err(py)
    }

    /// The generation a refresh of `id` at epoch `generation` replaces.
    fn replaced_generation(&self, id: u64, generation: u64) -> Option<u64> {
        self.schedule.replaced_generation(id, generation)
    }

    /// The generation of `id` at `epoch` (`None`: another shard's id).
    fn generation(&self, id: u64, epoch: u64) -> Option<u64> {
        self.schedule.generation(id, epoch)
    }

    /// The uses of `epoch` from `start` (up to `count`; `None`: to the end) as
    /// `(ids u64, refresh u8, generation u64)` little-endian bytes.
    #[pyo3(signature = (epoch, start=0, count=None))]
    fn epoch<'py>(
        &self,
        py: Python<'py>,
        epoch: u64,
        start: u64,
        count: Option<u64>,
    ) -> PyResult<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )> {
        let (ids, refresh, generation) = py
            .detach(|| -> core::Result<_> {
                let mut walk = self.schedule.epoch(epoch)?;
                walk.seek(start)?;
                let left = walk.len() - start;
                let take = count.map_or(left, |c| c.min(left));
                let mut uses = Vec::with_capacity(take as usize);
                walk.next_uses(take as usize, &mut uses);
                Ok(use_bytes(&uses))
            })
            .py_err(py)?;
        Ok((
            PyBytes::new(py, &ids),
            PyBytes::new(py, &refresh),
            PyBytes::new(py, &generation),
        ))
    }
}

/// The seed of the partial augmentation of `id` refreshed at epoch `generation`.
#[pyfunction]
fn partial_seed(seed: u64, id: u64, generation: u64) -> u64 {
    core::partial_seed(seed, id, generation)
}

/// The seed of the final augmentation of `id` at `epoch`.
#[pyfunction]
fn final_seed(seed: u64, id: u64, epoch: u64) -> u64 {
    core::final_seed(seed, id, epoch)
}

/// An augmentation seed as the `int64[2]` of TensorFlow's stateless random ops.
#[pyfunction]
fn stateless_seed_pair(seed: u64) -> (i64, i64) {
    let [high, low] = core::stateless_seed_pair(seed);
    (high, low)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeRefurbishSchedule>()?;
    m.add_class::<crate::refurbish_sampler::NativeRefurbishSampler>()?;
    m.add_class::<crate::refurbish_sampler::NativeRefurbishWalk>()?;
    m.add_class::<NativePartialStore>()?;
    m.add_class::<NativeRefurbisher>()?;
    m.add_function(wrap_pyfunction!(partial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(store_dataset_id, m)?)?;
    m.add_function(wrap_pyfunction!(final_seed, m)?)?;
    m.add_function(wrap_pyfunction!(stateless_seed_pair, m)?)?;
    m.add(
        "REFURBISH_SCHEDULE_VERSION",
        core::REFURBISH_SCHEDULE_VERSION,
    )?;
    Ok(())
}

/// The store of partially augmented samples: in memory (`path` None) or under the
/// directory `path`, for one dataset, partial function and seed.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativePartialStore {
    store: Arc<PartialStore>,
}

#[pymethods]
impl NativePartialStore {
    /// Opens the store; each option left `None` takes the core's default.
    #[new]
    #[pyo3(signature = (path, dataset, partial, seed=None, store_bytes=None))]
    fn new(
        py: Python<'_>,
        path: Option<PathBuf>,
        dataset: String,
        partial: String,
        seed: Option<u64>,
        store_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let identity = StoreIdentity {
            dataset,
            partial,
            seed: seed.unwrap_or(defaults::SEED),
        };
        let capacity = store_bytes.unwrap_or(defaults::STORE_BYTES);
        let store = match path {
            Some(path) => py
                .detach(|| PartialStore::open_dir(&path, &identity, capacity))
                .py_err(py)?,
            None => PartialStore::memory(&identity, capacity),
        };
        Ok(NativePartialStore {
            store: Arc::new(store),
        })
    }

    /// The stored partial output of `(id, generation)`, `None` if there is none that
    /// verifies.
    fn get<'py>(&self, py: Python<'py>, id: u64, generation: u64) -> Option<Bound<'py, PyBytes>> {
        let payload = py.detach(|| self.store.get(id, generation))?;
        Some(PyBytes::new(py, &payload))
    }

    /// Stores `payload`; removes generation `over` of the id. Whether it was stored.
    #[pyo3(signature = (id, generation, payload, over, recompute))]
    fn put(
        &self,
        py: Python<'_>,
        id: u64,
        generation: u64,
        payload: &[u8],
        over: Option<u64>,
        recompute: bool,
    ) -> PyResult<bool> {
        let payload = payload.to_vec();
        py.detach(|| self.store.put(id, generation, &payload, over, recompute))
            .py_err(py)
    }

    /// Removes entry `(id, generation)`.
    fn retire(&self, py: Python<'_>, id: u64, generation: u64) {
        py.detach(|| self.store.retire(id, generation))
    }

    /// The core's error if this store cannot serve a data-loading worker process.
    #[pyo3(signature = (reuse_factor=None))]
    fn check_worker_process(&self, py: Python<'_>, reuse_factor: Option<u64>) -> PyResult<()> {
        Refurbisher::check_worker_process(&self.store, reuse_factor).py_err(py)
    }

    /// The directory of the entries (`None` in memory).
    fn dir(&self) -> Option<PathBuf> {
        self.store.dir().map(PathBuf::from)
    }

    /// The file of entry `(id, generation)` (`None` in memory).
    fn entry_path(&self, id: u64, generation: u64) -> Option<PathBuf> {
        self.store.entry_path(id, generation)
    }

    /// This process's counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.store.stats();
        py_dict!(py, {
            "bytes": s.bytes,
            "hits": s.hits,
            "misses": s.misses,
            "corrupt": s.corrupt,
            "refreshes": s.refreshes,
            "recomputes": s.recomputes,
            "unstored": s.unstored,
            "evicted": s.evicted,
            "shared": s.shared,
            "waits": s.waits,
            "taken_over": s.taken_over,
        })
    }
}

/// The dataset part of a store identity for `files` of `instances` instances (the
/// core's rule: absolute paths, local files' sizes, the count).
#[pyfunction]
fn store_dataset_id(py: Python<'_>, files: Vec<String>, instances: u64) -> String {
    py.detach(|| core::store_dataset_id(&files, instances))
}

/// A failure of the step: the user's callable's (a Python exception) or the store's.
enum StepError {
    Py(PyErr),
    Core(core::Error),
}

impl From<core::Error> for StepError {
    fn from(e: core::Error) -> StepError {
        StepError::Core(e)
    }
}

/// The refurbish step of one schedule over one store.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeRefurbisher {
    refurbisher: Refurbisher,
}

#[pymethods]
impl NativeRefurbisher {
    #[new]
    fn new(
        schedule: PyRef<'_, NativeRefurbishSchedule>,
        store: PyRef<'_, NativePartialStore>,
    ) -> Self {
        NativeRefurbisher {
            refurbisher: Refurbisher::new(schedule.schedule, Arc::clone(&store.store)),
        }
    }

    /// The partial output of one use (the core's step): `load(stored bytes)` if the
    /// store has it, else
    /// `compute(partial_seed)` — a `(value, bytes to store)` pair — whose value is
    /// returned and whose bytes the core keeps or not.
    #[allow(clippy::too_many_arguments)] // one use of the schedule and the two callables
    fn partial<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        refresh: bool,
        generation: u64,
        epoch: u64,
        compute: &Bound<'py, PyAny>,
        load: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The GIL is released through the step (a wait for another process's claim
        // must not stop this process's other threads, one of which may hold that
        // claim) and taken again to call the partial function.
        let compute = compute.clone().unbind();
        let step = py.detach(|| {
            self.refurbisher
                .partial(id, refresh, generation, epoch, |seed| {
                    Python::attach(|py| {
                        let pair = compute.bind(py).call1((seed,)).map_err(StepError::Py)?;
                        let (value, payload): (Py<PyAny>, Vec<u8>) =
                            pair.extract().map_err(StepError::Py)?;
                        Ok::<_, StepError>((value, payload))
                    })
                })
        });
        match step {
            Ok(Partial::Computed(value)) => Ok(value.into_bound(py)),
            Ok(Partial::Stored(stored)) => load.call1((PyBytes::new(py, &stored),)),
            Err(StepError::Py(e)) => Err(e),
            Err(StepError::Core(e)) => Err(e).py_err(py),
        }
    }

    /// [`NativeRefurbisher::partial`] for a batch: `uses` as `(id, refresh, generation,
    /// epoch)`, `compute(i, partial_seed)` for use `i`; the outputs in the batch's order
    /// (a use another process is computing is taken after the batch's others).
    fn partials<'py>(
        &self,
        py: Python<'py>,
        uses: Vec<(u64, bool, u64, u64)>,
        compute: &Bound<'py, PyAny>,
        load: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let uses: Vec<_> = uses
            .into_iter()
            .map(|(id, refresh, generation, epoch)| {
                (
                    Use {
                        id,
                        refresh,
                        generation,
                    },
                    epoch,
                )
            })
            .collect();
        let compute = compute.clone().unbind();
        // The GIL as in `partial`: released through the step, taken to compute.
        let steps = py.detach(|| {
            self.refurbisher.partials(&uses, |i, seed| {
                Python::attach(|py| {
                    let pair = compute.bind(py).call1((i, seed)).map_err(StepError::Py)?;
                    let (value, payload): (Py<PyAny>, Vec<u8>) =
                        pair.extract().map_err(StepError::Py)?;
                    Ok::<_, StepError>((value, payload))
                })
            })
        });
        match steps {
            Ok(steps) => steps
                .into_iter()
                .map(|step| match step {
                    Partial::Computed(value) => Ok(value.into_bound(py)),
                    Partial::Stored(stored) => load.call1((PyBytes::new(py, &stored),)),
                })
                .collect(),
            Err(StepError::Py(e)) => Err(e),
            Err(StepError::Core(e)) => Err(e).py_err(py),
        }
    }

    /// The stored output of `(id, generation)` (`None`: compute it, then `keep`).
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        generation: u64,
    ) -> Option<Bound<'py, PyBytes>> {
        let stored = py.detach(|| self.refurbisher.lookup(id, generation))?;
        Some(PyBytes::new(py, &stored))
    }

    /// Counts and (unless no use of it will come) stores an output computed at
    /// `epoch`. Whether it was stored.
    fn keep(
        &self,
        py: Python<'_>,
        id: u64,
        generation: u64,
        epoch: u64,
        refresh: bool,
        payload: &[u8],
    ) -> PyResult<bool> {
        py.detach(|| {
            self.refurbisher
                .keep(id, generation, epoch, refresh, payload)
        })
        .py_err(py)
    }

    /// The seed of the partial augmentation of `(id, generation)`.
    fn partial_seed(&self, id: u64, generation: u64) -> u64 {
        self.refurbisher.partial_seed(id, generation)
    }

    /// The seed of the final augmentation of `id` at `epoch`.
    fn final_seed(&self, id: u64, epoch: u64) -> u64 {
        self.refurbisher.final_seed(id, epoch)
    }
}
