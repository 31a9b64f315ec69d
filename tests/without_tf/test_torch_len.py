"""`len(DataLoader(tfrecord_lirs.torch.Loader(...), batch_size=None, num_workers=W))`
is the number of batches the DataLoader yields per epoch on this rank, for any W:
the workers (real worker processes) take whole batches of the rank's epoch in turn,
so the batches, and every instance once per epoch, do not depend on W."""

from __future__ import annotations

import pytest
import torch.utils.data as tud

from conftest import write_id_shards

import tfrecord_lirs.torch as lirs_torch

N = 301


@pytest.fixture
def paths(tmp_path):
    return write_id_shards(tmp_path, "train", [0, 170, N])


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("drop_remainder,num_shards,shard_index,want", [
    (False, 1, 0, 31),   # ceil(301 / 10)
    (True, 1, 0, 30),    # floor
    (False, 2, 1, 16),   # rank 1 of 2 keeps 151 instances
])
def test_len_is_the_batches_the_dataloader_yields(paths, workers, drop_remainder, num_shards,
                                                  shard_index, want):
    loader = lirs_torch.Loader([str(p) for p in paths], seed=5, batch_size=10,
                               drop_remainder=drop_remainder, num_shards=num_shards,
                               shard_index=shard_index)
    data = tud.DataLoader(loader, batch_size=None, num_workers=workers)
    assert len(data) == want
    seen = []
    for epoch in range(2):
        batches = list(data)
        assert len(batches) == len(data) == want, (epoch, workers)
        got = [int(p) for batch in batches for p in batch]
        assert len(got) == len(set(got))  # each instance at most once in an epoch
        if not drop_remainder and num_shards == 1:
            assert sorted(got) == list(range(N))  # every instance, once
        # Only the epoch's last batch may be short.
        assert all(len(b) == 10 for b in batches[:-1])
        seen.append(sorted(got))
    # The same instances per epoch for any number of workers (a fresh order each).
    in_process = lirs_torch.Loader([str(p) for p in paths], seed=5, batch_size=10,
                                   drop_remainder=drop_remainder, num_shards=num_shards,
                                   shard_index=shard_index)
    for epoch in range(2):
        in_process.set_epoch(epoch)
        assert seen[epoch] == sorted(int(p) for b in in_process for p in b)
