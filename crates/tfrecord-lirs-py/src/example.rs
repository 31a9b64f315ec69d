//! `tf.train.Example` decoding for Python (`tfrecord_lirs.parse_example`): the core's
//! column decoder ([`core::example`]), its spec checks and errors, run without the GIL;
//! this converts types only. Numbers come back as `bytearray`s of native-endian values
//! (the package wraps them with `numpy.frombuffer`, which needs no numpy in the
//! extension and keeps it on the stable ABI), bytes as lists of `bytes`.
//!
//! `tf.train.Example` encoding (`tfrecord_lirs.serialize_example(s)`): Python values
//! converted in type to the core's [`example::Input`] (numpy arrays through numpy
//! itself, imported only when one is given), then the core's rules and encoder, a batch
//! without the GIL.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use tfrecord_lirs::example::{
    self, Array, ArrayData, Column, ColumnValues, DType, FeatureSpec, Input, Spec, Values,
};
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
            core::options::guard::guard("parse_examples", || {
                match &spec {
                    Some(spec) => example::parse_examples(spec, &slices),
                    None => example::parse_examples_inferred(&slices),
                }
                .map_err(core::Error::from)
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
                Ok::<_, core::Error>((
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

/// `value` as the core's [`Input`]: a conversion of type only (the core decides what a
/// feature may hold, and refuses the rest by [`Input::Other`]'s type name).
fn input_of(value: &Bound<'_, PyAny>) -> PyResult<Input> {
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Input::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = value.cast::<PyByteArray>() {
        return Ok(Input::Bytes(b.to_vec()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Input::Bytes(s.to_str()?.as_bytes().to_vec()));
    }
    if value.is_instance_of::<PyInt>() {
        // bool is an int; one beyond int64 goes as its text for the core's message.
        return Ok(match value.extract::<i64>() {
            Ok(i) => Input::Int(i),
            Err(_) => Input::BigInt(value.str()?.to_string()),
        });
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(Input::Float(value.extract()?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value.try_iter()?.map(|item| input_of(&item?));
        return Ok(Input::List(items.collect::<PyResult<_>>()?));
    }
    if value.hasattr("__array_interface__")? || value.hasattr("__array__")? {
        return array_of(value);
    }
    Ok(Input::Other(value.get_type().name()?.to_string()))
}

/// An array-like (numpy's arrays and scalars, torch tensors, ...) through
/// `numpy.asarray`: its type string, shape and elements in C order.
fn array_of(value: &Bound<'_, PyAny>) -> PyResult<Input> {
    let array = value
        .py()
        .import("numpy")?
        .call_method1("asarray", (value,))?;
    let dtype = array.getattr("dtype")?;
    let typestr: String = dtype.getattr("str")?.extract()?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    let data = if matches!(kind.as_str(), "O" | "S" | "U") {
        let items = array.call_method0("ravel")?.call_method0("tolist")?;
        let items = items.try_iter()?.map(|item| input_of(&item?));
        ArrayData::Items(items.collect::<PyResult<_>>()?)
    } else {
        let bytes = array.call_method0("tobytes")?;
        ArrayData::Raw(bytes.cast::<PyBytes>()?.as_bytes().to_vec())
    };
    Ok(Input::Array(Array {
        typestr,
        shape,
        data,
    }))
}

/// One example's features (a dict of name -> value) as the core's inputs.
fn inputs_of(features: &Bound<'_, PyAny>, at: &str) -> PyResult<Vec<(String, Input)>> {
    let Ok(features) = features.cast::<PyDict>() else {
        return Err(PyTypeError::new_err(format!(
            "{at}features are a dict of feature name -> value, not {}",
            features.get_type().name()?
        )));
    };
    let mut inputs = Vec::with_capacity(features.len());
    for (name, value) in features.iter() {
        let Ok(name) = name.cast::<PyString>() else {
            return Err(PyTypeError::new_err(format!(
                "{at}feature names are str, not {} ({})",
                name.get_type().name()?,
                name.repr()?
            )));
        };
        inputs.push((name.to_str()?.to_owned(), input_of(&value)?));
    }
    Ok(inputs)
}

/// One `tf.train.Example` of `features` (name -> value), serialized.
#[pyfunction]
fn serialize_example<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let inputs = inputs_of(features, "")?;
    let record = core::options::guard::guard("serialize_example", || {
        example::serialize_inputs(inputs).map_err(core::Error::from)
    })
    .py_err(py)?;
    Ok(PyBytes::new(py, &record))
}

/// `tf.train.Example`s of `examples` (an iterable of dicts of name -> value),
/// serialized; the encoding runs without the GIL.
#[pyfunction]
fn serialize_examples<'py>(
    py: Python<'py>,
    examples: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if examples.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(
            "serialize_examples takes a list of dicts (one per example); for one, use serialize_example",
        ));
    }
    let mut batch = Vec::new();
    for (i, features) in examples.try_iter()?.enumerate() {
        batch.push(inputs_of(&features?, &format!("example {i}: "))?);
    }
    let records = py
        .detach(|| {
            core::options::guard::guard("serialize_examples", || {
                example::serialize_input_batch(batch).map_err(core::Error::from)
            })
        })
        .py_err(py)?;
    Ok(records.iter().map(|r| PyBytes::new(py, r)).collect())
}

/// Adds this module's functions to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(serialize_example, m)?)?;
    m.add_function(wrap_pyfunction!(serialize_examples, m)?)?;
    m.add_function(wrap_pyfunction!(parse_examples, m)?)?;
    m.add_function(wrap_pyfunction!(parse_sequence_examples, m)?)?;
    Ok(())
}
