//! Helpers shared by the oracles.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tfrecord_lirs::format;

/// A scratch directory for the whole fuzzing run (in /dev/shm when there is one, so the
/// file system does not limit the exec rate). Each input overwrites the same files.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let prefix = format!("lirs-fuzz-{}-", std::process::id());
        let builder = {
            let mut b = tempfile::Builder::new();
            // The process id in the name tells `fuzz/run_targets.sh` which directories
            // are left over from runs that have ended (libFuzzer exits without
            // dropping this one) and which belong to a run still going.
            b.prefix(&prefix);
            b
        };
        if shm.is_dir() {
            builder.tempdir_in(shm).expect("scratch dir")
        } else {
            builder.tempdir().expect("scratch dir")
        }
    })
    .path()
}

/// `scratch()/name`.
pub fn scratch_file(name: &str) -> PathBuf {
    scratch().join(name)
}

/// Every error must name the file it is about.
pub fn assert_names(err: &tfrecord_lirs::Error, file: &Path) {
    let msg = err.to_string();
    let name = file.file_name().unwrap().to_string_lossy();
    assert!(msg.contains(&*name), "error does not name {name}: {msg}");
}

/// The record that really starts at `offset` of `data`, CRC-checked, if any.
pub fn record_at(data: &[u8], offset: u64) -> Option<&[u8]> {
    let rest = data.get(usize::try_from(offset).ok()?..)?;
    format::decode_record(rest, true).ok().map(|f| f.payload)
}

/// A page size from `shift`: every power of two from `format::MIN_PAGE_SIZE` (512 B,
/// 2^9) to `format::MAX_PAGE_SIZE` (16 MiB, 2^24), both ends included.
pub fn page_size(shift: u8) -> u64 {
    let lo = format::MIN_PAGE_SIZE.trailing_zeros();
    let hi = format::MAX_PAGE_SIZE.trailing_zeros();
    let page = 1u64 << (lo + u32::from(shift) % (hi - lo + 1));
    debug_assert!((format::MIN_PAGE_SIZE..=format::MAX_PAGE_SIZE).contains(&page));
    page
}

/// Every error must name one of `files`.
pub fn assert_names_one_of(err: &tfrecord_lirs::Error, files: &[&Path]) {
    let msg = err.to_string();
    assert!(
        files
            .iter()
            .any(|f| msg.contains(&*f.file_name().unwrap().to_string_lossy())),
        "error names none of {files:?}: {msg}"
    );
}

/// The records of `data` (offset, framed length, payload) walked from byte 0 by
/// `format::decode_record` alone, both CRCs checked: `Some` only if they tile all of
/// `data`. The oracles' own view of a file, independent of the scanner.
pub fn walk_records(data: &[u8]) -> Option<Vec<(u64, u64, &[u8])>> {
    let mut at = 0usize;
    let mut out = Vec::new();
    while at < data.len() {
        let frame = format::decode_record(&data[at..], true).ok()?;
        out.push((at as u64, frame.framed_len, frame.payload));
        at += frame.framed_len as usize;
    }
    Some(out)
}
