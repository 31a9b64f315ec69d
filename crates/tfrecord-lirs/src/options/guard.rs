//! The panic guard of the foreign entry points (the TensorFlow op's bridge, the Python
//! extension): a panic becomes an [`ErrorKind::Internal`](crate::ErrorKind::Internal)
//! error naming the entry point, never an unwind into C++ or Python; and a handle whose
//! method panicked may be half-updated, so [`Poison`] refuses every later call.
//!
//! ```
//! use tfrecord_lirs::options::guard::{guard, Poison};
//! use tfrecord_lirs::{Error, ErrorKind};
//! let e = guard("read", || -> Result<(), Error> { panic!("boom") }).unwrap_err();
//! assert_eq!(e.kind(), ErrorKind::Internal);
//! let mut poison = Poison::new("a reader");
//! assert!(poison.run("next", || -> Result<(), Error> { panic!("boom") }).is_err());
//! assert!(poison.run("next", || Ok::<_, Error>(())).unwrap_err().to_string().contains("unusable"));
//! ```

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::Error;

/// The error for a panic (its `message`) in entry point `point`.
pub fn panic_error(point: &str, message: &str) -> Error {
    Error::internal(format!(
        "panic in tfrecord-lirs (Rust): {message} (in `{point}`)"
    ))
}

/// Runs `f`; `Err` (the [`panic_error`]) only if it panicked.
pub fn catch<R>(point: &str, f: impl FnOnce() -> R) -> Result<R, Error> {
    catch_unwind(AssertUnwindSafe(f))
        .map_err(|payload| panic_error(point, &crate::pool::panic_message(payload.as_ref())))
}

/// Runs `f`, the body of entry point `point`: a panic is an Internal error naming it
/// (in the caller's error type `E`).
pub fn guard<T, E: From<Error>>(point: &str, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    catch(point, f).unwrap_or_else(|panic| Err(panic.into()))
}

/// Whether a stateful handle (`what`, e.g. "a PaddedWriter") is unusable after a panic
/// in one of its methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poison {
    what: &'static str,
    poisoned: bool,
}

impl Poison {
    /// A handle not poisoned yet.
    pub const fn new(what: &'static str) -> Poison {
        Poison {
            what,
            poisoned: false,
        }
    }

    /// Whether a method of the handle panicked.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Runs `f` as method `point` of the handle, as [`guard`] does; a panic poisons the
    /// handle, and a poisoned handle refuses this and every later call (Internal).
    pub fn run<T, E: From<Error>>(
        &mut self,
        point: &str,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        if self.poisoned {
            return Err(Error::internal(format!(
                "`{point}` on {} that is unusable after an earlier panic in it",
                self.what
            ))
            .into());
        }
        catch(point, f).unwrap_or_else(|panic| {
            self.poisoned = true;
            Err(panic.into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_panic_is_an_internal_error_and_poisons_for_good() {
        assert_eq!(guard("ok", || Ok::<_, Error>(3)).unwrap(), 3);
        let e = guard("read", || -> Result<(), Error> { panic!("boom {}", 1) }).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(
            e.to_string(),
            "panic in tfrecord-lirs (Rust): boom 1 (in `read`)"
        );
        let mut poison = Poison::new("a PaddedWriter");
        assert_eq!(poison.run("write", || Ok::<_, Error>(1)).unwrap(), 1);
        let e = poison
            .run("write", || -> Result<(), Error> { panic!("boom") })
            .unwrap_err();
        assert!(e.to_string().contains("boom (in `write`)"), "{e}");
        assert!(poison.is_poisoned());
        let e = poison.run("finish", || Ok::<_, Error>(())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`finish` on a PaddedWriter that is unusable after an earlier panic in it"
        );
    }
}
