"""Data refurbishing in Grain: `tfrecord_lirs.grain.refurbish` as a MapDataset, driven
by the core's refurbish schedule (docs/FORMAT.md §7)."""

import os
import shutil

import numpy as np
import pytest

import tfrecord_lirs
from tfrecord_lirs import errors

grain = pytest.importorskip("grain")
from tfrecord_lirs import grain as lirs_grain  # noqa: E402

N, BATCH, EPOCHS = 30, 6, 4


@pytest.fixture()
def source(records_source):
    return records_source(N, lambda i: 2 + i % 3)


class Partial:
    def __init__(self, log):
        self.log = str(log)

    def __call__(self, record, seed):
        with open(self.log, "a") as f:
            f.write(f"{record[0]}\n")
        return int(record[0]) * 1000 + int(np.random.default_rng(seed).integers(0, 1000))


def final(sample, seed):
    return (sample, int(np.random.default_rng(seed).integers(0, 1 << 20)))


def calls(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


def test_grain_refurbish_calls_partial_once_per_refresh(source, tmp_path):
    log = tmp_path / "p.log"
    ds = lirs_grain.refurbish(source, Partial(log), final, seed=5, reuse_factor=3,
                              batch_size=BATCH, store=str(tmp_path / "store"))
    assert len(ds) == N
    outputs = []
    for epoch in range(EPOCHS):
        before = calls(log)
        outputs.append([ds[epoch * N + i] for i in range(N)])
        assert calls(log) - before == ds.schedule.refreshes(epoch)
        ids = ds.schedule.epoch(epoch)[0].tolist()
        assert [o[0] // 1000 for o in outputs[-1]] == ids
    # The same through Grain's repeat (index // len is the epoch), batching and an
    # iterator with prefetch threads, on a store deleted first: the same elements (the
    # store is a memo).
    shutil.rmtree(ds.store.dir)
    again = lirs_grain.refurbish(source, Partial(tmp_path / "q.log"), final, seed=5,
                                 reuse_factor=3, batch_size=BATCH,
                                 store=str(tmp_path / "store"))
    it = again.repeat(EPOCHS).batch(BATCH, batch_fn=list).to_iter_dataset(
        grain.ReadOptions(num_threads=4, prefetch_buffer_size=8))
    got = [x for batch in it for x in batch]
    assert got == [x for epoch in outputs for x in epoch]


def test_grain_refurbish_batch_read_is_the_items_one_by_one(source, tmp_path):
    # Grain's batch read (`_getitems`) goes through the core's batch step: the outputs
    # and partial calls are those of `__getitem__` index by index, over refreshes and
    # reuses, batches crossing an epoch's end included.
    def dataset(name):
        return lirs_grain.refurbish(source, Partial(tmp_path / f"{name}.log"), final,
                                    seed=5, reuse_factor=2, batch_size=BATCH,
                                    store=str(tmp_path / f"{name}-store"))
    one, batched = dataset("one"), dataset("batched")
    indices = list(range(3 * N))
    want = [one[i] for i in indices]
    got = [x for k in range(0, len(indices), 7) for x in batched._getitems(indices[k:k + 7])]
    assert got == want
    assert calls(tmp_path / "batched.log") == calls(tmp_path / "one.log") > N
    assert batched.store.stats()["hits"] == one.store.stats()["hits"] > 0


def test_grain_refurbish_wrong_use(source, tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match="reuse_factor"):
        lirs_grain.refurbish(source, Partial(tmp_path / "l"), final, seed=1, reuse_factor=1.5)
    with pytest.raises(TypeError, match="DataSource"):
        lirs_grain.refurbish([b"x"], Partial(tmp_path / "l"), final, seed=1)


def test_grain_refurbish_indices_are_located_by_the_core(records_source, tmp_path):
    # Global index -> (epoch, position) is the core's rule (the schedule's locate), the
    # same as the Sampler's: an empty shard is an error naming it, not a ZeroDivisionError.
    source = records_source(3, lambda i: 2)
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=1, num_shards=2, shard_index=1)
    assert [schedule.locate(i) for i in (0, 3)] == [divmod(i, len(schedule)) for i in (0, 3)]
    empty = tfrecord_lirs.RefurbishSchedule(1, seed=1, num_shards=2, shard_index=0)
    assert len(empty) == 0
    with pytest.raises(errors.InvalidArgumentError, match="no instances"):
        empty.locate(0)
    one = records_source(1, lambda i: 2)
    ds = lirs_grain.refurbish(one, Partial(tmp_path / "l"), final, seed=1,
                              num_shards=2, shard_index=0)
    assert len(ds) == 0
    with pytest.raises(errors.InvalidArgumentError, match="no instances"):
        ds[0]


def test_grain_worker_processes_share_the_store(source, tmp_path):
    ds = lirs_grain.refurbish(source, Partial(tmp_path / "a.log"), final, seed=8,
                              reuse_factor=2, batch_size=BATCH)
    expected = [ds[i] for i in range(EPOCHS * N)]
    log = tmp_path / "b.log"
    shared = lirs_grain.refurbish(source, Partial(log), final, seed=8, reuse_factor=2,
                                  batch_size=BATCH, store=str(tmp_path / "store"))
    it = shared.repeat(EPOCHS).to_iter_dataset().mp_prefetch(
        grain.MultiprocessingOptions(num_workers=2))
    assert list(it) == expected
    # Two processes: a reuse whose refresh the other worker is computing waits for it
    # (its claim), one whose refresh the other has not come to is computed here and
    # found by the other: every (id, generation) computed once in all.
    refreshes = sum(shared.schedule.refreshes(e) for e in range(EPOCHS))
    assert calls(log) == refreshes


def test_grain_augment_pipelines_sharing_a_directory_augment_each_sample_once(
        source, tmp_path):
    log, share = tmp_path / "a.log", str(tmp_path / "share")
    jobs = [lirs_grain.augment(source, Partial(log), seed=5, batch_size=BATCH, share=share)
            for _ in range(3)]
    # Three pipelines read side by side, each by Grain's prefetch threads.
    iters = [iter(job.repeat(2).to_iter_dataset(
        grain.ReadOptions(num_threads=4, prefetch_buffer_size=8))) for job in jobs]
    got = [[] for _ in jobs]
    for _ in range(2 * N):
        for out, it in zip(got, iters):
            out.append(next(it))
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=5, batch_size=BATCH)
    expected = []
    for epoch in range(2):
        for i in schedule.epoch(epoch)[0].tolist():
            seed = tfrecord_lirs.refurbishing.partial_seed(5, i, epoch)
            expected.append(i * 1000 + int(np.random.default_rng(seed).integers(0, 1000)))
    assert got == [expected] * 3
    assert calls(log) == 2 * N  # once per sample and epoch, in all
    assert sum(job.store.stats()["shared"] for job in jobs) == 2 * 2 * N
