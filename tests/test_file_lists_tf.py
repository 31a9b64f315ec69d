"""LIRSDataset's strings through the core's file-list rule (with TensorFlow): a pattern
is its sorted data files, never their tables, a second build_offset_table is a no-op, a
pattern of nothing is NotFound naming it; bad shard arguments are the typed
InvalidArgumentError naming the parameter."""

import pytest
import tensorflow as tf

from conftest import framed

import tfrecord_lirs
from tfrecord_lirs import LIRSDataset


def shards(tmp_path, n=3):
    payloads = []
    for i in range(n):
        records = [b"%d-%d" % (i, r) for r in range(5 + i)]
        (tmp_path / f"t.tfrecord-{i:05d}-of-{n:05d}").write_bytes(framed(records)[0])
        payloads += records
    return payloads


def test_a_pattern_is_its_data_files_in_order(tmp_path):
    payloads = shards(tmp_path)
    pattern = str(tmp_path / "t.tfrecord-*")
    tfrecord_lirs.build_offset_table(pattern)
    tfrecord_lirs.build_offset_table(pattern)  # the second launch: tables current
    got = [x.numpy() for x in LIRSDataset(pattern, seed=1)]
    assert sorted(got) == sorted(payloads)
    stock = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(str(tmp_path / "t.tfrecord-?????-of-?????"))))
    assert [x.numpy() for x in stock] == payloads


def test_a_pattern_of_nothing_is_not_found_naming_it(tmp_path):
    shards(tmp_path, 1)
    missing = str(tmp_path / "v.tfrecord-*")
    with pytest.raises(tf.errors.NotFoundError, match="v.tfrecord-.*no data file matches"):
        LIRSDataset(missing)


@pytest.mark.parametrize("kwargs, says", [
    # -1 is SHARD_HINT: a half hint is refused naming both ways out.
    ({"num_shards": 2, "shard_index": -1},
     r"shard_index is tf.data.experimental.SHARD_HINT \(-1\) but num_shards is not.*"
     r"a shard index >= 0"),
    ({"num_shards": 0, "shard_index": 0}, "num_shards=0"),
    ({"num_shards": 2, "shard_index": 0.5}, "shard_index must be an integer, got 0.5"),
])
def test_bad_shards_are_typed_errors_naming_the_parameter(tmp_path, kwargs, says):
    shards(tmp_path, 1)
    path = str(tmp_path / "t.tfrecord-00000-of-00001")
    tfrecord_lirs.build_offset_table(path)
    with pytest.raises(tfrecord_lirs.errors.InvalidArgumentError, match=says):
        LIRSDataset(path, **kwargs)


@pytest.mark.parametrize("rule, each", [("keep", None), ("drop", 3), ("pad", 4)])
def test_shard_remainder_gives_every_rank_the_same_count(tmp_path, rule, each):
    payloads = shards(tmp_path, 2)  # 5 + 6 = 11 instances over 3 ranks
    pattern = str(tmp_path / "t.tfrecord-*")
    tfrecord_lirs.build_offset_table(pattern)
    ranks = [[x.numpy() for x in LIRSDataset(pattern, seed=3, num_shards=3, shard_index=k,
                                             shard_remainder=rule)]
             for k in range(3)]
    counts = [len(r) for r in ranks]
    flat = [p for r in ranks for p in r]
    if each is None:
        assert counts == [3, 4, 4] and sorted(flat) == sorted(payloads)
    else:
        assert counts == [each] * 3
        assert set(flat) <= set(payloads)
        assert len(set(flat)) == (9 if rule == "drop" else 11)
    # The op's cardinality agrees.
    ds = LIRSDataset(pattern, seed=3, num_shards=3, shard_index=0, shard_remainder=rule)
    assert int(ds.cardinality()) == counts[0]
