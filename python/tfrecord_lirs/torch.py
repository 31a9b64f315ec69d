"""`tfrecord_lirs.Loader` as a PyTorch `IterableDataset` (needs `torch`; no TensorFlow).

    loader = tfrecord_lirs.torch.Loader(paths, seed=42, batch_size=256)
    data = torch.utils.data.DataLoader(loader, batch_size=None, num_workers=2)
    for epoch in range(3):
        loader.set_epoch(epoch)       # the workers get a fresh copy every epoch
        for batch in data:            # list[bytes]; each worker reads its own share
            ...

In each worker process the Loader reads shard `shard_index * num_workers + worker_id`
of `num_shards * num_workers` (the Rust core's rule), so the workers together read
every instance of the epoch exactly once. `state_dict`/`load_state_dict` follow
torchdata's `StatefulDataLoader`, which calls them in each worker.
"""

import numpy as _np
import torch as _torch
import torch.utils.data as _tud

from tfrecord_lirs import example as _example
from tfrecord_lirs import loader as _loader


class Loader(_loader.Loader, _tud.IterableDataset):
    """`tfrecord_lirs.Loader` that PyTorch's DataLoader takes as an `IterableDataset`
    (use `batch_size=None`: the batches are the Loader's)."""


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


__all__ = ["ExampleCollate", "Loader"]
