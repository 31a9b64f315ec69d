//! Reading records: where the op library's paths are, the shared reader of a LIRSRead
//! op (or of a LIRSDataset), its batch reads, and the filler check of `LIRSIsFiller`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tfrecord_lirs as core;

use crate::status::{guard, report, FfiError, FfiResult};
use crate::{op_config, reader_cache, rules};
use crate::{FilePath, NamedValue, ProcessIoTotals, ReaderConfig, Status};

/// Where the op library's paths are: local files, and URLs through TensorFlow's file
/// systems (op library builds only; local files only without TensorFlow).
pub fn storage() -> core::Storage {
    #[cfg(feature = "tensorflow")]
    return crate::tf_fs::storage();
    #[cfg(not(feature = "tensorflow"))]
    core::Storage::local()
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
};

pub(crate) fn process_io_totals() -> ProcessIoTotals {
    let totals = core::process_io_totals();
    ProcessIoTotals {
        reads: totals.reads,
        bytes_read: totals.bytes_read,
    }
}

#[allow(clippy::ptr_arg)] // the bridge's signature: C++ builds rust::Vecs
pub(crate) fn open_reader_for_op(
    args: &Vec<NamedValue>,
    files: &Vec<FilePath>,
    tables: &Vec<FilePath>,
    status: &mut Status,
) -> FfiResult<Box<LirsReader>> {
    let config = report(status, op_config::reader_config(args, files, tables))?;
    open_reader(&config, status)
}

/// The reader of `config`, shared (see [`reader_cache`]); public for Rust-side tests.
pub fn open_reader(config: &ReaderConfig, status: &mut Status) -> FfiResult<Box<LirsReader>> {
    report(
        status,
        guard("open_reader", || {
            let pairs = rules::file_pairs(config)?;
            let backend = rules::parse_backend(&config.backend)?;
            let mmap_opt_in = (backend == core::Backend::Mmap).then(|| {
                // SAFETY: the user chose backend="mmap" by name; the Python (`backend=`)
                // and op (`backend` attr) documentation state its hazard (no file may be
                // written or truncated while it is mapped), which the caller thereby
                // accepts.
                unsafe { core::MmapOptIn::new() }
            });
            let options = core::ReaderOptions {
                page_size: rules::check_page_size(config.page_size)?,
                verify_payload_crc: config.verify_payload_crc,
                backend,
                trust_table: config.trust_table,
                index_missing: config.index_missing,
                page_aware: config.page_aware,
                mmap_opt_in,
                // The core's rule: the attr, else TFRECORD_LIRS_CACHE_DIR, else none.
                storage: storage().with_cache(core::options::cache(
                    Some(&path_of(&config.cache_dir)),
                    core::options::signed_cache_bytes(config.cache_bytes)?,
                )?),
            };
            Ok(Box::new(LirsReader {
                inner: reader_cache::open_shared(&pairs, &options)?,
            }))
        }),
    )
}

impl LirsReader {
    /// The shared core reader (for Rust-side users and tests).
    pub fn core(&self) -> &Arc<core::Reader> {
        &self.inner
    }

    /// The payloads of `ids`, read through the core's one batch entry (the same call,
    /// so the same read strategy, as Python's `read_many`).
    pub(crate) fn read_batch(
        &self,
        ids: &[i64],
        data: &mut Vec<u8>,
        ends: &mut Vec<u64>,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("read_batch", || {
                data.clear();
                ends.clear();
                let ids = ids
                    .iter()
                    .enumerate()
                    .map(|(at, &id)| {
                        u64::try_from(id).map_err(|_| {
                            FfiError::invalid(format!(
                                "instance id must be >= 0, got {id} at index {at}"
                            ))
                        })
                    })
                    .collect::<FfiResult<Vec<u64>>>()?;
                let mut batch = core::Batch::default();
                self.inner.read_batch_concurrent(&ids, &mut batch)?;
                data.reserve(batch.payload_bytes());
                for payload in batch.payloads() {
                    data.extend_from_slice(payload);
                    ends.push(data.len() as u64);
                }
                Ok(())
            }),
        )
    }

    /// Instances of a shard (public for Rust-side tests).
    pub fn shard_len(
        &self,
        num_shards: i64,
        shard_index: i64,
        status: &mut Status,
    ) -> FfiResult<u64> {
        report(
            status,
            guard("shard_len", || {
                let (n, i) = rules::check_shard(Some(num_shards), Some(shard_index))?;
                Ok(self.inner.shard_len(n, i)?)
            }),
        )
    }

    /// Checks a dataset's batching and order arguments (public for Rust-side tests).
    pub fn check_dataset(
        &self,
        batch_size: i64,
        num_parallel_reads: i64,
        order_version: i64,
        status: &mut Status,
    ) -> FfiResult<()> {
        report(
            status,
            guard("check_dataset", || {
                core::CursorOptions::dataset(&self.inner, batch_size, num_parallel_reads)?;
                rules::order_version_of(order_version)?;
                Ok(())
            }),
        )
    }
}

pub(crate) fn is_filler(record: &[u8], status: &mut Status) -> FfiResult<bool> {
    // Guarded although `is_filler` is a prefix comparison: it is cheap, and the test
    // panic point "is_filler" proves the kernel's error path.
    report(
        status,
        guard("is_filler", || Ok(core::format::is_filler(record))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::ok_status;
    use crate::test_support;
    use crate::ErrorCode;

    #[test]
    fn errors_carry_their_code_and_fill_the_status() {
        let mut status = ok_status();
        let dir = tempfile::tempdir().unwrap();
        let path = test_support::write_u32_file(dir.path(), 3, 8);
        let Err(err) = open_reader(&test_support::reader_config(&path, "io_uring"), &mut status)
        else {
            panic!("opened with an unknown backend");
        };
        assert_eq!(status.code, ErrorCode::InvalidArgument);
        assert_eq!(status.message, err.message);
        assert_eq!(err.to_string(), err.message); // no prefix in what()
        assert!(status.message.contains("backend"), "{}", status.message);
        let mut status = ok_status();
        open_reader(&test_support::reader_config(&path, "mmap"), &mut status).unwrap();
        assert_eq!(status.code, ErrorCode::Ok);
    }
}
