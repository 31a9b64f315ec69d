"""The registered TensorFlow ops' attr defaults are the Rust core's
(`tfrecord_lirs._lirs.defaults()`, crates/tfrecord-lirs/src/options/defaults.rs): C++
cannot take them from Rust, so they are compared here, as TensorFlow registered them,
and LIRSDataset's element spec and tf.errors classes follow the core's tables."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

from tfrecord_lirs import _checks, _lirs, _op_library, errors  # noqa: E402

DEFAULTS = _lirs.defaults()
# The attrs whose default differs in meaning from the Loader's: both ops', then
# LIRSDataset's.
OP_ATTR = {"cache_bytes": "op_cache_bytes"}
DATASET_ATTR = {**OP_ATTR, "batch_size": "dataset_batch_size",
                "deterministic": "dataset_deterministic", "seed_rule": "op_seed_rule"}


def _value(attr_value):
    kind = attr_value.WhichOneof("value")
    value = getattr(attr_value, kind)
    return value.decode() if kind == "s" else value


def test_registered_op_attr_defaults_are_the_cores():
    assert _op_library.ops is not None
    seen = set()
    for op in ("LIRSDataset", "LIRSShardHintDataset", "LIRSRead"):
        op_def = op_def_registry.get(op)
        assert op_def is not None, op
        for attr in op_def.attr:
            # Empty: not given (no user-facing default in the core's table).
            without_default = ("epoch_state", "metadata", "cache_dir")
            if not attr.HasField("default_value") or attr.name in without_default:
                continue
            key = (OP_ATTR if op == "LIRSRead" else DATASET_ATTR).get(attr.name, attr.name)
            assert _value(attr.default_value) == DEFAULTS[key], (op, attr.name)
            seen.add(attr.name)
    assert {"page_size", "order_version", "backend", "trust_table", "num_parallel_reads",
            "batch_size", "drop_remainder", "deterministic",
            "reshuffle_each_iteration", "shard_remainder", "cache_bytes",
            "index_missing"} <= seen


def test_each_core_error_class_is_also_its_tf_errors_class():
    for _kind, name in _lirs.error_classes():
        both = _checks._as_tf(getattr(errors, name))
        assert issubclass(both, getattr(tf.errors, name)), name
        assert issubclass(both, getattr(errors, name)), name


def test_parse_example_spec_classes_are_tf_ios():
    # tfrecord_lirs.FixedLenFeature / VarLenFeature have tf.io's fields and defaults,
    # and parse_example takes tf.io's own feature objects and dtypes alike.
    import tfrecord_lirs

    assert tfrecord_lirs.FixedLenFeature._fields == tf.io.FixedLenFeature._fields
    assert tfrecord_lirs.VarLenFeature._fields == tf.io.VarLenFeature._fields
    assert (tfrecord_lirs.FixedLenFeature([], "int64").default_value
            == tf.io.FixedLenFeature([], tf.int64).default_value)
    ex = tf.train.Example(features=tf.train.Features(feature={
        "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2])),
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"]))}))
    got = tfrecord_lirs.parse_example(ex.SerializeToString(), {
        "a": tf.io.FixedLenFeature([2], tf.int64),
        "s": tf.io.VarLenFeature(tf.string),
        "f": tf.io.FixedLenFeature([], tf.float32, default_value=tf.constant(0.5))})
    assert got["a"].tolist() == [1, 2] and got["s"].tolist() == [b"x"] and got["f"] == 0.5
