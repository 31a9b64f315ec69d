"""Checkpoints written by an older op library still restore, with real TensorFlow.

testdata/old_checkpoints/ holds iterator checkpoints written by the op of commit
3e4fb1c, whose kernel kept the walk's state in C++ under its own keys (`seed`, `seed2`,
`position`, `order_version`, `delivered_after`); today the kernel hands whichever of
those keys a checkpoint holds to Rust, which tells the formats apart
(make_old_checkpoints.py there says how they were made). Each case is rebuilt with the
same arguments over testdata/mixed.tfrecord, restored, and must deliver what the old
library delivered after the save: the same records in the same order, or for unordered
delivery the same records, in full batches but the last.
"""

import json
from collections import Counter
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")
import tfrecord_lirs  # noqa: E402

OLD = Path(__file__).resolve().parents[1] / "testdata" / "old_checkpoints"
DATA = OLD.parent / "mixed.tfrecord"
CASES = json.loads((OLD / "cases.json").read_text())


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return tfrecord_lirs.build_offset_table(
        str(DATA), str(tmp_path_factory.mktemp("old") / "mixed.tfrecord.offsets"))


@pytest.fixture(scope="module")
def index_of():
    return {r.numpy(): i for i, r in enumerate(tf.data.TFRecordDataset(str(DATA)))}


def _indices(element, index_of):
    values = element.numpy()
    return [index_of[v] for v in (values if element.shape.rank else [values])]


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_old_checkpoint_restores(name, table, index_of):
    case = CASES[name]
    ds = tfrecord_lirs.LIRSDataset(str(DATA), offset_tables=table, **case["kwargs"])
    options = tf.data.Options()
    options.deterministic = case["deterministic"]
    ds = ds.repeat(case["epochs"]).with_options(options)
    it = iter(ds)
    next(it)  # the restore must override what the iterator did
    tf.train.Checkpoint(iterator=it).read(str(OLD / case["prefix"])).assert_consumed()
    rest = [_indices(e, index_of) for e in it]
    if case["deterministic"]:
        assert rest == case["rest"]
    else:
        flat = Counter(i for batch in rest for i in batch)
        assert flat == Counter(i for batch in case["rest"] for i in batch)
        batch_size = case["kwargs"]["batch_size"]
        assert all(len(b) == batch_size for b in rest[:-1]), [len(b) for b in rest]
