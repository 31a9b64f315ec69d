"""Random access and LIRS epoch orders without TensorFlow: for Grain, PyTorch and plain
Python.

    source = tfrecord_lirs.DataSource(["train-0.tfrecord", "train-1.tfrecord"])
    len(source); source[7]; source.__getitems__([3, 1, 4])     # bytes, CRC-checked
    sampler = tfrecord_lirs.Sampler(source, seed=42, page_aware=True)
    sampler.set_epoch(1); list(sampler)                          # a fresh permutation

Everything is decided by the Rust core (tfrecord_lirs._lirs): this module only adapts
it to the protocols those libraries use.
"""

import array
import os
import sys
import types

from tfrecord_lirs import _checks, _lirs
from tfrecord_lirs._processes import process_group as _process_group


def _paths(value, name):
    """A path or a sequence of paths as a list of str (os.fsdecode of each), without
    expanding patterns."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return [os.fsdecode(value)]
    try:
        return [os.fsdecode(p) for p in value]
    except TypeError as e:
        raise TypeError(f"{name} must be a path or a sequence of paths, got {value!r}") from e


def data_files(value, name="paths", cache_dir=None, cache_bytes=None):
    """The data files a path, a pattern (`tf.io.gfile.glob` syntax, local or URL) or a
    sequence of them names, as a list of str: the core's rule (a pattern's matches
    sorted, offset tables never taken for data; a pattern or list that matches nothing
    raises `tfrecord_lirs.errors.NotFoundError` naming it). With `cache_dir` (None:
    `TFRECORD_LIRS_CACHE_DIR`), a pattern listed once is remembered there and its
    listing used when the storage cannot be reached (said on stderr)."""
    files = _checks.call_core(_lirs.expand_files, _paths(value, name),
                              None if cache_dir is None else os.fsdecode(cache_dir), cache_bytes)
    return [os.fsdecode(f) for f in files]


def _ids(data):
    """Little-endian u64 ids (the native order's bytes) as an array of ints."""
    ids = array.array("Q")
    ids.frombytes(data)
    if sys.byteorder == "big":
        ids.byteswap()
    return ids


class DataSource:
    """The instances of TFRecord files, by index, read through their offset tables.

    A random-access data source in the sense of Grain (`len`, `source[i]`) and a
    map-style PyTorch `Dataset` (`__getitem__`, and `__getitems__` for the batched
    fetch PyTorch's DataLoader uses). Every read checks the record's CRCs; a damaged
    record raises `tfrecord_lirs.errors.DataLossError` naming the file, instance and
    byte. Reads release the GIL. Picklable: a copy re-opens the files (Grain and
    DataLoader worker processes).

    `offset_tables`: None (each file's `<file>.offsets`) or one path per file (None
    for a file's default). `page_size`: the page of page-aware orders (as the files
    were padded; None: 4 KiB). `backend`: "auto" (the default: memory maps under a read
    lease, else pread), "pread" or "direct". `trust_table`: as
    `LIRSDataset(trust_table=True)` (None: False). Defaults are the Rust core's.

    `index_missing`: a file without its offset table gets one at open, built by the
    scan `tfrecord-lirs index` makes (every record's CRCs checked), once per file
    however many processes open it at once (DataLoader workers wait for the first),
    kept beside the file (`<file>.offsets`); where that directory is read-only, and
    for object storage, in `cache_dir` (else in this process's memory only). None:
    True; False: a missing table raises `NotFoundError`, as before.

    `cache_dir`: a local directory that keeps the bytes read from object storage
    (`s3://`, `gs://`, ...) in blocks, shared by every process naming it (DataLoader
    and Grain workers, other jobs): each block is fetched once, and a file read whole
    once is read from local disk without any request. None: the environment variable
    `TFRECORD_LIRS_CACHE_DIR`, else no cache. `cache_bytes`: the most bytes it holds
    (None: 32 GiB); the least recently used blocks are evicted past it. A pattern
    (`s3://bucket/train-*`) listed with a `cache_dir` is remembered there: with the
    storage unreachable, the same pattern opens from its remembered listing (said on
    stderr), as an explicit list of cached files does.

    `page_aware`: whether the source will be read in a page-aware order (a Sampler or
    Loader with `page_aware=True`). None: False, which suits random ids and every
    other order. With the default backend it decides how small records of files
    beyond the memory this process may use (its cgroup's limit) are read: mapped for
    a page-aware order, else cold (direct reads of each record).
    """

    def __init__(self, paths, offset_tables=None, *, page_size=None, backend=None,
                 trust_table=None, cache_dir=None, cache_bytes=None, index_missing=None,
                 page_aware=None):
        self._args = (
            data_files(paths, "paths", cache_dir, cache_bytes),
            None if offset_tables is None else [
                None if t is None else os.fsdecode(t) for t in _paths_or_none(offset_tables)
            ],
            page_size, backend, trust_table,
            None if cache_dir is None else os.fsdecode(cache_dir), cache_bytes,
            None if index_missing is None else bool(index_missing),
            None if page_aware is None else bool(page_aware),
        )
        self._open()

    def _open(self):
        # A copy pickled before `index_missing` (`page_aware`) existed has seven (eight)
        # arguments.
        files, tables, page_size, backend, trust_table, cache_dir, cache_bytes, *rest = self._args
        self._reader = _lirs.NativeReader(files, tables or [], page_size, backend,
                                          None if trust_table is None else bool(trust_table),
                                          cache_dir, cache_bytes, *rest)

    def __len__(self):
        return len(self._reader)

    def __getitem__(self, index):
        return self._reader.read(index)

    def __getitems__(self, indices):
        return self._reader.read_many(list(indices))

    # Grain's name for the batched read (SupportsBatchedReadRandomAccessDataSource).
    _getitems = __getitems__

    def __iter__(self):
        for i in range(len(self)):
            yield self._reader.read(i)

    def __getstate__(self):
        return {"args": self._args}

    def __setstate__(self, state):
        self._args = state["args"]
        self._open()

    def __repr__(self):
        # The same in every process (Grain keeps it in checkpoints): the count, the
        # first and last base names (a split is in them) and the instances.
        names = [os.path.basename(os.fsdecode(f).rstrip("/")) for f in self._args[0]]
        shown = "".join(f" {n}" for n in (names if len(names) <= 2
                                          else [names[0], "...", names[-1]]))
        return (f"DataSource({len(names)} file{'s' if len(names) != 1 else ''}{shown}, "
                f"{len(self)} instances)")

    @property
    def paths(self):
        """The data files, in id order."""
        return list(self._args[0])

    def _order(self, seed, epoch, page_aware, num_shards, shard_index, order_version):
        return _ids(self._reader.order(seed, epoch, page_aware, num_shards, shard_index,
                                       order_version))


def _paths_or_none(value):
    if isinstance(value, (str, bytes, os.PathLike)):
        return [value]
    return list(value)


def _lirs_count(value):
    """A length given for a Sampler, by the core's rule for counts."""
    return _checks.call_core(_lirs.check_count, "source_or_len", value)


class Sampler:
    """The LIRS epoch order of a `DataSource` (or of `n` instances): every epoch a
    fresh permutation of the whole dataset, the same for the same (seed, epoch) on
    every machine and version (docs/FORMAT.md §5).

    A PyTorch `Sampler`: `DataLoader(source, sampler=Sampler(source, seed),
    batch_size=256)`. Each iteration walks the current epoch (`epoch`); once it has
    handed out every id, the epoch moves on, so every epoch of the DataLoader is a
    fresh permutation with no call (an iteration dropped part way is walked again
    from its start). `set_epoch(e)` picks the epoch the next iteration walks, as with
    `DistributedSampler`. `state_dict()` / `load_state_dict(state)` (torchdata's
    `Stateful`: a `StatefulDataLoader` saves and restores them itself): the epoch,
    the position in it and what identifies the dataset, seed and shard; restored in
    any process, a state of another dataset, seed, shard or options is refused with
    `InvalidArgumentError`. `page_aware=True` (files padded by `pad`/`PaddedWriter`)
    shuffles whole pages and needs the source, not a length. `num_shards`/
    `shard_index`: this worker's slice of each epoch (every instance in exactly one
    shard). `order_version`: 1 (the default: the same orders as `LIRSDataset` and the
    CLI's `order`) or 2 (docs/FORMAT.md §5.8: computed position by position, nothing
    held per instance, for datasets of 10^8 instances and more).

    Elastic resume (docs/FORMAT.md §6), from K workers to K' (more or fewer): each
    old worker k saves `sampler.shard_state(consumed)` (the ids of this epoch's
    `order()` it consumed, in order); `Sampler.combine_shard_states(states)` makes
    the epoch state; each new worker j calls `sampler.resume(epoch_state)` on its
    `Sampler(..., num_shards=K2, shard_index=j)`: that epoch's order is then its
    part of the instances no old worker consumed (every one in exactly one new
    shard), and `set_epoch(e + 1)` goes on as a fresh K'-shard run.

    `shard_remainder`: what shards do with the instances left over when the count is
    not a multiple of `num_shards`. "keep" (the default): shard lengths differ by at
    most one. For `DistributedDataParallel`, where every rank must run the same number
    of steps: "drop" (as `DistributedSampler(drop_last=True)`: every shard has
    `len // num_shards`, the last `len % num_shards` ids of the epoch's order are left
    out) or "pad" (as `DistributedSampler(drop_last=False)`: every shard has
    `ceil(len / num_shards)`, the order repeated from its start). Elastic resume takes
    "keep" shards only.

    The epoch counter, the orders and the resume states are the Rust core's sampler
    (`tfrecord_lirs._lirs.NativeSampler`); arguments left None take its defaults
    (seed 0, page_aware False, one shard, order_version 1, shard_remainder "keep").
    """

    def __init__(self, source_or_len, seed=None, page_aware=None, num_shards=None,
                 shard_index=None, order_version=None, shard_remainder=None):
        self._source = source_or_len if isinstance(source_or_len, DataSource) else None
        self._instances = 0 if self._source is not None else _lirs_count(source_or_len)
        self._native = _lirs.NativeSampler(
            None if self._source is None else self._source._reader, self._instances,
            seed, page_aware, num_shards, shard_index, order_version, shard_remainder,
            _process_group())

    @property
    def epoch(self):
        """The epoch the next iteration walks."""
        return self._native.epoch()

    @epoch.setter
    def epoch(self, epoch):
        self._native.set_epoch(epoch)

    def set_epoch(self, epoch):
        """The epoch the next iteration walks."""
        self._native.set_epoch(epoch)

    def order(self, epoch=None):
        """The ids of `epoch` (default: the current one) in this shard, an array."""
        return _ids(self._native.order(epoch))

    def __iter__(self):
        return self._native.walk()

    def __len__(self):
        return self._native.len()

    def state_dict(self):
        """The checkpoint, a dict of plain values (picklable): where the iteration
        begun last is, or where the next one starts."""
        return self._native.state_dict()

    def load_state_dict(self, state_dict):
        """Restores a `state_dict()`: the next iteration goes on from it."""
        self._native.load_state_dict(dict(state_dict))

    def _locate(self, index):
        """Global index `index` over all epochs as (epoch, position), from the core."""
        return self._native.locate(index)

    def shard_state(self, consumed):
        """This worker's state for elastic resume (bytes): the first `consumed` ids
        of the current epoch's `order()` delivered."""
        return self._native.shard_state(consumed)

    @staticmethod
    def combine_shard_states(shard_states):
        """The epoch state (bytes) after every old worker's `shard_state`."""
        return _lirs.combine_shard_states([bytes(s) for s in shard_states])

    def resume(self, epoch_state):
        """Walk this shard of what `epoch_state` has not delivered: the epoch
        becomes the state's, and its order this shard's part of the rest."""
        self._native.resume(epoch_state)

    def __getstate__(self):
        source = self._source if self._source is not None else self._instances
        return {"source": source, "options": self._native.options(),
                "state": self._native.state_dict()}

    def __setstate__(self, state):
        self.__init__(state["source"], **state["options"])
        self._native.load_state_dict(state["state"])


def _forward_getters(cls, native):
    """Each getter of the native class `native` as a read-only property of `cls` (of
    its `_native`), with the native docstring: a getter added in Rust needs no edit
    here. Names `cls` defines itself (`epoch`, with its setter) stay its own."""
    for name, attr in vars(native).items():
        if isinstance(attr, types.GetSetDescriptorType) and name not in vars(cls):
            setattr(cls, name, property(lambda self, name=name: getattr(self._native, name),
                                        doc=attr.__doc__))


_forward_getters(Sampler, _lirs.NativeSampler)

__all__ = ["DataSource", "Sampler"]
