"""An argument of the wrong type, without TensorFlow: one message and one class per
mistake, the Rust core's (`options/argument.rs`): `tfrecord_lirs.errors.ArgumentTypeError`,
both a TypeError and the InvalidArgumentError that is a ValueError, so callers that
caught either before keep catching it. tests/test_argument_types_tf.py checks that
LIRSDataset says the same for the arguments it shares with these front ends."""

from __future__ import annotations

import pytest

from conftest import write_id_shards

import tfrecord_lirs
from tfrecord_lirs import DataSource, Loader, RefurbishSchedule, Sampler
from tfrecord_lirs.errors import ArgumentTypeError, InvalidArgumentError


@pytest.fixture
def data(tmp_path):
    return write_id_shards(tmp_path, "d", [0, 5])[0]


MISTAKES = [
    (lambda d, t: DataSource(d, backend=5), "backend must be a str, got 5"),
    (lambda d, t: DataSource(d, page_size=1.5), "page_size must be an integer, got 1.5"),
    (lambda d, t: DataSource(d, cache_dir=t / "c", cache_bytes=1.5),
     "cache_bytes must be an integer, got 1.5"),
    (lambda d, t: Loader(d, backend=b"pread"), "backend must be a str, got b'pread'"),
    (lambda d, t: Loader(d, deterministic="yes"),
     "deterministic must be a bool or None, got 'yes'"),
    (lambda d, t: Loader(d, batch_size=2.5), "batch_size must be an integer, got 2.5"),
    (lambda d, t: Loader(d, num_parallel_reads="4"),
     "num_parallel_reads must be an integer, got '4'"),
    (lambda d, t: Sampler(10, seed=2.5), "seed must be an integer, got 2.5"),
    (lambda d, t: Sampler(10, num_shards=True), "num_shards must be an integer, got True"),
    (lambda d, t: tfrecord_lirs.pad(d, t / "p", page_size=1.5),
     "page_size must be an integer, got 1.5"),
    (lambda d, t: tfrecord_lirs.pad(d, t / "p", page_size=True),
     "page_size must be an integer, got True"),
    (lambda d, t: tfrecord_lirs.pad(d, t / "p", fit=3), "fit must be a str, got 3"),
    (lambda d, t: tfrecord_lirs.pad(d, t / "p", compression=1),
     "compression must be a str or None, got 1"),
    (lambda d, t: RefurbishSchedule(10, reuse_factor=True),
     r"reuse_factor must be an integer >= 1, got True"),
    (lambda d, t: RefurbishSchedule(10, reuse_factor="2"),
     r"reuse_factor must be an integer >= 1, got '2'"),
    # The epoch state to resume from: bytes, given (LIRSDataset's epoch_state may be None).
    (lambda d, t: Sampler(10).resume("text"),
     "epoch_state must be bytes (shard states combined by combine_shard_states), got 'text'"),
    (lambda d, t: Sampler(10).resume(None),
     "epoch_state must be bytes (shard states combined by combine_shard_states), got None"),
    (lambda d, t: Loader(d).resume_epoch("text"),
     "epoch_state must be bytes (shard states combined by combine_shard_states), got 'text'"),
]


@pytest.mark.parametrize("make, says", MISTAKES)
def test_a_wrong_type_is_the_cores_one_error(data, tmp_path, make, says):
    with pytest.raises(ArgumentTypeError) as raised:
        make(data, tmp_path)
    assert str(raised.value) == says
    # The classes callers caught before: TypeError (PyO3's, or the Python checks') and
    # ValueError / InvalidArgumentError (the core's integer rule, the Python checks').
    assert isinstance(raised.value, TypeError)
    assert isinstance(raised.value, InvalidArgumentError) and isinstance(raised.value, ValueError)
    assert raised.value.file is None and raised.value.instance is None


def test_a_wrong_value_of_the_right_type_stays_the_values_rule(data, tmp_path):
    # The type rule passes it on: the value's own rule (and class) decides.
    with pytest.raises(InvalidArgumentError, match="backend") as raised:
        DataSource(data, backend="tape")
    assert not isinstance(raised.value, TypeError)
    with pytest.raises(InvalidArgumentError, match="page_size") as raised:
        tfrecord_lirs.pad(data, tmp_path / "p", page_size=100)
    assert not isinstance(raised.value, TypeError)
    with pytest.raises(InvalidArgumentError, match="reuse_factor") as raised:
        RefurbishSchedule(10, reuse_factor=2.5)
    assert not isinstance(raised.value, TypeError)


def test_a_negative_page_size_is_the_cores_value_error_everywhere(data, tmp_path):
    # The core's page-size rule for every front end: the same InvalidArgumentError and
    # words from DataSource (not PyO3's OverflowError) as from pad (and LIRSDataset,
    # tests/test_argument_types_tf.py).
    said = []
    for make in (lambda: DataSource(data, page_size=-1),
                 lambda: Loader(DataSource(data, page_size=-4096)),
                 lambda: tfrecord_lirs.pad(data, tmp_path / "p", page_size=-1)):
        with pytest.raises(InvalidArgumentError, match="page_size") as raised:
            make()
        assert not isinstance(raised.value, (OverflowError, TypeError)), type(raised.value)
        said.append(str(raised.value).replace("-4096", "-1"))
    assert said[0] == said[1] == said[2], said


def test_an_epoch_state_resumes_from_any_bytes_like_value(data):
    states = [Sampler(DataSource(data), seed=3, num_shards=2, shard_index=k).shard_state(1)
              for k in range(2)]
    epoch_state = Sampler.combine_shard_states(states)
    walks = []
    for given in (epoch_state, bytearray(epoch_state), memoryview(epoch_state)):
        sampler = Sampler(DataSource(data), seed=3)
        sampler.resume(given)
        walks.append(list(sampler))
    assert walks[0] == walks[1] == walks[2]
    assert len(walks[0]) == len(DataSource(data)) - 2  # one delivered by each old shard
