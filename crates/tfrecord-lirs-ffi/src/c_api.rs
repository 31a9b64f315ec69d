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
pub const C_API_VERSION: u32 = 2;

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
        *const PadSpec,
        *mut PadSummary,
        *mut c_char,
        usize,
    ) -> i32,
    pub writer_create: unsafe extern "C" fn(
        *const c_char,
        *const PadSpec,
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
}

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
};

/// The table of the C ABI (static; never freed).
#[no_mangle]
pub extern "C" fn tfrecord_lirs_c_api() -> *const CApi {
    &C_API
}

/// Options of [`lirs_pad_file`] and [`lirs_writer_create`].
#[repr(C)]
pub struct PadSpec {
    /// Page size in bytes (a power of two, 512 B to 16 MiB).
    pub page_size: u64,
    /// `"next"`, `"best"` or `"best:<window>"` (see [`rules::parse_fit`]).
    pub fit: *const c_char,
    /// How the input is compressed (`lirs_pad_file` only): NULL or "" (detect),
    /// "none", "gzip" or "zlib" (any case).
    pub compression: *const c_char,
    /// Take the instances from the input's trusted offset table (`lirs_pad_file` only).
    pub trust_table: bool,
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
}

impl From<&core::PadSummary> for PadSummary {
    fn from(s: &core::PadSummary) -> Self {
        PadSummary {
            instances: s.instances,
            pages: s.pages,
            filler_bytes: s.filler_bytes,
            data_bytes: s.data_bytes,
            inputs_mapped: s.instance_of_input.as_ref().map_or(0, Vec::len) as u64,
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

/// The core's pad options from `spec`.
///
/// # Safety
/// `spec` is NULL or points to a valid [`PadSpec`] whose strings are NULL or NUL-terminated.
unsafe fn pad_options<'a>(spec: *const PadSpec) -> FfiResult<(core::PadOptions, &'a PadSpec)> {
    // SAFETY: by the caller's contract.
    let spec = unsafe { spec.as_ref() }.ok_or_else(|| FfiError::invalid("no pad spec given"))?;
    // SAFETY: the spec's strings follow the contract of `c_str`.
    let fit = rules::parse_fit(unsafe { c_str(spec.fit, "fit") }?)?;
    let options = core::PadOptions {
        page_size: spec.page_size,
        fit,
        ..Default::default()
    };
    Ok((options, spec))
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
        let n = core::build_offset_table(&path_of(data), &table)?;
        // SAFETY: by this function's contract.
        unsafe { store(instances, n) };
        Ok(())
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Rewrites TFRecord `src` as page-aligned `dst` with its table, as `spec` says;
/// `*summary` receives what was written.
///
/// # Safety
/// `src`, `dst` are NULL or NUL-terminated; `spec` points to a valid [`PadSpec`]; `summary`
/// is NULL or writable; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_pad_file(
    src: *const c_char,
    dst: *const c_char,
    spec: *const PadSpec,
    summary: *mut PadSummary,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    let result = guard("pad_file", || {
        // SAFETY: by this function's contract.
        let (options, spec) = unsafe { pad_options(spec) }?;
        // SAFETY: by this function's contract.
        let compression: core::Compression =
            unsafe { c_str(spec.compression, "compression") }?.parse()?;
        // SAFETY: by this function's contract.
        let (src, dst) = unsafe { (path_of(c_bytes(src)), path_of(c_bytes(dst))) };
        let written = if spec.trust_table {
            if compression != core::Compression::Auto {
                return Err(FfiError::invalid(
                    "trust_table reads the input at random: it cannot be compressed",
                ));
            }
            core::pad_file_from_table(&src, &dst, &options, |_| {})?
        } else {
            core::pad_file_with(&src, &dst, &options, compression, |_| {})?
        };
        // SAFETY: by this function's contract.
        unsafe { store(summary, PadSummary::from(&written)) };
        Ok(())
    });
    // SAFETY: by this function's contract.
    unsafe { finish(result, err, err_len) }
}

/// Creates a page-aligned writer of `path` (and `path.offsets`, on finish) into `*out`
/// (NULL on error); free it with [`lirs_writer_free`].
///
/// # Safety
/// `path` is NULL or NUL-terminated; `spec` points to a valid [`PadSpec`]; `out` is
/// writable; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_writer_create(
    path: *const c_char,
    spec: *const PadSpec,
    out: *mut *mut Writer,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe { store(out, std::ptr::null_mut()) };
    let result = guard("create_writer", || {
        // SAFETY: by this function's contract.
        let (options, _) = unsafe { pad_options(spec) }?;
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

/// Checks a fit name (see [`rules::parse_fit`]).
///
/// # Safety
/// `fit` is NULL or NUL-terminated; `err` holds `err_len` bytes (or is NULL).
pub unsafe extern "C" fn lirs_check_fit(
    fit: *const c_char,
    err: *mut c_char,
    err_len: usize,
) -> i32 {
    // SAFETY: by this function's contract.
    unsafe { check_text("fit", fit, err, err_len, rules::parse_fit) }
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
    fn write_read_back_and_errors_with_codes() {
        let dir = tempfile::tempdir().unwrap();
        let path = CString::new(dir.path().join("w").as_os_str().as_bytes()).unwrap();
        let fit = CString::new("best:4").unwrap();
        let spec = PadSpec {
            page_size: 4096,
            fit: fit.as_ptr(),
            compression: std::ptr::null(),
            trust_table: false,
        };
        let mut err = [0u8; 256];
        let e = err.as_mut_ptr().cast::<c_char>();
        let mut w = std::ptr::null_mut();
        unsafe {
            assert_eq!(lirs_writer_create(path.as_ptr(), &spec, &mut w, e, 256), 0);
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
    }
}
