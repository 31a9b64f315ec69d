//! Fault injection for tests (cargo feature `fault-injection`; never in the
//! staticlib of the op library users install): a second cxx bridge with the test
//! entry points, the process-wide panic point that [`crate::guard`] checks on every
//! call when the feature is on, and the storage contract's cases run through the
//! storage every entry point reads with (TensorFlow's file systems in the op library).
//!
//! Its C++ side is `tf_op/lirs_test_ops.cc` (the ops `LIRSTestOnlyPanic` and
//! `LIRSTestOnlyStorageConformance`, the C function `lirs_test_set_panic_point`),
//! linked only into the test build of the op library (`make -C tf_op test-lib`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tfrecord_lirs::conformance;

use crate::status::{guard, report, FfiError, FfiResult};
use crate::Status;

#[cxx::bridge(namespace = "tfrecord_lirs::ffi")]
mod ffi {
    extern "C++" {
        include!("tfrecord-lirs-ffi/src/lib.rs.h");
        type Status = crate::Status;
    }
    extern "Rust" {
        /// Panics with `message` inside a guarded entry point, so tests can prove a
        /// panic surfaces as an Internal error.
        fn debug_panic(message: &str, status: &mut Status) -> Result<()>;
        /// Every call of the entry point named `point` (its Rust name, e.g.
        /// "read_batch" or "next_window") panics inside its guard until disarmed
        /// with "". The point "fetch_worker" makes every job of the core's fetch
        /// threads panic (inside those threads).
        fn set_test_panic_point(point: &str, status: &mut Status) -> Result<()>;
        /// The storage contract's cases run against the fixtures under `base`,
        /// opened as the op opens its files; one line per case that fails.
        fn storage_conformance(base: &str, status: &mut Status) -> Result<Vec<String>>;
    }
}

/// Name of the entry point that panics on purpose (empty = none).
static PANIC_POINT: Mutex<String> = Mutex::new(String::new());
/// Fast path: whether any panic point is armed.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Whether the panic point `point` is armed.
pub(crate) fn armed(point: &str) -> bool {
    ARMED.load(Ordering::Relaxed) && PANIC_POINT.lock().map(|p| *p == point).unwrap_or(false)
}

/// Panics if `point` is armed (called inside the guard of entry point `point`).
pub(crate) fn panic_if_armed(point: &str) {
    if armed(point) {
        panic!("test panic injected into entry point `{point}`");
    }
}

/// Makes entry point `point` panic on every call ("" disarms).
/// Not guarded (a guard could never be disarmed if this point were armed):
/// panic-free by construction, a poisoned lock is reported as an error.
pub fn arm_panic_point(point: &str) -> FfiResult<()> {
    let mut armed = PANIC_POINT
        .lock()
        .map_err(|_| FfiError::internal("panic point lock poisoned"))?;
    *armed = point.to_string();
    ARMED.store(!point.is_empty(), Ordering::Relaxed);
    Ok(())
}

/// [`arm_panic_point`] for C++ (the bridge's error protocol).
fn set_test_panic_point(point: &str, status: &mut Status) -> FfiResult<()> {
    report(status, arm_panic_point(point))
}

fn debug_panic(message: &str, status: &mut Status) -> FfiResult<()> {
    report(status, guard("debug_panic", || panic!("{}", message)))
}

/// [`conformance::run`] over `reader::storage` (in the op library:
/// TensorFlow's file systems for URLs, through `tf_fs`), each file opened the way
/// the readers open a file of one record, with the default backend.
pub fn run_storage_conformance(base: &str) -> Vec<String> {
    conformance::run_over(base, &crate::reader::storage())
}

fn storage_conformance(base: &str, status: &mut Status) -> FfiResult<Vec<String>> {
    report(
        status,
        guard("storage_conformance", || Ok(run_storage_conformance(base))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{cursor_config, reader_config, start, write_u32_file};
    use crate::{ok_status, open_reader, ErrorCode};

    #[test]
    fn panic_becomes_internal_error() {
        let mut st = ok_status();
        let err = debug_panic("boom", &mut st).unwrap_err();
        assert_eq!(err.code, ErrorCode::Internal);
        assert_eq!(st.code, ErrorCode::Internal);
        assert!(st
            .message
            .starts_with("panic in tfrecord-lirs (Rust): boom"));
    }

    /// Without TensorFlow the entry points' storage reads local files: the cases hold
    /// over the fixtures and a truncated fixture is reported (the op runs the same
    /// function over TensorFlow's file systems: tests/test_storage_conformance.py).
    #[test]
    fn storage_conformance_runs_the_cases_through_the_entry_points_storage() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in conformance::fixtures() {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let base = dir.path().to_str().unwrap();
        let mut st = ok_status();
        assert_eq!(
            storage_conformance(base, &mut st).unwrap(),
            Vec::<String>::new()
        );
        let long = dir.path().join("long.bin");
        let bytes = std::fs::read(&long).unwrap();
        std::fs::write(&long, &bytes[..bytes.len() / 2]).unwrap();
        let failures = storage_conformance(base, &mut st).unwrap();
        assert!(
            failures
                .iter()
                .any(|f| f.starts_with("whole_files: long.bin")),
            "{failures:?}"
        );
    }

    /// The panic points are process-wide, so every test that arms one is here.
    #[test]
    fn fetch_panics_are_internal_errors_that_pass_one_position() {
        let dir = tempfile::tempdir().unwrap();
        // ~4 KB records: the dataset's fetch windows (~384 KiB of data) then cut the
        // file into ten, more than the windows read ahead (the fault must reach
        // windows fetched after it is armed).
        let path = write_u32_file(dir.path(), 1000, 4000);
        let mut st = ok_status();
        let reader = open_reader(&reader_config(&path, "pread"), &mut st).unwrap();
        let id = |p: &[u8]| u32::from_le_bytes(p[..4].try_into().unwrap());
        let full: Vec<u32> = {
            let mut c = reader
                .fetch(&cursor_config(0, 2), &start(), &mut st)
                .unwrap();
            let mut out = Vec::new();
            while c.next_element(&mut st).unwrap() {
                out.push(id(c.element()));
            }
            out
        };
        assert_eq!(full.len(), 1000);

        for point in ["fetch_worker", "next_window"] {
            let mut c = reader
                .fetch(&cursor_config(0, 2), &start(), &mut st)
                .unwrap();
            let mut seen = Vec::new();
            assert!(c.next_element(&mut st).unwrap());
            seen.push(id(c.element()));
            // The first window is fetched: the fault hits a later one.
            arm_panic_point(point).unwrap();
            let err = loop {
                match c.next_element(&mut st) {
                    Ok(got) => {
                        assert!(got && seen.len() < 1000, "the fault never fired");
                        seen.push(id(c.element()));
                    }
                    Err(e) => break e,
                }
            };
            arm_panic_point("").unwrap();
            assert_eq!(err.code, ErrorCode::Internal, "{err}");
            assert!(err.message.contains("panic"), "{err}");
            let wanted = if point == "fetch_worker" {
                "fetch thread"
            } else {
                "`next_window`"
            };
            assert!(err.message.contains(wanted), "{err}");
            // The cursor is not poisoned: a fresh fetch goes on after the one position
            // the error passed.
            while c.next_element(&mut st).unwrap() {
                seen.push(id(c.element()));
            }
            assert_eq!(seen.len(), 999);
            let at = seen.iter().zip(&full).position(|(a, b)| a != b).unwrap();
            assert_eq!(seen, [&full[..at], &full[at + 1..]].concat(), "{point}");
        }

        // A panic in a guarded cursor method itself poisons that cursor for good.
        let mut c = reader
            .fetch(&cursor_config(4, 2), &start(), &mut st)
            .unwrap();
        let batch = c.next_batch(&mut st).unwrap();
        assert_eq!(batch.len(), 4);
        arm_panic_point("next_batch").unwrap();
        let err = c.next_batch(&mut st).unwrap_err();
        arm_panic_point("").unwrap();
        assert_eq!(err.code, ErrorCode::Internal);
        for _ in 0..2 {
            let err = c.next_batch(&mut st).unwrap_err();
            assert_eq!(err.code, ErrorCode::Internal);
            assert!(err.message.contains("unusable"), "{err}");
        }
        // A batch taken before the panic stays readable.
        assert_eq!(batch.record(0).len(), 4000);
    }
}
