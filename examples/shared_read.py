"""Several trainers on one LIRS read: tf.data service's cross-trainer cache.

    .venv/bin/python examples/shared_read.py            # 1 trainer, then 3 shared, then 3 separate

Hyper-parameter sweeps run many jobs over the same data at once; each job's own
shuffle reads the whole dataset again (OneAccess measured up to 89 % duplicated
I/O). With the tf.data service, one job of ``LIRSDataset(...).repeat()`` runs on a
worker and the cross-trainer cache (``CrossTrainerCache``) hands every trainer the
same elements: one read serves them all.

Semantics: every trainer sees the SAME globally shuffled stream (the same instances
in the same order, each trainer from where the cache stands when it joins), so the
trainers are not independent samples of the data: use it when the jobs only differ
in what they do with the data (learning rate, architecture), not when their results
must be averaged as independent runs over different orders. The dataset must be
infinite (``.repeat()``); a trainer that falls behind by more than the worker's
cache (``WorkerConfig(cross_trainer_cache_size_bytes=...)``) skips ahead.

Storage reads are counted by ``tfrecord_lirs.process_io_totals()`` (every LIRS
reader of the process; here the tf.data service worker runs in this process).
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

service = tf.data.experimental.service


def trainer_iterators(files, target, trainers, shared, seed=7, batch_size=None):
    """One iterator per trainer. `shared`: one job ("sweep") with a cross-trainer
    cache, a trainer id each; otherwise a job of its own per trainer (today's
    separate shuffles, behind the same service)."""
    iterators = []
    for t in range(trainers):
        ds = LIRSDataset(files, seed=seed, batch_size=batch_size).repeat()
        if shared:
            ds = ds.apply(service.distribute(
                service.ShardingPolicy.OFF, target, job_name="sweep",
                cross_trainer_cache=service.CrossTrainerCache(trainer_id=f"trainer-{t}")))
        else:
            ds = ds.apply(service.distribute(service.ShardingPolicy.OFF, target,
                                             job_name=f"trainer-{t}"))
        iterators.append(iter(ds))
    return iterators


def run(files, trainers, shared, steps, batch_size=None):
    """Steps of `trainers` trainers taking turns (as concurrent jobs do), on a fresh
    dispatcher and worker in this process. Returns the bytes and reads that left
    storage, and each trainer's stream of first bytes (for comparing streams)."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    address = dispatcher.target.split("://", 1)[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=address, port=0))
    before = tfrecord_lirs.process_io_totals()
    iterators = trainer_iterators(files, dispatcher.target, trainers, shared,
                                  batch_size=batch_size)
    streams = [[] for _ in iterators]
    for _ in range(steps):
        for stream, it in zip(streams, iterators):
            element = next(it).numpy()
            stream.append(element[0] if batch_size else element)
    after = tfrecord_lirs.process_io_totals()
    del iterators, worker, dispatcher
    return {
        "bytes_read": after["bytes_read"] - before["bytes_read"],
        "reads": after["reads"] - before["reads"],
        "streams": [[bytes(e).decode("latin-1") for e in s] for s in streams],
    }


def write_demo_file(directory, n=20000, size=200):
    path = os.path.join(directory, "sweep.tfrecord")
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(n):
            w.write(b"%d:" % i + b"x" * size)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", help="a LIRS file (default: write a demo file)")
    parser.add_argument("--trainers", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40000)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="LIRSDataset(batch_size=...): elements are batches")
    parser.add_argument("--mode", choices=["one", "shared", "separate"],
                        help="run one case and print JSON (the test and bench use this)")
    args = parser.parse_args()
    path = args.file or write_demo_file(tempfile.mkdtemp())
    cases = ([args.mode] if args.mode else ["one", "shared", "separate"])
    for mode in cases:
        trainers = 1 if mode == "one" else args.trainers
        result = run([path], trainers, mode == "shared", args.steps, args.batch_size)
        if args.mode:
            print(json.dumps({k: v for k, v in result.items() if k != "streams"}
                             | {"same_stream": all(s == result["streams"][0]
                                                   for s in result["streams"])}))
        else:
            print(f"{mode:>8}: {trainers} trainer(s) x {args.steps} elements: "
                  f"{result['bytes_read'] / 1e6:.1f} MB read in {result['reads']} reads")


if __name__ == "__main__":
    main()
