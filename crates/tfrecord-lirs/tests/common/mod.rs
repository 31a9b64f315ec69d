//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tfrecord_lirs::{Fit, PadOptions, PadSummary, PaddedWriter};

/// Deterministic payload `i` of `len` bytes; never starts with 0x00 (so never a filler).
pub fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| 1 + ((i * 131 + j * 7) % 255) as u8)
        .collect()
}

/// A kdd-like size mix: mean 362 B, standard deviation 30%, from a small LCG + Box-Muller.
pub fn kdd_sizes(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut uniform = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let z = (-2.0 * uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform()).cos();
            (362.0 + 0.3 * 362.0 * z).round().max(1.0) as usize
        })
        .collect()
}

/// Writes `payloads` padded into `dir/name`; returns the path and the summary.
pub fn write_padded(
    dir: &Path,
    name: &str,
    payloads: &[Vec<u8>],
    page_size: u64,
    fit: Fit,
) -> (PathBuf, PadSummary) {
    let path = dir.join(name);
    let mut w = PaddedWriter::create(
        &path,
        &PadOptions {
            page_size,
            fit,
            sync: false,
        },
    )
    .unwrap();
    for p in payloads {
        w.write(p).unwrap();
    }
    (path.clone(), w.finish().unwrap())
}

/// Writes `payloads` unpadded (like tf.io.TFRecordWriter) and its table.
pub fn write_plain(dir: &Path, name: &str, payloads: &[Vec<u8>]) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = Vec::new();
    for p in payloads {
        tfrecord_lirs::format::encode_record(p, &mut bytes);
    }
    std::fs::write(&path, bytes).unwrap();
    tfrecord_lirs::build_offset_table(&path, &tfrecord_lirs::default_table_path(&path)).unwrap();
    path
}
