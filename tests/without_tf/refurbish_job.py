"""One training job's input pipeline with data refurbishing, as a process of its own
(tests/without_tf/test_refurbish_second_job.py runs two on one store): a PyTorch
DataLoader over RefurbishSampler + RefurbishDataset. It reads epoch numbers from stdin,
one a line, and answers each with a JSON line: the partial augmentations it computed in
that epoch and the epoch's final outputs in delivery order.

    python refurbish_job.py DATA STORE SEED REUSE_FACTOR BATCH
"""

import json
import sys

import numpy as np
import torch.utils.data as tud

import tfrecord_lirs
from tfrecord_lirs.torch import RefurbishDataset, RefurbishSampler

computed = 0


def partial(record, seed):
    global computed
    computed += 1
    rng = np.random.default_rng(seed)
    return np.frombuffer(record, dtype=np.uint8).astype(np.int64).sum() + rng.integers(
        0, 1 << 30, 4)


def final(sample, seed):
    return sample * 3 + np.random.default_rng(seed).integers(0, 1000, 4)


def main(data, store, seed, reuse_factor, batch):
    source = tfrecord_lirs.DataSource([data])
    sampler = RefurbishSampler(source, seed=int(seed), reuse_factor=int(reuse_factor),
                               batch_size=int(batch))
    dataset = RefurbishDataset(source, partial, final, sampler, store=store,
                               partial_name="refurbish_job.partial v1")
    loader = tud.DataLoader(dataset, sampler=sampler, batch_size=int(batch),
                            num_workers=0, collate_fn=list)
    for line in sys.stdin:
        epoch = int(line)
        sampler.set_epoch(epoch)
        before = computed
        outputs = [x.tolist() for batch_ in loader for x in batch_]
        print(json.dumps({"epoch": epoch, "computed": computed - before,
                          "outputs": outputs}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
