//! Fault injection for tests (cargo feature `fault-injection`; never in the
//! staticlib of the op library users install): a second cxx bridge with the test
//! entry points, and the process-wide panic point that [`super::guard`] checks on
//! every call when the feature is on.
//!
//! Its C++ side is `tf_op/lirs_test_ops.cc` (the `LIRSTestOnlyPanic` op and the C
//! function `lirs_test_set_panic_point`), linked only into the test build of the op
//! library (`make -C tf_op test-lib`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{guard, report, FfiError, FfiResult, Status};

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

#[cfg(test)]
mod tests {
    use super::super::test_support::{reader_spec, write_u32_file};
    use super::super::{ok_status, open_reader, ErrorCode};
    use super::*;

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

    /// The panic points are process-wide, so every test that arms one is here.
    #[test]
    fn panics_poison_stateful_handles_and_worker_panics_are_internal() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_u32_file(dir.path());
        let mut st = ok_status();
        let reader = open_reader(&reader_spec(&path, "pread"), &mut st).unwrap();
        let cursor = || {
            let mut st = ok_status();
            let mut fetch = reader.fetch_spec(0, 2, &mut st).unwrap();
            fetch.seed = 1;
            // Several windows (the default window would span all 300 tiny records);
            // windows in flight when the fault is cleared fail too.
            fetch.window = 64;
            fetch.depth = 2;
            reader.fetch(&fetch, &mut st).unwrap()
        };
        let mut ids = Vec::new();

        // A panic on a fetch thread: Internal, and the cursor keeps working.
        let mut c = cursor();
        arm_panic_point("fetch_worker").unwrap();
        let err = c.next_window(&mut ids, &mut st).unwrap_err();
        arm_panic_point("").unwrap();
        assert_eq!(err.code, ErrorCode::Internal, "{err}");
        assert!(err.message.contains("fetch thread"), "{err}");
        let mut n = 0;
        loop {
            match c.next_window(&mut ids, &mut st) {
                Ok(true) => n += ids.len(),
                Ok(false) => break,
                Err(e) => assert_eq!(e.code, ErrorCode::Internal), // in flight
            }
        }
        assert!(n > 0 && n < 300);

        // A panic in `next_window` itself poisons the cursor for good.
        let mut c = cursor();
        assert!(c.next_window(&mut ids, &mut st).unwrap());
        let window = c.take_window();
        assert_eq!(window.payload(0, &mut st).unwrap().len(), 4);
        arm_panic_point("next_window").unwrap();
        let err = c.next_window(&mut ids, &mut st).unwrap_err();
        arm_panic_point("").unwrap();
        assert_eq!(err.code, ErrorCode::Internal);
        for _ in 0..2 {
            let err = c.next_window(&mut ids, &mut st).unwrap_err();
            assert_eq!(err.code, ErrorCode::Internal);
            assert!(err.message.contains("unusable"), "{err}");
        }
        assert!(c.take_window().payload(0, &mut st).is_err());
        // A window taken before the panic stays readable.
        assert_eq!(window.payload_at(0).len(), 4);
    }
}
