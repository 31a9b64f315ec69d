"""LIRSDataset behind the tf.data service: a dispatcher and two workers on localhost.

    .venv/bin/python examples/tf_data_service.py

Starts tf.data.experimental.service.DispatchServer and two WorkerServers in this
process (port 0: free ports; a real deployment runs them on other machines, see
docs/CLUSTER.md) and reads a LIRS file through `distribute` in both processing
modes:

parallel_epochs -- every worker runs the WHOLE dataset. With two workers the
    consumer gets every instance twice per epoch. With a fixed seed both
    workers compute the same permutation and the consumer interleaves them
    round-robin, so the two copies of an instance arrive close together
    (within a few batches): twice the I/O and correlated duplicates, not a
    shuffle of a doubled dataset. Use it only when each worker is meant to
    produce a full epoch (e.g. several independent trainers).

distributed_epoch -- the dispatcher splits the dataset's source among the
    workers (as ShardingPolicy.DYNAMIC does). LIRSDataset's splits are the
    parts of its epoch's permutation (about 256 contiguous blocks of it;
    page-aware, whole pages): every worker computes the same permutation from
    the one fixed seed and reads only the parts the dispatcher hands it, so
    the epoch is every instance exactly once and every byte is read once. A
    fast worker takes more parts. Each job re-creates the dataset, so a new
    permutation per epoch needs a new seed per epoch (`epoch_seed`).
    `distributed_epoch_by_shard` is the older form (a splittable source of
    shard numbers, each flat_mapped to one LIRS shard).

The file paths must be readable by every worker (shared storage), and every
worker process must have the op library loaded (import tfrecord_lirs).
"""

import hashlib
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

service = tf.data.experimental.service


def start_local_cluster(num_workers=2):
    """A dispatcher and `num_workers` workers on loopback, free ports. Keep the
    returned servers referenced: they stop when garbage-collected."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://", 1)[1]
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address, port=0))
               for _ in range(num_workers)]
    return dispatcher, workers


def epoch_seed(seed, epoch):
    """A deterministic seed for (seed, epoch), the same on every machine."""
    digest = hashlib.sha256(f"lirs-epoch:{seed}:{epoch}".encode()).digest()
    return int.from_bytes(digest[:7], "little")


def parallel_epochs(files, target, seed, page_aware=False, page_size=4096):
    """Every worker reads the whole dataset: each instance num_workers times."""
    ds = LIRSDataset(files, seed=seed, page_aware=page_aware, page_size=page_size)
    return ds.apply(service.distribute("parallel_epochs", target))


def distributed_epoch(files, target, seed, epoch, page_aware=False, page_size=4096):
    """One epoch, its parts handed out to the workers: each instance once."""
    ds = LIRSDataset(files, seed=epoch_seed(seed, epoch), page_aware=page_aware,
                     page_size=page_size)
    return ds.apply(service.distribute("distributed_epoch", target))


def distributed_epoch_by_shard(files, target, seed, epoch, num_shards=8, page_aware=False,
                               page_size=4096):
    """One epoch, split among the workers by LIRS shard: each instance once."""
    s = epoch_seed(seed, epoch)

    def shard(k):
        return LIRSDataset(files, seed=s, page_aware=page_aware, num_shards=num_shards,
                           shard_index=k, page_size=page_size)

    ds = tf.data.Dataset.range(num_shards).flat_map(shard)
    return ds.apply(service.distribute("distributed_epoch", target))


def main():
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "demo.tfrecord")
    n = 2000
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(n):
            w.write(b"%d:" % i + b"x" * (i % 97))

    dispatcher, workers = start_local_cluster(2)
    print(f"dispatcher {dispatcher.target}, {len(workers)} workers")

    def ids(ds):
        return [int(r.split(b":", 1)[0]) for r in ds.as_numpy_iterator()]

    got = ids(parallel_epochs([path], dispatcher.target, seed=1))
    print(f"parallel_epochs: {len(got)} elements for {n} instances "
          f"(each {len(got) // n}x); first 8: {got[:8]}")

    for epoch in range(2):
        got = ids(distributed_epoch([path], dispatcher.target, seed=1, epoch=epoch))
        assert sorted(got) == list(range(n))
        print(f"distributed_epoch, epoch {epoch}: {len(got)} elements, every instance "
              f"once; first 8: {got[:8]}")

    try:
        ids(LIRSDataset([path]).apply(
            service.distribute("distributed_epoch", dispatcher.target)))
    except tf.errors.InvalidArgumentError as e:
        print("LIRSDataset without a seed in distributed_epoch:", e.message.split("\n")[0],
              file=sys.stderr)


if __name__ == "__main__":
    main()
