//! The one cxx bridge between the `tfrecord-lirs` core crate and the
//! TensorFlow op library in `tf_op/`.
//!
//! Error protocol: every fallible entry point returns `Result<_, FfiError>`;
//! cxx turns an `Err` into a C++ `rust::Error` whose `what()` is
//! `"<KIND>: <message>"`, with `<KIND>` one of `DATA_LOSS`, `INVALID_ARGUMENT`,
//! `NOT_FOUND`, `INTERNAL` (see [`KIND_PREFIXES`]). `tf_op/lirs_status.h` maps
//! the prefix back onto an `absl::Status` code.
//!
//! Panic protocol: no panic may unwind into C++ (cxx would abort the process).
//! Every fallible entry point runs its body under [`guard`], which catches the
//! unwind and reports it as an `INTERNAL` error; the few infallible ones
//! (`payload`, `mix_seeds`) are panic-free by construction (see each). A
//! handle whose method panicked may be half-updated, so it is poisoned: every
//! later call on it fails with `INTERNAL` (`FetchCursor`, `LirsWriter`). Panics
//! on the core's fetch threads are caught there and arrive as `INTERNAL`
//! errors of `next_window`. All of this needs `panic = "unwind"`, which the
//! workspace's Cargo.toml sets explicitly for every profile.
//!
//! Fault injection (the panic points the tests use to prove all of the above)
//! exists only with the cargo feature `fault-injection`: see `src/fault_injection.rs`
//! (a second bridge) and `tf_op/lirs_test_ops.cc`. The staticlib linked into the
//! op library users install is built without it, so it has no test entry point
//! and no per-call check.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cxx::{CxxString, CxxVector};
use tfrecord_lirs as core;

#[cfg(feature = "fault-injection")]
pub mod fault_injection;
#[cfg(feature = "tensorflow")]
pub mod tf_fs;

#[cxx::bridge(namespace = "tfrecord_lirs::ffi")]
mod ffi {
    /// Mirror of `tfrecord_lirs::PadSummary`.
    #[derive(Debug, Clone, Default)]
    struct PadSummary {
        instances: u64,
        pages: u64,
        filler_bytes: u64,
        data_bytes: u64,
        /// Instance id of each input (best fit); empty for next fit.
        instance_of_input: Vec<u64>,
    }

    extern "Rust" {
        /// Shared, immutable reader over (data, offset table) pairs.
        type LirsReader;
        /// One iterator's epoch order with its I/O thread pool; not
        /// thread-safe (callers lock). Dropping it joins the threads.
        type FetchCursor;
        /// Page-aligned writer; `finish` consumes the inner writer.
        type LirsWriter;

        /// `tables` may be empty (→ `<data>.offsets` for every file) or the
        /// same length as `files`; an empty table name also means the default.
        fn open_reader(
            files: &CxxVector<CxxString>,
            tables: &CxxVector<CxxString>,
            page_size: u64,
            verify_payload_crc: bool,
            backend: &str,
            trust_table: bool,
        ) -> Result<Box<LirsReader>>;
        fn read(self: &LirsReader, id: u64) -> Result<Vec<u8>>;
        /// Payloads of `ids`, concatenated into `data`; `ends[i]` is the end
        /// offset of payload i in `data` (both vectors are cleared first).
        /// Runs of consecutive ids are fetched with one read (page-aware units).
        fn read_batch(
            self: &LirsReader,
            ids: &[u64],
            data: &mut Vec<u8>,
            ends: &mut Vec<u64>,
        ) -> Result<()>;
        fn shard_len(self: &LirsReader, num_shards: u64, shard_index: u64) -> Result<u64>;
        /// This shard's order for (`seed`, `epoch`), from `position`, fetched
        /// by `threads` I/O threads (0: as many as suit the reader, see
        /// `FetchOptions::auto_threads`; none, i.e. on the caller's thread, for
        /// mapped files), `window` ids (at least) at a time, up to `depth`
        /// windows ahead of the consumer. `unordered`: windows are handed out as
        /// they complete (RINAS; `Fetcher::unordered`); `exact_windows`: of exactly
        /// `window` ids (one batch each); `skip`: positions past `position` already
        /// delivered (from `resume`).
        #[allow(clippy::too_many_arguments)]
        fn fetch(
            self: &LirsReader,
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
            exact_windows: bool,
            skip: &[u64],
        ) -> Result<Box<FetchCursor>>;
        /// Where the consumer is, for a checkpoint, having used all but the last
        /// `unserved` payloads of the current window: returns the first position not
        /// delivered and puts the positions past it already delivered into `after`.
        fn resume(self: &FetchCursor, unserved: usize, after: &mut Vec<u64>) -> Result<u64>;

        /// Moves to the next window and puts its ids into `ids`; its
        /// payloads are then read with `payload`, in place (no copy into a
        /// joined buffer). Returns false at the end of the epoch. On a read
        /// error `ids` still holds the window's ids (so the caller can retry
        /// them singly) and the error is thrown. An `INTERNAL` error is not a
        /// read error (retrying the ids singly is pointless): after one from a
        /// panic here the cursor is poisoned and every later call fails too.
        fn next_window(self: &mut FetchCursor, ids: &mut Vec<u64>) -> Result<bool>;
        /// Payload `i` of the current window; empty past its end or when the
        /// window failed. Valid until the next `next_window` call.
        fn payload(self: &FetchCursor, i: usize) -> &[u8];

        fn build_offset_table(data: &[u8], table: &[u8]) -> Result<u64>;
        /// `best_fit_window == 0` → `Fit::Next`, else `Fit::Best { window }`.
        /// `compression`: "" (detect), "none", "gzip" or "zlib" (any case).
        /// `trust_table`: take the instances from `src`'s trusted table instead.
        fn pad_file(
            src: &[u8],
            dst: &[u8],
            page_size: u64,
            best_fit_window: u64,
            compression: &str,
            trust_table: bool,
        ) -> Result<PadSummary>;
        fn create_writer(
            path: &[u8],
            page_size: u64,
            best_fit_window: u64,
        ) -> Result<Box<LirsWriter>>;
        fn write(self: &mut LirsWriter, payload: &[u8]) -> Result<u64>;
        fn finish(self: &mut LirsWriter) -> Result<PadSummary>;

        fn is_filler(record: &[u8]) -> Result<bool>;
        /// Folds a TensorFlow (seed, seed2) pair into the core's u64 seed.
        fn mix_seeds(seed: i64, seed2: i64) -> u64;
    }
}

pub use ffi::PadSummary;

/// Message prefixes, one per `tfrecord_lirs::ErrorKind`, in the order
/// DataLoss, InvalidArgument, NotFound, Internal.
pub const KIND_PREFIXES: [&str; 4] = ["DATA_LOSS", "INVALID_ARGUMENT", "NOT_FOUND", "INTERNAL"];

/// Error crossing the bridge: a kind and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub kind: core::ErrorKind,
    pub message: String,
}

impl FfiError {
    fn new(kind: core::ErrorKind, message: impl Into<String>) -> Self {
        FfiError {
            kind,
            message: message.into(),
        }
    }
    fn invalid(message: impl Into<String>) -> Self {
        Self::new(core::ErrorKind::InvalidArgument, message)
    }
    fn prefix(&self) -> &'static str {
        match self.kind {
            core::ErrorKind::DataLoss => KIND_PREFIXES[0],
            core::ErrorKind::InvalidArgument => KIND_PREFIXES[1],
            core::ErrorKind::NotFound => KIND_PREFIXES[2],
            core::ErrorKind::Internal => KIND_PREFIXES[3],
        }
    }
}

impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.prefix(), self.message)
    }
}

impl std::error::Error for FfiError {}

impl From<core::Error> for FfiError {
    fn from(e: core::Error) -> Self {
        FfiError::new(e.kind(), e.to_string())
    }
}

type FfiResult<T> = Result<T, FfiError>;

/// Runs `f` (the body of entry point `point`), turning a panic into an
/// `INTERNAL` error instead of unwinding into C++.
pub fn guard<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    catch(point, f).unwrap_or_else(Err)
}

/// Like [`guard`], for a method of a stateful handle: once its body panicked,
/// `*poisoned` is set and this and every later call fail with `INTERNAL`
/// (the handle's state may be half-updated).
fn guard_poisoning<T>(
    point: &str,
    poisoned: &mut bool,
    f: impl FnOnce() -> FfiResult<T>,
) -> FfiResult<T> {
    if *poisoned {
        return Err(FfiError::new(
            core::ErrorKind::Internal,
            format!("`{point}` on a handle that is unusable after an earlier panic in it"),
        ));
    }
    catch(point, f).unwrap_or_else(|panic| {
        *poisoned = true;
        Err(panic)
    })
}

/// Runs `f`; `Err` only if it panicked (as an `INTERNAL` error).
/// `point` names the entry point for fault injection (unused without it).
#[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
fn catch<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> Result<FfiResult<T>, FfiError> {
    match catch_unwind(AssertUnwindSafe(|| {
        #[cfg(feature = "fault-injection")]
        fault_injection::panic_if_armed(point);
        // URLs are read through TensorFlow's file systems (op library builds only).
        #[cfg(feature = "tensorflow")]
        tf_fs::install();
        f()
    })) {
        Ok(r) => Ok(r),
        Err(payload) => {
            let what = if let Some(s) = payload.downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s.clone()
            } else {
                "non-string panic payload".to_string()
            };
            Err(FfiError::new(
                core::ErrorKind::Internal,
                format!("panic in tfrecord-lirs (Rust): {what}"),
            ))
        }
    }
}

fn path_of(bytes: &[u8]) -> PathBuf {
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
};
// Cursors move between TF threads (always under the iterator's mutex).
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<FetchCursor>();
    assert_send::<LirsWriter>();
};

fn open_reader(
    files: &CxxVector<CxxString>,
    tables: &CxxVector<CxxString>,
    page_size: u64,
    verify_payload_crc: bool,
    backend: &str,
    trust_table: bool,
) -> FfiResult<Box<LirsReader>> {
    guard("open_reader", || {
        if files.is_empty() {
            return Err(FfiError::invalid("no data files given"));
        }
        if !tables.is_empty() && tables.len() != files.len() {
            return Err(FfiError::invalid(format!(
                "got {} offset tables for {} data files (give one per file, or none)",
                tables.len(),
                files.len()
            )));
        }
        let mut pairs = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            let data = path_of(f.as_bytes());
            let table = match tables.get(i) {
                Some(t) if !t.is_empty() => path_of(t.as_bytes()),
                _ => core::default_table_path(&data),
            };
            pairs.push((data, table));
        }
        let backend = match backend {
            "" | "auto" => core::Backend::Auto,
            "pread" => core::Backend::Pread,
            "mmap" => core::Backend::Mmap,
            "direct" => core::Backend::Direct,
            other => {
                return Err(FfiError::invalid(format!(
                    "unknown I/O backend {other:?}: use \"auto\", \"pread\", \"mmap\" or \"direct\""
                )))
            }
        };
        let mmap_opt_in = (backend == core::Backend::Mmap).then(|| {
            // SAFETY: the user chose backend="mmap" by name; the Python (`backend=`) and op
            // (`backend` attr) documentation state its hazard (no file may be written or
            // truncated while it is mapped), which the caller thereby accepts.
            unsafe { core::MmapOptIn::new() }
        });
        let options = core::ReaderOptions {
            page_size,
            verify_payload_crc,
            backend,
            trust_table,
            mmap_opt_in,
        };
        let reader = core::Reader::open(&pairs, &options)?;
        Ok(Box::new(LirsReader {
            inner: Arc::new(reader),
        }))
    })
}

impl LirsReader {
    /// The shared core reader (for Rust-side users and tests).
    pub fn core(&self) -> &Arc<core::Reader> {
        &self.inner
    }

    fn read(&self, id: u64) -> FfiResult<Vec<u8>> {
        guard("read", || Ok(self.inner.read(id)?))
    }

    fn read_batch(&self, ids: &[u64], data: &mut Vec<u8>, ends: &mut Vec<u64>) -> FfiResult<()> {
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
        })
    }

    fn shard_len(&self, num_shards: u64, shard_index: u64) -> FfiResult<u64> {
        guard("shard_len", || {
            check_shard(num_shards, shard_index)?;
            Ok(self.inner.shard_len(num_shards, shard_index)?)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn fetch(
        &self,
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
        exact_windows: bool,
        skip: &[u64],
    ) -> FfiResult<Box<FetchCursor>> {
        guard("fetch", || {
            check_shard(num_shards, shard_index)?;
            let spec = core::OrderSpec {
                seed,
                epoch,
                page_aware,
                num_shards,
                shard_index,
            };
            let mut order = self.inner.epoch_order(&spec)?;
            if position > order.len() {
                return Err(FfiError::invalid(format!(
                    "position {position} is past the end of this epoch ({} instances)",
                    order.len()
                )));
            }
            order.seek(position)?;
            let threads = if threads == 0 {
                core::FetchOptions::auto_threads(&self.inner)
            } else {
                threads
            };
            let options = core::FetchOptions {
                threads,
                window,
                depth,
            };
            let mut fetcher = core::Fetcher::new(Arc::clone(&self.inner), order, options)?
                .skip(skip.iter().copied());
            if unordered {
                fetcher = fetcher.unordered();
            }
            if exact_windows {
                fetcher = fetcher.exact_windows();
            }
            Ok(Box::new(FetchCursor {
                fetcher,
                current: None,
                poisoned: false,
            }))
        })
    }
}

fn check_shard(num_shards: u64, shard_index: u64) -> FfiResult<()> {
    if num_shards == 0 {
        return Err(FfiError::invalid("num_shards must be >= 1"));
    }
    if shard_index >= num_shards {
        return Err(FfiError::invalid(format!(
            "shard_index ({shard_index}) must be < num_shards ({num_shards})"
        )));
    }
    Ok(())
}

pub struct FetchCursor {
    fetcher: core::Fetcher,
    /// The payloads of the window last returned by `next_window`.
    current: Option<core::Payloads>,
    /// Set when `next_window` panicked: the fetcher may be half-updated.
    poisoned: bool,
}

impl FetchCursor {
    fn next_window(&mut self, ids: &mut Vec<u64>) -> FfiResult<bool> {
        // Disjoint borrows: the body does not touch `poisoned`.
        let FetchCursor {
            fetcher,
            current,
            poisoned,
        } = self;
        guard_poisoning("next_window", poisoned, || {
            ids.clear();
            // Dropping the last window hands its buffers back to the fetch threads.
            *current = None;
            #[cfg(feature = "fault-injection")]
            fetcher.set_test_panic(fault_injection::armed("fetch_worker"));
            let Some(window) = fetcher.next_window() else {
                return Ok(false);
            };
            *ids = window.ids;
            *current = Some(window.result?);
            Ok(true)
        })
    }

    fn resume(&self, unserved: usize, after: &mut Vec<u64>) -> FfiResult<u64> {
        guard("resume", || {
            let resume = self.fetcher.resume(unserved);
            *after = resume.after;
            Ok(resume.position)
        })
    }

    fn payload(&self, i: usize) -> &[u8] {
        // Not guarded (it is called per element), panic-free by construction:
        // `Payloads::payload` looks up with `get` and answers an empty slice for
        // any index out of range; a poisoned cursor has no `current`.
        if self.poisoned {
            return &[];
        }
        self.current.as_ref().map_or(&[], |p| p.payload(i))
    }
}

fn pad_options(page_size: u64, best_fit_window: u64) -> FfiResult<core::PadOptions> {
    let fit = if best_fit_window == 0 {
        core::Fit::Next
    } else {
        let window = usize::try_from(best_fit_window).map_err(|_| {
            FfiError::invalid(format!("best-fit window {best_fit_window} is too large"))
        })?;
        core::Fit::Best { window }
    };
    Ok(core::PadOptions {
        page_size,
        fit,
        ..Default::default()
    })
}

fn summary(s: core::PadSummary) -> PadSummary {
    PadSummary {
        instances: s.instances,
        pages: s.pages,
        filler_bytes: s.filler_bytes,
        data_bytes: s.data_bytes,
        instance_of_input: s.instance_of_input.unwrap_or_default(),
    }
}

fn build_offset_table(data: &[u8], table: &[u8]) -> FfiResult<u64> {
    guard("build_offset_table", || {
        let data = path_of(data);
        let table = if table.is_empty() {
            core::default_table_path(&data)
        } else {
            path_of(table)
        };
        Ok(core::build_offset_table(&data, &table)?)
    })
}

fn pad_file(
    src: &[u8],
    dst: &[u8],
    page_size: u64,
    best_fit_window: u64,
    compression: &str,
    trust_table: bool,
) -> FfiResult<PadSummary> {
    guard("pad_file", || {
        let options = pad_options(page_size, best_fit_window)?;
        let compression: core::Compression = compression.parse()?;
        let (src, dst) = (path_of(src), path_of(dst));
        if trust_table {
            if compression != core::Compression::Auto {
                return Err(FfiError::invalid(
                    "trust_table reads the input at random: it cannot be compressed",
                ));
            }
            return Ok(summary(core::pad_file_from_table(
                &src,
                &dst,
                &options,
                |_| {},
            )?));
        }
        Ok(summary(core::pad_file_with(
            &src,
            &dst,
            &options,
            compression,
            |_| {},
        )?))
    })
}

pub struct LirsWriter {
    inner: Option<core::PaddedWriter>,
    /// Set when `write` or `finish` panicked: the file may be half-written, so
    /// it must not be finished (or written) as if it were whole.
    poisoned: bool,
}

fn create_writer(path: &[u8], page_size: u64, best_fit_window: u64) -> FfiResult<Box<LirsWriter>> {
    guard("create_writer", || {
        let options = pad_options(page_size, best_fit_window)?;
        let w = core::PaddedWriter::create(&path_of(path), &options)?;
        Ok(Box::new(LirsWriter {
            inner: Some(w),
            poisoned: false,
        }))
    })
}

impl LirsWriter {
    fn write(&mut self, payload: &[u8]) -> FfiResult<u64> {
        let LirsWriter { inner, poisoned } = self;
        guard_poisoning("write", poisoned, || match inner.as_mut() {
            Some(w) => Ok(w.write(payload)?),
            None => Err(FfiError::invalid("write() on a closed PaddedWriter")),
        })
    }

    fn finish(&mut self) -> FfiResult<PadSummary> {
        let LirsWriter { inner, poisoned } = self;
        guard_poisoning("finish", poisoned, || match inner.take() {
            Some(w) => Ok(summary(w.finish()?)),
            None => Err(FfiError::invalid("PaddedWriter is already closed")),
        })
    }
}

fn is_filler(record: &[u8]) -> FfiResult<bool> {
    // Guarded although `is_filler` is a prefix comparison: it is cheap, and the
    // test panic point "is_filler" proves the kernel's error path.
    guard("is_filler", || Ok(core::format::is_filler(record)))
}

/// Mapping from TensorFlow seeds onto the core's single u64 seed: the two
/// int64 seeds (TF's (seed, seed2) pair, or the pair a seed generator hands
/// out for one iteration) are folded with SplitMix64 so that every bit of both
/// affects the result and nearby pairs give unrelated seeds. The core's
/// `epoch` is then used for the iteration number (see tf_op/lirs_dataset_op.cc).
///
/// Not guarded: panic-free by construction (casts, shifts, xor and wrapping
/// arithmetic only; no overflow checks can fire even in debug builds).
fn mix_seeds(seed: i64, seed2: i64) -> u64 {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    splitmix(splitmix(seed as u64) ^ (seed2 as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_prefixes() {
        let e = FfiError::new(core::ErrorKind::DataLoss, "x");
        assert_eq!(e.to_string(), "DATA_LOSS: x");
        let e = FfiError::invalid("y");
        assert_eq!(e.to_string(), "INVALID_ARGUMENT: y");
    }

    #[test]
    fn mix_seeds_spreads() {
        assert_ne!(mix_seeds(1, 2), mix_seeds(2, 1));
        assert_ne!(mix_seeds(0, 0), mix_seeds(0, 1));
        assert_eq!(mix_seeds(7, 9), mix_seeds(7, 9));
    }

    #[test]
    fn bad_shards_rejected() {
        assert!(check_shard(0, 0).is_err());
        assert!(check_shard(2, 2).is_err());
        assert!(check_shard(2, 1).is_ok());
    }
}
