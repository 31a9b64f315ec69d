//! The core's front-end contract as Python sees it: every default
//! ([`core::options::defaults::TABLE`]) and each error kind's exception class name,
//! for the Python front ends that must pass concrete values on (the TensorFlow op's
//! attrs) and for the test that checks every front end against them.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tfrecord_lirs::options::defaults::{Value, TABLE};
use tfrecord_lirs::{self as core};

/// Every default by argument name: int, bool or str.
#[pyfunction]
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for &(name, value) in TABLE {
        match value {
            Value::Int(i) => out.set_item(name, i)?,
            Value::Bool(b) => out.set_item(name, b)?,
            Value::Str(s) => out.set_item(name, s)?,
        }
    }
    Ok(out)
}

/// Each error kind's name ("DataLoss", …) and the exception class raised for it
/// ("DataLossError", …), in the core's order.
#[pyfunction]
fn error_classes() -> Vec<(&'static str, &'static str)> {
    core::ErrorKind::ALL
        .iter()
        .map(|k| (k.name(), k.class_name()))
        .collect()
}

/// Adds this module's functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(error_classes, m)?)?;
    Ok(())
}
