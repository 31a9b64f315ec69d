//! Fault injection for tests (cargo feature `fault-injection`; never in the
//! staticlib of the op library users install): a second cxx bridge with the
//! test entry points, and the process-wide panic point that [`super::guard`]
//! checks on every call when the feature is on.
//!
//! Its C++ side is `tf_op/lirs_test_ops.cc` (the `LIRSTestOnlyPanic` op and the
//! C function `lirs_test_set_panic_point`), linked only into the test build of
//! the op library (`make -C tf_op test-lib`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::{guard, FfiError, FfiResult};
use tfrecord_lirs as core;

#[cxx::bridge(namespace = "tfrecord_lirs::ffi")]
mod ffi {
    extern "Rust" {
        /// Panics with `message` inside a guarded entry point, so tests can
        /// prove a panic surfaces as an INTERNAL error.
        fn debug_panic(message: &str) -> Result<()>;
        /// Every call of the entry point named `point` (the Rust function
        /// name, e.g. "read" or "next_window") panics inside its guard until
        /// disarmed with "". The point "fetch_worker" makes every job of the
        /// core's fetch threads panic (inside those threads).
        fn set_test_panic_point(point: &str) -> Result<()>;
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
fn set_test_panic_point(point: &str) -> FfiResult<()> {
    let mut armed = PANIC_POINT
        .lock()
        .map_err(|_| FfiError::new(core::ErrorKind::Internal, "panic point lock poisoned"))?;
    *armed = point.to_string();
    ARMED.store(!point.is_empty(), Ordering::Relaxed);
    Ok(())
}

fn debug_panic(message: &str) -> FfiResult<()> {
    guard("debug_panic", || panic!("{}", message))
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;
    use std::sync::Arc;

    use super::super::{create_writer, LirsReader};
    use super::*;

    #[test]
    fn panic_becomes_internal_error() {
        let err = debug_panic("boom").unwrap_err();
        assert_eq!(err.kind, core::ErrorKind::Internal);
        assert!(err
            .to_string()
            .starts_with("INTERNAL: panic in tfrecord-lirs (Rust): boom"));
    }

    /// The panic points are process-wide, so every test that arms one is here.
    #[test]
    fn panics_poison_stateful_handles_and_worker_panics_are_internal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut w = create_writer(path.as_os_str().as_bytes(), 4096, 0).unwrap();
        for i in 0..300u32 {
            w.write(&i.to_le_bytes()).unwrap();
        }
        w.finish().unwrap();
        let reader = LirsReader {
            inner: Arc::new(core::Reader::open_one(&path, None, &Default::default()).unwrap()),
        };
        let cursor = || {
            reader
                .fetch(1, 0, false, 1, 0, 0, 2, 64, 2, false, false, &[])
                .unwrap()
        };
        let mut ids = Vec::new();

        // A panic on a fetch thread: INTERNAL, and the cursor keeps working.
        let mut c = cursor();
        set_test_panic_point("fetch_worker").unwrap();
        let err = c.next_window(&mut ids).unwrap_err();
        set_test_panic_point("").unwrap();
        assert_eq!(err.kind, core::ErrorKind::Internal, "{err}");
        assert!(err.message.contains("fetch thread"), "{err}");
        let mut n = 0;
        loop {
            match c.next_window(&mut ids) {
                Ok(true) => n += ids.len(),
                Ok(false) => break,
                Err(e) => assert_eq!(e.kind, core::ErrorKind::Internal), // in flight
            }
        }
        assert!(n > 0 && n < 300);

        // A panic in `next_window` itself poisons the cursor for good.
        let mut c = cursor();
        assert!(c.next_window(&mut ids).unwrap());
        assert_eq!(c.payload(0).len(), 4);
        set_test_panic_point("next_window").unwrap();
        let err = c.next_window(&mut ids).unwrap_err();
        set_test_panic_point("").unwrap();
        assert_eq!(err.kind, core::ErrorKind::Internal);
        for _ in 0..2 {
            let err = c.next_window(&mut ids).unwrap_err();
            assert_eq!(err.kind, core::ErrorKind::Internal);
            assert!(err.message.contains("unusable"), "{err}");
        }
        assert!(c.payload(0).is_empty());

        // A panic in `write` poisons the writer: no later write, no finish.
        let mut w = create_writer(dir.path().join("w").as_os_str().as_bytes(), 4096, 0).unwrap();
        w.write(b"ok").unwrap();
        set_test_panic_point("write").unwrap();
        let err = w.write(b"boom").unwrap_err();
        set_test_panic_point("").unwrap();
        assert_eq!(err.kind, core::ErrorKind::Internal);
        assert!(w.write(b"again").unwrap_err().message.contains("unusable"));
        assert!(w.finish().unwrap_err().message.contains("unusable"));
    }
}
