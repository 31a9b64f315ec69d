"""`Loader`: batches of TFRecord payloads in LIRS order, without TensorFlow.

    loader = tfrecord_lirs.Loader(["train-0.tfrecord", "train-1.tfrecord"], seed=42,
                                  batch_size=256)
    for epoch in range(3):
        for batch in loader:          # list[bytes], a fresh permutation every epoch
            ...
    state = loader.state_dict()       # torchdata StatefulDataLoader convention

The walk (orders, fetch threads, batching, unordered delivery, checkpoints, sharding
rules, defaults) is the Rust core's (tfrecord_lirs._lirs.NativeLoader); this module
converts types and finds out which data-loading worker it runs in.
"""

from tfrecord_lirs import _lirs
from tfrecord_lirs._processes import process_group as _process_group
from tfrecord_lirs._processes import worker as _worker
from tfrecord_lirs.sources import DataSource


def process_shard():
    """This process's shard for multi-process training, as keyword arguments:
    `Loader(paths, seed=1, **process_shard())`. From the initialised
    `torch.distributed` process group (world size and rank), else from
    `jax.process_count()` and `jax.process_index()` when jax is installed (imported
    here, on call), else one shard (a single process)."""
    group = _process_group()
    if group is not None:
        return {"num_shards": group[0], "shard_index": group[1]}
    try:
        import jax
    except ImportError:
        return {"num_shards": 1, "shard_index": 0}
    return {"num_shards": jax.process_count(), "shard_index": jax.process_index()}


class Loader:
    """Epochs of batches (`list[bytes]`) of TFRecord files in LIRS order.

    Every epoch is a fresh permutation of the whole dataset (the order of
    `Sampler(source, seed).order(epoch)`, of the CLI's `order --seed --epoch`, and of
    the TensorFlow op's dataset cursor for the same order seed), read by the Rust
    dataset cursor's fetch threads with the GIL released, CRC-checked.

    Arguments (None: the default in brackets, decided by the Rust core):
      seed [0]; batch_size [256]; page_aware [False] (whole pages as the shuffle unit,
      for files padded by `pad`; given with paths, the source opened is told, see
      DataSource's `page_aware`); deterministic [True] (False: batches as their reads
      complete, RINAS: the same batches' multiset per epoch, another order);
      num_parallel_reads [-1: automatic] (fetch threads over the windows read ahead,
      not a count of files: see LIRSDataset); num_shards [1] / shard_index [0] (this
      process's slice of every epoch; inside PyTorch DataLoader workers it is split
      among them by whole batches); drop_remainder [False] (the short last batch);
      order_version [1] (or 2, docs/FORMAT.md §5.8); shard_remainder ["keep"] ("drop"
      or "pad": every shard the same count (its DataLoader workers differ by at most a
      batch), as for
      `Sampler`). `offset_tables`, `page_size`, `backend`, `trust_table`,
      `cache_dir`, `cache_bytes`, `index_missing`: as for `DataSource`. `paths` may also be a `DataSource`.

    Iterating walks the current epoch from its start (or from a state just loaded);
    at its end the epoch counter moves on, so the next iteration is a fresh
    permutation. `set_epoch(e)` picks the epoch the next iteration walks. In PyTorch
    DataLoader worker processes (`tfrecord_lirs.torch.Loader`) every iteration of the
    DataLoader walks the next epoch, with no call. An instance that cannot be read raises a
    `tfrecord_lirs.errors` exception naming file, instance and byte; calling `next`
    again goes on after it.

    `state_dict()` / `load_state_dict(state)`: the checkpoint (epoch, cursor position,
    and what identifies the dataset, seed and shard), restored exactly in any process;
    a state of another dataset, seed or shard is refused with `InvalidArgumentError`.
    For PyTorch DataLoader workers use `tfrecord_lirs.torch.Loader`, an
    `IterableDataset`.

    Elastic resume (docs/FORMAT.md §6): when an epoch checkpointed by K processes
    goes on with K' (more or fewer), each old process saves `shard_state()`,
    `Loader.combine_shard_states(states)` makes the epoch's state, and each new
    process calls `resume_epoch(epoch_state)` on its Loader (num_shards=K',
    shard_index=its own): the K' walks deliver every instance the K did not, once,
    and the next epochs are those of a fresh K'-shard run.
    """

    def __init__(self, paths, seed=None, batch_size=None, page_aware=None, deterministic=None,
                 num_parallel_reads=None, num_shards=None, shard_index=None,
                 drop_remainder=None, order_version=None, shard_remainder=None, *,
                 offset_tables=None, page_size=None, backend=None, trust_table=None,
                 cache_dir=None, cache_bytes=None, index_missing=None):
        if isinstance(paths, DataSource):
            self._source = paths
        else:
            self._source = DataSource(paths, offset_tables, page_size=page_size,
                                      backend=backend, trust_table=trust_table,
                                      cache_dir=cache_dir, cache_bytes=cache_bytes,
                                      index_missing=index_missing, page_aware=page_aware)
        self._native = _lirs.NativeLoader(
            self._source._reader, seed=seed, batch_size=batch_size, page_aware=page_aware,
            deterministic=deterministic, num_parallel_reads=num_parallel_reads,
            num_shards=num_shards, shard_index=shard_index, drop_remainder=drop_remainder,
            order_version=order_version, shard_remainder=shard_remainder,
            process_group=_process_group())

    def __iter__(self):
        self._native.begin(*_worker())
        return _Batches(self._native)

    @property
    def epoch(self):
        """The epoch walked now, or next."""
        return self._native.epoch()

    def set_epoch(self, epoch):
        """The epoch the next iteration walks, from its start."""
        self._native.set_epoch(epoch)

    @property
    def source(self):
        """The `DataSource` read."""
        return self._source

    def state_dict(self):
        """The checkpoint, a dict of plain values (picklable)."""
        return self._native.state_dict()

    def load_state_dict(self, state_dict):
        """Restores a `state_dict()`: the next iteration goes on from it."""
        self._native.load_state_dict(dict(state_dict), *_worker()[:2])

    def shard_state(self):
        """This process's share of the current epoch (bytes) for an elastic resume."""
        return self._native.shard_state(*_worker()[:2])

    @staticmethod
    def combine_shard_states(shard_states):
        """The epoch state (bytes) from the `shard_state()` of every process of a run."""
        return _lirs.combine_shard_states([bytes(s) for s in shard_states])

    def resume_epoch(self, epoch_state):
        """Goes on with the epoch `epoch_state` describes: the next iteration walks this
        Loader's shard of what was not delivered."""
        self._native.resume_epoch(epoch_state)

    def __getstate__(self):
        return {"source": self._source, "options": self._native.options(),
                "epoch": self._native.epoch(), "epochs": self._native.epochs_path()}

    def __setstate__(self, state):
        self._source = state["source"]
        self._native = _lirs.NativeLoader(self._source._reader, **state["options"])
        self._native.set_epoch(state["epoch"])
        if state.get("epochs") is not None:
            self._native.join_epochs(state["epochs"])

    def __repr__(self):
        return f"Loader({self._source!r}, epoch {self.epoch})"


class _Batches:
    """One walk's iterator. After an error, `next` goes on with the rest."""

    def __init__(self, native):
        self._native = native

    def __iter__(self):
        return self

    def __next__(self):
        batch = self._native.next_batch()
        if batch is None:
            raise StopIteration
        return batch


__all__ = ["Loader", "process_shard"]
