//! Whole-number arguments as a dynamically typed front end (Python) receives them: any
//! object. What is not an integer, or is negative where a count or index is asked for,
//! is an [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) naming the
//! parameter, never a conversion error of the front end's own (Python's bare
//! `OverflowError` or `TypeError`).

use crate::error::{Error, Result};

/// An argument as the front end got it: an integer (Python's are unbounded; any that
/// does not fit in an `i128` is [`Number::Other`]), or anything else, by its `repr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Number {
    /// An integer (not a bool).
    Int(i128),
    /// Not an integer: its `repr` (`2.5`, `True`, `'3'`).
    Other(String),
}

/// `value` as an `i64`, else the error naming `name`.
///
/// ```
/// use tfrecord_lirs::options::integer::{integer, Number};
/// assert_eq!(integer("batch_size", Number::Int(-3))?, -3);
/// let e = integer("batch_size", Number::Other("2.5".into())).unwrap_err();
/// assert_eq!(e.to_string(), "batch_size must be an integer, got 2.5");
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn integer(name: &str, value: Number) -> Result<i64> {
    match value {
        Number::Int(v) => i64::try_from(v).map_err(|_| {
            Error::invalid_argument(format!(
                "{name} must be an integer from {} to {}, got {v}",
                i64::MIN,
                i64::MAX
            ))
        }),
        Number::Other(repr) => Err(Error::invalid_argument(format!(
            "{name} must be an integer, got {repr}"
        ))),
    }
}

/// `value` as a count or index: an integer `>= 0` below 2^64, else the error naming
/// `name`.
///
/// ```
/// use tfrecord_lirs::options::integer::{non_negative, Number};
/// assert_eq!(non_negative("seed", Number::Int(7))?, 7);
/// let e = non_negative("shard_index", Number::Int(-1)).unwrap_err();
/// assert_eq!(e.to_string(), "shard_index must be >= 0, got -1");
/// # Ok::<(), tfrecord_lirs::Error>(())
/// ```
pub fn non_negative(name: &str, value: Number) -> Result<u64> {
    match value {
        Number::Int(v) if v < 0 => Err(Error::invalid_argument(format!(
            "{name} must be >= 0, got {v}"
        ))),
        Number::Int(v) => u64::try_from(v)
            .map_err(|_| Error::invalid_argument(format!("{name} must be below 2**64, got {v}"))),
        Number::Other(repr) => Err(Error::invalid_argument(format!(
            "{name} must be an integer, got {repr}"
        ))),
    }
}

/// `value` as a shard count: an integer `>= 1` ([`super::num_shards`]), else the error
/// naming `num_shards`.
pub fn num_shards(value: Number) -> Result<u64> {
    match value {
        Number::Int(v) if v < 1 => Err(Error::invalid_argument(format!(
            "num_shards must be >= 1, got {v}"
        ))),
        other => super::num_shards(non_negative("num_shards", other)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn every_bad_value_names_its_parameter() {
        for (name, value, says) in [
            (
                "shard_index",
                Number::Int(-1),
                "shard_index must be >= 0, got -1",
            ),
            ("seed", Number::Int(1 << 70), "seed must be below 2**64"),
            (
                "epoch",
                Number::Other("2.5".into()),
                "epoch must be an integer, got 2.5",
            ),
        ] {
            let e = non_negative(name, value).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().starts_with(says), "{e}");
        }
        let e = num_shards(Number::Int(0)).unwrap_err();
        assert_eq!(e.to_string(), "num_shards must be >= 1, got 0");
        assert_eq!(num_shards(Number::Int(3)).unwrap(), 3);
        let e = integer("batch_size", Number::Other("True".into())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }
}
