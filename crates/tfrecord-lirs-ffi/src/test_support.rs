//! Helpers of the crate's tests.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use tfrecord_lirs as core;

use crate::{CursorCheckpoint, CursorConfig, FilePath, ReaderConfig, WalkConfig};

/// A padded file `dir/d` of `n` instances of `len` bytes (at least 4), instance i
/// starting with `i` as 4 LE bytes.
pub fn write_u32_file(dir: &Path, n: u32, len: usize) -> PathBuf {
    let path = dir.join("d");
    let mut w = core::PaddedWriter::create(&path, &Default::default()).unwrap();
    for i in 0..n {
        let mut record = i.to_le_bytes().to_vec();
        record.resize(len.max(4), b'x');
        w.write(&record).unwrap();
    }
    w.finish().unwrap();
    path
}

/// A LIRSDataset iteration's cursor spec (seed pair (5, 0), one shard).
pub fn cursor_config(batch_size: i64, num_parallel_reads: i64) -> CursorConfig {
    CursorConfig {
        seed: 5,
        seed2: 0,
        order: (core::seed_from_pair(5, 0), 0),
        seed_rule: core::SeedRule::Fold,
        unordered: false,
        epoch_state: Vec::new(),
        walk: WalkConfig {
            page_aware: false,
            num_shards: 1,
            shard_index: 0,
            batch_size,
            drop_remainder: false,
            num_parallel_reads,
            order_version: 1,
            shard_remainder: "keep".into(),
        },
    }
}

/// `config` with its walk changed by `change` (for the tests that do not run with
/// fault injection).
#[cfg(not(feature = "fault-injection"))]
pub fn cursor_with(config: &CursorConfig, change: impl FnOnce(&mut WalkConfig)) -> CursorConfig {
    let mut config = config.clone();
    change(&mut config.walk);
    config
}

/// Seeds for a checkpoint's `shard_state` in tests that do not resume from it
/// (those tests do not run with fault injection).
#[cfg(not(feature = "fault-injection"))]
pub fn no_seeds() -> crate::IterationSeeds {
    crate::IterationSeeds {
        seed: 5,
        seed2: 0,
        num_random_samples: 0,
    }
}

/// The checkpoint of a new iteration.
pub fn start() -> CursorCheckpoint {
    CursorCheckpoint {
        position: 0,
        has_delivered_after: false,
        delivered_after: Vec::new(),
        order_version: 0,
        shard_state: Vec::new(),
    }
}

/// The config of a reader of `path` (default table) with `backend`.
pub fn reader_config(path: &Path, backend: &str) -> ReaderConfig {
    ReaderConfig {
        files: vec![FilePath {
            bytes: path.as_os_str().as_bytes().to_vec(),
        }],
        tables: vec![],
        page_size: 4096,
        verify_payload_crc: true,
        backend: backend.into(),
        trust_table: false,
        index_missing: true,
        cache_dir: Vec::new(),
        cache_bytes: -1,
        page_aware: false,
    }
}
