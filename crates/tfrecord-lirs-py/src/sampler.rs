//! `NativeSampler`: the core's [`core::Sampler`] for Python's `tfrecord_lirs.Sampler`
//! and the Grain adapter. Types only: orders as little-endian u64 bytes, states as
//! their encoded bytes; the epoch counter, the resumed epoch and every rule are the
//! core's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::{self as core, EpochState, Sampler, SamplerSource, SamplerState};

use crate::{args, IntoPy, NativeReader};

/// The keys of a `Sampler.state_dict()` (torchdata's `Stateful` convention: a dict of
/// picklable values). Its own kind, so a Loader's state is not taken for one.
const KEY_KIND: &str = "kind";
const KIND: &str = "tfrecord_lirs.Sampler";
const KEY_VERSION: &str = "version";
const STATE_VERSION: u64 = 1;

/// The epoch orders of one shard of a `NativeReader`'s files, or of `instances`
/// described by no file.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeSampler {
    sampler: Arc<Mutex<Sampler>>,
    /// The walk begun last (a `DataLoader` begins one and drops it before the one it
    /// uses): the position a state is taken at.
    latest: Mutex<Option<Arc<WalkProgress>>>,
}

/// Where a walk is (of a `NativeSampler` or a `NativeRefurbishSampler`).
pub(crate) struct WalkProgress {
    pub(crate) epoch: u64,
    /// The position in the epoch's order of the next id handed out.
    pub(crate) position: AtomicU64,
    /// Every id handed out.
    pub(crate) done: AtomicBool,
}

impl WalkProgress {
    pub(crate) fn new(epoch: u64, start: u64) -> Arc<WalkProgress> {
        Arc::new(WalkProgress {
            epoch,
            position: AtomicU64::new(start),
            done: AtomicBool::new(false),
        })
    }

    /// (epoch, position) while the walk has not handed out everything.
    pub(crate) fn in_progress(&self) -> Option<(u64, u64)> {
        (!self.done.load(Ordering::Relaxed))
            .then(|| (self.epoch, self.position.load(Ordering::Relaxed)))
    }

    /// Marks the walk done; true the first time (the sampler's epoch moves on once).
    pub(crate) fn finish(&self) -> bool {
        !self.done.swap(true, Ordering::Relaxed)
    }
}

/// One walk of a `NativeSampler`'s epoch: its ids one by one from the position the
/// sampler gave; at the end the sampler's epoch moves on.
#[pyclass(module = "tfrecord_lirs._lirs")]
pub(crate) struct NativeSamplerWalk {
    ids: Vec<u64>,
    progress: Arc<WalkProgress>,
    sampler: Arc<Mutex<Sampler>>,
}

#[pymethods]
impl NativeSamplerWalk {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let p = &self.progress;
        let position = p.position.load(Ordering::Relaxed);
        if let Some(&id) = usize::try_from(position).ok().and_then(|i| self.ids.get(i)) {
            p.position.store(position + 1, Ordering::Relaxed);
            return Ok(Some(id));
        }
        if p.finish() {
            lock(&self.sampler).py_err(py)?.walked(p.epoch);
        }
        Ok(None)
    }
}

fn lock(sampler: &Mutex<Sampler>) -> core::Result<MutexGuard<'_, Sampler>> {
    // The sampler's methods do not panic while it is held: a poisoned lock is an
    // internal error.
    sampler
        .lock()
        .map_err(|_| core::Error::internal("a Sampler was left poisoned by a panic"))
}

/// Ids as little-endian u64 bytes.
fn id_bytes<'py>(py: Python<'py>, ids: &[u64]) -> Bound<'py, PyBytes> {
    let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    PyBytes::new(py, &bytes)
}

#[pymethods]
impl NativeSampler {
    /// A sampler of `reader`'s files (`None`: of `instances` ids); each option left
    /// `None` takes the core's default.
    #[new]
    #[pyo3(signature = (reader, instances, seed=None, page_aware=None, num_shards=None,
        shard_index=None, order_version=None, shard_remainder=None, process_group=None))]
    #[allow(clippy::too_many_arguments)] // the sampler's options, as Python passes them
    fn new(
        py: Python<'_>,
        reader: Option<&NativeReader>,
        instances: u64,
        seed: Option<&Bound<'_, PyAny>>,
        page_aware: Option<bool>,
        num_shards: Option<&Bound<'_, PyAny>>,
        shard_index: Option<&Bound<'_, PyAny>>,
        order_version: Option<&Bound<'_, PyAny>>,
        shard_remainder: Option<&str>,
        process_group: Option<(u64, u64)>,
    ) -> PyResult<Self> {
        let seed = args::count(py, "seed", seed)?;
        let num_shards = args::num_shards(py, num_shards)?;
        let shard_index = args::count(py, "shard_index", shard_index)?;
        let (num_shards, shard_index, remainder) = core::options::process_group_shard(
            num_shards,
            shard_index,
            shard_remainder,
            process_group,
        )
        .py_err(py)?;
        let order_version = args::count(py, "order_version", order_version)?;
        let source = match reader {
            Some(r) => SamplerSource::Files(r.reader.clone()),
            None => SamplerSource::Instances(instances),
        };
        let sampler = py
            .detach(|| {
                Sampler::new(
                    source,
                    seed.unwrap_or(defaults::SEED),
                    page_aware.unwrap_or(defaults::PAGE_AWARE),
                    num_shards,
                    shard_index,
                    order_version.unwrap_or(defaults::ORDER_VERSION),
                )
                .map(|s| s.with_remainder(remainder))
            })
            .py_err(py)?;
        Ok(NativeSampler {
            sampler: Arc::new(Mutex::new(sampler)),
            latest: Mutex::new(None),
        })
    }

    /// A walk of the next epoch (from a state just restored, if any): an iterator of
    /// its ids. The epoch moves on when the walk has handed out all of them.
    fn walk(&self, py: Python<'_>) -> PyResult<NativeSamplerWalk> {
        let (epoch, start, ids) = py
            .detach(|| {
                let s = self.lock_detached()?;
                let (epoch, start) = s.next_walk();
                s.order(epoch).map(|ids| (epoch, start, ids))
            })
            .py_err(py)?;
        let progress = WalkProgress::new(epoch, start);
        *self.latest(py)? = Some(Arc::clone(&progress));
        Ok(NativeSamplerWalk {
            ids,
            progress,
            sampler: Arc::clone(&self.sampler),
        })
    }

    /// The checkpoint as a dict of plain values: where the walk begun last is (or the
    /// start of the next walk) and what identifies the sampler.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let latest = self.latest(py)?.clone();
        let walk = latest.and_then(|p| p.in_progress());
        let state = self.lock(py)?.state(walk);
        let d = PyDict::new(py);
        d.set_item(KEY_KIND, KIND)?;
        d.set_item(KEY_VERSION, STATE_VERSION)?;
        d.set_item("epoch", state.epoch)?;
        d.set_item("position", state.position)?;
        let walk = state.walk;
        d.set_item("files", walk.dataset.files)?;
        d.set_item("names", walk.dataset.names)?;
        d.set_item("seed", walk.seed)?;
        d.set_item("page_aware", walk.page_aware)?;
        d.set_item("num_shards", walk.num_shards)?;
        d.set_item("shard_index", walk.shard_index)?;
        d.set_item("shard_remainder", walk.shard_remainder.name())?;
        d.set_item("order_version", state.order_version)?;
        let resumed_from = state.resumed_from.map(|e| PyBytes::new(py, &e.encode()));
        d.set_item("resumed_from", resumed_from)?;
        Ok(d)
    }

    /// Restores a `state_dict()`: the next walk goes on from it.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let not_ours = |why: String| {
            crate::to_py(
                py,
                &core::Error::invalid_argument(format!(
                    "not a tfrecord_lirs.Sampler state_dict: {why}"
                )),
            )
        };
        let item = |key: &str| {
            state
                .get_item(key)?
                .ok_or_else(|| not_ours(format!("it has no {key:?} entry")))
        };
        let kind: String = item(KEY_KIND)?.extract()?;
        if kind != KIND {
            return Err(not_ours(format!("its kind is {kind:?}")));
        }
        let version: u64 = item(KEY_VERSION)?.extract()?;
        if version != STATE_VERSION {
            return Err(not_ours(format!(
                "its version is {version} (this release reads version {STATE_VERSION})"
            )));
        }
        let resumed_from = match state.get_item("resumed_from")? {
            Some(v) if !v.is_none() => {
                Some(EpochState::decode(&v.extract::<Vec<u8>>()?).py_err(py)?)
            }
            _ => None,
        };
        let saved = SamplerState {
            walk: core::WalkIdentity {
                dataset: core::DatasetIdentity {
                    files: item("files")?.extract()?,
                    names: item("names")?.extract()?,
                },
                seed: item("seed")?.extract()?,
                page_aware: item("page_aware")?.extract()?,
                num_shards: item("num_shards")?.extract()?,
                shard_index: item("shard_index")?.extract()?,
                shard_remainder: core::options::shard_remainder(
                    &item("shard_remainder")?.extract::<String>()?,
                )
                .py_err(py)?,
            },
            order_version: item("order_version")?.extract()?,
            epoch: item("epoch")?.extract()?,
            position: item("position")?.extract()?,
            resumed_from,
        };
        py.detach(|| self.lock_detached()?.restore(&saved))
            .py_err(py)?;
        *self.latest(py)? = None;
        Ok(())
    }

    /// The options in effect, as keyword arguments (each also a getter below).
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        py_dict!(py, {
            "seed": self.seed(py)?,
            "page_aware": self.page_aware(py)?,
            "num_shards": self.num_shards(py)?,
            "shard_index": self.shard_index(py)?,
            "order_version": self.order_version(py)?,
            "shard_remainder": self.shard_remainder(py)?,
        })
    }

    // The options one by one: `tfrecord_lirs.Sampler` shows each getter as a property
    // of its own, with the docstring below.

    /// The order's seed.
    #[getter]
    fn seed(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.seed())
    }

    /// Whether whole pages are the shuffle unit.
    #[getter]
    fn page_aware(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.lock(py)?.page_aware())
    }

    /// Shards of every epoch.
    #[getter]
    fn num_shards(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.shard().0)
    }

    /// This sampler's shard.
    #[getter]
    fn shard_index(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.shard().1)
    }

    /// The order algorithm, 1 or 2.
    #[getter]
    fn order_version(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.order_version().number())
    }

    /// What shards do with the remainder: "keep", "drop" or "pad".
    #[getter]
    fn shard_remainder(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.lock(py)?.remainder().name())
    }

    /// The epoch the next iteration walks.
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.epoch())
    }

    /// Sets the epoch the next iteration walks.
    fn set_epoch(&self, py: Python<'_>, epoch: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch = args::count(py, "epoch", Some(epoch))?.unwrap_or_default();
        self.lock(py)?.set_epoch(epoch);
        *self.latest(py)? = None;
        Ok(())
    }

    /// The ids of `epoch` (`None`: the current one) in this shard, as bytes.
    #[pyo3(signature = (epoch=None))]
    fn order<'py>(&self, py: Python<'py>, epoch: Option<u64>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = py
            .detach(|| {
                let s = self.lock_detached()?;
                s.order(epoch.unwrap_or(s.epoch()))
            })
            .py_err(py)?;
        Ok(id_bytes(py, &ids))
    }

    /// Instances of the current epoch in this shard.
    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.lock_detached()?.len()).py_err(py)
    }

    /// Global index `index` over all epochs as (epoch, position).
    fn locate(&self, py: Python<'_>, index: u64) -> PyResult<(u64, u64)> {
        py.detach(|| self.lock_detached()?.locate(index)).py_err(py)
    }

    /// The key of the random generator of the record at global index `index` of a
    /// run seeded `seed`.
    #[staticmethod]
    fn record_seed(seed: u64, index: u64) -> u128 {
        Sampler::record_seed(seed, index)
    }

    /// This shard's state for elastic resume (bytes): the first `consumed` ids of the
    /// current epoch's order delivered.
    fn shard_state<'py>(&self, py: Python<'py>, consumed: u64) -> PyResult<Bound<'py, PyBytes>> {
        let state = self.lock(py)?.shard_state(consumed).py_err(py)?;
        Ok(PyBytes::new(py, &state.encode()))
    }

    /// Goes on with the epoch `epoch_state` describes.
    fn resume(&self, py: Python<'_>, epoch_state: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch_state = crate::args::resume_state(py, epoch_state)?;
        let state = EpochState::decode(&epoch_state).py_err(py)?;
        py.detach(|| self.lock_detached()?.resume(state))
            .py_err(py)?;
        *self.latest(py)? = None;
        Ok(())
    }

    /// The epoch state an epoch was resumed from (bytes), or None.
    fn resumed_state<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let s = self.lock(py)?;
        Ok(s.resumed().map(|state| PyBytes::new(py, &state.encode())))
    }
}

impl NativeSampler {
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Sampler>> {
        self.lock_detached().py_err(py)
    }

    fn lock_detached(&self) -> core::Result<MutexGuard<'_, Sampler>> {
        lock(&self.sampler)
    }

    fn latest(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Option<Arc<WalkProgress>>>> {
        self.latest
            .lock()
            .map_err(|_| core::Error::internal("a Sampler's walk lock was poisoned"))
            .py_err(py)
    }
}
