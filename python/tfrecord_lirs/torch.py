"""`tfrecord_lirs.Loader` as a PyTorch `IterableDataset` (needs `torch`; no TensorFlow).

    loader = tfrecord_lirs.torch.Loader(paths, seed=42, batch_size=256)
    data = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2)
    for epoch in range(3):
        for batch in data:            # list[bytes]; each worker reads its own share
            ...                       # of a fresh permutation every epoch

In each worker process the Loader reads the batches `i` of its shard's epoch with
`i % num_workers == worker_id` (the Rust core's rule), so the workers together read
every instance of the epoch exactly once, in the same batches for any number of
workers, and `len(data)` is the batches per epoch. `state_dict`/`load_state_dict` follow
torchdata's `StatefulDataLoader`, which calls them in each worker.

Data refurbishing (docs/FORMAT.md §7): a `RefurbishSampler` (the schedule: which id is
refreshed or reused at each position) and a `RefurbishDataset` (runs the partial
augmentation on a refresh, stores it, and the final one on every use):

    sampler = tfrecord_lirs.torch.RefurbishSampler(source, seed=42, reuse_factor=3,
                                                   batch_size=256)
    data = tfrecord_lirs.torch.RefurbishDataset(source, partial=crop_flip,
                                                final=rand_augment, sampler=sampler,
                                                store="/dev/shm/partials")
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=256,
                                         num_workers=2)
    for epoch in range(90):           # each walks the next epoch's schedule
        for batch in loader:
            ...
"""

import numpy as _np
import torch as _torch
import torch.utils.data as _tud
from torch.utils.data._utils import collate as _collate

from tfrecord_lirs import _lirs
from tfrecord_lirs import errors as _errors
from tfrecord_lirs import example as _example
from tfrecord_lirs import loader as _loader
from tfrecord_lirs._processes import worker as _worker
from tfrecord_lirs.refurbishing import (RefurbishSchedule, Refurbisher, _check_functions,
                                        open_store)


class Loader(_loader.Loader, _tud.IterableDataset):
    """`tfrecord_lirs.Loader` that PyTorch's DataLoader takes as an `IterableDataset`
    (use `batch_size=None`: the batches are the Loader's).

    Every iteration of the DataLoader is a fresh permutation with no call:
    `set_epoch(e)` picks the epoch the next iteration walks, as with
    `DistributedSampler`, but is not needed. With worker processes (`num_workers > 0`,
    persistent or not, forked or spawned) every iteration walks the epoch after the
    one the iteration before walked, even when that one was cut short: the workers'
    copies share their epochs with this one (a small file in memory, the core's
    `WorkerEpochs`). In this process (`num_workers=0`) the epoch moves on when an
    iteration is walked to its end, as for `tfrecord_lirs.Loader`.

    In a `torch.distributed` process group (DDP, `torchrun`) `num_shards` and
    `shard_index` default to the world size and the rank, and `shard_remainder` to
    "pad", as `DistributedSampler` does: every rank runs the same number of steps.
    `len()` is the number of batches the DataLoader yields per epoch on this rank
    (for tqdm and learning-rate schedules), whatever its `num_workers`: the workers
    split the rank's epoch by whole batches (worker `w` of `W` takes batches `i` with
    `i % W == w`), so only the epoch's last batch is short (dropped with
    `drop_remainder=True`).

    The state is then in the workers: resume exactly with torchdata's
    `StatefulDataLoader`, whose `state_dict()` holds each worker's
    `Loader.state_dict()` and whose `load_state_dict()` restores each in its worker.
    This (main-process) copy's `state_dict()` is then an `InvalidArgumentError`
    saying so, not the start of an epoch it never walked.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._native.share_epochs()

    def __iter__(self):
        return map(Batch, super().__iter__())

    def __len__(self):
        return self._native.batches_per_epoch()


class Batch(list):
    """A batch of `Loader` (payloads, a list). A DataLoader given a `batch_size` over a
    Loader would collate several batches into one (a transposed list of tuples):
    that is refused, naming the fix."""


def _refuse_batches_of_batches(batch, *, collate_fn_map=None):
    raise _errors.InvalidArgumentError(
        "the DataLoader was given a batch_size, but tfrecord_lirs.torch.Loader yields "
        "batches already (its own batch_size): give the DataLoader batch_size=None")


# torch's default collate looks up the element's type here before its generic cases.
_collate.default_collate_fn_map[Batch] = _refuse_batches_of_batches


class ExampleCollate(_example.ParseExample):
    """A `collate_fn` that decodes a batch of serialized `tf.train.Example`s with
    `tfrecord_lirs.parse_example(records, features)`, numbers as torch tensors (a
    `Ragged` of tensors for a variable-length feature) and bytes as numpy object
    arrays. Picklable, so DataLoader worker processes take it under `spawn`:

        collate = tfrecord_lirs.torch.ExampleCollate(FEATURES)
        data = torch.utils.data.DataLoader(source, batch_size=32, collate_fn=collate,
                                           num_workers=2, multiprocessing_context="spawn")
    """

    def __call__(self, records):
        return {name: _tensors(value) for name, value in super().__call__(records).items()}


def _tensors(value):
    if isinstance(value, _example.Ragged):
        return _example.Ragged(_tensors(value.values), _tensors(value.row_lengths))
    if isinstance(value, _np.ndarray) and value.dtype != object:
        return _torch.from_numpy(value)
    return value


class RefurbishSampler(_tud.Sampler):
    """The refurbish schedule as a PyTorch `Sampler`: yields `(id, refresh,
    generation, epoch)` for a `RefurbishDataset`, in the core's delivery order (see
    `tfrecord_lirs.RefurbishSchedule`; give the DataLoader the same `batch_size`, so
    every batch holds its share of refreshes). Each iteration walks the current epoch
    (`epoch`); once it has handed out the whole epoch, the epoch moves on, so every
    epoch of the DataLoader (worker processes persistent or not) walks the next
    epoch's schedule with no call (an iteration dropped part way is walked again from
    its start). `set_epoch(e)` picks the epoch the next iteration walks.

    `state_dict(consumed)` / `load_state_dict(state)`: the refurbish state, a dict of
    its own (epoch, position, reuse_factor, schedule version, seed and the schedule's
    other options); `consumed` is how many samples of the epoch training has taken
    (batches × batch_size; the DataLoader fetches ahead, so what the sampler handed out
    is more). The next iteration after `load_state_dict` starts at that position.
    The epoch counter, the position and the checks of a state are the Rust core's
    (`tfrecord_lirs._lirs.NativeRefurbishSampler`).
    """

    def __init__(self, source_or_len, seed=None, reuse_factor=None, batch_size=None,
                 num_shards=None, shard_index=None, order_version=None):
        self.schedule = RefurbishSchedule(source_or_len, seed=seed, reuse_factor=reuse_factor,
                                          batch_size=batch_size, num_shards=num_shards,
                                          shard_index=shard_index,
                                          order_version=order_version)
        self._native = _lirs.NativeRefurbishSampler(self.schedule._native)

    @property
    def epoch(self):
        """The epoch the next iteration walks."""
        return self._native.epoch()

    def set_epoch(self, epoch):
        """The epoch the next iteration walks (from its start)."""
        self._native.set_epoch(epoch)

    def __len__(self):
        return self._native.len()

    def __iter__(self):
        return self._native.walk()

    def state_dict(self, consumed=None):
        """The refurbish state: where to go on (`consumed`: samples of the epoch
        taken; None: those this sampler handed out)."""
        return dict(self._native.state_dict(None if consumed is None else int(consumed)))

    def load_state_dict(self, state):
        """Goes on from `state` (a `state_dict` of a sampler with the same options)."""
        self._native.load_state_dict(dict(state))

    def __getstate__(self):
        return {"schedule": self.schedule, "state": self.state_dict()}

    def __setstate__(self, state):
        self.schedule = state["schedule"]
        self._native = _lirs.NativeRefurbishSampler(self.schedule._native)
        self._native.load_state_dict(state["state"])


class RefurbishDataset(_tud.Dataset):
    """A map-style Dataset over the positions a `RefurbishSampler` yields: on a
    refresh it reads the record (`source[id]`), runs `partial(record, seed)` and stores
    the output; on a reuse it takes the stored output (recomputing it if the entry is
    lost, torn or corrupt); then `final(sample, seed)` on every use. The seeds are
    derived from (seed, id, generation) and (seed, id, epoch) by the core, so the
    outputs do not depend on the store. `final=None`: no final augmentation (the
    stored sample as it is).

    `store`: a directory (shared by the DataLoader's worker processes, opened lazily
    in each), a `tfrecord_lirs.refurbishing.PartialStore`, or None (this process's
    memory: only for `num_workers=0`). Stored entries are keyed by `dataset_id`
    (None: the source's absolute paths and length), `partial_name` (None: the partial
    function's module and qualified name; add a version when you change it), the seed,
    the id and the generation. `serializer`: `(dumps, loads)` (None: pickle;
    `tfrecord_lirs.refurbish_tf.serializer(spec)` to share with tf.data jobs). Jobs
    running at once on one store directory share it: each partial output is computed
    by one of them, the others wait for it (`store.stats()`: `shared`, `waits`).
    """

    def __init__(self, source, partial, final, sampler, store=None, dataset_id=None,
                 partial_name=None, serializer=None, store_bytes=None):
        self._source = source
        self._schedule = sampler.schedule if isinstance(sampler, RefurbishSampler) \
            else sampler
        _check_functions(partial, final)
        self._store = open_store(store, source, partial, self._schedule.options["seed"],
                                 dataset_id, partial_name, store_bytes)
        # Opened here, so that a wrong store is an error before the first epoch.
        self._store.stats()
        self._partial, self._final, self._serializer = partial, final, serializer
        self._refurbisher = None

    @property
    def store(self):
        """The `PartialStore` (this process's counters: `store.stats()`)."""
        return self._store

    def __len__(self):
        return len(self._schedule)

    def _step(self):
        if self._refurbisher is None:
            if _worker()[2] is not None:
                self._store.check_worker_process(self._schedule.options["reuse_factor"])
            self._refurbisher = Refurbisher(self._source.__getitem__, self._partial,
                                            self._final, self._schedule, self._store,
                                            self._serializer)
        return self._refurbisher

    def __getitem__(self, use):
        id, refresh, generation, epoch = use
        return self._step().use(id, refresh, generation, epoch)

    def __getitems__(self, uses):
        # A DataLoader's batch at once: the core's batch step (`Refurbisher.uses`).
        return self._step().uses(uses)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_refurbisher"] = None
        return state


class AugmentDataset(RefurbishDataset):
    """Sample `id` of epoch `e` is `augment(source[id], seed)`, the seed derived from
    (seed, id, e) by the core, so a sample does not depend on who computed it. With
    `share` (a directory), the jobs that run at the same time with the same data,
    seed and augment (a hyper-parameter sweep: Ray Tune or Optuna trials, or a plain
    `for lr in ...: Popen(...)`) compute each augmented sample once in all: the first
    to come to it computes and stores it, the others wait for it or read it, and
    every job sees the same augmented samples. A job may start late or be killed at
    any time. Give the DataLoader `sampler=data.sampler` and the same `batch_size`;
    each epoch of the DataLoader walks the next epoch (`data.sampler.set_epoch(e)`
    picks one):

        data = tfrecord_lirs.torch.AugmentDataset(source, augment, seed=42,
                                                  batch_size=256, share="/dev/shm/sweep")
        loader = DataLoader(data, sampler=data.sampler, batch_size=256, num_workers=4)

    It is `RefurbishDataset` with `reuse_factor=1` and no final augmentation; the
    store's keys, `share` (a store directory) and `store_bytes` are its.
    `augment_name` (None: the function's module and qualified name) keys the store:
    change it when you change `augment`. tf.data jobs share the store through
    `tfrecord_lirs.augment(files, fn, share=...)` when this one stores their bytes
    (`serializer=tfrecord_lirs.refurbish_tf.serializer(spec)`).
    """

    def __init__(self, source, augment, *, seed, share=None, batch_size=None,
                 num_shards=None, shard_index=None, order_version=None, dataset_id=None,
                 augment_name=None, serializer=None, store_bytes=None):
        self.sampler = RefurbishSampler(source, seed=seed, reuse_factor=1,
                                        batch_size=batch_size, num_shards=num_shards,
                                        shard_index=shard_index, order_version=order_version)
        super().__init__(source, augment, None, self.sampler, store=share,
                         dataset_id=dataset_id, partial_name=augment_name,
                         serializer=serializer, store_bytes=store_bytes)


__all__ = ["AugmentDataset", "Batch", "ExampleCollate", "Loader", "RefurbishDataset",
           "RefurbishSampler"]
