//! Whole-number arguments as Python gives them (any object), converted by the core's
//! rule ([`tfrecord_lirs::options::integer`]): a negative, non-integer or bool value is
//! the core's `InvalidArgumentError` naming the parameter, not PyO3's `OverflowError`
//! or `TypeError`. `None` is "not given" (the core's default applies).

use pyo3::prelude::*;
use pyo3::types::PyBool;
use tfrecord_lirs::options::integer::{self, Number};

use crate::IntoPy;

/// `value` as the core's [`Number`].
fn number(value: &Bound<'_, PyAny>) -> Number {
    let repr = || value.repr().map_or_else(|_| "?".into(), |r| r.to_string());
    if value.is_instance_of::<PyBool>() {
        return Number::Other(repr());
    }
    match value.extract::<i128>() {
        Ok(v) => Number::Int(v),
        Err(_) => Number::Other(repr()),
    }
}

/// `value` (`None`: not given) as a count or index `>= 0`.
pub(crate) fn count(
    py: Python<'_>,
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| integer::non_negative(name, number(v)).py_err(py))
        .transpose()
}

/// `value` (`None`: not given) as a shard count `>= 1`.
pub(crate) fn num_shards(
    py: Python<'_>,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| integer::num_shards(number(v)).py_err(py))
        .transpose()
}

/// `value` (`None`: not given) as an `i64` (the core checks its range further).
pub(crate) fn signed(
    py: Python<'_>,
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<i64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| integer::integer(name, number(v)).py_err(py))
        .transpose()
}
