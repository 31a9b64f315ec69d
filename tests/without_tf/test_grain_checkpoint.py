"""A `grain.DataLoader` over `tfrecord_lirs.grain.IndexSampler` checkpointed with
Grain's own iterator state and restored in a new process: exactly the rest of the
run. Grain keeps `repr(sampler)` and `repr(data_source)` in the state and compares
them on a restore, so both are the same in every process and tell splits apart."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import grain
import pytest

from conftest import write_id_shards

from tfrecord_lirs import DataSource
from tfrecord_lirs import grain as lirs_grain

N = 230
HERE = Path(__file__).resolve().parent


def write_split(directory, split):
    return [str(p) for p in write_id_shards(directory, f"{split}.tfrecord", [0, 100, N])]


def loader(paths, workers):
    source = DataSource(paths)
    return grain.DataLoader(
        data_source=source,
        sampler=lirs_grain.IndexSampler(source, seed=8, num_epochs=2),
        worker_count=workers, shard_options=grain.sharding.NoSharding(),
        operations=[grain.transforms.Batch(10, batch_fn=list)])


RESTORE = """
import pickle, sys
sys.path[:0] = [{tests!r}, {common!r}]
from test_grain_checkpoint import loader
paths, state, workers = pickle.load(open({args!r}, "rb"))
it = iter(loader(paths, workers))
it.set_state(state)
print(repr([[int(p) for p in batch] for batch in it]))
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_grain_checkpoint_restores_in_a_new_process(tmp_path, workers):
    paths = write_split(tmp_path / "data", "train")
    it = iter(loader(paths, workers))
    first = [next(it) for _ in range(9)]
    state = it.get_state()
    rest = [[int(p) for p in batch] for batch in it]
    got = [int(p) for b in first for p in b] + [p for b in rest for p in b]
    assert sorted(got) == sorted(list(range(N)) * 2)
    args = tmp_path / "args.pkl"
    args.write_bytes(pickle.dumps((paths, state, workers)))
    code = RESTORE.format(tests=str(HERE), common=str(HERE.parent), args=str(args))
    out = subprocess.run([sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert eval(out.stdout) == rest


def test_the_sampler_repr_names_what_the_orders_depend_on(tmp_path):
    train = DataSource(write_split(tmp_path / "train", "train"))
    valid = DataSource(write_split(tmp_path / "valid", "valid"))
    s = lirs_grain.IndexSampler(train, seed=8, num_epochs=2)
    assert "0x" not in repr(s)
    assert repr(s) == repr(lirs_grain.IndexSampler(train, seed=8, num_epochs=2))
    assert "train.tfrecord-00000-of-00002" in repr(s) and "seed=8" in repr(s)
    assert repr(s) != repr(lirs_grain.IndexSampler(valid, seed=8, num_epochs=2))
    assert repr(s) != repr(lirs_grain.IndexSampler(train, seed=9, num_epochs=2))
    # Another split's checkpoint is refused by Grain's own comparison.
    it = iter(loader([str(p) for p in train.paths], 0))
    next(it)
    state = json.loads(it.get_state())
    other = iter(grain.DataLoader(
        data_source=valid, sampler=lirs_grain.IndexSampler(valid, seed=8, num_epochs=2),
        worker_count=0, shard_options=grain.sharding.NoSharding(),
        operations=[grain.transforms.Batch(10, batch_fn=list)]))
    with pytest.raises(ValueError):
        other.set_state(json.dumps(state).encode())
