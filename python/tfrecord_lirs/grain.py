"""LIRS epoch orders in Grain pipelines (needs `grain`; no TensorFlow).

Grain's own random access needs ArrayRecord; `tfrecord_lirs.DataSource` gives it to
plain TFRecord files. Two ways to walk it in LIRS orders:

* the Dataset API: `tfrecord_lirs.grain.shuffle(source, seed=42)` is a
  `grain.MapDataset` of the payloads, every epoch (index // len) a fresh LIRS
  permutation, page-aware if asked, on which `.map`, `.batch`, `.to_iter_dataset()`
  and the rest of Grain work as usual;
* the DataLoader API: `grain.DataLoader(data_source=source,
  sampler=tfrecord_lirs.grain.IndexSampler(source, seed=42, num_epochs=2), ...)`.

The orders are the core's (docs/FORMAT.md §5): the same as `tfrecord_lirs.Sampler`
and the CLI's `order` for the same seed and epoch.

`tfrecord_lirs.grain.ParseExample(features)` is a Grain `MapTransform` that decodes
each record (a serialized `tf.train.Example`) with `tfrecord_lirs.parse_example`.
"""

import grain as _grain
import numpy as np

from tfrecord_lirs import _lirs
from tfrecord_lirs import example as _example


from tfrecord_lirs.refurbishing import RefurbishSchedule, Refurbisher, open_store
from tfrecord_lirs.sources import DataSource, Sampler


class _EpochOrders:
    """The order of one epoch at a time (an array of ids), kept for the epoch being
    read: Grain asks index by index. Which epoch and position a global index is, the
    core's sampler says."""

    def __init__(self, sampler):
        self._sampler = sampler
        self._epoch = None
        self._ids = None

    def __len__(self):
        return len(self._sampler)

    def id_at(self, index):
        epoch, position = self._sampler._locate(index)
        if epoch != self._epoch:
            self._ids = self._sampler.order(epoch)
            self._epoch = epoch
        return self._ids[position]

    def __getstate__(self):
        return {"sampler": self._sampler}

    def __setstate__(self, state):
        self.__init__(state["sampler"])


class LIRSShuffleMapDataset(_grain.MapDataset):
    """The payloads of `source` in LIRS order: index `i` is position `i % len` of
    epoch `i // len`. Build it with `shuffle(...)`."""

    def __init__(self, source, *, seed, page_aware=None, num_shards=None, shard_index=None,
                 order_version=None, shard_remainder=None):
        if not isinstance(source, DataSource):
            raise TypeError(f"source must be a tfrecord_lirs.DataSource, got {source!r}")
        super().__init__()
        self._source = source
        self._orders = _EpochOrders(Sampler(source, seed=seed, page_aware=page_aware,
                                            num_shards=num_shards, shard_index=shard_index,
                                            order_version=order_version,
                                            shard_remainder=shard_remainder))

    def __len__(self):
        return len(self._orders)

    def __str__(self):
        return "LIRSShuffleMapDataset"

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        with self._stats.record_self_time():
            return self._stats.record_output_spec(self._source[self._orders.id_at(index)])

    def _getitems(self, indices):
        # One coalesced read in Rust for the whole batch of indices.
        return self._source.__getitems__([self._orders.id_at(i) for i in indices])


class LIRSRefurbishMapDataset(_grain.MapDataset):
    """Data refurbishing (docs/FORMAT.md §7): index `i` is position `i % len` of epoch
    `i // len` of the refurbish schedule; the element is `final(partial(record,
    seed), seed)` with the partial output stored on a refresh and reused from the store
    otherwise. Build it with `refurbish(...)`."""

    def __init__(self, source, partial, final, *, seed, reuse_factor=None, batch_size=None,
                 store=None, num_shards=None, shard_index=None, order_version=None,
                 dataset_id=None, partial_name=None, serializer=None, store_bytes=None):
        if not isinstance(source, DataSource):
            raise TypeError(f"source must be a tfrecord_lirs.DataSource, got {source!r}")
        super().__init__()
        self._source = source
        self._schedule = RefurbishSchedule(source, seed=seed, reuse_factor=reuse_factor,
                                           batch_size=batch_size, num_shards=num_shards,
                                           shard_index=shard_index,
                                           order_version=order_version)
        self._store = open_store(store, source, partial, self._schedule.options["seed"],
                                 dataset_id, partial_name, store_bytes)
        self._store.stats()  # a wrong store is an error here, not in a worker
        self._refurbisher = Refurbisher(source.__getitem__, partial, final, self._schedule,
                                        self._store, serializer)
        self._uses = None

    @property
    def schedule(self):
        """The `RefurbishSchedule`."""
        return self._schedule

    @property
    def store(self):
        """The `PartialStore` (this process's counters: `store.stats()`)."""
        return self._store

    def __len__(self):
        return len(self._schedule)

    def __str__(self):
        return "LIRSRefurbishMapDataset"

    def _use(self, index):
        """The use at global index `index`: (id, refresh, generation, epoch)."""
        epoch, position = self._schedule.locate(index)
        # One attribute for the epoch and its uses: Grain's threads share it.
        cached = self._uses
        if cached is None or cached[0] != epoch:
            ids, refresh, generation = self._schedule.epoch(epoch)
            cached = (epoch, ids.tolist(), refresh.tolist(), generation.tolist())
            self._uses = cached
        _, ids, refresh, generation = cached
        return ids[position], refresh[position], generation[position], epoch

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.slice(index)
        with self._stats.record_self_time():
            return self._stats.record_output_spec(self._refurbisher.use(*self._use(index)))

    def _getitems(self, indices):
        # Grain's batch read (`MapDataset._getitems`): the core's batch step, which
        # takes a use another job is computing after the batch's others.
        with self._stats.record_self_time(num_elements=len(indices)):
            return self._refurbisher.uses([self._use(i) for i in indices])


def refurbish(source, partial, final, *, seed, reuse_factor=None, batch_size=None,
              store=None, num_shards=None, shard_index=None, order_version=None,
              dataset_id=None, partial_name=None, serializer=None, store_bytes=None):
    """A `grain.MapDataset` of `final(partial(record, seed), seed)` over the refurbish
    schedule: the partial output is stored on a refresh and reused for `reuse_factor`
    epochs (`store`: a directory shared by Grain's worker processes, or None for this
    process's memory; jobs running at once on one directory share the work).
    `final=None`: no final augmentation. Arguments left None take the core's defaults; see
    `tfrecord_lirs.torch.RefurbishDataset` for the store's keys and `serializer`."""
    return LIRSRefurbishMapDataset(
        source, partial, final, seed=seed, reuse_factor=reuse_factor, batch_size=batch_size,
        store=store, num_shards=num_shards, shard_index=shard_index,
        order_version=order_version, dataset_id=dataset_id, partial_name=partial_name,
        serializer=serializer, store_bytes=store_bytes)


def augment(source, augment, *, seed, share=None, batch_size=None, num_shards=None,
            shard_index=None, order_version=None, dataset_id=None, augment_name=None,
            serializer=None, store_bytes=None):
    """A `grain.MapDataset` whose index `i` is `augment(record, seed)` of position
    `i % len` of epoch `i // len` of the epoch order, the seed derived from (seed, id,
    epoch) by the core. With `share` (a directory) the jobs running at the same time
    with the same data, seed and augment (a hyper-parameter sweep) compute each
    augmented sample once in all and see the same samples: see
    `tfrecord_lirs.torch.AugmentDataset`. It is `refurbish(source, augment, None,
    reuse_factor=1, store=share, partial_name=augment_name, ...)`."""
    return LIRSRefurbishMapDataset(
        source, augment, None, seed=seed, reuse_factor=1, batch_size=batch_size,
        store=share, num_shards=num_shards, shard_index=shard_index,
        order_version=order_version, dataset_id=dataset_id, partial_name=augment_name,
        serializer=serializer, store_bytes=store_bytes)


def shuffle(source, *, seed, page_aware=None, num_shards=None, shard_index=None,
            order_version=None, shard_remainder=None):
    """A `grain.MapDataset` of `source`'s payloads in LIRS epoch orders.

    `num_shards`/`shard_index`: this process's slice of every epoch (e.g.
    `jax.process_count()`/`jax.process_index()`); every instance is in exactly one.
    `order_version`, `shard_remainder` ("drop"/"pad": every process the same count):
    as for `tfrecord_lirs.Sampler`. Arguments left None take the core's defaults (as
    for `Sampler`).
    """
    return LIRSShuffleMapDataset(source, seed=seed, page_aware=page_aware,
                                 num_shards=num_shards, shard_index=shard_index,
                                 order_version=order_version, shard_remainder=shard_remainder)


class IndexSampler:
    """Grain's `Sampler` protocol for `grain.DataLoader`: global index `i` is
    position `i % len` of epoch `i // len` of the LIRS order, its record key the
    instance id there. Grain's DataLoader deals the indices out to its processes
    (`shard_options`) and workers itself.

    `num_epochs`: None repeats forever.
    """

    def __init__(self, source_or_len, *, seed, page_aware=None, num_epochs=None,
                 order_version=None):
        sampler = Sampler(source_or_len, seed=seed, page_aware=page_aware,
                          order_version=order_version)
        self._orders = _EpochOrders(sampler)
        self._seed = seed
        self._num_epochs = num_epochs
        # Grain keeps repr(sampler) in its DataLoader checkpoints and compares it on a
        # restore (in any process): what the orders depend on, no memory address.
        source = source_or_len if isinstance(source_or_len, DataSource) else len(sampler)
        self._repr = (f"tfrecord_lirs.grain.IndexSampler({source!r}, seed={sampler.seed}, "
                      f"page_aware={sampler.page_aware}, num_epochs={num_epochs}, "
                      f"order_version={sampler.order_version})")

    def __repr__(self):
        return self._repr

    def __len__(self):
        if self._num_epochs is None:
            import sys

            return sys.maxsize
        return self._num_epochs * len(self._orders)

    def __getitem__(self, index):
        if index < 0 or index >= len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} sampled records")
        # The record's generator: NumPy's Philox, keyed by the core's record seed.
        key = _lirs.NativeSampler.record_seed(self._seed, index)
        rng = np.random.Generator(np.random.Philox(key=key))
        return _grain.RecordMetadata(index=index,
                                     record_key=int(self._orders.id_at(index)), rng=rng)


class ParseExample(_grain.transforms.Map):
    """A Grain `MapTransform`: each element (a serialized `tf.train.Example`) becomes
    `tfrecord_lirs.parse_example(element, features)`, a dict of numpy values."""

    def __init__(self, features=None):
        self.features = features

    def map(self, element):
        return _example.parse_example(element, self.features)


__all__ = ["IndexSampler", "augment", "LIRSRefurbishMapDataset", "LIRSShuffleMapDataset", "ParseExample",
           "refurbish", "shuffle"]
