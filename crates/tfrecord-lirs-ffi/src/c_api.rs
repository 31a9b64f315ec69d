//! The C ABI Python calls through ctypes (`python/tfrecord_lirs/_native.py`): writing,
//! padding and indexing files, and the argument checks Python runs before it builds a
//! graph, in the op library itself, so Python and the kernels share one copy of the
//! core.
//!
//! The functions are reached through one table, [`CApi`]: the op library keeps every
//! symbol of the Rust archive out of its exports (so it cannot clash with another Rust
//! library in the process), and exports just the C++ function `lirs_c_api()`
//! (`tf_op/lirs_ops.cc`), which returns [`tfrecord_lirs_c_api`]'s table. Python
//! declares the same table as a ctypes structure and checks [`C_API_VERSION`].
//!
//! Convention: every fallible function returns an [`ErrorCode`] value (0 = ok) and, on
//! error, copies the NUL-terminated message (truncated to fit) into `err`, a buffer of
//! `err_len` bytes (NULL/0: no message). Strings are NUL-terminated bytes; a NULL
//! string is empty. Every body runs under [`guard`], so no panic crosses into C; a
//! writer whose method panicked is poisoned.

use std::ffi::{c_char, CStr};

use tfrecord_lirs as core;

use crate::{guard, guard_poisoning, path_of, rules, ErrorCode, FfiError, FfiResult};

/// The layout version of [`CApi`]; raise it with any change to the table or to a
/// function's signature (Python refuses a table of another version).
pub const C_API_VERSION: u32 = 4;

/// Every function of the C ABI, in this order (Python mirrors it).
#[repr(C)]
pub struct CApi {
    /// [`C_API_VERSION`].
    pub version: u32,
    pub build_offset_table:
        unsafe extern "C" fn(*const c_char, *const c_char, *mut u64, *mut c_char, usize) -> i32,
    pub pad_file: unsafe extern "C" fn(
        *const c_char,
        *const c_char,
        *const PadConfig,
        *mut PadSummary,
        *mut c_char,
        usize,
        *mut c_char,
        usize,
    ) -> i32,
    pub writer_create: unsafe extern "C" fn(
        *const c_char,
        *const PadConfig,
        *mut *mut Writer,
        *mut c_char,
        usize,
    ) -> i32,
    pub writer_write:
        unsafe extern "C" fn(*mut Writer, *const u8, usize, *mut u64, *mut c_char, usize) -> i32,
    pub writer_finish:
        unsafe extern "C" fn(*mut Writer, *mut PadSummary, *mut c_char, usize) -> i32,
    pub writer_instance_of_input: unsafe extern "C" fn(*mut Writer, *mut u64, usize) -> usize,
    pub writer_free: unsafe extern "C" fn(*mut Writer),
    pub check_backend: unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> i32,
    pub check_fit: unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> i32,
    pub check_shard: unsafe extern "C" fn(*const i64, *const i64, *mut c_char, usize) -> i32,
    pub default_table_path: unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> usize,
    pub check_page_size: unsafe extern "C" fn(i64, *mut c_char, usize) -> i32,
    pub build_offset_tables: unsafe extern "C" fn(
        *const *const c_char,
        usize,
        usize,
        Option<Progress>,
        *mut u64,
        *mut c_char,
        usize,
    ) -> i32,
    pub pad_files: unsafe extern "C" fn(
        *const *const c_char,
        usize,
        *const c_char,
        *const PadConfig,
        usize,
        Option<Progress>,
        *mut PadSummary,
        *mut c_char,
        usize,
    ) -> i32,
    pub check_compression_type: unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> i32,
    pub check_buffer_size: unsafe extern "C" fn(*const i64, *mut c_char, usize) -> i32,
    pub error_code_name: extern "C" fn(i32) -> *const c_char,
}

/// A progress callback of a run over many files: (bytes done, bytes in all the files).
/// Called from worker threads.
pub type Progress = extern "C" fn(u64, u64);

static C_API: CApi = CApi {
    version: C_API_VERSION,
    build_offset_table: lirs_build_offset_table,
    pad_file: lirs_pad_file,
    writer_create: lirs_writer_create,
    writer_write: lirs_writer_write,
    writer_finish: lirs_writer_finish,
    writer_instance_of_input: lirs_writer_instance_of_input,
    writer_free: lirs_writer_free,
    check_backend: lirs_check_backend,
    check_fit: lirs_check_fit,
    check_shard: lirs_check_shard,
    default_table_path: lirs_default_table_path,
    check_page_size: lirs_check_page_size,
    build_offset_tables: lirs_build_offset_tables,
    pad_files: lirs_pad_files,
    check_compression_type: lirs_check_compression_type,
    check_buffer_size: lirs_check_buffer_size,
    error_code_name: lirs_error_code_name,
};

/// The table of the C ABI (static; never freed).
#[no_mangle]
pub extern "C" fn tfrecord_lirs_c_api() -> *const CApi {
    &C_API
}

/// Options of [`lirs_pad_file`] and [`lirs_writer_create`].
#[repr(C)]
pub struct PadConfig {
    /// Page size in bytes (a power of two, 512 B to 16 MiB).
    pub page_size: u64,
    /// `"next"`, `"best"` or `"best:<window>"` (see [`rules::parse_fit`]); for
    /// `lirs_pad_file(s)` also `"auto"` ([`rules::parse_pad_fit`]).
    pub fit: *const c_char,
    /// How the input is compressed (`lirs_pad_file` only): NULL or "" (detect),
    /// "none", "gzip" or "zlib" (any case).
    pub compression: *const c_char,
    /// Take the instances from the input's trusted offset table (`lirs_pad_file` only).
    pub trust_table: bool,
    /// Replace an existing output (`lirs_pad_file(s)` only).
    pub overwrite: bool,
}

/// What [`lirs_pad_file`] and [`lirs_writer_finish`] report.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PadSummary {
    pub instances: u64,
    pub pages: u64,
    pub filler_bytes: u64,
    pub data_bytes: u64,
    /// Entries of the input → instance mapping ([`lirs_writer_instance_of_input`]);
    /// 0 when the instances kept their input order.
    pub inputs_mapped: u64,
    /// [`core::PadSummary::page_reads`].
    pub page_reads: u64,
    /// [`core::PadSummary::unpadded_page_reads`].
    pub unpadded_page_reads: u64,
}

impl From<&core::PadSummary> for PadSummary {
    fn from(s: &core::PadSummary) -> Self {
        PadSummary {
            instances: s.instances,
            pages: s.pages,
            filler_bytes: s.filler_bytes,
            data_bytes: s.data_bytes,
            inputs_mapped: s.instance_of_input.as_ref().map_or(0, Vec::len) as u64,
            page_reads: s.page_reads,
            unpadded_page_reads: s.unpadded_page_reads,
        }
    }
}

/// A page-aligned writer handle; `finish` consumes the inner writer.
pub struct Writer {
    inner: Option<core::PaddedWriter>,
    /// Set when `write` or `finish` panicked: the file may be half-written, so it must
    /// not be finished (or written) as if it were whole.
    poisoned: bool,
    /// After `finish`: the instance id of each input (best fit).
    instance_of_input: Vec<u64>,
}

/// The bytes of the C string `p` (empty for NULL).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives the call.
unsafe fn c_bytes<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: non-null and NUL-terminated, by the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_bytes()
}

/// The text of the C string `p` (empty for NULL), which must be UTF-8.
///
/// # Safety
/// As [`c_bytes`].
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    // SAFETY: passed on to the caller.
    std::str::from_utf8(unsafe { c_bytes(p) })
        .map_err(|_| FfiError::invalid(format!("{what} is not UTF-8")))
}

/// Stores `value` through `out` unless it is NULL.
///
/// # Safety
/// `out` is NULL or valid for writing a `T`.
unsafe fn store<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-null and writable, by the caller's contract.
        unsafe { out.write(value) };
    }
}

/// Turns a result into the C convention: the code, the message into `err`.
///
/// # Safety
/// `err` is NULL or valid for writing `err_len` bytes.
pub(crate) unsafe fn finish(result: FfiResult<()>, err: *mut c_char, err_len: usize) -> i32 {
    match result {
        Ok(()) => ErrorCode::Ok.repr,
        Err(e) => {
            if !err.is_null() && err_len > 0 {
                let n = e.message.len().min(err_len - 1);
                // SAFETY: `err` holds `err_len` > n bytes; the source is our own
                // string, which cannot overlap a caller's buffer.
                unsafe {
                    std::ptr::copy_nonoverlapping(e.message.as_ptr(), err.cast::<u8>(), n);
                    err.add(n).write(0);
                }
            }
            e.code.repr
        }
    }
}

/// The core's pad options from `config`.
///
/// # Safety
/// `config` is NULL or points to a valid [`PadConfig`] whose strings are NULL or NUL-terminated.
unsafe fn pad_options<'a>(
    config: *const PadConfig,
) -> FfiResult<(core::PadOptions, &'a PadConfig)> {
    // SAFETY: by the caller's contract.
    let config =
        unsafe { config.as_ref() }.ok_or_else(|| FfiError::invalid("no pad config given"))?;
    // SAFETY: the spec's strings follow the contract of `c_str`.
    let fit = rules::parse_fit(unsafe { c_str(config.fit, "fit") }?)?;
    Ok((pad_options_with(config, fit), config))
}

/// The core's pad options of `config` with placement `fit`.
fn pad_options_with(config: &PadConfig, fit: core::Fit) -> core::PadOptions {
    core::PadOptions {
        page_size: config.page_size,
        fit,
        storage: crate::storage(),
        ..Default::default()
    }
}

/// The core's request for `pad` of one input from `config`.
///
/// # Safety
/// `config` is NULL or points to a valid [`PadConfig`] whose strings are NULL or NUL-terminated.
unsafe fn pad_request(config: *const PadConfig) -> FfiResult<core::PadRequest> {
    // SAFETY: by the caller's contract.
    let config =
        unsafe { config.as_ref() }.ok_or_else(|| FfiError::invalid("no pad config given"))?;
    // SAFETY: the spec's strings follow the contract of `c_str`.
    let (fit, auto) = match rules::parse_pad_fit(unsafe { c_str(config.fit, "fit") }?)? {
        rules::PadFit::Fixed(fit) => (fit, false),
        rules::PadFit::Auto => (core::Fit::Next, true),
    };
    // SAFETY: by the caller's contract.
    let compression: core::Compression =
        unsafe { c_str(config.compression, "compression") }?.parse()?;
    Ok(core::PadRequest {
        options: pad_options_with(config, fit),
        auto,
        compression,
        trust_table: config.trust_table,
        overwrite: config.overwrite,
    })
}

/// Copies `text` (cut to fit, NUL-terminated) into `out`, a buffer of `out_len` bytes
/// (NULL/0: nothing).
///
/// # Safety
/// `out` is NULL or valid for writing `out_len` bytes.
unsafe fn copy_text(text: &str, out: *mut c_char, out_len: usize) {
    if !out.is_null() && out_len > 0 {
        let n = text.len().min(out_len - 1);
        // SAFETY: `out` holds `out_len` > n bytes; the source is our own string.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
            out.add(n).write(0);
        }
    }
}

/// The paths of a C array of `n` NUL-terminated strings.
///
/// # Safety
/// `paths` is valid for reading `n` pointers, each NULL or NUL-terminated (or `paths`
/// is NULL with `n` 0).
unsafe fn c_paths(paths: *const *const c_char, n: usize) -> Vec<std::path::PathBuf> {
    if paths.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: by this function's contract.
    let items = unsafe { std::slice::from_raw_parts(paths, n) };
    items
        .iter()
        // SAFETY: by this function's contract.
        .map(|&p| path_of(unsafe { c_bytes(p) }))
        .collect()
}

/// The total bytes of `files` (what the progress of a run over them counts up to).
fn total_bytes(files: &[std::path::PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum()
}

/// The outcome of a run over many files in the C convention: the summary
/// ([`core::many::summary`]) into `report` always; the code of the first failure, or 0.
///
/// # Safety
/// `report` is NULL or valid for writing `report_len` bytes.
unsafe fn finish_many<T>(
    verb: &str,
    outcomes: FfiResult<Vec<core::many::FileOutcome<T>>>,
    report: *mut c_char,
    report_len: usize,
) -> i32 {
    let outcomes = match outcomes {
        // SAFETY: by this function's contract.
        Err(e) => return unsafe { finish(Err(e), report, report_len) },
        Ok(o) => o,
    };
    // SAFETY: by this function's contract.
    unsafe { copy_text(&core::many::summary(verb, &outcomes), report, report_len) };
    match outcomes.iter().find_map(|o| o.result.as_ref().err()) {
        Some(e) => FfiError::from(e).code.repr,
        None => ErrorCode::Ok.repr,
    }
}

/// Scans each of the `n` TFRecord files `paths` and writes its offset table (the
/// default path), `jobs` files at a time (0: automatic); `instances[i]` receives file
/// `i`'s count (0 if it failed). Every file is done whatever became of the others;
/// `report` receives the summary naming each failure, the return value is the code of
/// the first failure (0: all succeeded). `progress` (optional) gets the bytes done.
///
/// # Safety
/// `paths` holds `n` NULL or NUL-terminated strings; `instances` is NULL or valid for
/// writing `n` u64s; `report` holds `report_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_build_offset_tables(
    paths: *const *const c_char,
    n: usize,
    jobs: usize,
    progress: Option<Progress>,
    instances: *mut u64,
    report: *mut c_char,
    report_len: usize,
) -> i32 {
    let outcomes = guard("build_offset_tables", || {
        // SAFETY: by this function's contract.
        let files = unsafe { c_paths(paths, n) };
        let total = total_bytes(&files);
        let report_progress = |done: u64| {
            if let Some(p) = progress {
                p(done, total);
            }
        };
        Ok(core::many::run_per_file(
            &files,
            jobs,
            &report_progress,
            |file, done| {
                let table = core::default_table_path(file);
                core::build_offset_table_in(&crate::storage(), file, &table, false, done)
            },
        ))
    });
    if let Ok(outcomes) = &outcomes {
        for (i, o) in outcomes.iter().enumerate() {
            // SAFETY: `instances` holds `n` u64s and `i < n`, by this function's contract.
            unsafe { store(instances.wrapping_add(i), *o.result.as_ref().unwrap_or(&0)) };
        }
    }
    // SAFETY: by this function's contract.
    unsafe { finish_many("indexed", outcomes, report, report_len) }
}

/// Pads each of the `n` TFRecord files `srcs` into directory `dst_dir` (under its file
/// name, see [`core::many::pad_outputs`]) as `config` says, `jobs` at a time (0:
/// automatic); `summaries[i]` receives file `i`'s summary (zeros if it failed).
/// Reports as [`lirs_build_offset_tables`].
///
/// # Safety
/// `srcs` holds `n` NULL or NUL-terminated strings; `dst_dir` is NULL or NUL-terminated;
/// `config` points to a valid [`PadConfig`]; `summaries` is NULL or valid for writing `n`
/// [`PadSummary`]s; `report` holds `report_len` bytes (or is NULL).
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lirs_pad_files(
    srcs: *const *const c_char,
    n: usize,
    dst_dir: *const c_char,
    config: *const PadConfig,
    jobs: usize,
    progress: Option<Progress>,
    summaries: *mut PadSummary,
    report: *mut c_char,
    report_len: usize,
) -> i32 {
    let outcomes = guard("pad_files", || {
        // SAFETY: by this function's contract.
        let request = unsafe { pad_request(config) }?;
        // SAFETY: by this function's contract.
        let (files, dir) = unsafe { (c_paths(srcs, n), path_of(c_bytes(dst_dir))) };
        let outputs = core::many::pad_outputs(&files, &dir)?;
        let total = total_bytes(&files);
        let report_progress = |done: u64| {
            if let Some(p) = progress {
                p(done, total);
            }
        };
        Ok(core::many::run_per_file(
            &files,
            jobs,
            &report_progress,
            |file, done| {
                let output = files
                    .iter()
                    .position(|f| f == file)
                    .and_then(|i| outputs.get(i))
                    .ok_or_else(|| core::Error::internal("an input without its output"))?;
                core::pad(file, output, &request, done).map(|(summary, _)| summary)
            },
        ))
    });
    if let Ok(outcomes) = &outcomes {
        for (i, o) in outcomes.iter().enumerate() {
            let summary = o.result.as_ref().map(PadSummary::from).unwrap_or_default();
            // SAFETY: `summaries` holds `n` entries and `i < n`, by this function's contract.
            unsafe { store(summaries.wrapping_add(i), summary) };
        }
    }
    // SAFETY: by this function's contract.
    unsafe { finish_many("padded", outcomes, report, report_len) }
}

/// Scans the TFRecord file `data` and writes its offset table to `table` (NULL or "":
/// the default path); `*instances` receives the instance count.
///
/// # Safety
/// `data`, `table` are NULL or NUL-terminated; `instances` is NULL or writable; `err` holds
/// `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_build_offset_table(
    data: *const c_char,
    table: *const c_char,
    instances: *mut u64,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("build_offset_table", || {
        // SAFETY: by this function's contract.
        let (data, table) = unsafe { (c_bytes(data), c_bytes(table)) };
        let table = if table.is_empty() {
            rules::default_table_path(data)
        } else {
            path_of(table)
        };
        let n =
            core::build_offset_table_in(&crate::storage(), &path_of(data), &table, false, |_| {})?;
        // SAFETY: by this function's contract.
        unsafe { store(instances, n) };
        Ok(())
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Rewrites TFRecord `src` as page-aligned `dst` with its table, as `config` says;
/// `*summary` receives what was written, `note` (a buffer of `note_len` bytes) what
/// `fit="auto"` chose and why (empty otherwise).
///
/// # Safety
/// `src`, `dst` are NULL or NUL-terminated; `config` points to a valid [`PadConfig`]; `summary`
/// is NULL or writable; `note` holds `note_len` bytes (or is NULL); `err` holds `err_len`
/// bytes (or is NULL).
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn lirs_pad_file(
    src: *const c_char,
    dst: *const c_char,
    config: *const PadConfig,
    summary: *mut PadSummary,
    note: *mut c_char,
    note_len: usize,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("pad_file", || {
        // SAFETY: by this function's contract.
        let request = unsafe { pad_request(config) }?;
        // SAFETY: by this function's contract.
        let (src, dst) = unsafe { (path_of(c_bytes(src)), path_of(c_bytes(dst))) };
        let (written, chose) = core::pad(&src, &dst, &request, |_| {})?;
        // SAFETY: by this function's contract.
        unsafe {
            store(summary, PadSummary::from(&written));
            copy_text(chose.as_deref().unwrap_or(""), note, note_len);
        }
        Ok(())
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Creates a page-aligned writer of `path` (and `path.offsets`, on finish) into `*out`
/// (NULL on error); free it with [`lirs_writer_free`].
///
/// # Safety
/// `path` is NULL or NUL-terminated; `config` points to a valid [`PadConfig`]; `out` is
/// writable; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_writer_create(
    path: *const c_char,
    config: *const PadConfig,
    out: *mut *mut Writer,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe { store(out, std::ptr::null_mut()) };
    let result = guard("create_writer", || {
        // SAFETY: by this function's contract.
        let (options, _) = unsafe { pad_options(config) }?;
        // SAFETY: by this function's contract.
        let w = core::PaddedWriter::create(&path_of(unsafe { c_bytes(path) }), &options)?;
        let writer = Box::new(Writer {
            inner: Some(w),
            poisoned: false,
            instance_of_input: Vec::new(),
        });
        // SAFETY: by this function's contract.
        unsafe { store(out, Box::into_raw(writer)) };
        Ok(())
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// The writer behind a handle.
///
/// # Safety
/// `writer` is NULL or a live handle of [`lirs_writer_create`], not used elsewhere
/// during the call.
unsafe fn writer_mut<'a>(writer: *mut Writer) -> FfiResult<&'a mut Writer> {
    // SAFETY: by the caller's contract.
    unsafe { writer.as_mut() }.ok_or_else(|| FfiError::invalid("no PaddedWriter handle given"))
}

/// Runs `f` on the writer behind `writer` (its file, and the input -> instance mapping
/// `finish` fills) as entry point `point`: a panic poisons the handle for good; the
/// outcome goes to `err` and the return code, the C ABI's convention.
///
/// # Safety
/// `writer` is NULL or a live, unshared handle; `err` holds `err_len` bytes (or is NULL).
unsafe fn with_writer(
    writer: *mut Writer,
    point: &str,
    err: *mut c_char,
    err_len: usize,
    f: impl FnOnce(&mut Option<core::PaddedWriter>, &mut Vec<u64>) -> FfiResult<()>,
) -> i32 {
    let result = (|| {
        // SAFETY: by this function's contract.
        let Writer {
            inner,
            poisoned,
            instance_of_input,
        } = unsafe { writer_mut(writer) }?;
        guard_poisoning(point, poisoned, || f(inner, instance_of_input))
    })();
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Writes one record `data[..len]`; `*index` receives its instance id (with best fit:
/// its input index, see [`lirs_writer_instance_of_input`]).
///
/// # Safety
/// `writer` is NULL or a live, unshared handle; `data` is valid for `len` bytes (or NULL with 0);
/// `index` is NULL or writable; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_writer_write(
    writer: *mut Writer,
    data: *const u8,
    len: usize,
    index: *mut u64,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let write = |inner: &mut Option<core::PaddedWriter>, _: &mut Vec<u64>| {
        let Some(w) = inner.as_mut() else {
            return Err(FfiError::invalid("write() on a closed PaddedWriter"));
        };
        let payload = if len == 0 {
            &[][..]
        } else {
            // SAFETY: `data` is valid for `len` > 0 bytes, by this function's contract.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        let i = w.write(payload)?;
        // SAFETY: by this function's contract.
        unsafe { store(index, i) };
        Ok(())
    };
    // SAFETY: by this function's contract.
    unsafe { with_writer(writer, "write", err, err_len, write) }
}

/// Finishes the file and its table (renamed into place); `*summary` receives what was
/// written. The handle must still be freed.
///
/// # Safety
/// `writer` is NULL or a live, unshared handle; `summary` is NULL or writable; `err` holds `err_len`
/// bytes (or is NULL).
pub unsafe extern "C" fn lirs_writer_finish(
    writer: *mut Writer,
    summary: *mut PadSummary,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let finish_file = |inner: &mut Option<core::PaddedWriter>, instance_of_input: &mut Vec<u64>| {
        let Some(w) = inner.take() else {
            return Err(FfiError::invalid("PaddedWriter is already closed"));
        };
        let written = w.finish()?;
        // SAFETY: by this function's contract.
        unsafe { store(summary, PadSummary::from(&written)) };
        *instance_of_input = written.instance_of_input.unwrap_or_default();
        Ok(())
    };
    // SAFETY: by this function's contract.
    unsafe { with_writer(writer, "finish", err, err_len, finish_file) }
}

/// Copies up to `n` entries of the finished writer's input → instance mapping into
/// `out`; returns how many were copied.
///
/// # Safety
/// `writer` is NULL or a live, unshared handle; `out` is valid for writing `n` u64s (or NULL with 0).
pub unsafe extern "C" fn lirs_writer_instance_of_input(
    writer: *mut Writer,
    out: *mut u64,
    n: usize,
) -> usize {
    // SAFETY: by this function's contract.
    let Ok(w) = (unsafe { writer_mut(writer) }) else {
        return 0;
    };
    let m = n.min(w.instance_of_input.len());
    if m > 0 {
        // SAFETY: `out` holds `n` >= m u64s; the source is the writer's own vector.
        unsafe { std::ptr::copy_nonoverlapping(w.instance_of_input.as_ptr(), out, m) };
    }
    m
}

/// Frees a writer handle (NULL: nothing); an unfinished file is discarded.
///
/// # Safety
/// `writer` is NULL or a live handle of [`lirs_writer_create`], freed only once.
pub unsafe extern "C" fn lirs_writer_free(writer: *mut Writer) {
    if !writer.is_null() {
        // SAFETY: a handle made by `Box::into_raw` in `lirs_writer_create`, freed once.
        drop(unsafe { Box::from_raw(writer) });
    }
}

/// The C convention of checking the text option `what`, `value`, with `parse`
/// (guarded as the entry point `check_<what>`).
///
/// # Safety
/// `value` is NULL or NUL-terminated; `err` holds `err_len` bytes (or is NULL).
unsafe fn check_text<T>(
    what: &str,
    value: *const c_char,
    err: *mut c_char,
    err_len: usize,
    parse: impl FnOnce(&str) -> FfiResult<T>,
) -> i32 {
    let result = guard(&format!("check_{what}"), || {
        // SAFETY: by this function's contract.
        parse(unsafe { c_str(value, what) }?).map(drop)
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Checks an I/O backend name (see [`rules::parse_backend`]).
///
/// # Safety
/// `backend` is NULL or NUL-terminated; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_backend(
    backend: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe { check_text("backend", backend, err, err_len, rules::parse_backend) }
}

/// Checks a fit name for `pad` (see [`rules::parse_pad_fit`]; a PaddedWriter refuses "auto" when created).
///
/// # Safety
/// `fit` is NULL or NUL-terminated; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_fit(
    fit: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe { check_text("fit", fit, err, err_len, rules::parse_pad_fit) }
}

/// Checks LIRSDataset's `compression_type` (see [`rules::check_compression_type`]).
///
/// # Safety
/// `compression_type` is NULL or NUL-terminated; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_compression_type(
    compression_type: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe {
        check_text(
            "compression_type",
            compression_type,
            err,
            err_len,
            rules::check_compression_type,
        )
    }
}

/// Checks LIRSDataset's `buffer_size` (see [`rules::check_buffer_size`]); NULL is
/// `None`.
///
/// # Safety
/// `buffer_size` is NULL or readable; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_buffer_size(
    buffer_size: *const i64,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("check_buffer_size", || {
        // SAFETY: by this function's contract.
        rules::check_buffer_size(unsafe { buffer_size.as_ref().copied() })
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Checks a shard pair (see [`rules::check_shard`]); a NULL pointer is a value not
/// known yet.
///
/// # Safety
/// `num_shards`, `shard_index` are NULL or readable; `err` holds `err_len` bytes (or
/// is NULL).
pub unsafe extern "C" fn lirs_check_shard(
    num_shards: *const i64,
    shard_index: *const i64,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("check_shard", || {
        // SAFETY: by this function's contract.
        let (n, i) = unsafe { (num_shards.as_ref().copied(), shard_index.as_ref().copied()) };
        rules::check_shard(n, i).map(drop)
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// The name of error code `code` (`"DataLoss"`, …; `"Internal"` for a code this
/// library does not have), NUL-terminated and static: foreign callers map the
/// library's names, not its numbers.
pub extern "C" fn lirs_error_code_name(code: i32) -> *const c_char {
    let name: &'static CStr = match code {
        0 => c"Ok",
        1 => c"DataLoss",
        2 => c"InvalidArgument",
        3 => c"NotFound",
        5 => c"PermissionDenied",
        6 => c"Unavailable",
        _ => c"Internal",
    };
    name.as_ptr()
}

/// Checks a page size (see [`rules::check_page_size`]).
///
/// # Safety
/// `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_page_size(
    page_size: i64,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("check_page_size", || {
        rules::check_page_size(page_size).map(drop)
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// The default offset-table path of data file `data`: copies it (NUL-terminated) into
/// `out` if it fits in `out_len` bytes; returns its length without the NUL (call
/// again with a larger buffer if that is not less than `out_len`).
///
/// # Safety
/// `data` is NULL or NUL-terminated; `out` is valid for writing `out_len` bytes (or NULL
/// with 0).
pub unsafe extern "C" fn lirs_default_table_path(
    data: *const c_char,
    out: *mut c_char,
    out_len: usize,
) -> usize {
    // Panic-free: a path concatenation and a bounded copy.
    // SAFETY: by this function's contract.
    let table = rules::default_table_path(unsafe { c_bytes(data) }).into_os_string();
    let bytes = table.as_encoded_bytes();
    if !out.is_null() && bytes.len() < out_len {
        // SAFETY: `out` holds `out_len` > len bytes; the source is our own buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len());
            out.add(bytes.len()).write(0);
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn message(err: &[u8]) -> String {
        CStr::from_bytes_until_nul(err)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn many_files_are_all_done_and_the_report_names_each_failure() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..3u8 {
            let path = dir.path().join(format!("f{i}"));
            let mut bytes = Vec::new();
            for k in 0..(10 + i) {
                core::format::encode_record(&[k; 100], &mut bytes);
            }
            std::fs::write(&path, bytes).unwrap();
            files.push(path);
        }
        files.insert(1, dir.path().join("missing"));
        let c_files: Vec<CString> = files
            .iter()
            .map(|f| CString::new(f.as_os_str().as_bytes()).unwrap())
            .collect();
        let ptrs: Vec<*const c_char> = c_files.iter().map(|c| c.as_ptr()).collect();
        let mut counts = [u64::MAX; 4];
        let mut report = [0u8; 1024];
        let code = unsafe {
            lirs_build_offset_tables(
                ptrs.as_ptr(),
                ptrs.len(),
                2,
                None,
                counts.as_mut_ptr(),
                report.as_mut_ptr().cast(),
                report.len(),
            )
        };
        assert_eq!(code, ErrorCode::NotFound.repr);
        assert_eq!(counts, [10, 0, 11, 12]);
        let text = message(&report);
        assert!(
            text.starts_with("indexed 3 of 4 files; 1 failed:"),
            "{text}"
        );
        assert!(text.contains("missing"), "{text}");

        // Padded into a directory, fit auto; then refused, as the outputs exist.
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let out_c = CString::new(out.as_os_str().as_bytes()).unwrap();
        let fit = CString::new("auto").unwrap();
        let config = PadConfig {
            page_size: 4096,
            fit: fit.as_ptr(),
            compression: std::ptr::null(),
            trust_table: false,
            overwrite: false,
        };
        let inputs = [ptrs[0], ptrs[2], ptrs[3]];
        let mut summaries = [PadSummary::default(); 3];
        let pad = |summaries: &mut [PadSummary; 3], report: &mut [u8; 1024]| unsafe {
            lirs_pad_files(
                inputs.as_ptr(),
                3,
                out_c.as_ptr(),
                &config,
                0,
                None,
                summaries.as_mut_ptr(),
                report.as_mut_ptr().cast(),
                report.len(),
            )
        };
        assert_eq!(pad(&mut summaries, &mut report), 0, "{}", message(&report));
        assert_eq!(message(&report), "padded 3 of 3 files");
        let counts: Vec<u64> = summaries.iter().map(|s| s.instances).collect();
        assert_eq!(counts, [10, 11, 12]);
        assert_eq!(
            pad(&mut summaries, &mut report),
            ErrorCode::InvalidArgument.repr
        );
        assert!(message(&report).starts_with("padded 0 of 3 files; 3 failed:"));
    }

    #[test]
    fn write_read_back_and_errors_with_codes() {
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(dir.path().join("w").as_os_str().as_bytes()).unwrap();
        let fit = CString::new("best:4").unwrap();
        let config = PadConfig {
            page_size: 4096,
            fit: fit.as_ptr(),
            compression: std::ptr::null(),
            trust_table: false,
            overwrite: false,
        };
        let mut err = [0u8; 256];
        let e = err.as_mut_ptr().cast::<c_char>();
        let mut w = std::ptr::null_mut();
        unsafe {
            assert_eq!(
                lirs_writer_create(path.as_ptr(), &config, &mut w, e, 256),
                0
            );
            for i in 0..10u8 {
                let mut index = u64::MAX;
                let rec = vec![i; 100 * usize::from(i)];
                assert_eq!(
                    lirs_writer_write(w, rec.as_ptr(), rec.len(), &mut index, e, 256),
                    0
                );
                assert_eq!(index, u64::from(i));
            }
            let mut summary = PadSummary::default();
            assert_eq!(lirs_writer_finish(w, &mut summary, e, 256), 0);
            assert_eq!(summary.instances, 10);
            assert_eq!(summary.inputs_mapped, 10);
            let mut ids = [0u64; 10];
            assert_eq!(lirs_writer_instance_of_input(w, ids.as_mut_ptr(), 10), 10);
            let mut sorted = ids;
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
            // A second finish: InvalidArgument, with its message.
            let code = lirs_writer_finish(w, &mut summary, e, 256);
            assert_eq!(code, ErrorCode::InvalidArgument.repr);
            assert_eq!(message(&err), "PaddedWriter is already closed");
            lirs_writer_free(w);

            // The table is where the default path says.
            let mut out = [0u8; 8];
            let n = lirs_default_table_path(path.as_ptr(), out.as_mut_ptr().cast(), out.len());
            let mut out = vec![0u8; n + 1];
            assert_eq!(
                lirs_default_table_path(path.as_ptr(), out.as_mut_ptr().cast(), out.len()),
                n
            );
            let table = message(&out);
            assert!(table.ends_with("w.offsets"));
            assert!(std::path::Path::new(&table).exists());

            // Missing input: NotFound; a message cut to the buffer.
            let missing = CString::new(dir.path().join("nope").as_os_str().as_bytes()).unwrap();
            let mut small = [0u8; 8];
            let code = lirs_build_offset_table(
                missing.as_ptr(),
                std::ptr::null(),
                std::ptr::null_mut(),
                small.as_mut_ptr().cast(),
                small.len(),
            );
            assert_eq!(code, ErrorCode::NotFound.repr);
            assert_eq!(message(&small).len(), 7);

            // The argument checks.
            let bad = CString::new("worst").unwrap();
            assert_eq!(
                lirs_check_fit(bad.as_ptr(), e, 256),
                ErrorCode::InvalidArgument.repr
            );
            assert!(message(&err).starts_with("fit must be"));
            let bad = CString::new("io_uring").unwrap();
            assert_eq!(lirs_check_backend(bad.as_ptr(), e, 256), 2);
            assert!(message(&err).starts_with("unknown I/O backend"));
            assert_eq!(lirs_check_shard(&2, std::ptr::null(), e, 256), 0);
            assert_eq!(lirs_check_shard(&2, &2, e, 256), 2);
            assert!(message(&err).starts_with("shard_index must be in [0, num_shards)"));
        }
        // Every code's name is the bridge's, and it names its enum value.
        for (code, name) in [
            (ErrorCode::Ok, "Ok"),
            (ErrorCode::DataLoss, "DataLoss"),
            (ErrorCode::InvalidArgument, "InvalidArgument"),
            (ErrorCode::NotFound, "NotFound"),
            (ErrorCode::Internal, "Internal"),
            (ErrorCode::PermissionDenied, "PermissionDenied"),
            (ErrorCode::Unavailable, "Unavailable"),
        ] {
            // SAFETY: the name is a static NUL-terminated string.
            let got = unsafe { CStr::from_ptr(lirs_error_code_name(code.repr)) };
            assert_eq!(got.to_str().unwrap(), name);
            assert_eq!(format!("{code:?}"), name);
        }
    }
}
