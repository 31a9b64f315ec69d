"""`tfrecord_lirs.serialize_example(s)` without TensorFlow: dicts of Python and numpy
values written as `tf.train.Example`s and read back by `parse_example` (fixed and
variable length, empty lists), by Google's protobuf (the `tfrecord` package's
`example_pb2`), and through `PaddedWriter` and `DataSource`; and every refusal, naming
the example, the feature and the value."""

from __future__ import annotations

import numpy as np
import pytest
from tfrecord import example_pb2

import tfrecord_lirs
from tfrecord_lirs import (FixedLenFeature, VarLenFeature, parse_example, serialize_example,
                           serialize_examples)
from tfrecord_lirs.errors import InvalidArgumentError

SPEC = {
    "image": FixedLenFeature([], "bytes"),
    "label": FixedLenFeature([], "int64"),
    "xy": FixedLenFeature([2, 2], "float32"),
    "tags": VarLenFeature("bytes"),
    "ids": VarLenFeature("int64"),
    "scores": VarLenFeature("float32"),
}

EXAMPLES = [
    {"image": b"\x89PNG\x00one", "label": 3, "xy": np.array([[0.5, 1.0], [-2.0, 1e-3]]),
     "tags": ["cat", b"dog"], "ids": np.array([7, -1, 2**40], dtype=np.int64),
     "scores": (0.25, 0.75)},
    # Empty lists: no values, whatever the dtype; numpy scalars and small dtypes.
    {"image": np.bytes_(b"two"), "label": np.int32(-5), "xy": [1.0, 2.0, 3.0, 4.0],
     "tags": [], "ids": np.array([], dtype=np.uint8), "scores": []},
    {"image": "three", "label": True, "xy": np.arange(4, dtype=np.float16).reshape(2, 2),
     "tags": np.array([b"a", b"bc", b""], dtype=object), "ids": np.array([255], np.uint8),
     "scores": np.float32(0.5)},
]


def test_parse_example_reads_back_what_serialize_examples_wrote():
    records = serialize_examples(EXAMPLES)
    assert [serialize_example(e) for e in EXAMPLES] == records
    got = parse_example(records, SPEC)
    assert list(got["image"]) == [b"\x89PNG\x00one", b"two", b"three"]
    assert got["label"].tolist() == [3, -5, 1]
    np.testing.assert_array_equal(got["xy"], np.array(
        [[[0.5, 1.0], [-2.0, 1e-3]], [[1, 2], [3, 4]], [[0, 1], [2, 3]]], dtype=np.float32))
    assert [list(r) for r in got["tags"].rows()] == [[b"cat", b"dog"], [], [b"a", b"bc", b""]]
    assert [r.tolist() for r in got["ids"].rows()] == [[7, -1, 2**40], [], [255]]
    assert [r.tolist() for r in got["scores"].rows()] == [[0.25, 0.75], [], [0.5]]
    # No spec: every feature, the empty lists as no values.
    inferred = parse_example(records[1])
    assert inferred["tags"].size == 0 and inferred["label"].tolist() == [-5]


def test_google_protobuf_reads_the_same_message_and_order_does_not_matter():
    record = serialize_example({"b": [1, 2], "a": b"x", "c": [0.5], "e": []})
    ex = example_pb2.Example.FromString(record)
    f = ex.features.feature
    assert list(f["b"].int64_list.value) == [1, 2]
    assert list(f["a"].bytes_list.value) == [b"x"]
    assert list(f["c"].float_list.value) == [0.5]
    assert f["e"].WhichOneof("kind") is None  # an empty list: a Feature with no list
    # Written in name order whatever the dict's order: protobuf's deterministic bytes.
    assert record == ex.SerializeToString(deterministic=True)
    assert serialize_example({"e": [], "c": [0.5], "a": b"x", "b": [1, 2]}) == record


def test_arrays_of_every_integer_and_float_width():
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                  np.uint64, np.bool_):
        values = np.array([0, 1, 1, 0], dtype=dtype)
        got = parse_example(serialize_example({"v": values}), {"v": VarLenFeature("int64")})
        assert got["v"].tolist() == [0, 1, 1, 0], dtype
    big_endian = np.array([-3, 70000], dtype=">i4")
    got = parse_example(serialize_example({"v": big_endian}), {"v": VarLenFeature("int64")})
    assert got["v"].tolist() == [-3, 70000]
    for dtype in (np.float16, np.float32, np.float64, ">f8"):
        values = np.array([0.5, -1.25, 3.0], dtype=dtype)
        got = parse_example(serialize_example({"v": values}), {"v": VarLenFeature("float32")})
        assert got["v"].tolist() == [0.5, -1.25, 3.0], dtype
    # Strided views are taken in C order, as the array reads.
    view = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2].T
    got = parse_example(serialize_example({"v": view}), {"v": FixedLenFeature([2, 3], "int64")})
    np.testing.assert_array_equal(got["v"], view)
    # An empty bytes array is an empty bytes list (typed); str arrays are UTF-8.
    got = parse_example(serialize_example({"s": np.array(["é", "b"]), "e": np.array([], "S1")}))
    assert list(got["s"]) == ["é".encode(), b"b"] and got["e"].dtype == object


def test_a_torch_tensor_is_taken_as_numpy_takes_it():
    torch = pytest.importorskip("torch")
    record = serialize_example({"ids": torch.tensor([[1, 2], [3, 4]]),
                                "w": torch.tensor([0.5], dtype=torch.float64)})
    got = parse_example(record, {"ids": VarLenFeature("int64"), "w": VarLenFeature("float32")})
    assert got["ids"].tolist() == [1, 2, 3, 4] and got["w"].tolist() == [0.5]


@pytest.mark.parametrize("value, words", [
    ([1, 2.5], "item 1 is a float, item 0 is an int"),
    ([b"a", 1], "item 1 is an int, item 0 is bytes"),
    ([[1, 2], [3]], "item 0: a nested list"),
    ([np.array([1, 2])], "item 0: an array (<i8, shape [2]) in a list"),
    (2**63, "int 9223372036854775808 is outside int64's range"),
    ([0, -2**63 - 1], "item 1: int -9223372036854775809 is outside int64's range"),
    (np.array([2**64 - 1], dtype=np.uint64), "uint64 element 0 (18446744073709551615)"),
    (None, "a NoneType is not a feature value"),
    ({"a": 1}, "a dict is not a feature value"),
    (np.array([1 + 2j]), 'array dtype "<c16" is not a feature type'),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), 'array dtype "<M8[D]"'),
    (np.array([b"x", 1], dtype=object), "|O array: item 1 is an int, item 0 is bytes"),
])
def test_bad_values_are_invalid_argument_errors_naming_example_feature_and_value(value, words):
    with pytest.raises(InvalidArgumentError) as e:
        serialize_examples([{"ok": 1}, {"ok": 2, "bad": value}])
    message = str(e.value)
    assert message.startswith('example 1: feature "bad": '), message
    assert words in message, message
    assert isinstance(e.value, ValueError)
    with pytest.raises(InvalidArgumentError, match='^feature "bad": '):
        serialize_example({"bad": value})


def test_not_a_dict_or_not_a_str_name_is_a_type_error():
    with pytest.raises(TypeError, match="example 1: features are a dict .* not list"):
        serialize_examples([{}, [("a", 1)]])
    with pytest.raises(TypeError, match=r"feature names are str, not int \(3\)"):
        serialize_example({3: b"x"})
    with pytest.raises(TypeError, match="a list of dicts"):
        serialize_examples({"a": 1})
    assert serialize_examples([]) == []
    assert serialize_example({}) == b"\x0a\x00"  # tf.train.Example(features=Features())


def test_written_by_padded_writer_and_read_by_data_source(tmp_path):
    path = tmp_path / "train.tfrecord"
    examples = [{"label": i, "tags": ["t"] * (i % 3)} for i in range(50)]
    with tfrecord_lirs.PaddedWriter(path, page_size=512) as writer:
        for record in serialize_examples(examples):
            writer.write(record)
    source = tfrecord_lirs.DataSource([str(path)])
    records = [source[i] for i in range(len(source))]
    got = parse_example(records, {"label": FixedLenFeature([], "int64"),
                                  "tags": VarLenFeature("bytes")})
    assert got["label"].tolist() == list(range(50))
    assert got["tags"].row_lengths.tolist() == [i % 3 for i in range(50)]
