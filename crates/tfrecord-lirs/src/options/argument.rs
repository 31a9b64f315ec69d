//! Which type of value each option takes, as a dynamically typed front end (Python)
//! receives it (any object): one message for a value of another type, an
//! [`ArgumentError`], which every front end reports alike (Python: `ArgumentTypeError`,
//! both a `TypeError` and the `InvalidArgumentError` that is a `ValueError`, so a
//! caller catching either keeps catching it). Values of the right type are then checked
//! by the option's own rule (`options::page_size`, `options::backend`,
//! [`integer`](super::integer) ...).

use std::fmt;

use crate::error::Error;

/// The type of a value as the front end got it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Not given (Python's `None`).
    Absent,
    /// A bool (never taken for an integer).
    Bool,
    /// An integer, when it fits in an `i128` (else [`Type::Other`]).
    Int(i128),
    /// A text string.
    Text,
    /// A byte string.
    Bytes,
    /// Anything else (a float, a list ...).
    Other,
}

/// A value of the wrong type for its option; an
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) as an [`Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentError(String);

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgumentError {}

impl From<ArgumentError> for Error {
    fn from(e: ArgumentError) -> Self {
        Error::invalid_argument(e.0)
    }
}

fn wrong(name: &str, wanted: &str, repr: &str) -> ArgumentError {
    ArgumentError(format!("{name} must be {wanted}, got {repr}"))
}

/// A whole-number argument `name` (its type `got`, shown as `repr`): the integer, or
/// `None` when not given; any other type (a bool, a float, a str) is refused.
///
/// ```
/// use tfrecord_lirs::options::argument::{integer, Type};
/// assert_eq!(integer("seed", Type::Int(7), "7"), Ok(Some(7)));
/// let e = integer("seed", Type::Other, "2.5").unwrap_err();
/// assert_eq!(e.to_string(), "seed must be an integer, got 2.5");
/// ```
pub fn integer(name: &str, got: Type, repr: &str) -> Result<Option<i128>, ArgumentError> {
    match got {
        Type::Absent => Ok(None),
        Type::Int(v) => Ok(Some(v)),
        _ => Err(wrong(name, "an integer", repr)),
    }
}

/// What an epoch state is, in the words of every message about one.
const EPOCH_STATE: &str = "bytes (shard states combined by combine_shard_states)";

/// Checks that the epoch state a walk resumes from (`Sampler.resume`,
/// `Loader.resume_epoch`: its type `got`, shown as `repr`) is bytes; unlike the
/// `epoch_state` option, it must be given.
///
/// ```
/// use tfrecord_lirs::options::argument::{resume_state, Type};
/// assert!(resume_state(Type::Bytes, "b''").is_ok());
/// let e = resume_state(Type::Text, "'x'").unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "epoch_state must be bytes (shard states combined by combine_shard_states), got 'x'"
/// );
/// ```
pub fn resume_state(got: Type, repr: &str) -> Result<(), ArgumentError> {
    match got {
        Type::Bytes => Ok(()),
        _ => Err(wrong("epoch_state", EPOCH_STATE, repr)),
    }
}

/// Checks that `value` (its type `got`, shown as `repr`) has the type option `name`
/// takes. An option with no rule here is refused (a front end's mistake).
///
/// ```
/// use tfrecord_lirs::options::argument::{check, Type};
/// assert!(check("backend", Type::Text, "'pread'").is_ok());
/// let e = check("deterministic", Type::Int(1), "1").unwrap_err();
/// assert_eq!(e.to_string(), "deterministic must be a bool or None, got 1");
/// ```
pub fn check(name: &str, got: Type, repr: &str) -> Result<(), ArgumentError> {
    use Type::*;
    let (ok, wanted) = match name {
        "backend" | "fit" | "compression_type" => (got == Text, "a str"),
        "page_size" | "buffer_size" | "cache_bytes" | "start_epoch" | "batch_size"
        | "num_parallel_reads" => return integer(name, got, repr).map(drop),
        "compression" => (matches!(got, Absent | Text), "a str or None"),
        "deterministic" => (matches!(got, Absent | Bool), "a bool or None"),
        "epoch_state" => {
            if matches!(got, Absent | Bytes) {
                return Ok(());
            }
            return Err(wrong(name, &format!("{EPOCH_STATE} or None"), repr));
        }
        // A number: the value's rule (`options::reuse_factor`) refuses fractions.
        "reuse_factor" => (!matches!(got, Bool | Text | Bytes), "an integer >= 1"),
        _ => return Err(ArgumentError(format!("no type rule for argument {name}"))),
    };
    if ok {
        Ok(())
    } else {
        Err(wrong(name, wanted, repr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn each_wrong_type_has_one_message() {
        for (name, got, repr, says) in [
            ("backend", Type::Int(5), "5", "backend must be a str, got 5"),
            (
                "page_size",
                Type::Other,
                "1.5",
                "page_size must be an integer, got 1.5",
            ),
            (
                "page_size",
                Type::Bool,
                "True",
                "page_size must be an integer, got True",
            ),
            (
                "compression",
                Type::Int(1),
                "1",
                "compression must be a str or None, got 1",
            ),
            (
                "deterministic",
                Type::Text,
                "'yes'",
                "deterministic must be a bool or None",
            ),
            (
                "epoch_state",
                Type::Text,
                "'x'",
                "epoch_state must be bytes (shard states",
            ),
            (
                "reuse_factor",
                Type::Bool,
                "True",
                "reuse_factor must be an integer >= 1, got True",
            ),
        ] {
            let e = check(name, got, repr).unwrap_err();
            assert!(e.to_string().starts_with(says), "{e}");
            assert_eq!(Error::from(e).kind(), ErrorKind::InvalidArgument);
        }
        for (name, got) in [
            ("fit", Type::Text),
            ("batch_size", Type::Absent),
            ("start_epoch", Type::Int(-1)), // the value's rule is the option's own
            ("deterministic", Type::Bool),
            ("epoch_state", Type::Bytes),
            ("reuse_factor", Type::Other),
        ] {
            assert!(check(name, got, "").is_ok(), "{name}");
        }
        assert!(check("nonsense", Type::Text, "'x'").is_err());
    }

    #[test]
    fn a_resumed_state_is_bytes_and_given() {
        assert!(resume_state(Type::Bytes, "b''").is_ok());
        for (got, repr) in [
            (Type::Text, "'x'"),
            (Type::Absent, "None"),
            (Type::Int(3), "3"),
        ] {
            let e = resume_state(got, repr).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("epoch_state must be {EPOCH_STATE}, got {repr}")
            );
            assert_eq!(Error::from(e).kind(), ErrorKind::InvalidArgument);
        }
    }
}
