"""The refurbish sampler's epochs with no call: each DataLoader epoch (worker processes,
persistent or not) walks the next epoch's schedule, as `tfrecord_lirs.Sampler` does;
`set_epoch` still picks one; a state (also one saved by earlier releases) restores
exactly, and the epochs go on from it."""

import pickle

import numpy as np
import pytest
import torch.utils.data as tud

from tfrecord_lirs.refurbishing import partial_seed
from tfrecord_lirs.torch import AugmentDataset, RefurbishDataset, RefurbishSampler

N, BATCH, SEED = 24, 6, 5


@pytest.fixture()
def source(records_source):
    return records_source(N, lambda i: 1 + i % 4)


def partial(record, seed):
    return np.array([record[0], seed % 1000], dtype=np.int64)


def final(sample, seed):
    return sample * 10 + np.random.default_rng(seed).integers(0, 10, 2)


def loader(data, sampler, num_workers=2, persistent=False, context=None):
    return tud.DataLoader(data, sampler=sampler, batch_size=BATCH, num_workers=num_workers,
                          persistent_workers=persistent and num_workers > 0,
                          multiprocessing_context=context if num_workers else None,
                          collate_fn=list)


def epoch_of(loader):
    return [x.tolist() for batch in loader for x in batch]


def refurbish(source, store):
    sampler = RefurbishSampler(source, seed=SEED, reuse_factor=2, batch_size=BATCH)
    return sampler, RefurbishDataset(source, partial, final, sampler, store=str(store))


def reference(source, tmp_path, epochs):
    """What `set_epoch(e)` before each epoch gives (one process)."""
    sampler, data = refurbish(source, tmp_path / "reference-store")
    out = []
    for e in epochs:
        sampler.set_epoch(e)
        out.append(epoch_of(loader(data, sampler, num_workers=0)))
    return out


@pytest.mark.parametrize("persistent", [False, True])
def test_refurbish_epochs_move_on_with_no_set_epoch(source, tmp_path, persistent):
    sampler, data = refurbish(source, tmp_path / "store")
    dl = loader(data, sampler, persistent=persistent)
    got = []
    for _ in range(3):
        got.append(epoch_of(dl))
    assert got == reference(source, tmp_path, range(3))
    assert got[0] != got[1] != got[2] != got[0]
    assert sampler.epoch == 3
    # set_epoch still picks the epoch; the epochs go on from it.
    sampler.set_epoch(7)
    assert [epoch_of(dl), epoch_of(dl)] == reference(source, tmp_path, [7, 8])


@pytest.mark.parametrize("persistent,context", [(False, None), (True, None),
                                                (True, "spawn")])
def test_augment_dataset_samples_differ_by_epoch_with_no_set_epoch(source, tmp_path,
                                                                   persistent, context):
    """Spawned workers get the dataset pickled, its sampler (the core's) with it."""
    data = AugmentDataset(source, partial, seed=SEED, batch_size=BATCH,
                          share=str(tmp_path / "share"))
    dl = loader(data, data.sampler, persistent=persistent, context=context)
    for e in range(3):
        ids = data.sampler.schedule.epoch(e)[0].tolist()
        assert epoch_of(dl) == [partial(bytes([i]), partial_seed(SEED, i, e)).tolist()
                                for i in ids]
    assert data.sampler.epoch == 3
    # A sampler that is told the epoch gives the same samples.
    told = AugmentDataset(source, partial, seed=SEED, batch_size=BATCH,
                          share=str(tmp_path / "share"))
    told.sampler.set_epoch(2)
    expected = [partial(bytes([i]), partial_seed(SEED, i, 2)).tolist()
                for i in told.sampler.schedule.epoch(2)[0].tolist()]
    assert epoch_of(loader(told, told.sampler, num_workers=0)) == expected


def test_a_state_taken_mid_epoch_restores_exactly_and_the_epochs_go_on(source, tmp_path):
    sampler, data = refurbish(source, tmp_path / "store")
    dl = loader(data, sampler)
    epoch_of(dl)                                  # epoch 0, no set_epoch
    taken = []
    for batch in dl:                              # epoch 1: stop after two batches
        taken += [x.tolist() for x in batch]
        if len(taken) == 2 * BATCH:
            break
    state = sampler.state_dict(consumed=len(taken))
    assert (state["epoch"], state["position"]) == (1, 2 * BATCH)
    assert pickle.loads(pickle.dumps(sampler)).state_dict() == sampler.state_dict()

    again, data = refurbish(source, tmp_path / "store")
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    dl = loader(data, again)
    expected = reference(source, tmp_path, [1, 2])
    assert taken + epoch_of(dl) == expected[0]
    assert epoch_of(dl) == expected[1]
    assert again.epoch == 3


def test_a_state_saved_by_earlier_releases_restores(source):
    """The dict a RefurbishSampler saved before its state was the core's."""
    old = {"refurbish_schedule_version": 1, "seed": SEED, "reuse_factor": 2,
           "batch_size": BATCH, "num_shards": 1, "shard_index": 0, "order_version": 1,
           "epoch": 3, "position": 10}
    sampler = RefurbishSampler(source, seed=SEED, reuse_factor=2, batch_size=BATCH)
    sampler.load_state_dict(old)
    assert sampler.state_dict() == old
    ids, refresh, generation = sampler.schedule.epoch(3, 10)
    assert list(sampler) == [(i, f, g, 3) for i, f, g in zip(
        ids.tolist(), refresh.tolist(), generation.tolist())]
    # A walk begun and dropped costs no epoch; one walked to its end moves it on.
    iter(sampler)
    walk = iter(sampler)
    next(walk)
    assert sampler.state_dict()["position"] == 1 and sampler.epoch == 4
    assert [u[3] for u in walk] == [4] * (N - 1)
    assert sampler.epoch == 5 and sampler.state_dict()["position"] == 0
