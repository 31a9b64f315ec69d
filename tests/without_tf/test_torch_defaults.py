"""PyTorch with nothing but defaults: every epoch of a DataLoader is a fresh
permutation without `set_epoch` (worker processes forked or spawned, persistent or
not, map-style and iterable), a map-style `StatefulDataLoader` resumes exactly in a
new process at any epoch and refuses another split's state, and `torchrun` with two
ranks takes rank and world size from `torch.distributed`, pads as `DistributedSampler`
does and never leaves a rank waiting."""

from __future__ import annotations

import collections
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch.utils.data as tud
from torchdata.stateful_dataloader import StatefulDataLoader

from conftest import write_id_shards

import tfrecord_lirs.torch as lirs_torch
from tfrecord_lirs import DataSource, Loader, Sampler
from tfrecord_lirs.errors import InvalidArgumentError

N = 301
HERE = Path(__file__).resolve().parent


def write_split(directory, split):
    """Two shards of `split`, payloads b"<id>", with their tables."""
    return write_id_shards(directory, split, [0, 170, N])


@pytest.fixture
def paths(tmp_path):
    return write_split(tmp_path / "data", "train")


def ids(batches):
    return [int(p) for batch in batches for p in batch]


def collate(batch):
    return list(batch)


WORKERS = [
    pytest.param(dict(num_workers=0), id="in-process"),
    pytest.param(dict(num_workers=2), id="workers"),
    pytest.param(dict(num_workers=2, persistent_workers=True), id="persistent"),
    pytest.param(dict(num_workers=2, multiprocessing_context="spawn"), id="spawn"),
]


def epoch_of(paths, epoch, **workers):
    """The batches a DataLoader gives for `epoch` picked by `set_epoch`."""
    loader = lirs_torch.Loader(paths, seed=4, batch_size=16)
    loader.set_epoch(epoch)
    return [list(b) for b in tud.DataLoader(loader, batch_size=None, **workers)]


@pytest.mark.parametrize("workers", WORKERS)
def test_the_iterable_loader_reshuffles_every_epoch_with_no_call(paths, workers):
    loader = lirs_torch.Loader(paths, seed=4, batch_size=16)
    data = tud.DataLoader(loader, batch_size=None, **workers)
    epochs = [[list(b) for b in data] for _ in range(3)]
    for e, batches in enumerate(epochs):
        assert sorted(ids(batches)) == list(range(N)), e
        # Exactly epoch e: what set_epoch(e) gives.
        assert batches == epoch_of(paths, e, **workers), e
    assert len({tuple(ids(b)) for b in epochs}) == 3
    assert loader.epoch == 3
    # set_epoch is still honoured.
    loader.set_epoch(7)
    assert [list(b) for b in data] == epoch_of(paths, 7, **workers)


def test_an_iteration_cut_short_in_workers_still_moves_every_worker_on(paths):
    loader = lirs_torch.Loader(paths, seed=4, batch_size=16)
    data = tud.DataLoader(loader, batch_size=None, num_workers=2)
    it = iter(data)
    next(it)
    del it
    # Both workers walked epoch 0 (one of them part way): the next iteration is
    # epoch 1 in both, so it holds every id once.
    got = [list(b) for b in data]
    assert got == epoch_of(paths, 1, num_workers=2)
    assert sorted(ids(got)) == list(range(N))


@pytest.mark.parametrize("workers", [0, 2])
def test_the_map_style_sampler_reshuffles_every_epoch_with_no_call(paths, workers):
    source = DataSource(paths)
    sampler = Sampler(source, seed=6)
    data = tud.DataLoader(source, sampler=sampler, batch_size=16, num_workers=workers,
                          collate_fn=collate)
    for e in range(3):
        got = ids(data)
        assert got == [int(source[i]) for i in Sampler(source, seed=6).order(e)], e
    assert sampler.epoch == 3
    # An iteration dropped part way is walked again from its start.
    it = iter(data)
    next(it)
    del it
    assert sampler.epoch == 3
    assert ids(data) == [int(source[i]) for i in sampler.order(3)]


RESUME = """
import pickle, sys
sys.path.insert(0, {tests!r})
from torchdata.stateful_dataloader import StatefulDataLoader
from tfrecord_lirs import DataSource, Sampler
paths, state, workers = pickle.load(open({args!r}, "rb"))
source = DataSource(paths)
run = StatefulDataLoader(source, sampler=Sampler(source, seed=2), batch_size=10,
                         num_workers=workers, collate_fn=list)
run.load_state_dict(state)
print(repr([[int(p) for p in batch] for batch in run]))
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_map_style_stateful_dataloader_resumes_in_a_new_process_at_a_later_epoch(
        paths, tmp_path, workers):
    source = DataSource(paths)
    run = StatefulDataLoader(source, sampler=Sampler(source, seed=2), batch_size=10,
                             num_workers=workers, collate_fn=collate)
    for _ in range(2):
        list(run)
    it = iter(run)
    first = [next(it) for _ in range(12)]
    state = run.state_dict()
    rest = [[int(p) for p in b] for b in it]
    assert sorted(ids(first) + ids(rest)) == list(range(N))
    # Epoch 2, not epoch 0 again.
    assert ids(first) + ids(rest) == [int(source[i]) for i in Sampler(source, seed=2).order(2)]
    args = tmp_path / "args.pkl"
    args.write_bytes(pickle.dumps(([str(p) for p in paths], state, workers)))
    out = subprocess.run([sys.executable, "-c", RESUME.format(tests=str(HERE), args=str(args))],
                         capture_output=True, text=True, timeout=300, check=True)
    assert eval(out.stdout) == rest  # exactly the rest: no replay, no loss


def test_a_sampler_state_of_another_split_is_refused(paths, tmp_path):
    train = DataSource(paths)
    sampler = Sampler(train, seed=2)
    it = iter(sampler)
    for _ in range(5):
        next(it)
    state = sampler.state_dict()
    assert (state["epoch"], state["position"]) == (0, 5)
    valid = DataSource(write_split(tmp_path / "valid", "valid"))
    with pytest.raises(InvalidArgumentError, match="another dataset .*valid-00000-of-00002"):
        Sampler(valid, seed=2).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="seed 2 .this Sampler has seed 3"):
        Sampler(train, seed=3).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="not a tfrecord_lirs.Sampler state_dict"):
        Sampler(train, seed=2).load_state_dict(Loader(paths, seed=2).state_dict())
    # The same split elsewhere (another directory): the rest of the walk.
    moved = DataSource(write_split(tmp_path / "moved", "train"))
    again = Sampler(moved, seed=2)
    again.load_state_dict(state)
    assert list(again) == list(it)
    # A pickled copy keeps its place too.
    copy = pickle.loads(pickle.dumps(Sampler(train, seed=2)))
    assert copy.state_dict() == Sampler(train, seed=2).state_dict()


DDP = """
import json, os, sys
import torch, torch.distributed as dist
import torch.utils.data as tud
import tfrecord_lirs
from tfrecord_lirs import DataSource, Sampler
import tfrecord_lirs.torch as lirs_torch

dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=60))
paths = json.loads(os.environ["LIRS_PATHS"])
rank = dist.get_rank()
report = {{"rank": rank, "process_shard": tfrecord_lirs.process_shard()}}
# The iterable Loader with 2 DataLoader workers, no shard arguments.
loader = lirs_torch.Loader(paths, seed=1, batch_size=10)
steps = 0
seen = []
for batch in tud.DataLoader(loader, batch_size=None, num_workers=2):
    seen += [int(p) for p in batch]
    dist.all_reduce(torch.ones(1))  # a collective per step, as DDP's backward
    steps += 1
report["loader"] = {{"steps": steps, "ids": seen}}
# The map-style Sampler, no shard arguments.
source = DataSource(paths)
sampler = Sampler(source, seed=1)
steps, seen = 0, []
for batch in tud.DataLoader(source, sampler=sampler, batch_size=10, collate_fn=list):
    seen += [int(p) for p in batch]
    dist.all_reduce(torch.ones(1))
    steps += 1
report["sampler"] = {{"steps": steps, "ids": seen, "num_shards": sampler.num_shards,
                      "shard_index": sampler.shard_index,
                      "shard_remainder": sampler.shard_remainder}}
with open(os.path.join({out!r}, "rank%d.json" % rank), "w") as f:
    json.dump(report, f)
dist.destroy_process_group()
"""


def test_torchrun_with_two_ranks_shards_by_rank_pads_and_never_hangs(paths, tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP.format(out=str(tmp_path)))
    env = dict(os.environ, LIRS_PATHS=__import__("json").dumps([str(p) for p in paths]),
               OMP_NUM_THREADS="1")
    # Rendezvous and gloo on loopback, inside a network namespace of this test's own.
    cmd = ["unshare", "--net", "sh", "-c",
           'ip link set lo up && exec "$0" -m torch.distributed.run --nnodes 1 '
           '--nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29533 "$1"',
           sys.executable, str(script)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out
    import json
    reports = sorted((json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)),
                     key=lambda r: r["rank"])
    for r, report in enumerate(reports):
        assert report["process_shard"] == {"num_shards": 2, "shard_index": r}
        assert report["sampler"]["num_shards"] == 2
        assert report["sampler"]["shard_index"] == r
        assert report["sampler"]["shard_remainder"] == "pad"
    for kind in ("loader", "sampler"):
        steps = [rep[kind]["steps"] for rep in reports]
        assert steps[0] == steps[1], (kind, steps)  # the same steps: nobody waits
        got = reports[0][kind]["ids"] + reports[1][kind]["ids"]
        # Every id, padded by repeats of the order's first ids (as DistributedSampler).
        assert set(got) == set(range(N)), kind
        counts = collections.Counter(got)
        assert sum(counts.values()) - N < 2 * 2 + 1, kind


def test_a_dataloader_batching_the_loaders_batches_is_refused(paths):
    loader = lirs_torch.Loader(paths, seed=4, batch_size=16)
    for workers in (0, 2):
        with pytest.raises(InvalidArgumentError, match="give the DataLoader batch_size=None"):
            next(iter(tud.DataLoader(loader, batch_size=2, num_workers=workers)))
    # With batch_size=None the batches are the Loader's, as lists.
    first = next(iter(tud.DataLoader(loader, batch_size=None)))
    assert isinstance(first, list) and len(first) == 16


def test_a_refurbish_store_in_memory_is_refused_in_worker_processes(paths):
    source = DataSource(paths)
    sampler = lirs_torch.RefurbishSampler(source, seed=1, reuse_factor=2, batch_size=10)
    data = lirs_torch.RefurbishDataset(source, lambda r, s: r, lambda x, s: x, sampler)
    with pytest.raises(InvalidArgumentError, match="store=None.*DataLoader worker process"):
        list(tud.DataLoader(data, sampler=sampler, batch_size=10, num_workers=2,
                            collate_fn=collate))
    # In this process it works.
    assert len(ids(tud.DataLoader(data, sampler=sampler, batch_size=10,
                                  collate_fn=collate))) == N
