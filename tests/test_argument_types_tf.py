"""An argument of the wrong type given to the TensorFlow front end (`LIRSDataset`,
`read`): the same message and class as the TF-free front ends give for it
(tests/without_tf/test_argument_types.py), the Rust core's: `ArgumentTypeError`, a
TypeError and an InvalidArgumentError (a ValueError), and with TensorFlow loaded also a
tf.errors.InvalidArgumentError, so every class callers caught before still catches it."""

from __future__ import annotations

import pytest
import tensorflow as tf

from conftest import write_id_shards

import tfrecord_lirs
from tfrecord_lirs import LIRSDataset
from tfrecord_lirs.errors import ArgumentTypeError, InvalidArgumentError


@pytest.fixture
def data(tmp_path):
    return str(write_id_shards(tmp_path, "d", [0, 5])[0])


MISTAKES = [
    # Shared with DataSource / Loader / Sampler / pad (the same words there).
    ({"backend": 5}, "backend must be a str, got 5"),
    ({"page_size": 1.5}, "page_size must be an integer, got 1.5"),
    ({"page_size": True}, "page_size must be an integer, got True"),
    ({"batch_size": 2.5}, "batch_size must be an integer, got 2.5"),
    ({"num_parallel_reads": "4"}, "num_parallel_reads must be an integer, got '4'"),
    ({"deterministic": "yes"}, "deterministic must be a bool or None, got 'yes'"),
    ({"seed": 2.5}, "seed must be an integer, got 2.5"),
    ({"num_shards": 2, "shard_index": 0.5}, "shard_index must be an integer, got 0.5"),
    # LIRSDataset's own.
    ({"compression_type": 1}, "compression_type must be a str, got 1"),
    ({"buffer_size": 1.5}, "buffer_size must be an integer, got 1.5"),
    ({"cache_dir": "c", "cache_bytes": 1.5}, "cache_bytes must be an integer, got 1.5"),
    ({"start_epoch": 1.0}, "start_epoch must be an integer, got 1.0"),
    ({"epoch_state": "text"}, "epoch_state must be bytes (shard states combined by "
                              "combine_shard_states) or None, got 'text'"),
]


def _check(raised, says):
    assert str(raised.value) == says
    for cls in (ArgumentTypeError, InvalidArgumentError, TypeError, ValueError,
                tf.errors.InvalidArgumentError):
        assert isinstance(raised.value, cls), cls


@pytest.mark.parametrize("kwargs, says", MISTAKES)
def test_lirs_dataset_says_what_the_core_says(data, kwargs, says):
    with pytest.raises(ArgumentTypeError) as raised:
        LIRSDataset(data, **kwargs)
    _check(raised, says)


@pytest.mark.parametrize("kwargs, says", [
    ({"backend": 5}, "backend must be a str, got 5"),
    ({"page_size": 1.5}, "page_size must be an integer, got 1.5"),
    ({"cache_dir": "c", "cache_bytes": 1.5}, "cache_bytes must be an integer, got 1.5"),
])
def test_read_says_what_the_core_says(data, kwargs, says):
    with pytest.raises(ArgumentTypeError) as raised:
        tfrecord_lirs.read([data], [0], **kwargs)
    _check(raised, says)


def test_a_constant_tensor_is_checked_by_value(data):
    # buffer_size as a tensor: its value, by the core's rule (as TFRecordDataset).
    with pytest.raises(InvalidArgumentError, match="buffer_size must be >= 0"):
        LIRSDataset(data, buffer_size=tf.constant(-1, tf.int64))
    LIRSDataset(data, buffer_size=tf.constant(1 << 20, tf.int64))


def test_a_negative_page_size_says_what_the_tf_free_front_ends_say(data):
    # One class and message per mistake: LIRSDataset's is DataSource's (the core's
    # InvalidArgumentError, not PyO3's OverflowError).
    said = []
    for make in (lambda: LIRSDataset(data, page_size=-1),
                 lambda: tfrecord_lirs.DataSource(data, page_size=-1)):
        with pytest.raises(InvalidArgumentError, match="page_size") as raised:
            make()
        assert not isinstance(raised.value, (OverflowError, TypeError))
        said.append(str(raised.value))
    assert said[0] == said[1], said
