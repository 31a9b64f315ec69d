//! `NativeSampler`: the core's [`core::Sampler`] for Python's `tfrecord_lirs.Sampler`
//! and the Grain adapter. Types only: orders as little-endian u64 bytes, states as
//! their encoded bytes; the epoch counter, the resumed epoch and every rule are the
//! core's.

use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::{self as core, EpochState, Sampler, SamplerSource};

use crate::{args, IntoPy, NativeReader};

/// The epoch orders of one shard of a `NativeReader`'s files, or of `instances`
/// described by no file.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct NativeSampler {
    sampler: Mutex<Sampler>,
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
        shard_index=None, order_version=None, shard_remainder=None))]
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
    ) -> PyResult<Self> {
        let remainder =
            core::options::shard_remainder(shard_remainder.unwrap_or(defaults::SHARD_REMAINDER))
                .py_err(py)?;
        let seed = args::count(py, "seed", seed)?;
        let num_shards = args::num_shards(py, num_shards)?;
        let shard_index = args::count(py, "shard_index", shard_index)?;
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
                    num_shards.unwrap_or(defaults::NUM_SHARDS),
                    shard_index.unwrap_or(defaults::SHARD_INDEX),
                    order_version.unwrap_or(defaults::ORDER_VERSION),
                )
                .map(|s| s.with_remainder(remainder))
            })
            .py_err(py)?;
        Ok(NativeSampler {
            sampler: Mutex::new(sampler),
        })
    }

    /// The options in effect, as keyword arguments.
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.lock(py)?;
        let (num_shards, shard_index) = s.shard();
        py_dict!(py, {
            "seed": s.seed(),
            "page_aware": s.page_aware(),
            "num_shards": num_shards,
            "shard_index": shard_index,
            "order_version": s.order_version().number(),
            "shard_remainder": s.remainder().name(),
        })
    }

    /// The epoch the next iteration walks.
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.lock(py)?.epoch())
    }

    /// Sets the epoch the next iteration walks.
    fn set_epoch(&self, py: Python<'_>, epoch: &Bound<'_, PyAny>) -> PyResult<()> {
        let epoch = args::count(py, "epoch", Some(epoch))?.unwrap_or_default();
        self.lock(py)?.set_epoch(epoch);
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
    fn resume(&self, py: Python<'_>, epoch_state: &[u8]) -> PyResult<()> {
        let state = EpochState::decode(epoch_state).py_err(py)?;
        py.detach(|| self.lock_detached()?.resume(state)).py_err(py)
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

    /// The sampler; its methods do not panic while it is held, so a poisoned lock is
    /// an internal error.
    fn lock_detached(&self) -> core::Result<MutexGuard<'_, Sampler>> {
        self.sampler
            .lock()
            .map_err(|_| core::Error::internal("a Sampler was left poisoned by a panic"))
    }
}
