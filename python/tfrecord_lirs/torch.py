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

import torch.utils.data as _tud

from tfrecord_lirs import loader as _loader


class Loader(_loader.Loader, _tud.IterableDataset):
    """`tfrecord_lirs.Loader` that PyTorch's DataLoader takes as an `IterableDataset`
    (use `batch_size=None`: the batches are the Loader's)."""


__all__ = ["Loader"]
