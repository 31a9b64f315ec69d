//! Whole-number arguments as Python gives them (any object), converted by the core's
//! rule ([`tfrecord_lirs::options::integer`]): a negative, non-integer or bool value is
//! the core's `InvalidArgumentError` naming the parameter, not PyO3's `OverflowError`
//! or `TypeError`. `None` is "not given" (the core's default applies).

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyMemoryView, PyString};
use tfrecord_lirs::options::argument::{self, ArgumentError, Type};
use tfrecord_lirs::options::integer::{self, Number};

use crate::IntoPy;

fn repr(value: &Bound<'_, PyAny>) -> String {
    value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
}

/// `value` as the core's [`Number`]; a value of another type is the core's type
/// mistake ([`argument::integer`]).
fn number(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<Number> {
    match argument::integer(name, type_of(value), &repr(value)) {
        Ok(v) => Ok(Number::Int(v.unwrap_or_default())),
        Err(e) => Err(argument_error(py, e)),
    }
}

/// The type of `value` as the core's [`Type`].
fn type_of(value: &Bound<'_, PyAny>) -> Type {
    if value.is_none() {
        Type::Absent
    } else if value.is_instance_of::<PyBool>() {
        Type::Bool
    } else if value.is_instance_of::<PyString>() {
        Type::Text
    } else if value.is_instance_of::<PyBytes>() {
        Type::Bytes
    } else {
        value.extract::<i128>().map_or(Type::Other, Type::Int)
    }
}

/// A wrong type as `tfrecord_lirs.errors.ArgumentTypeError`: the core's
/// `InvalidArgumentError` (a `ValueError`), also a `TypeError`.
fn argument_error(py: Python<'_>, e: ArgumentError) -> PyErr {
    py.import("tfrecord_lirs.errors")
        .and_then(|m| m.getattr("ArgumentTypeError"))
        .and_then(|class| class.call1((e.to_string(),)))
        .map_or_else(|import_error| import_error, PyErr::from_value)
}

/// Checks that `value` has the type option `name` takes ([`argument::check`]).
pub(crate) fn check_type(py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    argument::check(name, type_of(value), &repr(value)).map_err(|e| argument_error(py, e))
}

/// `value` as a str, when it has the type option `name` takes ([`argument::check`]).
pub(crate) fn text(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<pyo3::pybacked::PyBackedStr> {
    check_type(py, name, value)?;
    value.extract()
}

/// `value` (`None`: not given) as a count or index `>= 0`.
pub(crate) fn count(
    py: Python<'_>,
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| integer::non_negative(name, number(py, name, v)?).py_err(py))
        .transpose()
}

/// `value` (`None`: not given) as a shard count `>= 1`.
pub(crate) fn num_shards(
    py: Python<'_>,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u64>> {
    value
        .filter(|v| !v.is_none())
        .map(|v| integer::num_shards(number(py, "num_shards", v)?).py_err(py))
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
        .map(|v| integer::integer(name, number(py, name, v)?).py_err(py))
        .transpose()
}

/// `value` (`None`: not given) as a page size, by the core's rule ([`signed`], then
/// `options::signed_page_size`): a negative one is the same `InvalidArgumentError`
/// for every front end (LIRSDataset's included).
pub(crate) fn page_size(py: Python<'_>, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    signed(py, "page_size", value)?
        .map(|p| tfrecord_lirs::options::signed_page_size(p).py_err(py))
        .transpose()
}

/// The epoch state a walk resumes from, as bytes: the buffers `bytes()` took before
/// (a bytearray, a memoryview) too; anything else is the core's type mistake
/// ([`argument::resume_state`]).
pub(crate) fn resume_state(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<PyBackedBytes> {
    let value = if value.is_instance_of::<PyMemoryView>() {
        value.call_method0("tobytes")?
    } else {
        value.clone()
    };
    let got = if value.is_instance_of::<PyByteArray>() {
        Type::Bytes
    } else {
        type_of(&value)
    };
    argument::resume_state(got, &repr(&value)).map_err(|e| argument_error(py, e))?;
    Ok(value.extract::<PyBackedBytes>()?)
}

/// `value` (`None`: not given) converted by PyO3 once it has the type option `name`
/// takes ([`argument::check`]): a bool, or a `u64` (a negative or too large integer
/// stays PyO3's `OverflowError`, as it was).
pub(crate) fn typed<T>(
    py: Python<'_>,
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<T>>
where
    T: for<'a, 'py> FromPyObject<'a, 'py, Error = PyErr>,
{
    match value {
        Some(v) => {
            check_type(py, name, v)?;
            v.extract()
        }
        None => Ok(None),
    }
}
