"""Data refurbishing in PyTorch: RefurbishSampler + RefurbishDataset in a real
DataLoader with worker processes sharing a disk store (docs/FORMAT.md §7)."""

import os
import pickle
import shutil

import numpy as np
import pytest
import torch.utils.data as tud

import tfrecord_lirs
from tfrecord_lirs import errors
from tfrecord_lirs.refurbishing import PartialStore
from tfrecord_lirs.torch import RefurbishDataset, RefurbishSampler

N, BATCH, EPOCHS = 40, 8, 4


@pytest.fixture()
def source(records_source):
    return records_source(N, lambda i: 1 + i % 5)


class Partial:
    """A deterministic random partial augmentation that logs each call (one line per
    call, appended: the worker processes share the file)."""

    def __init__(self, log):
        self.log = str(log)

    def __call__(self, record, seed):
        with open(self.log, "a") as f:
            f.write(f"{record[0]}\n")
        rng = np.random.default_rng(seed)
        return np.frombuffer(record, dtype=np.uint8).sum() + rng.integers(0, 1 << 30, 4)


def final(sample, seed):
    return sample * 3 + np.random.default_rng(seed).integers(0, 1000, 4)


def calls(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


def run(source, tmp_path, name, r, disturb=None, num_workers=2, store_bytes=None):
    """Outputs of every epoch (id → final output) and partial calls per epoch."""
    log = tmp_path / f"{name}.log"
    store = tmp_path / f"{name}-store"
    sampler = RefurbishSampler(source, seed=3, reuse_factor=r, batch_size=BATCH)
    data = RefurbishDataset(source, Partial(log), final, sampler, store=str(store),
                            store_bytes=store_bytes)
    loader = tud.DataLoader(data, sampler=sampler, batch_size=BATCH,
                            num_workers=num_workers, collate_fn=list)
    outputs, per_epoch = [], []
    for epoch in range(EPOCHS):
        if disturb is not None:
            disturb(epoch, data.store)
        sampler.set_epoch(epoch)
        before = calls(log)
        ids = sampler.schedule.epoch(epoch)[0].tolist()
        got = [x for batch in loader for x in batch]
        outputs.append({i: out.tolist() for i, out in zip(ids, got)})
        per_epoch.append(calls(log) - before)
    return outputs, per_epoch, sampler


@pytest.mark.parametrize("r", [2, 3])
def test_partial_runs_once_per_refresh_across_worker_processes(source, tmp_path, r):
    outputs, per_epoch, sampler = run(source, tmp_path, "a", r)
    expected = [sampler.schedule.refreshes(e) for e in range(EPOCHS)]
    assert per_epoch == expected
    assert per_epoch[0] == N
    assert all(abs(c - N / r) <= 1 for c in per_epoch[1:])
    # The final augmentation differs every epoch (fresh seeds), so no output repeats.
    assert all(outputs[0][i] != outputs[1][i] for i in range(N))


def test_outputs_do_not_depend_on_the_store(source, tmp_path):
    reference, _, _ = run(source, tmp_path, "ref", 3)

    def delete_store(epoch, store):
        if epoch == 2:
            shutil.rmtree(store.dir)

    deleted, per_epoch, sampler = run(source, tmp_path, "deleted", 3, delete_store)
    assert deleted == reference
    # Epoch 2's reuses were recomputed (one partial call each), then stored again.
    assert per_epoch[2] == N
    assert per_epoch[3] == sampler.schedule.refreshes(3)

    torn = []

    def tear_an_entry(epoch, store):
        if epoch == 1:
            ids, refresh, generation = sampler.schedule.epoch(1)
            i = next(k for k in range(N) if not refresh[k])
            path = store.entry_path(int(ids[i]), int(generation[i]))
            whole = open(path, "rb").read()
            open(path, "wb").write(whole[:len(whole) // 2])
            torn.append(path)

    with_torn, per_epoch, _ = run(source, tmp_path, "torn", 3, tear_an_entry)
    assert torn and with_torn == reference
    assert per_epoch[1] == sampler.schedule.refreshes(1) + 1


def test_a_second_job_on_the_same_store_computes_nothing_stored(source, tmp_path):
    first, per_epoch, sampler = run(source, tmp_path, "shared", 2)
    # A second job (fresh sampler, dataset and workers) on the first one's store, walking
    # its last epoch: every entry it needs is the first job's.
    log = tmp_path / "second.log"
    second = RefurbishSampler(source, seed=3, reuse_factor=2, batch_size=BATCH)
    data = RefurbishDataset(source, Partial(log), final, second,
                            store=str(tmp_path / "shared-store"))
    second.set_epoch(EPOCHS - 1)
    loader = tud.DataLoader(data, sampler=second, batch_size=BATCH, num_workers=2,
                            collate_fn=list)
    got = [x.tolist() for batch in loader for x in batch]
    ids = second.schedule.epoch(EPOCHS - 1)[0].tolist()
    assert got == [first[-1][i] for i in ids]
    assert calls(log) == 0


def test_the_byte_bound_holds_for_the_whole_store_across_worker_processes(source, tmp_path):
    reference, _, _ = run(source, tmp_path, "unbounded", 3)

    def entries(store):
        return [os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(store)
                for f in files if "." in f and not f.startswith(".")]

    bound = 25 * max(entries(tmp_path / "unbounded-store"))  # under one generation's 40
    on_disk = []

    def measure(epoch, store):
        if epoch > 0:
            on_disk.append(sum(entries(store.dir)))

    bounded, per_epoch, sampler = run(source, tmp_path, "bounded", 3, measure,
                                      store_bytes=bound)
    on_disk.append(sum(entries(tmp_path / "bounded-store")))
    # Two worker processes wrote, each counted in the one ledger: never past the bound
    # (each counting its own would have let the store reach twice it).
    assert on_disk and max(on_disk) <= bound
    assert bounded == reference
    # What did not fit was recomputed.
    assert sum(per_epoch) > sum(sampler.schedule.refreshes(e) for e in range(EPOCHS))


def test_a_batch_fetch_is_the_items_one_by_one(source, tmp_path):
    # DataLoader fetches a batch through `__getitems__` (the core's batch step, which
    # takes a use another job is computing last): the outputs and the partial calls are
    # those of `__getitem__` use by use, over refreshes and reuses of two epochs.
    def dataset(name):
        sampler = RefurbishSampler(source, seed=4, reuse_factor=2, batch_size=BATCH)
        return sampler, RefurbishDataset(source, Partial(tmp_path / f"{name}.log"), final,
                                         sampler, store=str(tmp_path / f"{name}-store"))
    (s1, one), (s2, batched) = dataset("one"), dataset("batched")
    for epoch in range(2):
        s1.set_epoch(epoch)
        s2.set_epoch(epoch)
        uses = list(s1)
        assert uses == list(s2)
        want = [one[u] for u in uses]
        got = [x for k in range(0, len(uses), BATCH)
               for x in batched.__getitems__(uses[k:k + BATCH])]
        assert [w.tolist() for w in want] == [g.tolist() for g in got]
    assert calls(tmp_path / "batched.log") == calls(tmp_path / "one.log") > N
    assert batched.store.stats()["hits"] == one.store.stats()["hits"] > 0


def test_reuse_factor_one_is_the_plain_samplers_order(source):
    sampler = RefurbishSampler(source, seed=9, reuse_factor=1, batch_size=BATCH)
    plain = tfrecord_lirs.Sampler(source, seed=9)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        plain.set_epoch(epoch)
        uses = list(sampler)
        assert [u[0] for u in uses] == list(plain)
        assert all(u[1] and u[2] == epoch == u[3] for u in uses)


def test_state_dict_resumes_exactly(source):
    sampler = RefurbishSampler(source, seed=4, reuse_factor=2, batch_size=BATCH)
    sampler.set_epoch(3)
    full = list(sampler)
    state = sampler.state_dict(consumed=16)
    assert state["epoch"] == 3 and state["position"] == 16
    assert state["reuse_factor"] == 2 and state["refurbish_schedule_version"] == 1
    again = RefurbishSampler(source, seed=4, reuse_factor=2, batch_size=BATCH)
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert list(again) == full[16:]
    # The epoch walked to its end, the next iteration walks the next one.
    assert list(again) == [(i, f, g, 4) for i, f, g in zip(
        *(a.tolist() for a in again.schedule.epoch(4)))]
    other = RefurbishSampler(source, seed=4, reuse_factor=3, batch_size=BATCH)
    with pytest.raises(errors.InvalidArgumentError, match="reuse_factor"):
        other.load_state_dict(state)


def test_wrong_use_gets_clear_errors(source, tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match="reuse_factor"):
        RefurbishSampler(source, reuse_factor=0)
    sampler = RefurbishSampler(source, seed=1, reuse_factor=2, batch_size=BATCH)

    def unpicklable(record, seed):
        return lambda: record

    data = RefurbishDataset(source, unpicklable, final, sampler)
    with pytest.raises(errors.InvalidArgumentError, match="cannot be stored"):
        next(iter(tud.DataLoader(data, sampler=sampler, batch_size=BATCH, num_workers=0,
                                 collate_fn=list)))
    # A store of another dataset: its own namespace, never its entries; a namespace
    # given as the store, or a namespace of another identity, is refused.
    store = tmp_path / "s"
    a = PartialStore(str(store), "a", "p", 1)
    a.put(0, 0, b"of a")
    b = PartialStore(str(store), "b", "p", 1)
    assert b.get(0, 0) is None and a.get(0, 0) == b"of a"
    with pytest.raises(errors.InvalidArgumentError, match="give its parent"):
        RefurbishDataset(source, Partial(tmp_path / "l"), final, sampler, store=a.dir)
    with pytest.raises(errors.InvalidArgumentError, match="empty path"):
        RefurbishDataset(source, Partial(tmp_path / "l"), final, sampler, store="")
    with open(os.path.join(a.dir, "IDENTITY"), "w") as f:
        f.write("another")
    with pytest.raises(errors.InvalidArgumentError, match="another dataset"):
        PartialStore(str(store), "a", "p", 1).stats()


def test_augment_dataset_runs_in_worker_processes_with_or_without_a_share(source, tmp_path):
    """The plain case (`AugmentDataset`: reuse_factor 1, no final augmentation): sample
    `id` of epoch `e` is `augment(record, partial_seed(seed, id, e))`, once per use;
    without `share` the store is in memory and keeps nothing, so worker processes lose
    nothing by it (a memory store is refused only when outputs are reused)."""
    from tfrecord_lirs.torch import AugmentDataset

    for share in (None, str(tmp_path / "share")):
        log = tmp_path / f"{share is None}.log"
        data = AugmentDataset(source, Partial(log), seed=3, batch_size=BATCH, share=share)
        loader = tud.DataLoader(data, sampler=data.sampler, batch_size=BATCH,
                                num_workers=2, collate_fn=list)
        for epoch in range(2):
            data.sampler.set_epoch(epoch)
            got = [x.tolist() for batch in loader for x in batch]
            ids = data.sampler.schedule.epoch(epoch)[0].tolist()
            augment = Partial(tmp_path / "reference.log")
            assert got == [augment(source[i], tfrecord_lirs.refurbishing.partial_seed(
                3, i, epoch)).tolist() for i in ids]
        assert calls(log) == 2 * N
