//! How an outcome crosses the bridge: the error type ([`FfiError`], a code and a
//! message), the one mapping of the core's error kinds onto the bridge's codes, the
//! caller's [`Status`] filled in on failure, and the panic guards every entry point
//! runs under.
//!
//! # Errors
//!
//! An error crosses as an [`ErrorCode`] (mapped once, from
//! [`tfrecord_lirs::Error::kind`], in [`FfiError`]'s `From`) and a message, never as a
//! text prefix to parse. cxx can carry only a string in the C++ exception it throws for
//! an `Err`, so every fallible bridge function takes the caller's [`Status`] as its last
//! argument and returns `Result<T>`: on `Err` it has first written the code and the
//! message into that `Status`, and the `rust::Error` thrown is only the signal (its
//! `what()` is the same message). The C++ side (`tf_op/lirs_status.h`) catches it and
//! turns the `Status` into an `absl::Status` with one switch. `Result` rather than a
//! returned `Status` because the constructors return `Box<T>` and cxx has no
//! `Option<Box<T>>`.
//!
//! # Panics
//!
//! No panic may unwind into C++ (that aborts the process). Every fallible entry
//! point runs its body under [`guard`], which catches the unwind and reports it as an
//! `Internal` error; the unguarded ones (`BatchView`'s, called per record) are
//! panic-free by construction.
//! A handle whose method panicked may be half-updated, so it is poisoned
//! ([`guard_poisoning`]): every later call on it fails with `Internal`
//! (`DatasetCursor`). Panics while fetching (on the core's fetch threads, or taking
//! the next window) are caught in the core's cursor, which reports them as `Internal`
//! errors and fetches afresh. All of this needs `panic = "unwind"`, which the
//! workspace's Cargo.toml sets explicitly for every profile.
//!
//! Fault injection (the panic points the tests use to prove all of the above) exists
//! only with the cargo feature `fault-injection`: see `src/fault_injection.rs` (a
//! second bridge) and `tf_op/lirs_test_ops.cc`. The staticlib linked into the op
//! library users install is built without it, so it has no test entry point and no
//! per-call check.

use std::fmt;

use tfrecord_lirs as core;

#[cfg(feature = "fault-injection")]
use crate::fault_injection;
use crate::{ErrorCode, Status};

impl From<core::ErrorKind> for ErrorCode {
    /// The one mapping of the core's error kinds onto the bridge's codes.
    fn from(kind: core::ErrorKind) -> Self {
        match kind {
            core::ErrorKind::DataLoss => ErrorCode::DataLoss,
            core::ErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
            core::ErrorKind::NotFound => ErrorCode::NotFound,
            core::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
            core::ErrorKind::Unavailable => ErrorCode::Unavailable,
            core::ErrorKind::Internal => ErrorCode::Internal,
        }
    }
}

/// Error crossing the bridge: a code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub code: ErrorCode,
    pub message: String,
}

impl FfiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        FfiError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    fn to_status(&self) -> Status {
        Status {
            code: self.code,
            message: self.message.clone(),
        }
    }
}

/// The message only: the code travels in the caller's [`Status`].
impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FfiError {}

impl From<core::Error> for FfiError {
    fn from(e: core::Error) -> Self {
        FfiError::new(e.kind().into(), crate::remedy::say(&e))
    }
}

impl From<&core::Error> for FfiError {
    fn from(e: &core::Error) -> Self {
        FfiError::new(e.kind().into(), crate::remedy::say(e))
    }
}

pub type FfiResult<T> = Result<T, FfiError>;

/// A fresh `Status` (code `Ok`), as a caller passes one.
pub fn ok_status() -> Status {
    Status {
        code: ErrorCode::Ok,
        message: String::new(),
    }
}

/// Writes the error of `result`, if any, into `status` (the cxx error protocol).
pub(crate) fn report<T>(status: &mut Status, result: FfiResult<T>) -> FfiResult<T> {
    if let Err(e) = &result {
        *status = e.to_status();
    }
    result
}

/// Runs `f` (the body of entry point `point`), turning a panic into an `Internal`
/// error instead of unwinding into C++ or C.
pub fn guard<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    core::options::guard::guard(point, || armed(point, f))
}

/// Runs `f` as method `point` of a handle that `poison` guards: the core's
/// [`Poison`](core::options::guard::Poison), so a panic leaves the handle unusable.
pub fn guard_poisoning<T>(
    point: &str,
    poison: &mut core::options::guard::Poison,
    f: impl FnOnce() -> FfiResult<T>,
) -> FfiResult<T> {
    poison.run(point, || armed(point, f))
}

/// `f`, after the test build's panic point `point` (none in a release build).
#[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))]
fn armed<T>(point: &str, f: impl FnOnce() -> FfiResult<T>) -> FfiResult<T> {
    #[cfg(feature = "fault-injection")]
    fault_injection::panic_if_armed(point);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_has_its_code() {
        for (kind, code) in [
            (core::ErrorKind::DataLoss, ErrorCode::DataLoss),
            (core::ErrorKind::InvalidArgument, ErrorCode::InvalidArgument),
            (core::ErrorKind::NotFound, ErrorCode::NotFound),
            (core::ErrorKind::Internal, ErrorCode::Internal),
            (
                core::ErrorKind::PermissionDenied,
                ErrorCode::PermissionDenied,
            ),
            (core::ErrorKind::Unavailable, ErrorCode::Unavailable),
        ] {
            assert_eq!(ErrorCode::from(kind), code);
        }
    }
}
