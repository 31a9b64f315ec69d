//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tfrecord_lirs::format;
use tfrecord_lirs::{DatasetCursor, Fit, PadOptions, PadSummary, PaddedWriter};

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
            ..Default::default()
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

/// One filler record over `[from, to)`: its header and magic, the zeros of the hole
/// (left unwritten, so the file stays sparse) and its payload CRC, so that every byte of
/// the file belongs to a valid record (padded-file invariant (a)).
pub fn write_sparse_filler(file: &std::fs::File, from: u64, to: u64) {
    let payload_len = to - from - format::FRAMING_LEN;
    let mut head = format::encode_header(payload_len).to_vec();
    head.extend_from_slice(format::FILLER_MAGIC);
    file.write_all_at(&head, from).unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut crc = crc32c::crc32c(format::FILLER_MAGIC);
    let mut left = payload_len - format::FILLER_MAGIC.len() as u64;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        crc = crc32c::crc32c_append(crc, &zeros[..n]);
        left -= n as u64;
    }
    let footer = format::mask_crc(crc).to_le_bytes();
    file.write_all_at(&footer, to - format::FOOTER_LEN as u64)
        .unwrap();
}

/// The repository's testdata/ (files written by real TensorFlow).
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The entries of testdata/manifest.json.
pub fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(testdata().join("manifest.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["files"].as_array().unwrap().clone()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The payloads a manifest entry describes, regenerated from its rule.
pub fn manifest_payloads(entry: &Value) -> Vec<Vec<u8>> {
    if let Some(list) = entry["payloads_hex"].as_array() {
        return list.iter().map(|h| hex(h.as_str().unwrap())).collect();
    }
    let rule = &entry["payload_rule"];
    assert_eq!(rule["name"], "affine_mod256");
    let (a, b) = (rule["a"].as_u64().unwrap(), rule["b"].as_u64().unwrap());
    entry["payload_sizes"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (0..n.as_u64().unwrap())
                .map(|j| ((i as u64 * a + j * b) % 256) as u8)
                .collect()
        })
        .collect()
}

/// The mmap backend's opt-in, for tests that read their own temporary files through it.
pub fn mmap_opt_in() -> Option<tfrecord_lirs::MmapOptIn> {
    // SAFETY: the tests' own temporary files; nothing writes or truncates them while
    // they are mapped.
    Some(unsafe { tfrecord_lirs::MmapOptIn::new() })
}

/// The id a test payload starts with (its first 4 bytes, little-endian).
pub fn id_of(payload: &[u8]) -> u64 {
    u64::from(u32::from_le_bytes(payload[..4].try_into().unwrap()))
}

/// Takes up to `batches` batches from `cursor`, their ids appended to `out`.
pub fn take(cursor: &mut DatasetCursor, batches: usize, out: &mut Vec<u64>) {
    for _ in 0..batches {
        match cursor.next_batch() {
            Some(batch) => out.extend(batch.unwrap().iter().map(id_of)),
            None => return,
        }
    }
}
