//! `tf.train.Example` decoding for Python (`tfrecord_lirs.parse_example`): the core's
//! column decoder ([`core::example`]), its spec checks and errors, run without the GIL;
//! this converts types only. Numbers come back as `bytearray`s of native-endian values
//! (the package wraps them with `numpy.frombuffer`, which needs no numpy in the
//! extension and keeps it on the stable ABI), bytes as lists of `bytes`.

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};
use tfrecord_lirs::example::{self, Column, ColumnValues, DType, FeatureSpec, Spec, Values};
use tfrecord_lirs::{self as core};

use crate::IntoPy;

/// One feature of a spec as the package passes it: (name, dtype name, shape or `None`
/// for variable length, default values flattened or `None`).
type PyFeature<'py> = (String, String, Option<Vec<i64>>, Option<Bound<'py, PyAny>>);

/// One decoded column as the package takes it: (name, dtype name, fixed shape or
/// `None`, values, row lengths as native-endian int64 or `None`).
type PyColumn<'py> = (
    String,
    &'static str,
    Option<Vec<usize>>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyByteArray>>,
);

/// The core's spec from the package's tuples; a default is read as the feature's dtype.
fn spec_of(py: Python<'_>, features: Vec<PyFeature<'_>>) -> PyResult<Spec> {
    let mut specs = Vec::with_capacity(features.len());
    for (name, dtype, shape, default) in features {
        let dtype = DType::from_name(&dtype).py_err(py)?;
        let default = match &default {
            None => None,
            Some(values) => Some(match dtype {
                DType::Bytes => Values::Bytes(values.extract()?),
                DType::Int64 => Values::Int64(values.extract()?),
                DType::Float32 => Values::Float32(values.extract()?),
            }),
        };
        specs.push(FeatureSpec {
            name,
            dtype,
            shape,
            default,
        });
    }
    Spec::new(specs).py_err(py)
}

/// Native-endian bytes of `values`, written straight into a new `bytearray`.
fn native_bytes<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    values: &[T],
    to_bytes: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyByteArray>> {
    PyByteArray::new_with(py, values.len() * N, |out| {
        for (chunk, &v) in out.chunks_exact_mut(N).zip(values) {
            chunk.copy_from_slice(&to_bytes(v));
        }
        Ok(())
    })
}

fn py_column<'py>(py: Python<'py>, column: Column<'_>) -> PyResult<PyColumn<'py>> {
    let dtype = column.values.dtype().name();
    let values = match &column.values {
        ColumnValues::Bytes(v) => {
            PyList::new(py, v.iter().map(|b| PyBytes::new(py, b)))?.into_any()
        }
        ColumnValues::Int64(v) => native_bytes(py, v, i64::to_ne_bytes)?.into_any(),
        ColumnValues::Float32(v) => native_bytes(py, v, f32::to_ne_bytes)?.into_any(),
    };
    let row_lengths = match &column.row_lengths {
        Some(rows) => {
            let rows: Vec<i64> = rows.iter().map(|&n| n as i64).collect();
            Some(native_bytes(py, &rows, i64::to_ne_bytes)?)
        }
        None => None,
    };
    Ok((column.name, dtype, column.shape, values, row_lengths))
}

/// Decodes serialized `tf.train.Example`s (a list of `bytes`) into one column per
/// feature: of `features` (the package's spec tuples) in their order, or, with `None`,
/// every feature the records have, variable-length, sorted by name. The decoding runs
/// without the GIL.
#[pyfunction]
#[pyo3(signature = (records, features=None))]
fn parse_examples<'py>(
    py: Python<'py>,
    records: Vec<Bound<'py, PyBytes>>,
    features: Option<Vec<PyFeature<'py>>>,
) -> PyResult<Vec<PyColumn<'py>>> {
    let spec = features.map(|f| spec_of(py, f)).transpose()?;
    let slices: Vec<&[u8]> = records.iter().map(|r| r.as_bytes()).collect();
    let columns = py
        .detach(|| {
            core::options::guard::guard("parse_examples", || match &spec {
                Some(spec) => example::parse_examples(spec, &slices),
                None => example::parse_examples_inferred(&slices),
            })
        })
        .py_err(py)?;
    columns.into_iter().map(|c| py_column(py, c)).collect()
}

/// One sequence feature as the package passes it: (name, dtype name, shape per step
/// or `None` for variable length, allow_missing, whether a default value was given).
type PySequenceFeature = (String, String, Option<Vec<i64>>, bool, bool);

/// One decoded sequence column: (name, dtype name, shape per step or `None`, values,
/// steps per record and values per step (variable length; else `None`) as
/// native-endian int64).
type PySequenceColumn<'py> = (
    String,
    &'static str,
    Option<Vec<usize>>,
    Bound<'py, PyAny>,
    Bound<'py, PyByteArray>,
    Option<Bound<'py, PyByteArray>>,
);

fn lengths<'py>(py: Python<'py>, lengths: &[usize]) -> PyResult<Bound<'py, PyByteArray>> {
    let lengths: Vec<i64> = lengths.iter().map(|&n| n as i64).collect();
    native_bytes(py, &lengths, i64::to_ne_bytes)
}

/// Decodes serialized `tf.train.SequenceExample`s: their context (one column per
/// feature of `context`, as `parse_examples`) and their feature lists (one column per
/// feature of `sequence`). The decoding runs without the GIL.
#[pyfunction]
fn parse_sequence_examples<'py>(
    py: Python<'py>,
    records: Vec<Bound<'py, PyBytes>>,
    context: Vec<PyFeature<'py>>,
    sequence: Vec<PySequenceFeature>,
) -> PyResult<(Vec<PyColumn<'py>>, Vec<PySequenceColumn<'py>>)> {
    let context = spec_of(py, context)?;
    let mut features = Vec::with_capacity(sequence.len());
    for (name, dtype, shape, allow_missing, has_default) in sequence {
        let dtype = DType::from_name(&dtype).py_err(py)?;
        // A placeholder of the feature's dtype: the core refuses any default.
        let default = has_default.then(|| match dtype {
            DType::Bytes => Values::Bytes(Vec::new()),
            DType::Int64 => Values::Int64(Vec::new()),
            DType::Float32 => Values::Float32(Vec::new()),
        });
        let spec = FeatureSpec {
            name,
            dtype,
            shape,
            default,
        };
        features.push((spec, allow_missing));
    }
    let sequence = example::SequenceSpec::new(features).py_err(py)?;
    let slices: Vec<&[u8]> = records.iter().map(|r| r.as_bytes()).collect();
    let (context, lists) = py
        .detach(|| {
            core::options::guard::guard("parse_sequence_examples", || {
                Ok((
                    example::parse_examples(&context, &slices)?,
                    example::parse_sequence_examples(&sequence, &slices)?,
                ))
            })
        })
        .py_err(py)?;
    let context = context
        .into_iter()
        .map(|c| py_column(py, c))
        .collect::<PyResult<_>>()?;
    let lists = lists
        .into_iter()
        .map(|c| -> PyResult<PySequenceColumn<'py>> {
            let (name, dtype, shape, values, _) = py_column(
                py,
                Column {
                    name: c.name,
                    shape: c.shape,
                    values: c.values,
                    row_lengths: None,
                },
            )?;
            let step_lengths = c.step_lengths.map(|l| lengths(py, &l)).transpose()?;
            Ok((
                name,
                dtype,
                shape,
                values,
                lengths(py, &c.steps)?,
                step_lengths,
            ))
        })
        .collect::<PyResult<_>>()?;
    Ok((context, lists))
}

/// Adds this module's functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_examples, m)?)?;
    m.add_function(wrap_pyfunction!(parse_sequence_examples, m)?)?;
    Ok(())
}
