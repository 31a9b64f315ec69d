"""tfrecord_lirs.RefurbishSchedule: the core's refurbish schedule (docs/FORMAT.md §7)
through the extension, as numpy arrays."""

import pickle

import numpy as np
import pytest

import tfrecord_lirs
from tfrecord_lirs import errors
from tfrecord_lirs.refurbishing import final_seed, partial_seed


@pytest.mark.parametrize("order_version", [1, 2])
@pytest.mark.parametrize("num_shards,shard_index", [(1, 0), (3, 2)])
def test_reuse_factor_one_is_the_samplers_order(order_version, num_shards, shard_index):
    n = 103
    schedule = tfrecord_lirs.RefurbishSchedule(n, seed=7, reuse_factor=1, batch_size=10,
                                               num_shards=num_shards,
                                               shard_index=shard_index,
                                               order_version=order_version)
    sampler = tfrecord_lirs.Sampler(n, seed=7, num_shards=num_shards,
                                    shard_index=shard_index, order_version=order_version)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        ids, refresh, generation = schedule.epoch(epoch)
        assert ids.tolist() == list(sampler.order())
        assert refresh.all() and (generation == epoch).all()


def test_epochs_are_balanced_and_batches_hold_their_share():
    n, r, batch = 101, 3, 8
    schedule = tfrecord_lirs.RefurbishSchedule(n, seed=5, reuse_factor=r, batch_size=batch)
    assert len(schedule) == n and schedule.version == 1
    last = {}
    for epoch in range(7):
        ids, refresh, generation = schedule.epoch(epoch)
        assert ids.dtype == np.uint64 and refresh.dtype == bool
        assert sorted(ids.tolist()) == list(range(n))
        m = int(refresh.sum())
        assert m == schedule.refreshes(epoch)
        assert m == n if epoch == 0 else m in (n // r, -(-n // r))
        for b in range(0, n, batch):
            k = int(refresh[b:b + batch].sum())
            assert abs(k * n - m * len(refresh[b:b + batch])) < n
        for i, f, g in zip(ids.tolist(), refresh.tolist(), generation.tolist()):
            assert g == (epoch if f else last[i])
            assert schedule.generation(i, epoch) == g
            last[i] = g
    # A resume: from any position, the rest of the epoch.
    ids, refresh, generation = schedule.epoch(4)
    rest = schedule.epoch(4, start=37)
    assert rest[0].tolist() == ids[37:].tolist()
    assert rest[1].tolist() == refresh[37:].tolist()
    assert schedule.epoch(4, start=37, count=5)[0].tolist() == ids[37:42].tolist()
    # Pickled (a DataLoader worker gets a copy): the same schedule.
    again = pickle.loads(pickle.dumps(schedule))
    assert again.epoch(4)[0].tolist() == ids.tolist()


def test_a_source_gives_its_length(tmp_path):
    path = tmp_path / "d.tfrecord"
    with tfrecord_lirs.PaddedWriter(str(path)) as w:
        for i in range(12):
            w.write(b"x" * i)
    source = tfrecord_lirs.DataSource([str(path)])
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=1, reuse_factor=2, batch_size=4)
    assert len(schedule) == 12


@pytest.mark.parametrize("bad", [0, 0.5, 1.5, -1])
def test_a_wrong_reuse_factor_is_refused_naming_it(bad):
    with pytest.raises(errors.InvalidArgumentError, match="reuse_factor"):
        tfrecord_lirs.RefurbishSchedule(10, reuse_factor=bad)


def test_wrong_arguments_are_refused():
    with pytest.raises(TypeError, match="reuse_factor"):
        tfrecord_lirs.RefurbishSchedule(10, reuse_factor="2")
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        tfrecord_lirs.RefurbishSchedule(10, reuse_factor=2, batch_size=0)
    with pytest.raises(errors.InvalidArgumentError, match="batch_size"):
        tfrecord_lirs.RefurbishSchedule(10, reuse_factor=2, batch_size=-3)
    with pytest.raises(errors.InvalidArgumentError, match="shard_index"):
        tfrecord_lirs.RefurbishSchedule(10, num_shards=2, shard_index=2)
    with pytest.raises(TypeError, match="n_or_source"):
        tfrecord_lirs.RefurbishSchedule("ten")


def test_defaults_are_the_cores():
    options = tfrecord_lirs.RefurbishSchedule(10).options
    defaults = tfrecord_lirs._lirs.defaults()
    assert options["reuse_factor"] == defaults["reuse_factor"] == 1
    assert options["batch_size"] == defaults["batch_size"]


def test_seeds_are_the_cores_golden_values():
    # docs/FORMAT.md §7's golden values.
    assert partial_seed(42, 7, 3) == 1845879215478875613
    assert final_seed(42, 7, 3) == 9869551858472380167
