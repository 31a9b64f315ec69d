//! `NativeRefurbishSampler`: the core's [`RefurbishSampler`] for PyTorch's
//! `tfrecord_lirs.torch.RefurbishSampler`. Types only: the epoch counter, the rule by
//! which it moves on (the plain `Sampler`'s) and the checks of a restored state are
//! the core's; a use is an `(id, refresh, generation, epoch)` tuple.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tfrecord_lirs::{self as core, EpochSchedule, RefurbishSampler, RefurbishSamplerState};

use crate::refurbish::{saved_count, saved_schedule, NativeRefurbishSchedule};
use crate::sampler::WalkProgress;
use crate::{args, IntoPy};

/// One shard's refurbish schedule, epoch by epoch.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeRefurbishSampler {
    sampler: Arc<Mutex<RefurbishSampler>>,
    /// The walk begun last (a `DataLoader` begins one and drops it before the one it
    /// uses): the walk a state is taken of.
    latest: Mutex<Option<Arc<WalkProgress>>>,
}

/// One walk of a `NativeRefurbishSampler`'s epoch: its uses from the position the
/// sampler gave; at the end the sampler's epoch moves on.
#[pyclass(module = "tfrecord_lirs._lirs")]
pub(crate) struct NativeRefurbishWalk {
    uses: EpochSchedule,
    progress: Arc<WalkProgress>,
    sampler: Arc<Mutex<RefurbishSampler>>,
}

fn lock(sampler: &Mutex<RefurbishSampler>) -> core::Result<MutexGuard<'_, RefurbishSampler>> {
    // The sampler's methods do not panic while it is held: a poisoned lock is an
    // internal error.
    sampler
        .lock()
        .map_err(|_| core::Error::internal("a RefurbishSampler was left poisoned by a panic"))
}

#[pymethods]
impl NativeRefurbishWalk {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<(u64, bool, u64, u64)>> {
        let p = &self.progress;
        if let Some(u) = self.uses.next() {
            p.position.store(self.uses.position(), Ordering::Relaxed);
            return Ok(Some((u.id, u.refresh, u.generation, p.epoch)));
        }
        if p.finish() {
            lock(&self.sampler).py_err(py)?.walked(p.epoch);
        }
        Ok(None)
    }
}

#[pymethods]
impl NativeRefurbishSampler {
    /// A sampler of `schedule`, at epoch 0.
    #[new]
    fn new(schedule: PyRef<'_, NativeRefurbishSchedule>) -> Self {
        NativeRefurbishSampler {
            sampler: Arc::new(Mutex::new(RefurbishSampler::new(schedule.schedule))),
            latest: Mutex::new(None),
        }
    }

    /// A walk of the next epoch (from a state just restored, if any): an iterator of
    /// its uses. The epoch moves on when the walk has handed out all of them.
    fn walk(&self, py: Python<'_>) -> PyResult<NativeRefurbishWalk> {
        let uses = self.lock(py)?.walk().py_err(py)?;
        let progress = WalkProgress::new(uses.epoch(), uses.position());
        *self.latest(py)? = Some(Arc::clone(&progress));
        Ok(NativeRefurbishWalk {
            uses,
            progress,
            sampler: Arc::clone(&self.sampler),
        })
    }

    /// The checkpoint as a dict of plain values (the schedule version, its options,
    /// `epoch` and `position`). `consumed` (uses of the epoch taken by training, which
    /// trails what the walk handed out): the position in the epoch of the walk begun
    /// last, even if that walk has ended (a `DataLoader` fetches ahead). `None`: where
    /// that walk is, or the start of the next walk once it has ended.
    #[pyo3(signature = (consumed=None))]
    fn state_dict<'py>(
        &self,
        py: Python<'py>,
        consumed: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let latest = self.latest(py)?.clone();
        let s = self.lock(py)?;
        let walk = match consumed {
            Some(c) => Some((latest.map_or(s.epoch(), |p| p.epoch), c)),
            None => latest.and_then(|p| p.in_progress()),
        };
        let state = s.state(walk);
        let p = state.params;
        py_dict!(py, {
            "refurbish_schedule_version": state.version,
            "seed": p.seed,
            "reuse_factor": p.reuse_factor,
            "batch_size": p.batch_size,
            "num_shards": p.num_shards,
            "shard_index": p.shard_index,
            "order_version": p.order_version.number(),
            "epoch": state.epoch,
            "position": state.position,
        })
    }

    /// Restores a `state_dict()`: the next walk goes on from it.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let (version, params) = saved_schedule(py, state)?;
        let saved = RefurbishSamplerState {
            version,
            params,
            epoch: saved_count(py, state, "epoch")?,
            position: saved_count(py, state, "position")?,
        };
        self.lock(py)?.restore(&saved).py_err(py)?;
        *self.latest(py)? = None;
        Ok(())
    }

    /// The epoch the next iteration walks.
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.epoch())
    }

    /// Sets the epoch the next iteration walks (from its start).
    fn set_epoch(&self, py: Python<'_>, epoch: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch = args::count(py, "epoch", Some(epoch))?.unwrap_or_default();
        self.lock(py)?.set_epoch(epoch);
        *self.latest(py)? = None;
        Ok(())
    }

    /// Uses per epoch (the shard's ids).
    fn len(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.schedule().len())
    }
}

impl NativeRefurbishSampler {
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, RefurbishSampler>> {
        lock(&self.sampler).py_err(py)
    }

    fn latest(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, Option<Arc<WalkProgress>>>> {
        self.latest
            .lock()
            .map_err(|_| core::Error::internal("a RefurbishSampler's walk lock was poisoned"))
            .py_err(py)
    }
}
