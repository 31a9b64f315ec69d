"""One job of a sweep sharing a store (tests/without_tf/test_refurbish_share.py runs
several at once): a PyTorch DataLoader over a refurbish schedule with a disk store. Each
partial call appends a line to LOG (the DataLoader's worker processes share the file).
It prints `ready`, waits for a line on stdin, then runs; at the end it prints one JSON
line: the outputs of every epoch in delivery order and
this process's store counters.

    python share_job.py DATA STORE LOG REUSE_FACTOR EPOCHS WORKERS [HOLD [STORE_BYTES]]

REUSE_FACTOR 1 runs the plain case (`AugmentDataset`, no final augmentation). With
HOLD (a FIFO's path), each partial call first prints `holding <id>` and then blocks
opening HOLD for reading, for ever: the job holds its claims until it is killed ("-":
no hold). STORE_BYTES: the store's bound.
"""

import hashlib
import json
import os
import sys

import numpy as np
import torch.utils.data as tud

import tfrecord_lirs
from tfrecord_lirs.torch import AugmentDataset, RefurbishDataset, RefurbishSampler

SEED, BATCH = 5, 8


class Partial:
    def __init__(self, log, hold):
        self.log, self.hold = log, hold

    def __call__(self, record, seed):
        if self.hold:
            print(f"holding {record[0]}", flush=True)
            os.open(self.hold, os.O_RDONLY)  # no writer ever comes
        with open(self.log, "a") as f:
            f.write(f"{record[0]}\n")
        work = hashlib.sha256(record)
        for _ in range(2000):  # CPU work, as an augmentation (the jobs overlap in it)
            work = hashlib.sha256(work.digest())
        rng = np.random.default_rng(seed)
        return np.frombuffer(record, dtype=np.uint8).astype(np.int64).sum() + rng.integers(
            0, 1 << 30, 4)


def final(sample, seed):
    return sample * 3 + np.random.default_rng(seed).integers(0, 1000, 4)


def main(data, store, log, reuse_factor, epochs, workers, hold="-", store_bytes=None):
    source = tfrecord_lirs.DataSource([data])
    partial = Partial(log, None if hold == "-" else hold)
    store_bytes = None if store_bytes is None else int(store_bytes)
    if int(reuse_factor) == 1:
        dataset = AugmentDataset(source, partial, seed=SEED, batch_size=BATCH, share=store,
                                 augment_name="share_job.partial v1",
                                 store_bytes=store_bytes)
        sampler = dataset.sampler
    else:
        sampler = RefurbishSampler(source, seed=SEED, reuse_factor=int(reuse_factor),
                                   batch_size=BATCH)
        dataset = RefurbishDataset(source, partial, final, sampler, store=store,
                                   partial_name="share_job.partial v1",
                                   store_bytes=store_bytes)
    loader = tud.DataLoader(dataset, sampler=sampler, batch_size=BATCH,
                            num_workers=int(workers), collate_fn=list)
    # Ready: the test starts the jobs' epochs at once (so they do run side by side).
    print("ready", flush=True)
    sys.stdin.readline()
    outputs = []
    for epoch in range(int(epochs)):
        sampler.set_epoch(epoch)
        outputs.append([x.tolist() for batch in loader for x in batch])
    print(json.dumps({"outputs": outputs, "stats": dataset.store.stats()}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
