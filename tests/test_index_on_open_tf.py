"""No separate indexing step, through the TensorFlow op: `LIRSDataset([file])` and
`tfrecord_lirs.read` on a file written by `tf.io.TFRecordWriter` and never indexed give
every record (the table built on open, with the bytes of the tests' own framing, kept
beside the file); `index_missing=False` keeps the old `NotFoundError`; a graph saved
before the attr existed still loads (the attr's default)."""

import collections

import pytest
import tensorflow as tf

from conftest import affine_payload, assert_error, framed, run_cli, run_ok

import tfrecord_lirs
from tfrecord_lirs import LIRSDataset


@pytest.fixture
def untabled(tmp_path):
    payloads = [affine_payload(i, 3 + (i * 11) % 400) for i in range(1200)]
    path = tmp_path / "u.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for p in payloads:
            w.write(p)
    return path, payloads


def test_lirs_dataset_reads_an_unindexed_file(untabled, tmp_path):
    path, payloads = untabled
    got = [bytes(x.numpy()) for x in LIRSDataset([str(path)], seed=3)]
    assert collections.Counter(got) == collections.Counter(payloads)
    assert (tmp_path / "u.tfrecord.offsets").read_bytes() == framed(payloads)[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.tfrecord", "u.tfrecord.offsets"]
    # The table is there now: read by id as usual.
    ids = [1199, 0, 600]
    assert [bytes(x) for x in tfrecord_lirs.read(str(path), ids).numpy()] == [
        payloads[i] for i in ids]


def test_read_builds_the_table_too(untabled, tmp_path):
    path, payloads = untabled
    got = tfrecord_lirs.read(str(path), [5, 1100]).numpy()
    assert [bytes(x) for x in got] == [payloads[5], payloads[1100]]
    assert (tmp_path / "u.tfrecord.offsets").read_bytes() == framed(payloads)[1]


def test_index_missing_false_keeps_the_missing_table_error(untabled, tmp_path):
    path, _ = untabled
    with pytest.raises(tf.errors.NotFoundError, match="no offset table"):
        list(LIRSDataset([str(path)], index_missing=False))
    with pytest.raises(tf.errors.NotFoundError, match="index_missing=True"):
        tfrecord_lirs.read(str(path), [0], index_missing=False)
    assert [p.name for p in tmp_path.iterdir()] == ["u.tfrecord"]


def test_the_cli_readers_build_it_unless_told_not_to(untabled, tmp_path):
    path, payloads = untabled
    line = assert_error(run_cli("get", path, 7, "--index-missing", "false"), names=path.name)
    assert "no offset table" in line, line
    assert run_ok("get", path, 7).stdout == payloads[7]
    assert (tmp_path / "u.tfrecord.offsets").read_bytes() == framed(payloads)[1]


def test_a_graph_without_the_attr_loads_with_its_default(untabled):
    # A LIRSDataset node as an older release wrote it: no `index_missing` attr.
    path, payloads = untabled
    ds = LIRSDataset([str(path)], seed=1)
    serialized = tf.raw_ops.DatasetToGraphV2(input_dataset=ds._variant_tensor)
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(serialized.numpy())
    nodes = [n for n in gd.node if n.op == "LIRSDataset"]
    assert len(nodes) == 1 and "index_missing" in nodes[0].attr
    del nodes[0].attr["index_missing"]
    restored = tf.data.experimental.from_variant(
        tf.raw_ops.DatasetFromGraph(graph_def=gd.SerializeToString()),
        structure=ds.element_spec)
    got = [bytes(x.numpy()) for x in restored]
    assert collections.Counter(got) == collections.Counter(payloads)
