//! The bridges between the `tfrecord-lirs` core crate and its two foreign users:
//!
//! * one cxx bridge (this module) for the TensorFlow op library in `tf_op/`: readers,
//!   fetch cursors, filler checks and the options the kernels validate;
//! * a plain C ABI ([`c_api`]) for Python's ctypes (`python/tfrecord_lirs/_native.py`),
//!   exported from the same op library: writing, padding and indexing files, and the
//!   argument checks Python runs before it builds a graph.
//!
//! Every rule either side needs (the backend names, the shard check, the default
//! offset-table path, the fetch defaults, the fit syntax, the error classes) is decided
//! here or in the core, once; C++ and Python only translate.
//!
//! # Errors
//!
//! An error crosses as an [`ErrorCode`] (mapped once, from
//! [`tfrecord_lirs::Error::kind`], in [`FfiError`]'s `From`) and a message, never as a
//! text prefix to parse. cxx can carry only a string in the C++ exception it throws for
//! an `Err`, so every fallible bridge function takes the caller's [`Status`] as its last
//! argument and returns `Result<T>`: on `Err` it has first written the code and the
//! message into that `Status`, and the `rust::Error` thrown is only the signal (its
//! `what()` is the same message). The C++ side (`tf_op/lirs_status.h`) catches it and
//! turns the `Status` into an `absl::Status` with one switch. `Result` rather than a
//! returned `Status` because the constructors return `Box<T>` and cxx has no
//! `Option<Box<T>>`. The C ABI returns the code's value (0 = ok) and copies the message
//! into the caller's buffer.
//!
//! # Panics
//!
//! No panic may unwind into C++ or C (that aborts the process). Every fallible entry
//! point runs its body under [`guard`], which catches the unwind and reports it as an
//! `Internal` error; the infallible ones (`mix_seeds`) are panic-free by construction.
//! A handle whose method panicked may be half-updated, so it is poisoned: every later
//! call on it fails with `Internal` (`FetchCursor`, the C ABI's writer). Panics on the
//! core's fetch threads are caught there and arrive as `Internal` window errors of
//! `next_window`. All of this needs `panic = "unwind"`, which the workspace's
//! Cargo.toml sets explicitly for every profile.
//!
//! Fault injection (the panic points the tests use to prove all of the above) exists
//! only with the cargo feature `fault-injection`: see `src/fault_injection.rs` (a
//! second bridge) and `tf_op/lirs_test_ops.cc`. The staticlib linked into the op
//! library users install is built without it, so it has no test entry point and no
//! per-call check.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tfrecord_lirs as core;

pub mod c_api;
#[cfg(feature = "fault-injection")]
pub mod fault_injection;
pub mod rules;
#[cfg(feature = "tensorflow")]
pub mod tf_fs;

#[cxx::bridge(namespace = "tfrecord_lirs::ffi")]
mod ffi {
    /// The class of an error, as TensorFlow's status codes know it (C++ maps it onto
    /// `absl::StatusCode`, Python onto `tf.errors`). The values are also the return
    /// codes of the C ABI. Never `OutOfRange`: for a dataset iterator that code means
    /// "end of sequence" and would silently truncate the data.
    #[derive(Debug)]
    #[repr(i32)]
    enum ErrorCode {
        Ok = 0,
        /// The bytes are damaged: CRC mismatch, truncation, not a record.
        DataLoss = 1,
        /// Bad arguments, or a table that does not fit its data file.
        InvalidArgument = 2,
        /// A file does not exist.
        NotFound = 3,
        /// Anything else (I/O failures, bugs, caught panics).
        Internal = 4,
    }

    /// The outcome of a bridge call: filled in by Rust when the call fails.
    #[derive(Debug)]
    struct Status {
        code: ErrorCode,
        message: String,
    }

    /// A file path as bytes (TensorFlow's strings are bytes; no UTF-8 is required).
    #[derive(Debug, Clone)]
    struct FilePath {
        bytes: Vec<u8>,
    }

    /// What to open: data files and their offset tables, and how to read them.
    #[derive(Debug, Clone)]
    struct ReaderSpec {
        files: Vec<FilePath>,
        /// Empty (→ the default table of every file), or one per file, where an empty
        /// path also means the default (see `table_paths`).
        tables: Vec<FilePath>,
        page_size: u64,
        verify_payload_crc: bool,
        /// "auto", "pread", "mmap" or "direct" (see `check_backend`).
        backend: String,
        trust_table: bool,
    }

    /// One epoch's order of one shard and how to fetch it: `seed`, `epoch`,
    /// `page_aware`, `num_shards`, `shard_index` define the order, `position` where to
    /// start in it, and `threads` I/O threads (0: on the consumer's thread) read
    /// `window` ids (at least) at a time, up to `depth` windows ahead. `unordered`:
    /// windows are handed out as they complete (RINAS, `Fetcher::unordered`), and with
    /// `batch_size` (the in-kernel batch, 0: none) each window is exactly one batch;
    /// `skip`: positions past `position` already delivered (from `resume`). Start from
    /// `LirsReader::fetch_spec`, which decides the defaults.
    #[derive(Debug, Clone)]
    struct FetchSpec {
        seed: u64,
        epoch: u64,
        page_aware: bool,
        num_shards: u64,
        shard_index: u64,
        position: u64,
        threads: usize,
        window: usize,
        depth: usize,
        unordered: bool,
        batch_size: usize,
        skip: Vec<u64>,
    }

    extern "Rust" {
        /// Shared, immutable reader over (data, offset table) pairs.
        type LirsReader;
        /// One iterator's epoch order with its I/O thread pool; not thread-safe
        /// (callers lock). Dropping it joins the threads.
        type FetchCursor;
        /// The payloads of one window, owned by the caller (`take_window`);
        /// immutable, so safe to share between threads.
        type WindowPayloads;

        /// Checks an I/O backend name (the `backend` attr of the kernels).
        fn check_backend(backend: &str, status: &mut Status) -> Result<()>;
        /// Checks a (`num_shards`, `shard_index`) pair as TensorFlow gives it.
        fn check_shard(num_shards: i64, shard_index: i64, status: &mut Status) -> Result<()>;
        /// The offset table of each data file of `spec` (the given one, or the
        /// default path), in file order.
        fn table_paths(spec: &ReaderSpec, status: &mut Status) -> Result<Vec<FilePath>>;

        fn open_reader(spec: &ReaderSpec, status: &mut Status) -> Result<Box<LirsReader>>;
        /// Payloads of `ids`, concatenated into `data`; `ends[i]` is the end offset of
        /// payload i in `data` (both vectors are cleared first). Runs of consecutive
        /// ids are fetched with one read (page-aware units).
        fn read_batch(
            self: &LirsReader,
            ids: &[u64],
            data: &mut Vec<u8>,
            ends: &mut Vec<u64>,
            status: &mut Status,
        ) -> Result<()>;
        /// Instances of shard `shard_index` of `num_shards` (checked as `check_shard`).
        fn shard_len(
            self: &LirsReader,
            num_shards: i64,
            shard_index: i64,
            status: &mut Status,
        ) -> Result<u64>;
        /// The fetch settings of a LIRSDataset with `batch_size` (0: unbatched) and
        /// `num_parallel_reads` (-1: automatic, the op attr's convention) over this
        /// reader now; the order fields are left for the caller (0, shard 0 of 1).
        fn fetch_spec(
            self: &LirsReader,
            batch_size: i64,
            num_parallel_reads: i64,
            status: &mut Status,
        ) -> Result<FetchSpec>;
        /// Starts fetching the order of `spec` from its position.
        fn fetch(
            self: &LirsReader,
            spec: &FetchSpec,
            status: &mut Status,
        ) -> Result<Box<FetchCursor>>;
        /// Where the consumer is, for a checkpoint, having used all but the last
        /// `unserved` payloads of the current window: returns the first position not
        /// delivered and puts the positions past it already delivered into `after`.
        fn resume(
            self: &FetchCursor,
            unserved: usize,
            after: &mut Vec<u64>,
            status: &mut Status,
        ) -> Result<u64>;

        /// Moves to the next window and puts its ids into `ids`; false at the end of
        /// the epoch. Its payloads are then taken with `take_window`. An error here
        /// fails the whole window and is always `Internal` (a panic in Rust, dead
        /// fetch threads): after a panic in this call the cursor is poisoned and every
        /// later call fails too.
        fn next_window(
            self: &mut FetchCursor,
            ids: &mut Vec<u64>,
            status: &mut Status,
        ) -> Result<bool>;
        /// The payloads of the window the last `next_window` moved to, handed over:
        /// they stay where they were read, valid as long as the box lives (an empty
        /// window if there is none). Dropping the box gives the buffers back for reuse.
        fn take_window(self: &mut FetchCursor) -> Box<WindowPayloads>;

        /// Slots in the window (its ids).
        fn len(self: &WindowPayloads) -> usize;
        /// Whether every slot was read (no instance failed): then `payload_at` serves
        /// every slot.
        fn all_read(self: &WindowPayloads) -> bool;
        /// Payload `i`: empty for a failed slot or one out of range (the per-record
        /// path, no status: check `all_read` once per window instead).
        fn payload_at(self: &WindowPayloads, i: usize) -> &[u8];
        /// Payload `i`, or the error reading that instance (naming its file and byte).
        /// (`unsafe` only because cxx requires it to name the lifetime; safe to call.)
        unsafe fn payload<'a>(
            self: &'a WindowPayloads,
            i: usize,
            status: &mut Status,
        ) -> Result<&'a [u8]>;

        /// Whether `record` is a filler record.
        fn is_filler(record: &[u8], status: &mut Status) -> Result<bool>;
        /// Folds a TensorFlow (seed, seed2) pair into the core's u64 seed.
        fn mix_seeds(seed: i64, seed2: i64) -> u64;
    }
}

pub use ffi::{ErrorCode, FetchSpec, FilePath, ReaderSpec, Status};

impl From<core::ErrorKind> for ErrorCode {
    /// The one mapping of the core's error kinds onto the bridge's codes.
    fn from(kind: core::ErrorKind) -> Self {
        match kind {
            core::ErrorKind::DataLoss => ErrorCode::DataLoss,
            core::ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
            core::ErrorKind::NotFound => ErrorCode::NotFound,
            core::ErrorKind::Internal => ErrorCode::Internal,
        }
    }
}

/// Error crossing the bridge: a code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub code: ErrorCode,
    pub message: String,
}

impl FfiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        FfiError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    fn to_status(&self) -> Status {
        Status {
            code: self.code,
            message: self.message.clone(),
        }
    }
}

/// The message only: the code travels in the caller's [`Status`].
impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FfiError {}

impl From<core::Error> for FfiError {
    fn from(e: core::Error) -> Self {
        FfiError::new(e.kind().into(), e.to_string())
    }
}

impl From<&core::Error> for FfiError {
    fn from(e: &core::Error) -> Self {
        FfiError::new(e.kind().into(), e.to_string())
    }
}

pub type FfiResult<T> = Result<T, FfiError>;

/// Runs `f` (the body of entry point `point`), turning a panic into an `Internal`
/// error instead of unwinding into C++ or C.
pub fn guard<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    catch(point, f).unwrap_or_else(Err)
}

/// Like [`guard`], for a method of a stateful handle: once its body panicked,
/// `*poisoned` is set and this and every later call fail with `Internal` (the
/// handle's state may be half-updated).
pub fn guard_poisoning<T>(
    point: &str,
    poisoned: &mut bool,
    f: impl FnOnce() -> FfiResult<T>,
) -> FfiResult<T> {
    if *poisoned {
        return Err(FfiError::internal(format!(
            "`{point}` on a handle that is unusable after an earlier panic in it"
        )));
    }
    catch(point, f).unwrap_or_else(|panic| {
        *poisoned = true;
        Err(panic)
    })
}

/// Writes the error of `result`, if any, into `status` (the cxx error protocol).
fn report<T>(status: &mut Status, result: FfiResult<T>) -> FfiResult<T> {
    if let Err(e) = &result {
        *status = e.to_status();
    }
    result
}

/// Runs `f`; `Err` only if it panicked (as an `Internal` error). `point` names the
/// entry point for fault injection (unused without it).
#[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
fn catch<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> Result<FfiResult<T>, FfiError> {
    catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "fault-injection")]
        fault_injection::panic_if_armed(point);
        // URLs are read through TensorFlow's file systems (op library builds only).
        #[cfg(feature = "tensorflow")]
        tf_fs::install();
        f()
    }))
    .map_err(|payload| {
        let what = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_string()
        };
        FfiError::internal(format!("panic in tfrecord-lirs (Rust): {what}"))
    })
}

/// A path from the bytes of a foreign string.
pub fn path_of(bytes: &[u8]) -> PathBuf {
    Path::new(OsStr::from_bytes(bytes)).to_path_buf()
}

pub struct LirsReader {
    inner: Arc<core::Reader>,
}

// The reader is shared by every iterator of a dataset (and by TF threads).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<core::Reader>();
    assert_send_sync::<LirsReader>();
    // A window is read by any thread holding a tensor that views it, and dropped by
    // whichever lets go of it last.
    assert_send_sync::<WindowPayloads>();
};
// Cursors move between TF threads (always under the iterator's mutex).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<FetchCursor>();
};

fn check_backend(backend: &str, status: &mut Status) -> FfiResult<()> {
    report(
        status,
        guard("check_backend", || rules::parse_backend(backend).map(drop)),
    )
}

fn check_shard(num_shards: i64, shard_index: i64, status: &mut Status) -> FfiResult<()> {
    report(
        status,
        guard("check_shard", || {
            rules::check_shard(Some(num_shards), Some(shard_index)).map(drop)
        }),
    )
}

fn table_paths(spec: &ReaderSpec, status: &mut Status) -> FfiResult<Vec<FilePath>> {
    report(
        status,
        guard("table_paths", || {
            Ok(rules::file_pairs(spec)?
                .into_iter()
                .map(|(_, table)| FilePath {
                    bytes: table.into_os_string().into_encoded_bytes(),
                })
                .collect())
        }),
    )
}

fn open_reader(spec: &ReaderSpec, status: &mut Status) -> FfiResult<Box<LirsReader>> {
    report(
        status,
        guard("open_reader", || {
            let pairs = rules::file_pairs(spec)?;
            let backend = rules::parse_backend(&spec.backend)?;
            let mmap_opt_in = (backend == core::Backend::Mmap).then(|| {
                // SAFETY: the user chose backend="mmap" by name; the Python (`backend=`)
                // and op (`backend` attr) documentation state its hazard (no file may be
                // written or truncated while it is mapped), which the caller thereby
                // accepts.
                unsafe { core::MmapOptIn::new() }
            });
            let options = core::ReaderOptions {
                page_size: spec.page_size,
                verify_payload_crc: spec.verify_payload_crc,
                backend,
                trust_table: spec.trust_table,
                mmap_opt_in,
            };
            let reader = core::Reader::open(&pairs, &options)?;
            Ok(Box::new(LirsReader {
                inner: Arc::new(reader),
            }))
        }),
    )
}

impl LirsReader {
    /// The shared core reader (for Rust-side users and tests).
    pub fn core(&self) -> &Arc<core::Reader> {
        &self.inner
    }

    fn read_batch(
        &self,
        ids: &[u64],
        data: &mut Vec<u8>,
        ends: &mut Vec<u64>,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("read_batch", || {
                data.clear();
                ends.clear();
                let mut batch = core::Batch::default();
                self.inner.read_batch(ids, &mut batch)?;
                data.reserve(batch.payload_bytes());
                for payload in batch.payloads() {
                    data.extend_from_slice(payload);
                    ends.push(data.len() as u64);
                }
                Ok(())
            }),
        )
    }

    fn shard_len(&self, num_shards: i64, shard_index: i64, status: &mut Status) -> FfiResult<u64> {
        report(
            status,
            guard("shard_len", || {
                let (n, i) = rules::check_shard(Some(num_shards), Some(shard_index))?;
                Ok(self.inner.shard_len(n, i)?)
            }),
        )
    }

    fn fetch_spec(
        &self,
        batch_size: i64,
        num_parallel_reads: i64,
        status: &mut Status,
    ) -> FfiResult<FetchSpec> {
        report(
            status,
            guard("fetch_spec", || {
                rules::dataset_fetch_spec(&self.inner, batch_size, num_parallel_reads)
            }),
        )
    }

    /// Starts fetching `spec`'s order (public for Rust-side tests).
    pub fn fetch(&self, spec: &FetchSpec, status: &mut Status) -> FfiResult<Box<FetchCursor>> {
        report(
            status,
            guard("fetch", || {
                let (num_shards, shard_index) = (spec.num_shards, spec.shard_index);
                rules::check_shard_u64(num_shards, shard_index)?;
                let order_spec = core::OrderSpec {
                    seed: spec.seed,
                    epoch: spec.epoch,
                    page_aware: spec.page_aware,
                    num_shards,
                    shard_index,
                };
                let mut order = self.inner.epoch_order(&order_spec)?;
                if spec.position > order.len() {
                    return Err(FfiError::invalid(format!(
                        "position {} is past the end of this epoch ({} instances)",
                        spec.position,
                        order.len()
                    )));
                }
                order.seek(spec.position)?;
                // Unordered batches: windows of exactly one batch, so each batch holds
                // the instances it holds in order.
                let exact = spec.unordered && spec.batch_size > 0;
                let options = core::FetchOptions {
                    threads: spec.threads,
                    window: if exact { spec.batch_size } else { spec.window },
                    depth: spec.depth,
                };
                let mut fetcher = core::Fetcher::new(Arc::clone(&self.inner), order, options)?
                    .skip(spec.skip.iter().copied());
                if spec.unordered {
                    fetcher = fetcher.unordered();
                }
                if exact {
                    fetcher = fetcher.exact_windows();
                }
                Ok(Box::new(FetchCursor {
                    fetcher,
                    current: WindowPayloads::default(),
                    poisoned: false,
                }))
            }),
        )
    }
}

pub struct FetchCursor {
    fetcher: core::Fetcher,
    /// The payloads of the window last returned by `next_window`, until taken.
    current: WindowPayloads,
    /// Set when `next_window` panicked: the fetcher may be half-updated.
    poisoned: bool,
}

impl FetchCursor {
    /// Moves to the next window (public for Rust-side tests).
    pub fn next_window(&mut self, ids: &mut Vec<u64>, status: &mut Status) -> FfiResult<bool> {
        // Disjoint borrows: the body does not touch `poisoned`.
        let FetchCursor {
            fetcher,
            current,
            poisoned,
        } = self;
        let result = guard_poisoning("next_window", poisoned, || {
            ids.clear();
            // Dropping an untaken window hands its buffers back to the fetch threads.
            *current = WindowPayloads::default();
            #[cfg(feature = "fault-injection")]
            fetcher.set_test_panic(fault_injection::armed("fetch_worker"));
            let Some(window) = fetcher.next_window() else {
                return Ok(false);
            };
            current.payloads = Some(window.result?);
            *ids = window.ids;
            Ok(true)
        });
        report(status, result)
    }

    /// Hands over the current window's payloads (public for Rust-side tests).
    pub fn take_window(&mut self) -> Box<WindowPayloads> {
        Box::new(std::mem::take(&mut self.current))
    }

    /// Where the consumer is (see the bridge declaration; public for Rust-side tests).
    pub fn resume(
        &self,
        unserved: usize,
        after: &mut Vec<u64>,
        status: &mut Status,
    ) -> FfiResult<u64> {
        report(
            status,
            guard("resume", || {
                let resume = self.fetcher.resume(unserved);
                *after = resume.after;
                Ok(resume.position)
            }),
        )
    }
}

/// One window's payloads, where the fetch read them (see `take_window`). Its methods
/// are called per record, so they are not guarded: panic-free by construction
/// (lookups with `get`, no arithmetic).
#[derive(Default)]
pub struct WindowPayloads {
    payloads: Option<core::Payloads>,
}

impl WindowPayloads {
    /// Slots in the window.
    pub fn len(&self) -> usize {
        self.payloads.as_ref().map_or(0, core::Payloads::len)
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no slot failed.
    pub fn all_read(&self) -> bool {
        self.payloads
            .as_ref()
            .is_none_or(|p| p.failures().len() == 0)
    }

    /// Payload `i`; empty if it failed or is out of range.
    pub fn payload_at(&self, i: usize) -> &[u8] {
        match self.payloads.as_ref().and_then(|p| p.get(i)) {
            Some(Ok(bytes)) => bytes,
            _ => &[],
        }
    }

    /// Payload `i`, or its error (public for Rust-side tests).
    pub fn payload(&self, i: usize, status: &mut Status) -> FfiResult<&[u8]> {
        let result = match &self.payloads {
            Some(payloads) => match payloads.get(i) {
                Some(Ok(bytes)) => Ok(bytes),
                Some(Err(e)) => Err(FfiError::from(e)),
                None => Err(FfiError::internal(format!(
                    "payload {i} of a window of {}",
                    payloads.len()
                ))),
            },
            None => Err(FfiError::internal(
                "payload of no window (the last next_window failed or ended)",
            )),
        };
        report(status, result)
    }
}

fn is_filler(record: &[u8], status: &mut Status) -> FfiResult<bool> {
    // Guarded although `is_filler` is a prefix comparison: it is cheap, and the test
    // panic point "is_filler" proves the kernel's error path.
    report(
        status,
        guard("is_filler", || Ok(core::format::is_filler(record))),
    )
}

/// Mapping from TensorFlow seeds onto the core's single u64 seed: the two int64 seeds
/// (TF's (seed, seed2) pair, or the pair a seed generator hands out for one
/// iteration) are folded with SplitMix64 so that every bit of both affects the result
/// and nearby pairs give unrelated seeds. The core's `epoch` is then used for the
/// iteration number (see tf_op/lirs_dataset_op.cc).
///
/// Not guarded: panic-free by construction (casts, shifts, xor and wrapping arithmetic
/// only; no overflow checks can fire even in debug builds).
fn mix_seeds(seed: i64, seed2: i64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    splitmix(splitmix(seed as u64) ^ (seed2 as u64))
}

/// A fresh `Status` (code `Ok`), as a caller passes one.
pub fn ok_status() -> Status {
    Status {
        code: ErrorCode::Ok,
        message: String::new(),
    }
}

/// Helpers of the crate's tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};

    use super::{core, FilePath, ReaderSpec};

    /// A padded file `dir/d` of 300 instances, instance i holding `i` as 4 LE bytes.
    pub fn write_u32_file(dir: &Path) -> PathBuf {
        let path = dir.join("d");
        let mut w = core::PaddedWriter::create(&path, &Default::default()).unwrap();
        for i in 0..300u32 {
            w.write(&i.to_le_bytes()).unwrap();
        }
        w.finish().unwrap();
        path
    }

    /// The spec of a reader of `path` (default table) with `backend`.
    pub fn reader_spec(path: &Path, backend: &str) -> ReaderSpec {
        ReaderSpec {
            files: vec![FilePath {
                bytes: path.as_os_str().as_bytes().to_vec(),
            }],
            tables: vec![],
            page_size: 4096,
            verify_payload_crc: true,
            backend: backend.into(),
            trust_table: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_code_and_fill_the_status() {
        let mut status = ok_status();
        let err = check_backend("io_uring", &mut status).unwrap_err();
        assert_eq!(status.code, ErrorCode::InvalidArgument);
        assert_eq!(status.message, err.message);
        assert_eq!(err.to_string(), err.message); // no prefix in what()
        assert!(status.message.contains("backend"), "{}", status.message);
        let mut status = ok_status();
        check_backend("mmap", &mut status).unwrap();
        assert_eq!(status.code, ErrorCode::Ok);
        for (kind, code) in [
            (core::ErrorKind::DataLoss, ErrorCode::DataLoss),
            (core::ErrorKind::InvalidArgument, ErrorCode::InvalidArgument),
            (core::ErrorKind::NotFound, ErrorCode::NotFound),
            (core::ErrorKind::Internal, ErrorCode::Internal),
        ] {
            assert_eq!(ErrorCode::from(kind), code);
        }
    }

    #[test]
    fn mix_seeds_spreads() {
        assert_ne!(mix_seeds(1, 2), mix_seeds(2, 1));
        assert_ne!(mix_seeds(0, 0), mix_seeds(0, 1));
        assert_eq!(mix_seeds(7, 9), mix_seeds(7, 9));
    }

    /// Not with `fault-injection`: its tests arm process-wide panic points that would
    /// hit this test's fetches.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn cursor_slots_carry_their_own_errors() {
        use super::test_support::{reader_spec, write_u32_file};
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path());
        // Damage instance 7's payload (a CRC mismatch).
        let reader = core::Reader::open_one(&path, None, &Default::default()).unwrap();
        let (_, off) = reader.location(7).unwrap();
        drop(reader);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize + 12] ^= 1;
        std::fs::write(&path, bytes).unwrap();

        // Mapped (automatic: one fetch thread) and with a pool of 2 threads.
        for (backend, parallel_reads) in [("mmap", -1), ("pread", 2)] {
            let mut st = ok_status();
            let reader = open_reader(&reader_spec(&path, backend), &mut st).unwrap();
            let mut fetch = reader.fetch_spec(16, parallel_reads, &mut st).unwrap();
            assert_eq!(fetch.threads, if backend == "mmap" { 1 } else { 2 });
            fetch.seed = 5;
            let mut cursor = reader.fetch(&fetch, &mut st).unwrap();
            let (mut ids, mut seen, mut failed) = (Vec::new(), 0, 0);
            while cursor.next_window(&mut ids, &mut st).unwrap() {
                let window = cursor.take_window();
                assert_eq!(window.len(), ids.len());
                assert_eq!(window.all_read(), !ids.contains(&7));
                for (i, &id) in ids.iter().enumerate() {
                    let mut st = ok_status();
                    if window.all_read() {
                        assert_eq!(window.payload_at(i), (id as u32).to_le_bytes());
                    } else if id == 7 {
                        assert!(window.payload_at(i).is_empty());
                    }
                    match window.payload(i, &mut st) {
                        Ok(p) => assert_eq!(p, (id as u32).to_le_bytes()),
                        Err(e) => {
                            assert_eq!(id, 7);
                            assert_eq!(st.code, ErrorCode::DataLoss);
                            assert!(e.message.contains("instance 7"), "{e}");
                            failed += 1;
                        }
                    }
                    seen += 1;
                }
                let mut st = ok_status();
                assert!(window.payload(ids.len(), &mut st).is_err());
                assert!(window.payload_at(ids.len()).is_empty());
                assert_eq!(st.code, ErrorCode::Internal);
            }
            assert_eq!((seen, failed), (300, 1), "{backend}");
        }
        let mut st = ok_status();
        let reader = open_reader(&reader_spec(&path, "auto"), &mut st).unwrap();
        // Shards are checked in Rust, with the one wording.
        let mut st = ok_status();
        assert!(reader.shard_len(2, 2, &mut st).is_err());
        assert_eq!(st.code, ErrorCode::InvalidArgument);
        assert!(st
            .message
            .contains("shard_index must be in [0, num_shards)"));
    }
}
