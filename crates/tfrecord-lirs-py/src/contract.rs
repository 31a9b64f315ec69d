//! The core's front-end contract as Python sees it: every default
//! ([`core::options::defaults::TABLE`]) and each error kind's exception class name,
//! for the Python front ends that must pass concrete values on (the TensorFlow op's
//! attrs) and for the test that checks every front end against them; and, in the
//! development build only (feature `conformance`), the storage contract's cases (the
//! core's `conformance` module), for the tests that run them against the file systems
//! only Python reaches (TensorFlow's, through `tf.io.gfile`).

use pyo3::prelude::*;
#[cfg(feature = "conformance")]
use pyo3::types::PyBytes;
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

/// The files the storage contract's cases read: (name under the base, bytes).
#[cfg(feature = "conformance")]
#[pyfunction]
fn storage_conformance_fixtures(py: Python<'_>) -> Vec<(&'static str, Bound<'_, PyBytes>)> {
    core::conformance::fixtures()
        .into_iter()
        .map(|(name, bytes)| (name, PyBytes::new(py, &bytes)))
        .collect()
}

/// Runs the storage contract's cases against the fixtures under `base` (a directory
/// or URL prefix), opened through `through`: "readers" (the readers' storage: object
/// storage only) or "gfile" (the writers' storage: TensorFlow's file systems first,
/// through `tf.io.gfile`, then object storage). One line per case that fails.
#[cfg(feature = "conformance")]
#[pyfunction]
fn storage_conformance(py: Python<'_>, base: &str, through: &str) -> PyResult<Vec<String>> {
    let storage = match through {
        "readers" => crate::storage(),
        "gfile" => crate::gfile::write_storage(),
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "through must be \"readers\" or \"gfile\", not {other:?}"
            )))
        }
    };
    // The GIL released: the cases' threads read through gfile, which takes it.
    Ok(py.detach(|| core::conformance::run_over(base, &storage)))
}

/// Adds this module's functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(defaults, m)?)?;
    m.add_function(wrap_pyfunction!(error_classes, m)?)?;
    #[cfg(feature = "conformance")]
    {
        m.add_function(wrap_pyfunction!(storage_conformance_fixtures, m)?)?;
        m.add_function(wrap_pyfunction!(storage_conformance, m)?)?;
    }
    Ok(())
}
