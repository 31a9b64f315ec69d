"""Exact resumption with DataLoader worker processes: torchdata's StatefulDataLoader
(its worker-state protocol: `state_dict`/`load_state_dict` on the dataset in each
worker) over `tfrecord_lirs.torch.Loader` (iterable) and `Sampler` (map-style), with 0
and 2 workers: a resume mid-epoch gives exactly the remaining elements, no replay, no
loss. The main process's copy of a Loader walked by workers refuses `state_dict()`,
naming StatefulDataLoader."""

from __future__ import annotations

import pytest
import torch.utils.data as tud
from torchdata.stateful_dataloader import StatefulDataLoader

from conftest import write_id_shards

import tfrecord_lirs.torch as lirs_torch
from tfrecord_lirs import DataSource, Sampler
from tfrecord_lirs.errors import InvalidArgumentError

N = 300


@pytest.fixture
def paths(tmp_path):
    return write_id_shards(tmp_path, "train", [0, 170, N])


def ids(batches):
    return [int(p) for batch in batches for p in batch]


def collate(batch):
    return list(batch)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_iterable_loader_resumes_exactly(paths, workers):
    def loader():
        return StatefulDataLoader(lirs_torch.Loader(paths, seed=5, batch_size=10),
                                  batch_size=None, num_workers=workers)
    run = loader()
    it = iter(run)
    first = [next(it) for _ in range(7)]
    state = run.state_dict()
    rest = list(it)
    assert sorted(ids(first + rest)) == list(range(N))
    again = loader()
    again.load_state_dict(state)
    resumed = list(again)
    assert resumed == rest  # exactly the remaining batches, in the same order
    assert sorted(ids(first + resumed)) == list(range(N))  # no replay, no loss


@pytest.mark.parametrize("workers", [0, 2])
def test_the_map_style_sampler_resumes_exactly(paths, workers):
    source = DataSource(paths)

    def loader():
        return StatefulDataLoader(source, sampler=Sampler(source, seed=2), batch_size=10,
                                  num_workers=workers, collate_fn=collate)
    run = loader()
    it = iter(run)
    first = [next(it) for _ in range(12)]
    state = run.state_dict()
    rest = list(it)
    again = loader()
    again.load_state_dict(state)
    resumed = list(again)
    assert resumed == rest
    assert sorted(ids(first + resumed)) == list(range(N))


def test_the_main_copy_of_a_loader_walked_by_workers_names_stateful_dataloader(paths):
    loader = lirs_torch.Loader(paths, seed=5, batch_size=10)
    it = iter(tud.DataLoader(loader, batch_size=None, num_workers=2))
    next(it)
    with pytest.raises(InvalidArgumentError, match="StatefulDataLoader"):
        loader.state_dict()
    del it
    # Walked in this process (num_workers=0): its own state.
    alone = lirs_torch.Loader(paths, seed=5, batch_size=10)
    batches = iter(tud.DataLoader(alone, batch_size=None, num_workers=0))
    next(batches)
    assert alone.state_dict()["epoch"] == 0
