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

import mmap

import torch.utils.data as _tud

from tfrecord_lirs import loader as _loader


class Loader(_loader.Loader, _tud.IterableDataset):
    """`tfrecord_lirs.Loader` that PyTorch's DataLoader takes as an `IterableDataset`
    (use `batch_size=None`: the batches are the Loader's).

    With worker processes (`num_workers > 0`) the state is in the workers: resume
    exactly with torchdata's `StatefulDataLoader`, whose `state_dict()` holds each
    worker's `Loader.state_dict()` and whose `load_state_dict()` restores each in its
    worker. This (main-process) copy's `state_dict()` is then an
    `InvalidArgumentError` saying so, not the start of an epoch it never walked.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mark_fresh()

    def _mark_fresh(self):
        # One byte shared with the worker processes forked from this one: set when a
        # worker walks. Pickled copies (spawned workers) are flagged when pickled.
        self._walked_in_worker = mmap.mmap(-1, 1)
        self._pickled = False

    def __iter__(self):
        if _tud.get_worker_info() is not None:
            self._walked_in_worker[0] = 1
        return super().__iter__()

    def state_dict(self):
        if _tud.get_worker_info() is None and (self._walked_in_worker[0] or self._pickled):
            self._native.set_walked_elsewhere()
        return super().state_dict()

    def __getstate__(self):
        if _tud.get_worker_info() is None:
            self._pickled = True
        return super().__getstate__()

    def __setstate__(self, state):
        super().__setstate__(state)
        self._mark_fresh()


__all__ = ["Loader"]
