"""Data refurbishing (Revamper, USENIX ATC '21): reuse each sample's partially
augmented version for `reuse_factor` epochs, running only the final augmentation on a
reuse (docs/FORMAT.md §7).

    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=42, reuse_factor=3,
                                               batch_size=256)
    ids, refresh, generation = schedule.epoch(1)   # numpy arrays, delivery order

The schedule, the augmentation seeds and every rule are the Rust core's
(tfrecord_lirs._lirs.NativeRefurbishSchedule); this module converts types only.
"""

import operator
import os
import pickle

from tfrecord_lirs import _checks, _lirs, errors
from tfrecord_lirs.sources import DataSource


def _length(n_or_source):
    if isinstance(n_or_source, DataSource):
        return len(n_or_source)
    try:
        return operator.index(n_or_source)
    except TypeError:
        raise TypeError(
            f"n_or_source must be a DataSource or a number of instances, got {n_or_source!r}"
        ) from None


def _reuse_factor(reuse_factor):
    """The extension takes a number (the core refuses fractional ones, naming
    `reuse_factor`); a bool or a str is a TypeError (the core's type rule)."""
    if reuse_factor is None:
        return None
    _checks.check_argument("reuse_factor", reuse_factor)
    return float(reuse_factor)


class RefurbishSchedule:
    """Per epoch: the ids of this shard in delivery order, whether each is a refresh
    (read, partially augmented, stored) or a reuse (the stored partial output), and its
    generation (the epoch of its last refresh).

    Epoch 0 refreshes every id; from epoch 1, `floor` or `ceil(n / reuse_factor)` ids
    are refreshed per epoch, each id exactly every `reuse_factor` epochs, and every
    batch of `batch_size` holds its share of them (within ±1). `reuse_factor=1` is the
    plain epoch order of `Sampler` (same seed, shard and `order_version`). With
    `num_shards > 1` (and `reuse_factor > 1`) a shard keeps a fixed set of ids every
    epoch, so its stored entries stay its own. Arguments left None take the core's
    defaults (seed 0, reuse_factor 1, batch_size 256, one shard, order_version 1).
    """

    def __init__(self, n_or_source, seed=None, reuse_factor=None, batch_size=None,
                 num_shards=None, shard_index=None, order_version=None):
        self._n = _length(n_or_source)
        self._native = _lirs.NativeRefurbishSchedule(
            self._n, seed, _reuse_factor(reuse_factor), batch_size, num_shards,
            shard_index, order_version)

    @property
    def options(self):
        """The options in effect, as keyword arguments."""
        return dict(self._native.options())

    @property
    def version(self):
        """The schedule algorithm's version (docs/FORMAT.md §7)."""
        return _lirs.REFURBISH_SCHEDULE_VERSION

    def __len__(self):
        return self._native.len()

    def locate(self, index):
        """`(epoch, position)` of global index `index`, the epochs laid end to end
        (the core's rule; an error when the shard has no ids)."""
        return self._native.locate(index)

    def refreshes(self, epoch):
        """Refreshes in `epoch`."""
        return self._native.refreshes(epoch)

    def check_state(self, state):
        """Checks a saved refurbish state (a dict with the schedule version, the
        options and `position`) against this schedule (the core's rule)."""
        self._native.check_state(dict(state))

    def replaced_generation(self, id, generation):
        """The generation whose entry a refresh of `id` at epoch `generation` makes
        over (None at epoch 0)."""
        return self._native.replaced_generation(id, generation)

    def generation(self, id, epoch):
        """The generation of `id` at `epoch` (None: another shard's id)."""
        return self._native.generation(id, epoch)

    def epoch(self, epoch, start=0, count=None):
        """`(ids, refresh, generation)` of `epoch` from position `start` (up to
        `count`): numpy arrays of uint64, bool and uint64, in delivery order."""
        import numpy as np

        ids, refresh, generation = self._native.epoch(epoch, start, count)
        return (np.frombuffer(bytearray(ids), dtype="<u8"),
                np.frombuffer(bytearray(refresh), dtype=np.uint8).astype(bool),
                np.frombuffer(bytearray(generation), dtype="<u8"))

    def __getstate__(self):
        return {"n": self._n, "options": self.options}

    def __setstate__(self, state):
        self.__init__(state["n"], **state["options"])


def partial_seed(seed, id, generation):
    """The seed of the partial augmentation of `id` refreshed at epoch `generation`
    (the same for every use of that generation)."""
    return _lirs.partial_seed(seed, id, generation)


def final_seed(seed, id, epoch):
    """The seed of the final augmentation of `id` at `epoch` (new every epoch)."""
    return _lirs.final_seed(seed, id, epoch)


def stateless_seed_pair(seed):
    """An augmentation seed (`partial_seed`, `final_seed`) as the `(high, low)` pair
    TensorFlow's stateless random ops take as `int64[2]` (docs/FORMAT.md §7)."""
    return _lirs.stateless_seed_pair(seed)




class PartialStore:
    """The store of partially augmented samples (the Rust core's `PartialStore`): in
    this process's memory (`path=None`; with DataLoader workers each worker would
    have its own, so give a directory) or under the directory `path` (shared by every
    worker process, a restarted job and a concurrent job with the same dataset,
    partial function and seed; e.g. under /dev/shm for memory speed). Jobs that use
    one directory at the same time share the work: each entry is computed by the
    first process that claims it, the others wait for it (a claim dies with its
    process, so a killed job never blocks the rest). Entries are
    checksummed bytes keyed by (dataset, partial, seed, id, generation); a missing,
    torn or corrupt one reads as None (the caller recomputes). `store_bytes`: the
    bound of the whole store, every process's entries counted (None: the core's
    default); over it the oldest generations make room, and a put that still does not
    fit, or meets a full disk, is not stored (the next use recomputes). Picklable: a
    copy re-opens the store lazily.
    """

    def __init__(self, path, dataset, partial, seed=None, store_bytes=None):
        self._args = (None if path is None else os.fsdecode(path), str(dataset),
                      str(partial), seed, store_bytes)
        self._native = None

    def _store(self):
        if self._native is None:
            self._native = _lirs.NativePartialStore(*self._args)
        return self._native

    def check_worker_process(self, reuse_factor=None):
        """Raises `InvalidArgumentError` if this store cannot serve a DataLoader worker
        process: one in memory, unless `reuse_factor` is 1 (nothing is reused)."""
        self._store().check_worker_process(reuse_factor)

    @property
    def dir(self):
        """The directory of this dataset's entries (None in memory)."""
        return self._store().dir()

    def entry_path(self, id, generation):
        """The file of entry (id, generation) (None in memory)."""
        return self._store().entry_path(id, generation)

    def get(self, id, generation):
        """The stored bytes of (id, generation), or None."""
        return self._store().get(id, generation)

    def put(self, id, generation, payload, over=None, recompute=False):
        """Stores `payload`; removes the id's entry of generation `over`. Returns
        whether it was stored."""
        return self._store().put(id, generation, payload, over, recompute)

    def stats(self):
        """The counters: bytes (the store's), and this process's hits, misses,
        corrupt, refreshes, recomputes (the partial outputs it computed), unstored,
        evicted, shared (refreshes it took from another job on the store), waits (for
        another process's claim on an entry) and taken_over (claims of a process that
        died)."""
        return dict(self._store().stats())

    def __getstate__(self):
        return {"args": self._args}

    def __setstate__(self, state):
        self._args = state["args"]
        self._native = None


class Refurbisher:
    """Runs `partial(record, seed)` on a refresh (and on a reuse whose stored entry
    is lost), stores its output, and `final(sample, seed)` on every use (None: the
    stored sample as it is); the seeds are
    the core's `partial_seed(seed, id, generation)` and `final_seed(seed, id, epoch)`,
    so a lost entry is recomputed to the same output (for deterministic functions).
    The step (look up, compute, store or not, count) is the core's
    (`_lirs.NativeRefurbisher`); `partial` and the serializer are its callbacks.

    `serializer`: `(dumps, loads)` between the partial output and the stored bytes
    (None: pickle, protocol 5). The front ends (`tfrecord_lirs.torch.RefurbishDataset`)
    call `use(id, refresh, generation, epoch)` with one position of the schedule.
    Picklable: a copy makes its core step again lazily (in a worker process).
    """

    def __init__(self, read, partial, final, schedule, store, serializer=None):
        _check_functions(partial, final)
        self._read, self._partial, self._final = read, partial, final
        self._schedule, self._store = schedule, store
        self._dumps, self._loads = serializer or (_pickle_dumps, pickle.loads)
        self._native = None

    def _step(self):
        if self._native is None:
            self._native = _lirs.NativeRefurbisher(self._schedule._native,
                                                   self._store._store())
        return self._native

    def _compute(self, id, seed):
        sample = self._partial(self._read(id), seed)
        try:
            payload = self._dumps(sample)
        except Exception as e:
            raise errors.InvalidArgumentError(
                f"the partial function's output for id {id} cannot be stored "
                f"({type(e).__name__}: {e}); return picklable values (numpy arrays, "
                f"tensors, bytes) or pass serializer=(dumps, loads)") from e
        return sample, payload

    def use(self, id, refresh, generation, epoch):
        """The final output of `id` at `epoch`."""
        id, generation, epoch = int(id), int(generation), int(epoch)
        step = self._step()
        sample = step.partial(id, bool(refresh), generation, epoch,
                              lambda seed: self._compute(id, seed), self._loads)
        if self._final is None:
            return sample
        return self._final(sample, step.final_seed(id, epoch))

    def uses(self, uses):
        """The final outputs of a batch of `(id, refresh, generation, epoch)` uses, in
        its order; a use that another job sharing the store is computing is taken
        after the batch's others (the core's batch step), so jobs in step split a
        batch rather than wait for each other's entries in turn."""
        uses = [(int(i), bool(r), int(g), int(e)) for i, r, g, e in uses]
        step = self._step()
        samples = step.partials(uses, lambda k, seed: self._compute(uses[k][0], seed),
                                self._loads)
        if self._final is None:
            return samples
        return [self._final(sample, step.final_seed(id, epoch))
                for sample, (id, _, _, epoch) in zip(samples, uses)]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_native"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


def _function_name(fn):
    """A callable's module and qualified name (of its class for a callable object)."""
    named = fn if hasattr(fn, "__qualname__") else type(fn)
    return f"{named.__module__}.{named.__qualname__}"


def _store_dataset_id(source):
    paths = getattr(source, "paths", None)
    if paths is None:
        raise TypeError("give dataset_id= (a name of the data) for a source other than "
                        "tfrecord_lirs.DataSource")
    return _lirs.store_dataset_id([os.fsdecode(p) for p in paths], len(source))


def open_store(store, source, partial, seed, dataset_id=None, partial_name=None,
               store_bytes=None):
    """`store` if it is a `PartialStore`, else the store under the directory `store`
    (None: in memory) keyed by `dataset_id` (None: the source's absolute paths and
    length), `partial_name` (None: the partial function's module and qualified name)
    and `seed`."""
    if isinstance(store, PartialStore):
        return store
    name = partial_name or _function_name(partial)
    identity = dataset_id if dataset_id is not None else _store_dataset_id(source)
    return PartialStore(store, identity, name, seed, store_bytes)


def _check_functions(partial, final):
    if not callable(partial) or not (final is None or callable(final)):
        raise TypeError("partial must be a callable partial(record, seed) and final a "
                        "callable final(sample, seed) or None")


def _pickle_dumps(value):
    return pickle.dumps(value, protocol=5)


__all__ = ["PartialStore", "RefurbishSchedule", "Refurbisher", "final_seed", "open_store",
           "partial_seed", "stateless_seed_pair"]
