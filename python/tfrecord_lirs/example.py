"""`tf.train.Example` records decoded and written without TensorFlow: `parse_example`,
`serialize_example` / `serialize_examples` (its inverse; see the latter's docs).

    FEATURES = {
        "image": tfrecord_lirs.FixedLenFeature([], "bytes"),
        "label": tfrecord_lirs.FixedLenFeature([], "int64"),
        "bbox": tfrecord_lirs.VarLenFeature("float32"),
    }
    one = tfrecord_lirs.parse_example(record, FEATURES)      # one record
    batch = tfrecord_lirs.parse_example(records, FEATURES)   # a list of records

What comes back, per feature (the shapes of `tf.io.parse_single_example` /
`tf.io.parse_example` with the same spec):

* `FixedLenFeature(shape, dtype, default_value=None)`: a numpy array of `shape` (one
  record) or `[len(records), *shape]` (a batch): int64, float32, or an object array of
  `bytes`; a 0-d result is its scalar (`numpy.int64`, `numpy.float32` or `bytes`), as
  `Tensor.numpy()` gives. A record without the feature takes `default_value` (as many
  values as `shape` holds); without one it is an `InvalidArgumentError`.
* `VarLenFeature(dtype)`: one record, a 1-d array of its values; a batch, a
  `Ragged(values, row_lengths)`: every record's values one after the other and how many
  each record has (TensorFlow's `SparseTensor` holds the same values; its
  `dense_shape[1]` is `row_lengths.max()`).
* no spec (`features=None`): every feature the records have, as `VarLenFeature` of the
  dtype they hold.

dtypes: "bytes" (or "string", `bytes`, `object`), "int64", "float32"; numpy and
TensorFlow dtypes work too, and so do `tf.io.FixedLenFeature` / `tf.io.VarLenFeature`
objects. Errors name the record (its index in the batch) and the feature:
`InvalidArgumentError` for a missing, mistyped or wrongly sized feature,
`DataLossError` for bytes that are not an Example. The decoding is the Rust core's; a
batch is decoded without the GIL.
"""

import collections
import importlib

from tfrecord_lirs import _lirs


class FixedLenFeature(collections.namedtuple(
        "FixedLenFeature", ["shape", "dtype", "default_value"], defaults=[None])):
    """A feature with `prod(shape)` values in every record (`tf.io.FixedLenFeature`)."""

    __slots__ = ()


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"],
        defaults=[False, None])):
    """A sequence feature with `prod(shape)` values in every step
    (`tf.io.FixedLenSequenceFeature`); a batch is padded with zeros (empty bytes) to its
    most steps. `allow_missing`: a record without the feature list has no steps (else
    it is an error). `default_value` must be None, as TensorFlow's."""

    __slots__ = ()


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature with any number of values, none if missing (`tf.io.VarLenFeature`)."""

    __slots__ = ()


class Ragged(collections.namedtuple("Ragged", ["values", "row_lengths"])):
    """A variable-length feature over a batch: `values` (every record's, in order) and
    `row_lengths` (int64, one per record)."""

    __slots__ = ()

    def rows(self):
        """Each record's values, as a list of arrays."""
        np = _numpy()
        return np.split(self.values, np.cumsum(self.row_lengths)[:-1])


def _numpy():
    """numpy, imported on first use: `import tfrecord_lirs` needs no numpy (the package
    depends on nothing), decoding Examples does."""
    try:
        return importlib.import_module("numpy")
    except ImportError as e:
        raise ImportError("tfrecord_lirs.parse_example returns numpy arrays: "
                          "pip install numpy") from e


_NUMERIC = ("int64", "float32")


def _dtype_name(dtype):
    """The dtype's name for the core (which decides what is valid)."""
    if isinstance(dtype, str):
        return dtype
    if dtype in (bytes, str, object):
        return "bytes"
    name = getattr(dtype, "name", None)  # tf.DType, numpy.dtype
    if isinstance(name, str):
        return "bytes" if name in ("object", "bytes") else name
    try:
        return _numpy().dtype(dtype).name
    except TypeError:
        return repr(dtype)


def _spec(name, feature):
    """(name, dtype, shape or None, flat default or None): the extension's form."""
    kind = type(feature).__name__
    if kind == "VarLenFeature":
        return (name, _dtype_name(feature.dtype), None, None)
    if kind != "FixedLenFeature":
        raise TypeError(
            f"feature {name!r}: {kind} is not supported; use tfrecord_lirs.FixedLenFeature "
            "or tfrecord_lirs.VarLenFeature (or the tf.io ones)")
    shape = [-1 if d is None else int(d) for d in list(feature.shape)]
    dtype = _dtype_name(feature.dtype)
    default = feature.default_value
    if default is not None:
        if hasattr(default, "numpy"):
            default = default.numpy()
        np = _numpy()
        if dtype in _NUMERIC:
            default = np.asarray(default, dtype=dtype).ravel().tolist()
        else:
            default = [v if isinstance(v, bytes) else str(v).encode()
                       for v in np.asarray(default, dtype=object).ravel().tolist()]
    return (name, dtype, shape, default)


def _values(np, dtype, values):
    if dtype in _NUMERIC:
        return np.frombuffer(values, dtype=dtype)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def parse_example(records, features=None):
    """Decodes one serialized `tf.train.Example` (`bytes`) or a batch (a sequence of
    them) into a dict of feature name -> values (see the module's docs); `features` maps
    names to `FixedLenFeature`/`VarLenFeature`, `None` decodes every feature."""
    single, batch = _batch(records)
    spec = None if features is None else [_spec(n, f) for n, f in features.items()]
    np = _numpy()
    return _arrays(np, _lirs.parse_examples(batch, spec), len(batch), single)


def _batch(records):
    """(whether `records` is one record, the records as a list of `bytes`)."""
    if isinstance(records, (bytes, bytearray, memoryview)):
        return True, [bytes(records)]
    return False, [r if type(r) is bytes else bytes(r) for r in records]


def _arrays(np, columns, n, single):
    """The extension's columns of `n` records as arrays by feature name: fixed-length
    ones `[n, *shape]` (`[*shape]` for one record), variable-length ones `Ragged` (the
    values alone for one record)."""
    out = {}
    for name, dtype, shape, values, row_lengths in columns:
        values = _values(np, dtype, values)
        if row_lengths is None:
            values = values.reshape((n, *shape))
            out[name] = values[0] if single else values
        elif single:
            out[name] = values
        else:
            out[name] = Ragged(values, np.frombuffer(row_lengths, dtype=np.int64))
    return out


def _sequence_spec(name, feature):
    """(name, dtype, shape or None, allow_missing, has a default): the extension's form."""
    kind = type(feature).__name__
    if kind == "VarLenFeature":
        return (name, _dtype_name(feature.dtype), None, True, False)
    if kind != "FixedLenSequenceFeature":
        raise TypeError(
            f"sequence feature {name!r}: {kind} is not supported; use "
            "tfrecord_lirs.FixedLenSequenceFeature or tfrecord_lirs.VarLenFeature "
            "(or the tf.io ones)")
    shape = [-1 if d is None else int(d) for d in list(feature.shape)]
    return (name, _dtype_name(feature.dtype), shape, bool(feature.allow_missing),
            feature.default_value is not None)


def parse_sequence_example(records, context_features=None, sequence_features=None):
    """Decodes serialized `tf.train.SequenceExample`s, as `tf.io.parse_sequence_example`
    (a sequence of records) and `tf.io.parse_single_sequence_example` (one `bytes`).

    `context_features` maps names to `FixedLenFeature`/`VarLenFeature` (decoded as
    `parse_example` decodes features); `sequence_features` maps names to
    `FixedLenSequenceFeature`/`VarLenFeature` (the tf.io ones work too); None: none.

    One record: `(context, feature_lists)`; a fixed-length sequence feature is an array
    `[steps, *shape]`, a variable-length one a `Ragged(values, row_lengths)` of its
    steps. A batch: `(context, feature_lists, lengths)`; a fixed-length sequence
    feature is an array `[len(records), max_steps, *shape]` padded with zeros (empty
    bytes), its steps per record in `lengths` (int64, TensorFlow's
    `feature_list_lengths`); a variable-length one is
    `Ragged(Ragged(values, values_per_step), steps_per_record)` (TensorFlow's
    `SparseTensor` holds the same values, `dense_shape` `[len(records),
    steps_per_record.max(), values_per_step.max()]`). Errors name the record, the
    feature and the step: `InvalidArgumentError` for a step of another dtype or size or
    a missing list that is not allowed to be, `DataLossError` for bytes that are not a
    SequenceExample."""
    single, batch = _batch(records)
    context_spec = [_spec(n, f) for n, f in (context_features or {}).items()]
    sequence_spec = [_sequence_spec(n, f) for n, f in (sequence_features or {}).items()]
    np = _numpy()
    context_columns, lists = _lirs.parse_sequence_examples(batch, context_spec, sequence_spec)
    context = _arrays(np, context_columns, len(batch), single)
    feature_lists, lengths = {}, {}
    for name, dtype, shape, values, steps, step_lengths in lists:
        values = _values(np, dtype, values)
        steps = np.frombuffer(steps, dtype=np.int64)
        if step_lengths is None:
            most = int(steps.max()) if len(steps) else 0
            values = values.reshape((len(batch), most, *shape))
            feature_lists[name] = values[0] if single else values
            lengths[name] = steps
        else:
            rows = Ragged(values, np.frombuffer(step_lengths, dtype=np.int64))
            feature_lists[name] = rows if single else Ragged(rows, steps)
    if single:
        return context, feature_lists
    return context, feature_lists, lengths


class ParseExample:
    """`parse_example(records, features)` as a picklable callable: a `collate_fn` for a
    PyTorch DataLoader over raw records (works with worker processes under `spawn`,
    where a lambda does not), or any map over records."""

    def __init__(self, features=None):
        self.features = features

    def __call__(self, records):
        return parse_example(records, self.features)

    def __repr__(self):
        return f"ParseExample({self.features!r})"


def serialize_example(features):
    """One `tf.train.Example` of `features` (a dict of name -> value), serialized:
    the inverse of `parse_example` (see `serialize_examples` for the values taken).

        record = tfrecord_lirs.serialize_example({
            "image": png_bytes,                        # bytes_list
            "label": 3,                                # int64_list
            "bbox": numpy.array([0.1, 0.2, 0.5, 0.9]),  # float_list (as float32)
        })
    """
    return _lirs.serialize_example(features)


def serialize_examples(examples):
    """`tf.train.Example`s of `examples` (a list of dicts of name -> value), serialized
    (a list of `bytes`), the encoding without the GIL; the inverse of `parse_example`:

        records = tfrecord_lirs.serialize_examples(
            [{"label": 3, "tags": ["cat", "dog"]}, {"label": 5, "tags": []}])
        with tfrecord_lirs.PaddedWriter("train.tfrecord") as w:
            for r in records:
                w.write(r)
        batch = tfrecord_lirs.parse_example(records, {"tags": tfrecord_lirs.VarLenFeature("bytes")})

    A feature's value: `bytes` or `str` (UTF-8) -> bytes_list; `int` (and `bool`) ->
    int64_list; `float` -> float_list (rounded to float32); a list or tuple of one of
    these, all of one kind -> that list; a numpy array (or numpy scalar, or anything
    `numpy.asarray` takes, e.g. a torch tensor), its values flattened in C order:
    integer and bool dtypes -> int64_list, floating ones -> float_list, bytes and str
    ones -> bytes_list, object ones as a list of their items. An empty list (or empty
    object array) is a `Feature` with no list, which `parse_example` and TensorFlow read
    as no values of whichever dtype the spec says (so it suits a `VarLenFeature` of any
    dtype); an empty array of a numeric, bytes or str dtype is an empty list of that
    dtype.

    Features are written in byte-wise name order, each as protobuf writes it, so the
    bytes are those of `tf.train.Example(...).SerializeToString(deterministic=True)`
    for the same content (with Python's default upb protobuf, unless a name is a prefix
    of another: upb puts "ab" before "a"; the message is the same). Errors name the
    example (its index), the feature and the value: `InvalidArgumentError` for a list
    mixing kinds, a nested list, an int outside int64, an array of another dtype
    (complex, datetime, ...) or a value of another type (e.g. None); `TypeError` for
    features that are not a dict or a name that is not a str. The rules and the
    encoding are the Rust core's."""
    return _lirs.serialize_examples(examples)


__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "ParseExample", "Ragged",
           "VarLenFeature", "parse_example", "parse_sequence_example", "serialize_example",
           "serialize_examples"]
