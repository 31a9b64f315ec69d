//! Writing, padding and indexing files, and the argument checks of the Python API
//! (`tfrecord_lirs.io`, `tfrecord_lirs._op_library`): the core's functions and rules as
//! Python functions and one class, [`PaddedWriter`]. They convert types and nothing
//! else; errors are the `tfrecord_lirs.errors` exceptions of their kind, which the
//! TensorFlow-facing module re-raises as the matching `tf.errors` class too.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pyo3::prelude::*;
use tfrecord_lirs as core;
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::options::guard::Poison;
use tfrecord_lirs::pad_args::PadArgs;

use crate::gfile::write_storage;
use crate::{to_py, IntoPy};

/// What a padded write produced, as Python's `PadSummary` fields in order:
/// (instances, pages, filler_bytes, data_bytes, page_reads, unpadded_page_reads).
type SummaryFields = (u64, u64, u64, u64, u64, u64);

fn summary_fields(s: &core::PadSummary) -> SummaryFields {
    (
        s.instances,
        s.pages,
        s.filler_bytes,
        s.data_bytes,
        s.page_reads,
        s.unpadded_page_reads,
    )
}

/// Checks an I/O backend name ([`core::options::backend`]).
#[pyfunction]
fn check_backend(py: Python<'_>, backend: &Bound<'_, PyAny>) -> PyResult<()> {
    let backend = crate::args::text(py, "backend", backend)?;
    core::options::backend(&backend).map(drop).py_err(py)
}

/// Checks a fit name for `pad` ([`core::options::pad_fit`]; a PaddedWriter refuses
/// "auto" when created).
#[pyfunction]
fn check_fit(py: Python<'_>, fit: &Bound<'_, PyAny>) -> PyResult<()> {
    let fit = crate::args::text(py, "fit", fit)?;
    core::options::pad_fit(&fit).map(drop).py_err(py)
}

/// Checks a page size as Python gives it (an integer: [`crate::args::signed`], then
/// [`core::options::signed_page_size`]).
#[pyfunction]
fn check_page_size(py: Python<'_>, page_size: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(crate::args::page_size(py, Some(page_size))?.unwrap_or(defaults::PAGE_SIZE))
}

/// Checks a shard pair; `None` is a value not known yet. True when it asks for
/// the worker's shard under tf.data's HINT sharding (`SHARD_HINT` for both:
/// [`core::options::shard_request`]).
#[pyfunction]
#[pyo3(signature = (num_shards, shard_index))]
fn check_shard(
    py: Python<'_>,
    num_shards: Option<&Bound<'_, PyAny>>,
    shard_index: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let num_shards = crate::args::signed(py, "num_shards", num_shards)?;
    let shard_index = crate::args::signed(py, "shard_index", shard_index)?;
    core::options::shard_request(num_shards, shard_index)
        .map(|request| request == core::options::ShardRequest::Hint)
        .py_err(py)
}

/// LIRSDataset's `seed` as the op's `seed2` input: checked as the Sampler's seed (an
/// integer in [0, 2**64)), its u64 as the i64 of the same bits (the op's inputs are
/// i64; the seed rule reads them back as the u64: docs/FORMAT.md §5.9).
#[pyfunction]
fn op_seed_input(py: Python<'_>, seed: &Bound<'_, PyAny>) -> PyResult<i64> {
    let seed = crate::args::count(py, "seed", Some(seed))?;
    Ok(seed.unwrap_or(core::options::defaults::SEED) as i64)
}

/// Checks LIRSDataset's `compression_type` ([`core::options::compression_type`]).
#[pyfunction]
fn check_compression_type(py: Python<'_>, compression_type: &Bound<'_, PyAny>) -> PyResult<()> {
    let compression_type = crate::args::text(py, "compression_type", compression_type)?;
    core::options::compression_type(&compression_type).py_err(py)
}

/// Checks LIRSDataset's `buffer_size`; `None` when not given
/// ([`core::options::buffer_size`]).
#[pyfunction]
#[pyo3(signature = (buffer_size))]
fn check_buffer_size(py: Python<'_>, buffer_size: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let buffer_size = crate::args::signed(py, "buffer_size", buffer_size)?;
    core::options::buffer_size(buffer_size).py_err(py)
}

/// Checks LIRSDataset's arguments ([`core::options::dataset_arguments`]); `None` is a
/// value not given or not known yet.
#[pyfunction]
#[pyo3(signature = (batch_size, num_parallel_reads, files, tables))]
fn check_dataset_arguments(
    py: Python<'_>,
    batch_size: Option<&Bound<'_, PyAny>>,
    num_parallel_reads: &Bound<'_, PyAny>,
    files: Option<u64>,
    tables: Option<u64>,
) -> PyResult<()> {
    let batch_size = crate::args::signed(py, "batch_size", batch_size)?;
    let num_parallel_reads =
        crate::args::signed(py, "num_parallel_reads", Some(num_parallel_reads))?
            .unwrap_or(defaults::NUM_PARALLEL_READS);
    core::options::dataset_arguments(batch_size, num_parallel_reads, files, tables).py_err(py)
}

/// The offset table used for data file `path` when none is given.
#[pyfunction]
fn default_table_path(path: PathBuf) -> std::ffi::OsString {
    // An OsString (a Python str), not a PathBuf: PyO3 returns a PathBuf as a
    // pathlib.Path, whose normalisation would turn `ram://x` into `ram:/x`.
    core::default_table_path(&path).into_os_string()
}

/// Scans TFRecord file `data` and writes its offset table to `table` unless that is
/// current ([`core::index_file_in`]); returns the instance count.
#[pyfunction]
fn build_offset_table(py: Python<'_>, data: PathBuf, table: PathBuf) -> PyResult<u64> {
    py.detach(|| {
        guard("build_offset_table", || {
            core::index_file_in(&write_storage(), &data, &table, false, |_| {})
                .map(core::Indexed::instances)
        })
    })
    .py_err(py)
}

/// The data files `inputs` (paths and patterns) name ([`core::expand_files`]),
/// listed through the local tier `cache_dir` (the core's rule, as a reader's), which
/// remembers a pattern's listing for when the storage cannot be reached.
#[pyfunction]
#[pyo3(signature = (inputs, cache_dir=None, cache_bytes=None))]
fn expand_files(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    cache_dir: Option<PathBuf>,
    cache_bytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<std::ffi::OsString>> {
    let cache_bytes = crate::args::typed(py, "cache_bytes", cache_bytes)?;
    let cache = core::options::cache(cache_dir.as_deref(), cache_bytes).py_err(py)?;
    let storage = write_storage().with_cache(cache);
    // OsStrings, not pathlib.Paths, whose normalisation would turn `ram://x` into `ram:/x`.
    py.detach(|| guard("expand_files", || core::expand_files(&storage, &inputs)))
        .map(|files| files.into_iter().map(PathBuf::into_os_string).collect())
        .py_err(py)
}

/// `value` as a count or index `>= 0` ([`core::options::integer::non_negative`]),
/// the error naming `name`.
#[pyfunction]
fn check_count(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(crate::args::count(py, name, Some(value))?.unwrap_or_default())
}

/// Checks that `value` has the type option `name` takes
/// ([`core::options::argument::check`]): a wrong type is
/// `tfrecord_lirs.errors.ArgumentTypeError`, a wrong value `InvalidArgumentError`.
#[pyfunction]
fn check_argument(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    crate::args::check_type(py, name, value)
}

/// Whether `path` is a pattern ([`core::format::file_list::is_pattern`]).
#[pyfunction]
fn is_pattern(path: &str) -> bool {
    core::format::file_list::is_pattern(path)
}

/// The core's request for `pad` of one input, from `pad()`'s arguments (`None`: the
/// core's default).
fn pad_request(
    page_size: Option<u64>,
    fit: Option<&str>,
    compression: Option<&str>,
    trust_table: Option<bool>,
    overwrite: bool,
) -> core::Result<core::PadRequest> {
    let d = PadArgs::default();
    PadArgs {
        page_size: page_size.unwrap_or(d.page_size),
        fit: fit.unwrap_or(d.fit),
        // Python's "" (TFRecordOptions' none) is the core's automatic detection too.
        compression: compression.unwrap_or(d.compression),
        trust_table: trust_table.unwrap_or(d.trust_table),
        overwrite,
        sync: d.sync,
    }
    .request(write_storage())
}

/// Rewrites TFRecord `src` as page-aligned `dst` with its table; returns the summary
/// fields and what `fit="auto"` chose and why ("" otherwise).
#[pyfunction]
#[pyo3(signature = (src, dst, page_size=None, fit=None, compression=None, trust_table=None,
    overwrite=false))]
#[allow(clippy::too_many_arguments)] // pad()'s arguments, as Python passes them
fn pad_file(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    page_size: Option<u64>,
    fit: Option<&str>,
    compression: Option<&str>,
    trust_table: Option<bool>,
    overwrite: bool,
) -> PyResult<(SummaryFields, String)> {
    let request = pad_request(page_size, fit, compression, trust_table, overwrite).py_err(py)?;
    // One input given alone: into `dst`, or into it as a directory (the CLI's rule).
    let dst = core::pad_args::outputs(
        &request.options.storage,
        std::slice::from_ref(&src),
        &dst,
        false,
    )
    .py_err(py)?
    .remove(0);
    let (written, chose) = py
        .detach(|| guard("pad_file", || core::pad(&src, &dst, &request, |_| {})))
        .py_err(py)?;
    Ok((summary_fields(&written), chose.unwrap_or_default()))
}

/// Files worked on at once: `jobs`, or the core's default (automatic).
fn jobs_or_default(jobs: Option<usize>) -> usize {
    jobs.unwrap_or(defaults::JOBS as usize)
}

/// The total bytes of `files` (what the progress of a run over them counts up to).
fn total_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum()
}

/// Runs `work` on every file (`jobs` at a time, 0: automatic) with the GIL released,
/// reporting (bytes done, bytes in all) to the Python callable `progress`; every file
/// is done whatever became of the others. Then the results, or the exception of the
/// first failure's kind carrying the core's summary naming each failed file.
fn run_many<T: Send>(
    py: Python<'_>,
    verb: &str,
    files: &[PathBuf],
    jobs: usize,
    progress: Option<Py<PyAny>>,
    work: impl Fn(&Path, &mut dyn FnMut(u64)) -> core::Result<T> + Sync,
) -> PyResult<Vec<T>> {
    let total = total_bytes(files);
    let report = |done: u64| {
        if let Some(callback) = &progress {
            Python::attach(|py| {
                // A failing progress display must not fail the work it reports on.
                if let Err(e) = callback.call1(py, (done, total)) {
                    e.write_unraisable(py, None);
                }
            });
        }
    };
    let work = &work;
    let outcomes = py.detach(|| core::many::run_per_file(files, jobs, &report, work));
    if let Some(first) = outcomes.iter().find_map(|o| o.result.as_ref().err()) {
        let summary = core::many::summary(verb, &outcomes, &crate::remedy::say);
        let err = to_py(py, first);
        err.value(py).setattr("args", (summary,))?;
        return Err(err);
    }
    Ok(outcomes.into_iter().filter_map(|o| o.result.ok()).collect())
}

/// Scans each TFRecord file of `files` and writes its offset table (the default path),
/// `jobs` at a time; returns the instance counts.
#[pyfunction]
#[pyo3(signature = (files, jobs, progress))]
fn build_offset_tables(
    py: Python<'_>,
    files: Vec<PathBuf>,
    jobs: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<u64>> {
    run_many(
        py,
        "indexed",
        &files,
        jobs_or_default(jobs),
        progress,
        |file, done| {
            let table = core::default_table_path(file);
            core::index_file_in(&write_storage(), file, &table, false, done)
                .map(core::Indexed::instances)
        },
    )
}

/// Pads each TFRecord file of `srcs` into directory `dst_dir` (under its file name,
/// see [`core::many::pad_outputs`]), `jobs` at a time; returns the summary fields of
/// each with what `fit="auto"` chose for it (as `pad_file`).
#[pyfunction]
#[pyo3(signature = (srcs, dst_dir, page_size, fit, compression, trust_table, overwrite, jobs, progress))]
#[allow(clippy::too_many_arguments)] // pad()'s arguments, as Python passes them
fn pad_files(
    py: Python<'_>,
    srcs: Vec<PathBuf>,
    dst_dir: PathBuf,
    page_size: Option<u64>,
    fit: Option<&str>,
    compression: Option<&str>,
    trust_table: Option<bool>,
    overwrite: bool,
    jobs: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<(SummaryFields, String)>> {
    let jobs = jobs_or_default(jobs);
    let request = pad_request(page_size, fit, compression, trust_table, overwrite).py_err(py)?;
    // Inputs given as a list: each into the directory `dst_dir` (the CLI's rule).
    let outputs =
        core::pad_args::outputs(&request.options.storage, &srcs, &dst_dir, true).py_err(py)?;
    run_many(py, "padded", &srcs, jobs, progress, |file, done| {
        let output = srcs
            .iter()
            .position(|f| f == file)
            .and_then(|i| outputs.get(i))
            .ok_or_else(|| core::Error::internal("an input without its output"))?;
        core::pad(file, output, &request, done)
            .map(|(summary, chose)| (summary_fields(&summary), chose.unwrap_or_default()))
    })
}

/// Runs `f` as entry point `point` under the core's panic guard: a panic is an
/// Internal error naming it, never an unwind into Python (the fault-injection build
/// arms a panic point here).
fn guard<T>(point: &str, f: impl FnOnce() -> core::Result<T>) -> core::Result<T> {
    core::options::guard::guard(point, || {
        #[cfg(feature = "fault-injection")]
        test_panic::panic_if_armed(point);
        f()
    })
}

/// A page-aligned writer's state: a panic inside one of its methods poisons it for
/// good (the file may be half-written, so it must not be finished as if whole).
struct WriterState {
    inner: Option<core::PaddedWriter>,
    poison: Poison,
}

impl WriterState {
    fn new(writer: core::PaddedWriter) -> WriterState {
        WriterState {
            inner: Some(writer),
            poison: Poison::new("a PaddedWriter"),
        }
    }

    /// Runs `f` on the writer as method `method`: a panic is an Internal error and
    /// poisons the writer; a poisoned writer refuses every call.
    fn run<T>(
        &mut self,
        method: &str,
        f: impl FnOnce(&mut Option<core::PaddedWriter>) -> core::Result<T>,
    ) -> core::Result<T> {
        let inner = &mut self.inner;
        self.poison.run(method, || {
            #[cfg(feature = "fault-injection")]
            test_panic::panic_if_armed(method);
            f(inner)
        })
    }
}

/// Writes page-aligned TFRecord `path` and its offset table `path.offsets`
/// (python/tfrecord_lirs/writing.py wraps it as `tfrecord_lirs.PaddedWriter`).
#[pyclass(module = "tfrecord_lirs._lirs", frozen)]
pub(crate) struct PaddedWriter {
    state: Mutex<WriterState>,
}

impl PaddedWriter {
    fn with_state<T: Send>(
        &self,
        py: Python<'_>,
        method: &str,
        f: impl FnOnce(&mut Option<core::PaddedWriter>) -> core::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            // A panic is caught inside `run`, so the lock is never poisoned by one;
            // if it were, the state is still the poisoned flag's to judge.
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.run(method, f)
        })
        .py_err(py)
    }
}

#[pymethods]
impl PaddedWriter {
    /// Creates the writer of `path` with `page_size` and placement `fit` ("next",
    /// "best" or "best:<window>"); `None`: the core's default.
    #[new]
    #[pyo3(signature = (path, page_size=None, fit=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        page_size: Option<u64>,
        fit: Option<&str>,
    ) -> PyResult<Self> {
        let fit = core::options::fit(fit.unwrap_or(defaults::FIT)).py_err(py)?;
        let options = core::PadOptions {
            page_size: page_size.unwrap_or(defaults::PAGE_SIZE),
            fit,
            storage: write_storage(),
            ..Default::default()
        };
        let writer = py
            .detach(|| {
                guard("create_writer", || {
                    core::PaddedWriter::create(&path, &options)
                })
            })
            .py_err(py)?;
        Ok(PaddedWriter {
            state: Mutex::new(WriterState::new(writer)),
        })
    }

    /// Writes one record; returns its instance id (next fit) or its input index (best
    /// fit: the ids are known after `finish`).
    fn write(&self, py: Python<'_>, record: &[u8]) -> PyResult<u64> {
        self.with_state(py, "write", |inner| match inner.as_mut() {
            Some(w) => w.write(record),
            None => Err(core::Error::invalid_argument(
                "write() on a closed PaddedWriter",
            )),
        })
    }

    /// Finishes the file and its table (renamed into place); returns the summary
    /// fields and the instance id of each input (empty when they kept their order).
    fn finish(&self, py: Python<'_>) -> PyResult<(SummaryFields, Vec<u64>)> {
        self.with_state(py, "finish", |inner| {
            let w = inner
                .take()
                .ok_or_else(|| core::Error::invalid_argument("PaddedWriter is already closed"))?;
            let written = w.finish()?;
            let ids = written.instance_of_input.clone().unwrap_or_default();
            Ok((summary_fields(&written), ids))
        })
    }

    /// Discards an unfinished file (nothing appears under its names).
    fn discard(&self, py: Python<'_>) {
        py.detach(|| {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // Dropping an unfinished writer removes its staging files.
            drop(state.inner.take());
        });
    }
}

/// Adds this module's functions and class to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PaddedWriter>()?;
    m.add_function(wrap_pyfunction!(check_backend, m)?)?;
    m.add_function(wrap_pyfunction!(check_fit, m)?)?;
    m.add_function(wrap_pyfunction!(check_page_size, m)?)?;
    m.add_function(wrap_pyfunction!(check_shard, m)?)?;
    m.add_function(wrap_pyfunction!(op_seed_input, m)?)?;
    m.add_function(wrap_pyfunction!(check_compression_type, m)?)?;
    m.add_function(wrap_pyfunction!(check_buffer_size, m)?)?;
    m.add_function(wrap_pyfunction!(check_dataset_arguments, m)?)?;
    m.add_function(wrap_pyfunction!(default_table_path, m)?)?;
    m.add_function(wrap_pyfunction!(build_offset_table, m)?)?;
    m.add_function(wrap_pyfunction!(expand_files, m)?)?;
    m.add_function(wrap_pyfunction!(is_pattern, m)?)?;
    m.add_function(wrap_pyfunction!(check_count, m)?)?;
    m.add_function(wrap_pyfunction!(check_argument, m)?)?;
    m.add_function(wrap_pyfunction!(build_offset_tables, m)?)?;
    m.add_function(wrap_pyfunction!(pad_file, m)?)?;
    m.add_function(wrap_pyfunction!(pad_files, m)?)?;
    #[cfg(feature = "fault-injection")]
    m.add_function(wrap_pyfunction!(test_panic::set_test_panic_point, m)?)?;
    Ok(())
}

/// Fault injection for the tests (cargo feature `fault-injection`; never in the
/// extension users install): a panic point the writer's methods check, armed from
/// Python (tests/fault_injection.py arms it here and in the op library's test build).
#[cfg(feature = "fault-injection")]
mod test_panic {
    use std::sync::Mutex;

    use pyo3::prelude::*;

    /// The method that panics on purpose (empty: none).
    static PANIC_POINT: Mutex<String> = Mutex::new(String::new());

    /// Panics if `point` is armed (called inside the panic guard).
    pub(super) fn panic_if_armed(point: &str) {
        let armed = PANIC_POINT.lock().map(|p| *p == point).unwrap_or(false);
        if armed {
            panic!("test panic injected into entry point `{point}`");
        }
    }

    /// Makes the writer method `point` panic on every call ("" disarms).
    #[pyfunction]
    pub(super) fn set_test_panic_point(point: &str) {
        let mut armed = PANIC_POINT.lock().unwrap_or_else(|p| p.into_inner());
        *armed = point.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_poisons_the_writer_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.tfrecord");
        let mut state =
            WriterState::new(core::PaddedWriter::create(&path, &Default::default()).unwrap());
        assert_eq!(
            state
                .run("write", |w| w.as_mut().unwrap().write(b"ok"))
                .unwrap(),
            0
        );
        let e = state
            .run("write", |_| -> core::Result<u64> { panic!("boom") })
            .unwrap_err();
        assert_eq!(e.kind(), core::ErrorKind::Internal);
        assert!(
            e.to_string().contains("`write`") && e.to_string().contains("boom"),
            "{e}"
        );
        let e = state
            .run("finish", |w| w.take().unwrap().finish().map(drop))
            .unwrap_err();
        assert!(e.to_string().contains("unusable"), "{e}");
        drop(state);
        // Nothing half-written appears under the final names.
        assert!(!path.exists());
        assert!(!core::default_table_path(&path).exists());
    }
}
