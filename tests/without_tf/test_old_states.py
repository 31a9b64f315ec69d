"""The elastic-resume states of every version still restore, without TensorFlow.

testdata/old_checkpoints/states_v<N>/ holds a Sampler's worker states and their
combined epoch state over testdata/mixed.tfrecord, written by the library of that
state version (make_state_checkpoints.py there says how), and the orders the three
shards of a Sampler resumed from them walked then. Today's library must combine them
to the same epoch state and walk the same orders; a version 1 state names no dataset
(compared by instances only), a version 2 state is refused by the same records under
another name.
"""

import json
import shutil
from pathlib import Path

import pytest

import tfrecord_lirs
from tfrecord_lirs import DataSource, Sampler
from tfrecord_lirs.errors import DataLossError

OLD = Path(__file__).resolve().parents[2] / "testdata" / "old_checkpoints"
DATA = OLD.parent / "mixed.tfrecord"
VERSIONS = sorted(int(p.name.rsplit("_v", 1)[1]) for p in OLD.glob("states_v*"))


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """mixed.tfrecord with its table, under its own name and under another one."""
    out = {}
    for name in ("mixed.tfrecord", "other.tfrecord"):
        d = tmp_path_factory.mktemp(name.split(".")[0])
        shutil.copy(DATA, d / name)
        tfrecord_lirs.build_offset_table(str(d / name))
        out[name] = DataSource([str(d / name)])
    return out


def test_every_state_version_is_here():
    assert VERSIONS == [1, 2]


@pytest.mark.parametrize("version", VERSIONS)
def test_old_sampler_states_combine_and_resume(version, copies):
    here = OLD / f"states_v{version}"
    case = json.loads((here / "cases.json").read_text())["sampler"]
    shards = [(here / f"sampler_shard_{k}.bin").read_bytes() for k in range(2)]
    epoch_state = (here / "epoch_state.bin").read_bytes()
    combined = Sampler.combine_shard_states(shards)
    assert combined == epoch_state
    info = tfrecord_lirs._lirs.epoch_state_info(epoch_state)
    assert info["delivered"] == sum(case["consumed"])
    for j in range(3):
        s = Sampler(copies["mixed.tfrecord"], num_shards=3, shard_index=j, **case["kwargs"])
        s.resume(epoch_state)
        assert s.epoch == case["epoch"]
        assert [int(i) for i in s.order()] == case["resumed"][j]
    other = Sampler(copies["other.tfrecord"], num_shards=3, shard_index=0, **case["kwargs"])
    if version == 1:
        assert info["files"] is None
        other.resume(epoch_state)  # compared by instances only
    else:
        assert info["files"] == [["mixed.tfrecord", 304, DATA.stat().st_size]] or \
            info["files"] == [("mixed.tfrecord", 304, DATA.stat().st_size)]
        with pytest.raises(DataLossError, match="file 0 other.tfrecord \\(304 instances"):
            other.resume(epoch_state)
