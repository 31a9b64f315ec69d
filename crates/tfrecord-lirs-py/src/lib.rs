//! `tfrecord_lirs._lirs`: the TensorFlow-free Python extension over the core crate.
//!
//! It converts types and nothing else: which table belongs to which file, what an
//! index means, the epoch orders and every error are the core's. Python's
//! `tfrecord_lirs.DataSource` and `tfrecord_lirs.Sampler` (python/tfrecord_lirs/) wrap
//! these classes with the Grain and PyTorch protocols.
//!
//! Errors become the exception classes of `tfrecord_lirs.errors` (one per
//! [`ErrorKind`](core::ErrorKind), the core's table), with the core's message and its `file`, `instance` and `offset`
//! as attributes. Reads release the GIL.

/// A dict of keyword options (or counters) from `key: value` pairs, each value any
/// type PyO3 converts: what the `options()` and `stats()` methods return.
macro_rules! py_dict {
    ($py:expr, { $($key:literal : $value:expr),* $(,)? }) => {{
        let d = pyo3::types::PyDict::new($py);
        $( d.set_item($key, $value)?; )*
        Ok::<_, pyo3::PyErr>(d)
    }};
}

mod args;
mod contract;
mod elastic;
mod example;
mod gfile;
mod refurbish;
mod refurbish_sampler;
mod remedy;
mod sampler;

use std::path::PathBuf;
use std::sync::Arc;

mod loader;

use pyo3::exceptions::{PyIndexError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::{self as core, Batch, EpochOrder, OrderParams, OrderVersion, Reader};

mod io;

/// A core error as the `tfrecord_lirs.errors` exception of its kind.
fn to_py(py: Python<'_>, e: &core::Error) -> PyErr {
    let class = e.kind().class_name();
    let made = (|| -> PyResult<PyErr> {
        let errors = py.import("tfrecord_lirs.errors")?;
        let exc = errors.getattr(class)?.call1((remedy::say(e),))?;
        exc.setattr("file", e.file().map(|p| p.as_os_str()))?;
        exc.setattr("instance", e.instance())?;
        exc.setattr("offset", e.offset())?;
        Ok(PyErr::from_value(exc))
    })();
    // The errors module is part of the package: failing to build its exception is a
    // broken installation, reported with the original message rather than lost.
    made.unwrap_or_else(|import_error| {
        PyRuntimeError::new_err(format!(
            "{} (and tfrecord_lirs.errors failed: {import_error})",
            remedy::say(e)
        ))
    })
}

/// `Result<T, core::Error>` (or of an error the core turns into one) to `PyResult<T>`.
trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T, E: Into<core::Error>> IntoPy<T> for Result<T, E> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e.into()))
    }
}

/// Random access to the instances of TFRecord files through their offset tables.
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
struct NativeReader {
    reader: Arc<Reader>,
}

#[pymethods]
impl NativeReader {
    /// Opens `files` with `tables` (none, or one per file; `None` or "" for a file's
    /// default `<file>.offsets`); an option left `None` takes the core's default
    /// (`cache_dir`: the core's rule, `TFRECORD_LIRS_CACHE_DIR` else none;
    /// `index_missing`: a missing table built on open; `page_aware`: the order it is
    /// walked in, `ReaderOptions::page_aware`).
    #[new]
    #[pyo3(signature = (files, tables, page_size=None, backend=None, trust_table=None,
                        cache_dir=None, cache_bytes=None, index_missing=None, page_aware=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        files: Vec<PathBuf>,
        tables: Vec<Option<PathBuf>>,
        page_size: Option<&Bound<'_, PyAny>>,
        backend: Option<&Bound<'_, PyAny>>,
        trust_table: Option<bool>,
        cache_dir: Option<PathBuf>,
        cache_bytes: Option<&Bound<'_, PyAny>>,
        index_missing: Option<bool>,
        page_aware: Option<bool>,
    ) -> PyResult<Self> {
        let page_size = args::page_size(py, page_size)?.unwrap_or(defaults::PAGE_SIZE);
        let cache_bytes = args::typed(py, "cache_bytes", cache_bytes)?;
        let trust_table = trust_table.unwrap_or(defaults::TRUST_TABLE);
        let backend = match backend.filter(|b| !b.is_none()) {
            Some(b) => core::options::backend(&args::text(py, "backend", b)?),
            None => core::options::backend(defaults::BACKEND),
        }
        .py_err(py)?;
        if backend == core::Backend::Mmap {
            // The mmap backend needs an unsafe promise (no file changes while mapped);
            // this front end does not make it for its users: "auto" maps files under a
            // read lease, which is safe.
            return Err(to_py(
                py,
                &core::Error::invalid_argument(
                    "backend \"mmap\" is offered by LIRSDataset only; use \"auto\" \
                     (memory maps under a read lease), \"pread\" or \"direct\"",
                ),
            ));
        }
        let pairs = core::options::data_and_tables(&files, &tables).py_err(py)?;
        let cache = core::options::cache(cache_dir.as_deref(), cache_bytes).py_err(py)?;
        let options = core::ReaderOptions {
            page_size,
            backend,
            trust_table,
            index_missing: index_missing.unwrap_or(defaults::INDEX_MISSING),
            page_aware: page_aware.unwrap_or(defaults::PAGE_AWARE),
            storage: storage().with_cache(cache),
            ..Default::default()
        };
        let reader = py.detach(|| Reader::open(&pairs, &options)).py_err(py)?;
        Ok(NativeReader {
            reader: Arc::new(reader),
        })
    }

    fn __len__(&self) -> usize {
        // Ids are u64; a dataset of more than usize::MAX instances cannot exist in a
        // 64-bit address space's tables, and usize is 64 bits on every supported target.
        self.reader.len() as usize
    }

    /// The payload of instance `index` (negative counts from the end, as for a list).
    fn read<'py>(&self, py: Python<'py>, index: i64) -> PyResult<Bound<'py, PyBytes>> {
        let id = self.id(index)?;
        let reader = &self.reader;
        let payload = py.detach(|| reader.read(id)).py_err(py)?;
        Ok(PyBytes::new(py, &payload))
    }

    /// The payloads of `indices`, in their order (repeats allowed), read with the GIL
    /// released: one coalesced pass over local files, many requests in flight on
    /// remote storage.
    fn read_many<'py>(&self, py: Python<'py>, indices: Vec<i64>) -> PyResult<Bound<'py, PyList>> {
        let ids = indices
            .iter()
            .map(|&i| self.id(i))
            .collect::<PyResult<Vec<u64>>>()?;
        let reader = &self.reader;
        let batch = py
            .detach(|| {
                let mut batch = Batch::default();
                reader
                    .read_batch_concurrent(&ids, &mut batch)
                    .map(|()| batch)
            })
            .py_err(py)?;
        PyList::new(py, batch.payloads().map(|p| PyBytes::new(py, p)))
    }

    /// The epoch order of `params` as little-endian u64 ids (page-aware units need the
    /// files, so this is where a page-aware sampler gets its order).
    #[pyo3(signature = (seed, epoch, page_aware, num_shards, shard_index, order_version))]
    #[allow(clippy::too_many_arguments)] // the order's parameters, as Python passes them
    fn order<'py>(
        &self,
        py: Python<'py>,
        seed: u64,
        epoch: u64,
        page_aware: bool,
        num_shards: u64,
        shard_index: u64,
        order_version: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let version = core::options::order_version(order_version).py_err(py)?;
        let params = order_params(seed, epoch, page_aware, num_shards, shard_index);
        let reader = &self.reader;
        let ids = py
            .detach(|| {
                reader
                    .epoch_order_with_version(&params, version)
                    .map(order_bytes)
            })
            .py_err(py)?;
        Ok(PyBytes::new(py, &ids))
    }

    /// Instances of shard `shard_index` of `num_shards` in every epoch.
    fn shard_len(&self, py: Python<'_>, num_shards: u64, shard_index: u64) -> PyResult<u64> {
        self.reader.shard_len(num_shards, shard_index).py_err(py)
    }
}

impl NativeReader {
    /// The id of a Python index: negative ones count from the end; out of range is an
    /// IndexError (the sequence protocol's end signal for `for x in source`).
    fn id(&self, index: i64) -> PyResult<u64> {
        let len = self.reader.len();
        let id = if index < 0 {
            len.checked_sub(index.unsigned_abs())
        } else {
            Some(index as u64).filter(|&i| i < len)
        };
        id.ok_or_else(|| {
            PyIndexError::new_err(format!("index {index} is out of range for {len} instances"))
        })
    }
}

/// The order of `(seed, epoch)`, page-aware or not, for shard `shard_index` of
/// `num_shards` (the arguments of both order functions, as Python passes them).
fn order_params(
    seed: u64,
    epoch: u64,
    page_aware: bool,
    num_shards: u64,
    shard_index: u64,
) -> OrderParams {
    OrderParams {
        seed,
        epoch,
        page_aware,
        num_shards,
        shard_index,
    }
}

/// An order's ids as little-endian u64 bytes.
fn order_bytes(order: EpochOrder) -> Vec<u8> {
    let mut out = Vec::with_capacity(order.len() as usize * 8);
    for id in order {
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

/// The epoch order of `n` instances described by no file, as little-endian u64 ids:
/// the same order a reader of `n` instances gives (page-aware orders need the files).
#[pyfunction]
#[pyo3(signature = (n, seed, epoch, page_aware, num_shards, shard_index, order_version))]
#[allow(clippy::too_many_arguments)] // the order's parameters, as Python passes them
fn instance_order<'py>(
    py: Python<'py>,
    n: u64,
    seed: u64,
    epoch: u64,
    page_aware: bool,
    num_shards: u64,
    shard_index: u64,
    order_version: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let version: OrderVersion = core::options::order_version(order_version).py_err(py)?;
    let params = order_params(seed, epoch, page_aware, num_shards, shard_index);
    let ids = py
        .detach(|| EpochOrder::of_len(n, &params, version).map(order_bytes))
        .py_err(py)?;
    Ok(PyBytes::new(py, &ids))
}

/// Checks an `order_version` argument (the core's rule and message).
#[pyfunction]
fn check_order_version(py: Python<'_>, order_version: u64) -> PyResult<()> {
    core::options::order_version(order_version)
        .map(drop)
        .py_err(py)
}

/// What every reader of this extension read in this process since it started:
/// `(reads, bytes_read)` (the op library's readers count apart).
#[pyfunction]
fn process_io_totals() -> (u64, u64) {
    let totals = core::process_io_totals();
    (totals.reads, totals.bytes_read)
}

/// Where the readers' paths are: local files, and URLs through object_store only (no
/// TensorFlow, and no GIL on the read path): the core's rule with no file systems of
/// the extension's own.
pub(crate) fn storage() -> core::Storage {
    core::Storage::with_url_file_systems(Vec::new())
}

/// The module `tfrecord_lirs._lirs`.
#[pymodule]
fn _lirs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeReader>()?;
    m.add_class::<loader::NativeLoader>()?;
    m.add_class::<sampler::NativeSampler>()?;
    m.add_class::<sampler::NativeSamplerWalk>()?;
    m.add_function(wrap_pyfunction!(instance_order, m)?)?;
    m.add_function(wrap_pyfunction!(check_order_version, m)?)?;
    m.add_function(wrap_pyfunction!(process_io_totals, m)?)?;
    elastic::register(m)?;
    refurbish::register(m)?;
    io::register(m)?;
    contract::register(m)?;
    example::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
