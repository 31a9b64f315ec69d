"""`tfrecord_lirs.parse_sequence_example` against TensorFlow's own parser on the same
`tf.train.SequenceExample` records (every list type, fixed- and variable-length
sequence features, steps of every count including none, lists missing, context
features), with the very same spec dicts (tf.io's feature objects) given to both:
`tf.io.parse_sequence_example` (a batch: padded dense features and their lengths, a
VarLenFeature's SparseTensor against our nested values and lengths) and
`tf.io.parse_single_sequence_example` (one record); and the same refusals."""

import numpy as np
import pytest
import tensorflow as tf

import tfrecord_lirs
from tfrecord_lirs.errors import InvalidArgumentError

N = 24


def _feature(kind, values):
    if kind == "i":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


@pytest.fixture(scope="module")
def records():
    rng = np.random.default_rng(11)
    out = []
    for r in range(N):
        steps = int(rng.integers(0, 6))
        lists = {
            "tokens": tf.train.FeatureList(feature=[
                _feature("i", [int(rng.integers(-5, 10**12))]) for _ in range(steps)]),
            "frames": tf.train.FeatureList(feature=[
                _feature("f", rng.normal(size=3).astype(np.float32).tolist())
                for _ in range(steps)]),
            "words": tf.train.FeatureList(feature=[
                _feature("b", [b"w%d" % int(rng.integers(100))
                               for _ in range(int(rng.integers(0, 4)))])
                for _ in range(int(rng.integers(0, 4)))]),
        }
        if r % 5 == 3:
            del lists["frames"]  # missing: allowed
        if r % 7 == 2:
            del lists["words"]
        context = {"id": _feature("i", [r]), "name": _feature("b", [b"seq%d" % r])}
        if r % 2:
            context["scores"] = _feature("f", rng.normal(size=r % 4).tolist())
        out.append(tf.train.SequenceExample(
            context=tf.train.Features(feature=context),
            feature_lists=tf.train.FeatureLists(feature_list=lists)).SerializeToString())
    return out


CONTEXT = {
    "id": tf.io.FixedLenFeature([], tf.int64),
    "name": tf.io.FixedLenFeature([], tf.string),
    "scores": tf.io.VarLenFeature(tf.float32),
}
SEQUENCE = {
    "tokens": tf.io.FixedLenSequenceFeature([], tf.int64),
    "frames": tf.io.FixedLenSequenceFeature([3], tf.float32, allow_missing=True),
    "words": tf.io.VarLenFeature(tf.string),
}


def _same(ours, theirs, where):
    theirs = theirs.numpy()
    assert ours.dtype == theirs.dtype or (ours.dtype == object and theirs.dtype == object), where
    assert ours.shape == theirs.shape, where
    assert ours.tolist() == theirs.tolist(), where


def _same_nested(ours, sparse, where):
    """Ragged(Ragged(values, per step), per record) against a [records, steps, values]
    SparseTensor."""
    rows, steps = ours
    values, per_step = rows
    indices = []
    at = 0
    for b, n in enumerate(steps.tolist()):
        for s in range(n):
            indices.extend([b, s, i] for i in range(per_step[at + s]))
        at += n
    assert sparse.indices.numpy().tolist() == indices, where
    _same(values, sparse.values, where)
    dense = sparse.dense_shape.numpy().tolist()
    assert dense[:2] == [len(steps), int(steps.max(initial=0))], where
    assert dense[2] == int(per_step.max(initial=0)), where


def test_a_batch_equals_tensorflows(records):
    context, lists, lengths = tfrecord_lirs.parse_sequence_example(records, CONTEXT, SEQUENCE)
    tf_context, tf_lists, tf_lengths = tf.io.parse_sequence_example(
        records, context_features=CONTEXT, sequence_features=SEQUENCE)
    _same(context["id"], tf_context["id"], "id")
    _same(context["name"], tf_context["name"], "name")
    scores = context["scores"]
    _same(scores.values, tf_context["scores"].values, "scores")
    assert tf_context["scores"].indices.numpy()[:, 0].tolist() == \
        np.repeat(np.arange(N), scores.row_lengths).tolist()
    for name in ("tokens", "frames"):
        _same(lists[name], tf_lists[name], name)
        _same(lengths[name], tf_lengths[name], name)
    assert sorted(lengths) == sorted(tf_lengths.keys())
    _same_nested(lists["words"], tf_lists["words"], "words")


def test_one_record_equals_tensorflows(records):
    for r in (0, 3, 4):  # frames present, frames missing, ...
        context, lists = tfrecord_lirs.parse_sequence_example(records[r], CONTEXT, SEQUENCE)
        tf_context, tf_lists = tf.io.parse_single_sequence_example(
            records[r], context_features=CONTEXT, sequence_features=SEQUENCE)
        assert context["id"] == tf_context["id"].numpy()
        assert context["name"] == tf_context["name"].numpy()
        for name in ("tokens", "frames"):
            _same(lists[name], tf_lists[name], f"{name} of record {r}")
        words = tf_lists["words"]
        values, per_step = lists["words"]
        _same(values, words.values, "words")
        assert words.indices.numpy()[:, 0].tolist() == \
            np.repeat(np.arange(len(per_step)), per_step).tolist()


def test_both_refuse_the_same_records(records):
    # "frames" is missing in records 3, 8, ...: required without allow_missing.
    strict = dict(SEQUENCE, frames=tf.io.FixedLenSequenceFeature([3], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_sequence_example(records, sequence_features=strict)
    with pytest.raises(InvalidArgumentError, match="record 3: sequence feature \"frames\""):
        tfrecord_lirs.parse_sequence_example(records, sequence_features=strict)
    # Steps of 3 values where the shape holds 2.
    wrong = dict(SEQUENCE, frames=tf.io.FixedLenSequenceFeature([2], tf.float32,
                                                                 allow_missing=True))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_sequence_example(records, sequence_features=wrong)
    with pytest.raises(InvalidArgumentError, match="step 0 has 3 float32 values"):
        tfrecord_lirs.parse_sequence_example(records, sequence_features=wrong)
    # Another dtype.
    mistyped = dict(SEQUENCE, tokens=tf.io.FixedLenSequenceFeature([], tf.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_sequence_example(records, sequence_features=mistyped)
    with pytest.raises(InvalidArgumentError, match="holds a int64_list, the spec says float32"):
        tfrecord_lirs.parse_sequence_example(records, sequence_features=mistyped)
    # A default value: TensorFlow refuses it when the spec is built, so does the core.
    with pytest.raises(InvalidArgumentError, match="a default value is not allowed"):
        tfrecord_lirs.parse_sequence_example(records, sequence_features={
            "tokens": tfrecord_lirs.FixedLenSequenceFeature([], "int64", default_value=0)})
