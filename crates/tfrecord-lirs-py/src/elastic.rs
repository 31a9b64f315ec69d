//! Elastic resume for the TensorFlow-free front ends (docs/FORMAT.md §6): the core's
//! [`core::ShardState`] (a worker's state) and [`core::EpochState`] (an epoch's,
//! from every worker's) as bytes, and the order of a shard of what an epoch state has
//! not delivered. Types converted, nothing decided: the rules are the core's.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tfrecord_lirs::{self as core, EpochState, ShardState};

use super::{IntoPy, NativeReader};

/// The state of an epoch where nothing was delivered: `instances` ids of the order
/// `(seed, epoch, page_aware, order_version)`.
#[pyfunction]
#[pyo3(signature = (instances, seed, epoch, page_aware, order_version))]
fn fresh_epoch_state<'py>(
    py: Python<'py>,
    instances: u64,
    seed: u64,
    epoch: u64,
    page_aware: bool,
    order_version: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let version = core::options::order_version(order_version).py_err(py)?;
    let order = core::OrderParams {
        seed,
        epoch,
        page_aware,
        ..Default::default()
    };
    let state = EpochState::fresh(instances, &order, version);
    Ok(PyBytes::new(py, &state.encode()))
}

/// A worker's state: shard `shard_index` of `num_shards` walking from `epoch_state`,
/// having delivered its positions below `position` and those in `delivered_after`.
#[pyfunction]
#[pyo3(signature = (epoch_state, num_shards, shard_index, position, delivered_after))]
fn shard_state<'py>(
    py: Python<'py>,
    epoch_state: &[u8],
    num_shards: u64,
    shard_index: u64,
    position: u64,
    delivered_after: Vec<u64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let base = EpochState::decode(epoch_state).py_err(py)?;
    let shard = ShardState::of_positions(base, num_shards, shard_index, position, delivered_after)
        .py_err(py)?;
    Ok(PyBytes::new(py, &shard.encode()))
}

/// The epoch state after every worker's `shard_states`, all of one run.
#[pyfunction]
fn combine_shard_states<'py>(
    py: Python<'py>,
    shard_states: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let shards = shard_states
        .iter()
        .map(|b| ShardState::decode(b))
        .collect::<core::Result<Vec<_>>>()
        .py_err(py)?;
    let epoch = EpochState::combine(&shards).py_err(py)?;
    Ok(PyBytes::new(py, &epoch.encode()))
}

/// What an epoch state holds, as a dict: order_version, seed, epoch, page_aware,
/// instances, delivered (a count), undelivered, delivered_ranges ([start, end) pairs),
/// files (each file's (base name, instances, bytes), or None for a state that does not
/// name its dataset).
#[pyfunction]
fn epoch_state_info<'py>(py: Python<'py>, epoch_state: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let state = EpochState::decode(epoch_state).py_err(py)?;
    let out = PyDict::new(py);
    out.set_item("order_version", state.order_version.number())?;
    out.set_item("seed", state.seed)?;
    out.set_item("epoch", state.epoch)?;
    out.set_item("page_aware", state.page_aware)?;
    out.set_item("instances", state.instances)?;
    out.set_item("delivered", state.delivered_count())?;
    out.set_item("undelivered", state.undelivered_count())?;
    let ranges: Vec<(u64, u64)> = state.delivered().iter().map(|r| (r.start, r.end)).collect();
    out.set_item("delivered_ranges", ranges)?;
    let files = state.dataset.map(|d| {
        let names = d.names.unwrap_or_default();
        d.files
            .iter()
            .enumerate()
            .map(|(i, &(n, bytes))| (names.get(i).cloned().unwrap_or_default(), n, bytes))
            .collect::<Vec<_>>()
    });
    out.set_item("files", files)?;
    Ok(out)
}

/// The ids (little-endian u64 bytes) shard `shard_index` of `num_shards` walks from
/// `epoch_state`, over `reader`'s files (`None`: instances described by no file), for
/// a walker of `(seed, page_aware, order_version)` (the state's, else `DataLossError`).
#[pyfunction]
#[pyo3(signature = (epoch_state, reader, seed, page_aware, num_shards, shard_index, order_version))]
#[allow(clippy::too_many_arguments)] // the order's parameters, as Python passes them
fn resumed_order<'py>(
    py: Python<'py>,
    epoch_state: &[u8],
    reader: Option<&NativeReader>,
    seed: u64,
    page_aware: bool,
    num_shards: u64,
    shard_index: u64,
    order_version: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let state = EpochState::decode(epoch_state).py_err(py)?;
    let version = core::options::order_version(order_version).py_err(py)?;
    let order = core::OrderParams {
        seed,
        epoch: state.epoch,
        page_aware,
        num_shards,
        shard_index,
    };
    let reader = reader.map(|r| r.reader.as_ref());
    let ids = py
        .detach(|| state.shard_ids(reader, &order, version))
        .py_err(py)?;
    let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    Ok(PyBytes::new(py, &bytes))
}

/// Adds this module's functions to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fresh_epoch_state, m)?)?;
    m.add_function(wrap_pyfunction!(shard_state, m)?)?;
    m.add_function(wrap_pyfunction!(combine_shard_states, m)?)?;
    m.add_function(wrap_pyfunction!(epoch_state_info, m)?)?;
    m.add_function(wrap_pyfunction!(resumed_order, m)?)?;
    Ok(())
}
