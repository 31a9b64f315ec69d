"""Data-parallel ranks without TensorFlow: `shard_remainder="drop"|"pad"` gives every
rank the same count (DistributedSampler's drop_last and padding), by the core's rule;
bad integer arguments are the core's InvalidArgumentError naming the parameter."""

from __future__ import annotations

import pytest

from conftest import framed

import tfrecord_lirs
from tfrecord_lirs import DataSource, Loader, Sampler
from tfrecord_lirs.errors import InvalidArgumentError


@pytest.mark.parametrize("rule, lens", [("keep", [133, 133, 134]), ("drop", [133] * 3),
                                        ("pad", [134] * 3)])
def test_every_rank_gets_the_same_count(rule, lens):
    ranks = [Sampler(400, seed=3, num_shards=3, shard_index=k, shard_remainder=rule)
             for k in range(3)]
    assert [len(r) for r in ranks] == lens
    ids = [list(r) for r in ranks]
    assert [len(i) for i in ids] == lens
    whole = list(Sampler(400, seed=3))
    flat = [i for rank in ids for i in rank]
    if rule == "drop":
        assert flat == whole[:399]
    elif rule == "pad":
        assert flat == whole + whole[:2]  # as DistributedSampler pads
    else:
        assert sorted(flat) == list(range(400))
    assert all(r.shard_remainder == rule for r in ranks)


def test_even_shards_in_a_dataloader_and_grain(tmp_path):
    path = tmp_path / "d.tfrecord"
    data, table = framed([b"%d" % i for i in range(10)])
    path.write_bytes(data)
    (tmp_path / "d.tfrecord.offsets").write_bytes(table)
    source = DataSource(path)
    import torch.utils.data as tud
    counts = []
    for rank in range(4):
        sampler = Sampler(source, seed=1, num_shards=4, shard_index=rank, shard_remainder="pad")
        loader = tud.DataLoader(source, sampler=sampler, batch_size=2, collate_fn=list)
        counts.append(sum(len(b) for b in loader))
    assert counts == [3, 3, 3, 3]
    import tfrecord_lirs.grain as lirs_grain
    lens = [len(lirs_grain.shuffle(source, seed=1, num_shards=4, shard_index=k,
                                   shard_remainder="drop")) for k in range(4)]
    assert lens == [2, 2, 2, 2]


def test_a_bad_remainder_is_named():
    with pytest.raises(InvalidArgumentError, match="shard_remainder must be one of"):
        Sampler(10, shard_remainder="last")


@pytest.mark.parametrize("make, name", [
    (lambda: Sampler(10, shard_index=-1, num_shards=2), "shard_index must be >= 0, got -1"),
    (lambda: Sampler(10, num_shards=0), "num_shards must be >= 1, got 0"),
    (lambda: Sampler(10, seed=2.5), "seed must be an integer, got 2.5"),
    (lambda: Sampler(10, num_shards=True), "num_shards must be an integer, got True"),
    (lambda: Sampler(-3), "source_or_len must be >= 0, got -3"),
    (lambda: Sampler(10).set_epoch(-1), "epoch must be >= 0, got -1"),
])
def test_bad_integers_name_the_parameter(make, name):
    with pytest.raises(InvalidArgumentError, match=name):
        make()


def test_bad_loader_integers_name_the_parameter(tmp_path):
    path = tmp_path / "d.tfrecord"
    data, table = framed([b"x"] * 5)
    path.write_bytes(data)
    (tmp_path / "d.tfrecord.offsets").write_bytes(table)
    for kwargs, says in [({"batch_size": -3}, "batch_size must be >= 1, got -3"),
                         ({"batch_size": 2.5}, "batch_size must be an integer, got 2.5"),
                         ({"shard_index": -1, "num_shards": 2}, "shard_index must be >= 0"),
                         ({"num_shards": 0}, "num_shards must be >= 1, got 0"),
                         ({"seed": -1}, "seed must be >= 0, got -1")]:
        with pytest.raises(InvalidArgumentError, match=says):
            Loader(path, **kwargs)
    assert tfrecord_lirs.errors.InvalidArgumentError is InvalidArgumentError


# Each rank's equal shard of 100 (33 or 34) is split among its 2 workers by batches.
@pytest.mark.parametrize("rule, each", [("drop", 33), ("pad", 34)])
def test_loader_ranks_with_dataloader_workers_get_the_same_count(tmp_path, rule, each):
    path = tmp_path / "d.tfrecord"
    data, table = framed([b"%d" % i for i in range(100)])
    path.write_bytes(data)
    (tmp_path / "d.tfrecord.offsets").write_bytes(table)
    import torch.utils.data as tud
    import tfrecord_lirs.torch as lirs_torch
    got = []
    for rank in range(3):
        loader = lirs_torch.Loader(path, seed=4, batch_size=5, num_shards=3, shard_index=rank,
                                   shard_remainder=rule)
        ids = [int(p) for b in tud.DataLoader(loader, batch_size=None, num_workers=2)
               for p in b]
        assert len(ids) == each
        got += ids
    if rule == "drop":
        assert len(set(got)) == len(got) == 99
    else:
        assert set(got) == set(range(100)) and len(got) == 102
