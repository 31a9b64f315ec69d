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


STATE_VERSIONS = sorted(int(p.name.rsplit("_v", 1)[1]) for p in OLD.glob("states_v*"))


@pytest.mark.parametrize("version", STATE_VERSIONS)
def test_an_iterator_checkpoint_of_every_state_version_restores(version, table, index_of,
                                                                 tmp_path):
    """testdata/old_checkpoints/states_v<N>/tf: an iterator checkpoint whose
    `shard_state` is of state version N (make_state_checkpoints.py there) restores and
    delivers what its library delivered after the save; a version 2 one is refused by
    the same records under another name (it names its dataset), a version 1 one is
    compared by instances only."""
    here = OLD / f"states_v{version}"
    case = json.loads((here / "cases.json").read_text())["tf"]
    ds = tfrecord_lirs.LIRSDataset(str(DATA), offset_tables=table, **case["kwargs"])
    it = iter(ds)
    next(it)
    tf.train.Checkpoint(iterator=it).read(str(here / case["prefix"])).assert_consumed()
    assert [_indices(e, index_of) for e in it] == case["rest"]

    renamed = tmp_path / "renamed.tfrecord"
    renamed.write_bytes(DATA.read_bytes())
    other = iter(tfrecord_lirs.LIRSDataset(str(renamed), offset_tables=table,
                                           **case["kwargs"]))
    if version == 1:
        tf.train.Checkpoint(iterator=other).read(str(here / case["prefix"])).assert_consumed()
        assert [_indices(e, index_of) for e in other] == case["rest"]
    else:
        with pytest.raises(tf.errors.DataLossError,
                           match="file 0 mixed.tfrecord.*file 0 renamed.tfrecord"):
            tf.train.Checkpoint(iterator=other).read(str(here / case["prefix"]))
            next(other)
