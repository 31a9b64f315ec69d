"""LIRSDataset under tf.distribute: MultiWorkerMirroredStrategy, two local workers.

    .venv/bin/python examples/multi_worker.py            # writes a demo file, launches 2 workers
    .venv/bin/python examples/multi_worker.py --data f.tfrecord --epochs 3

The launcher starts one process per worker with TF_CONFIG pointing at free
localhost ports (what a cluster scheduler would do, one process per machine).
Every worker builds its input with `strategy.distribute_datasets_from_function`:

    def dataset_fn(ctx):                          # ctx: tf.distribute.InputContext
        return LIRSDataset(files, seed=SEED,      # the SAME seed on every worker
                           num_shards=ctx.num_input_pipelines,
                           shard_index=ctx.input_pipeline_id).batch(per_replica_batch)

With the same seed, every worker computes the same global permutation of all
instances for an epoch and reads only its own slice of it (instance-based:
positions [k*N/K, (k+1)*N/K); page-aware: the pages j with j mod K == k), so
the workers' shards are disjoint and together cover every instance exactly
once per epoch; the next iteration (epoch) is a new global permutation.

Each worker writes the instance ids it read per epoch to --report-dir/worker_<i>.json
and runs one all-reduce per epoch (the global count) to show the workers
really form one collective group. The launcher checks the cover and prints a
summary.  Records are expected to start with "<id>:" (as the demo file does);
a real job would parse tf.train.Example instead.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

SEED = 2024


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def write_demo_file(path, n=1000, page_size=4096):
    import tfrecord_lirs
    with tfrecord_lirs.PaddedWriter(path, page_size=page_size) as w:
        for i in range(n):
            w.write(b"%d:" % i + b"x" * (i % 97))
    return n


def worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from tfrecord_lirs import LIRSDataset

    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    def dataset_fn(ctx):
        ds = LIRSDataset([args.data], seed=SEED, page_aware=args.page_aware,
                         num_shards=ctx.num_input_pipelines,
                         shard_index=ctx.input_pipeline_id, page_size=args.page_size)
        return ds.batch(ctx.get_per_replica_batch_size(args.global_batch))

    dist = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def global_count(n):
        return strategy.reduce(tf.distribute.ReduceOp.SUM,
                               strategy.run(lambda: tf.constant(n, tf.int64)), axis=None)

    epochs = []
    for _ in range(args.epochs):
        seen = []
        for batch in dist:          # one iteration = one epoch (a new permutation)
            for local in strategy.experimental_local_results(batch):
                seen.extend(int(r.split(b":", 1)[0]) for r in local.numpy())
        total = int(global_count(len(seen)))
        epochs.append({"ids": seen, "global_count": total})
    with open(os.path.join(args.report_dir, f"worker_{task}.json"), "w",
              encoding="utf-8") as f:
        json.dump({"task": task, "epochs": epochs}, f)


def launch(args):
    """Starts args.workers processes with TF_CONFIG; returns their reports."""
    ports = free_ports(args.workers)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for i in range(args.workers):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": i}})
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--data", args.data,
               "--epochs", str(args.epochs), "--report-dir", args.report_dir,
               "--page-size", str(args.page_size), "--global-batch", str(args.global_batch)]
        if args.page_aware:
            cmd.append("--page-aware")
        procs.append(subprocess.Popen(cmd, env=env))
    deadline = time.monotonic() + args.timeout
    try:
        for p in procs:
            rc = p.wait(timeout=max(1, deadline - time.monotonic()))
            if rc != 0:
                raise RuntimeError(f"worker exited with {rc}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    reports = []
    for i in range(args.workers):
        with open(os.path.join(args.report_dir, f"worker_{i}.json"), encoding="utf-8") as f:
            reports.append(json.load(f))
    return reports


def check_cover(reports, n):
    """Per epoch: the workers' ids are disjoint and cover 0..n-1 exactly once."""
    for e in range(len(reports[0]["epochs"])):
        all_ids = [i for r in reports for i in r["epochs"][e]["ids"]]
        assert sorted(all_ids) == list(range(n)), f"epoch {e}: not an exact cover"
        assert all(r["epochs"][e]["global_count"] == n for r in reports)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="padded TFRecord file with offsets (default: write one)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--page-size", type=int, default=4096)
    ap.add_argument("--page-aware", action="store_true")
    ap.add_argument("--report-dir")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main():
    args = parse_args()
    if args.worker:
        worker(args)
        return
    tmp = tempfile.TemporaryDirectory()
    args.report_dir = args.report_dir or tmp.name
    n = None
    if args.data is None:
        args.data = os.path.join(tmp.name, "demo.tfrecord")
        n = write_demo_file(args.data, page_size=args.page_size)
    reports = launch(args)
    if n is not None:
        check_cover(reports, n)
    for r in reports:
        sizes = [len(e["ids"]) for e in r["epochs"]]
        print(f"worker {r['task']}: instances per epoch {sizes}, "
              f"first ids of epoch 0 {r['epochs'][0]['ids'][:6]}")
    if n is not None:
        print(f"each of {args.epochs} epochs: the {args.workers} shards are disjoint and "
              f"cover all {n} instances exactly once")
    tmp.cleanup()


if __name__ == "__main__":
    main()
