"""`make bench` row 14, sweep: JOBS concurrent jobs (processes) with the same data,
seed and augmentation, sharing one store directory (each augmented sample is computed
by the first job to need it, the others wait for it or read it), against the same jobs
each on a store of its own (every job computes every sample). Front ends:

* torch (the TensorFlow-free venv's python): each job a DataLoader with WORKERS worker
  processes over `tfrecord_lirs.torch.AugmentDataset(..., share=dir)`, row 14's whole
  augmentation (decode, crop, flip, 5 RandAugment-like layers) in numpy/PIL;
* tf (the TensorFlow venv's python): each job `tfrecord_lirs.augment(..., share=dir)`,
  the same augmentation as TensorFlow ops (benchmarks/refurbish_tf_bench.py), its map's
  `num_parallel_calls` the library's default (`--tf-parallel` to set it).

Every epoch a new augmentation (reuse_factor 1). Prints one JSON line per setting:
per-job images/s (mean, min) over epochs 1..E-1 (epoch 0, with each job's start,
untimed, as row 14's refurbish rows; its seconds are the jobs' `first_epoch_s`; the
jobs start epoch 1 together, once every one has finished epoch 0), CPU
time per image (tf: epochs 1..E-1; torch: every epoch), augmentations computed in all,
bytes the jobs read from the data file in all (the engine's read counters:
`_lirs.process_io_totals()` in the DataLoader workers,
`tfrecord_lirs.process_io_totals()` in a tf.data job), and whether every job saw the
same samples.

The two settings run ROUNDS times, alternated (separate, shared, separate, ...), and the
lines printed are the round whose speedup (shared over separate, per-job img/s) is the
median, with every round's speedup beside it: on this 2-core VM one round's speedup
ranged 1.57-2.91x for the same tree minutes apart (2026-11-29), so one round is noise.
Most of that spread was the jobs' timed epochs not overlapping (a job that starts late
times epochs with fewer jobs beside it); with the start barrier (`wait_for_start`) the
rounds of the tf sweep ranged 2.61-3.22x and of the PyTorch sweep 3.97-4.36x
(2026-11-30).

    python sweep_bench.py --out DIR [--frontend torch|tf] [--images N] [--epochs E]
                          [--jobs J] [--workers W] [--rounds R] [--tf-threads T]
                          [--tf-parallel P] [--tf-autotune on|off] [--count]

`--count` (tf jobs) runs every job under valgrind's callgrind and adds the
instructions the jobs executed over their timed epochs, per image delivered
(`instructions_per_image`; benchmarks/counting.py), and separate's over shared's
(`work_per_image_separate_over_shared`): the work ratio, which the machine's speed does
not move. Slow (valgrind runs one thread at a time, ~50x): `--images 128 --rounds 1`
takes ~10 min. callgrind counts user space only: the shared jobs' system calls (the
store's files, thread hand-offs) are not in it, so for throughput the ratio is a
ceiling and the timed runs' CPU time per image the closer figure (2026-11-30: 3.54x
counted, 2.64x by CPU time).

`--tf-autotune off` turns tf.data's autotuning and injected prefetch off in every tf
job. With them on (TensorFlow's default), samples of the idle task showed the CPUs idle
22-26 % of a 30-epoch sweep's steady state (`perf record -a -e cpu-clock`,
2026-11-29); `/proc/stat` and every switch to the idle task showed 0.1-1.4 % the next
day (benchmarks/PROFILE_NOTES.md).
"""

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import tfrecord_lirs  # noqa: E402
import counting  # noqa: E402
from counting import callgrind  # noqa: E402

try:  # the torch front end (the TensorFlow-free venv)
    import torch.utils.data as tud
    from refurbish_bench import BATCH, SEED, Counted, calls, whole, write_images
    from tfrecord_lirs.torch import AugmentDataset
except ImportError:  # the tf front end (the TensorFlow venv has no torch)
    Counted = object
    from refurbish_tf_bench import BATCH, SEED, write_images  # noqa: F401


def digest(batch):
    return [hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=8).hexdigest()
            for x in batch]


class CountedIo(Counted):
    """`Counted`, also writing what this worker process's readers read since it
    started (`worker_start`) to `<log>.io-<pid>` after each call: a record is read
    only to be augmented, so the last call's figure is the worker's."""

    def __call__(self, record, seed):
        out = super().__call__(record, seed)
        with open(f"{self.log}.io-{os.getpid()}", "w") as f:
            f.write(str(tfrecord_lirs._lirs.process_io_totals()[1] - _WORKER_START[0]))
        return out


_WORKER_START = [0]


def worker_start(_worker_id):
    # A forked worker inherits the counters of the process it was forked from.
    _WORKER_START[0] = tfrecord_lirs._lirs.process_io_totals()[1]


def worker_bytes(log):
    return sum(int(open(os.path.join(os.path.dirname(log), f)).read() or 0)
               for f in os.listdir(os.path.dirname(log))
               if f.startswith(os.path.basename(log) + ".io-"))


def cpu_secs(children=False):
    """This process's CPU time (every thread's, user and system), with its ended
    children's if `children` (a DataLoader's worker processes): on a shared, loaded
    machine a steadier figure than wall time."""
    whos = [resource.RUSAGE_SELF] + ([resource.RUSAGE_CHILDREN] if children else [])
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, whos))


def wait_for_start():
    """The start barrier: tells the bench this job has finished its untimed epoch 0,
    then waits until every job has (`sweep` answers on stdin), so the timed epochs of
    all jobs run at the same time. Without it a job that started late (TensorFlow's
    import and tracing take seconds, and vary) times some epochs with fewer jobs
    beside it: on this 2-core VM, with 3 timed epochs of ~2 s, one round's speedup
    ranged 1.54-4.22x (2026-11-29)."""
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        raise SystemExit("the bench ended before the timed epochs")


def job(data, store, log, epochs, workers):
    """One PyTorch job: prints its images/s over every epoch, a hash of its samples
    and the bytes its readers read."""
    source = tfrecord_lirs.DataSource([data])
    dataset = AugmentDataset(source, CountedIo(whole, log), seed=SEED, batch_size=BATCH,
                             share=store, augment_name="sweep-bench-1")
    loader = tud.DataLoader(dataset, sampler=dataset.sampler, batch_size=BATCH,
                            num_workers=workers, collate_fn=digest, persistent_workers=True,
                            worker_init_fn=worker_start)
    seen = hashlib.blake2b(digest_size=8)
    before = tfrecord_lirs._lirs.process_io_totals()[1]
    # The worker processes' CPU time is known only when they end, so it is counted over
    # every epoch; the rate is over epochs 1..E-1 (epoch 0 holds the workers' start).
    begin, cpu = time.perf_counter(), cpu_secs(children=True)
    for epoch in range(epochs):
        if epoch == 1:
            first_epoch_s = time.perf_counter() - begin
            wait_for_start()
            start = time.perf_counter()
        dataset.sampler.set_epoch(epoch)
        for hashes in loader:
            seen.update("".join(hashes).encode())
    secs = time.perf_counter() - start
    main_bytes = tfrecord_lirs._lirs.process_io_totals()[1] - before
    del loader  # its workers end, so their CPU time is counted as this process's children's
    print(json.dumps({"images_per_s": len(source) * (epochs - 1) / secs,
                      "first_epoch_s": first_epoch_s,
                      "cpu_secs": cpu_secs(children=True) - cpu,
                      "cpu_images": len(source) * epochs,
                      "samples": seen.hexdigest(), "computed": calls(log),
                      "bytes_read": main_bytes + worker_bytes(log)}), flush=True)


def tf_job(data, store, log, epochs, _workers):
    """One tf.data job (`tfrecord_lirs.augment(share=)`): the same report. Its
    augmentations are counted in the graph by a TensorFlow variable (no Python op)."""
    import tensorflow as tf

    from refurbish_tf_bench import final, partial, sub_seed

    threads = int(os.environ.get("SWEEP_TF_THREADS", "0"))
    if threads:  # --tf-threads: TensorFlow's pools, and the map's ops, sized per job
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        tf.config.threading.set_intra_op_parallelism_threads(threads)

    count = tf.Variable(0, dtype=tf.int64, trainable=False)

    def augment(record, seed):
        with tf.control_dependencies([count.assign_add(1)]):
            record = tf.identity(record)
        return final(partial(record, sub_seed(seed, 1)), sub_seed(seed, 2))

    n = len(tfrecord_lirs.DataSource([data]))
    parallel = os.environ["SWEEP_TF_PARALLEL"]  # "": the library's default
    ds = tfrecord_lirs.augment([data], augment, seed=SEED, share=store, batch_size=BATCH,
                               epochs=epochs, augment_name="sweep-bench-tf-1",
                               num_parallel_calls=int(parallel) if parallel else None)
    seen = hashlib.blake2b(digest_size=8)
    before = tfrecord_lirs.process_io_totals()["bytes_read"]
    if threads:
        one = tf.data.Options()
        one.threading.max_intra_op_parallelism = threads
        ds = ds.with_options(one)
    if os.environ["SWEEP_TF_AUTOTUNE"] == "off":  # --tf-autotune off
        off = tf.data.Options()
        off.autotune.enabled = False
        off.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(off)
    begin = time.perf_counter()
    # Epoch 0 untimed, as row 14's `timed`: it holds the iterator's creation (grappler
    # optimizing the map function, ~1-2 s of CPU once per job), which a 512-image bench
    # would otherwise spread as ~1 ms over every image.
    it = iter(ds.batch(BATCH).prefetch(tf.data.AUTOTUNE))
    for _ in range(n // BATCH):  # whole batches: the pipeline batches across epochs
        seen.update("".join(digest(next(it).numpy())).encode())
    # The map and the prefetch keep computing ahead while this job waits (at most the
    # map's depth and a few batches, as in every job and either setting).
    first_epoch_s = time.perf_counter() - begin
    wait_for_start()
    callgrind("on")  # --count only
    start, cpu, timed = time.perf_counter(), cpu_secs(), 0
    for batch in it:
        seen.update("".join(digest(batch.numpy())).encode())
        timed += len(batch)
    secs = time.perf_counter() - start
    callgrind("off")
    print(json.dumps({"images_per_s": timed / secs, "first_epoch_s": first_epoch_s,
                      "cpu_images": timed,
                      "samples": seen.hexdigest(),
                      "cpu_secs": cpu_secs() - cpu,
                      "computed": int(count.numpy()),
                      "bytes_read": tfrecord_lirs.process_io_totals()["bytes_read"] - before}),
          flush=True)


def sweep(data, root, shared, args):
    """Starts the jobs at once, releases them together once each has finished its
    epoch 0 (`wait_for_start`); their results and the augmentations computed in all."""
    stores = [os.path.join(root, "shared" if shared else f"own-{j}") for j in range(args.jobs)]
    logs = [os.path.join(root, f"{'shared' if shared else 'own'}-{j}.calls")
            for j in range(args.jobs)]
    counted = [os.path.join(root, f"callgrind-{j}.out") for j in range(args.jobs)]
    under = [counting.command(f) if args.count else [] for f in counted]
    procs = [subprocess.Popen(valgrind + [sys.executable, __file__, "--job", args.frontend,
                                          data, store, log, str(args.epochs),
                                          str(args.workers)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, SWEEP_TF_THREADS=str(args.tf_threads),
                                       SWEEP_TF_PARALLEL=("" if args.tf_parallel is None
                                                          else str(args.tf_parallel)),
                                       SWEEP_TF_AUTOTUNE=args.tf_autotune,
                                       BENCH_CALLGRIND="1" if args.count else "0"))
             for store, log, valgrind in zip(stores, logs, under)]
    try:
        for p in procs:  # the start barrier
            while (line := p.stdout.readline()) and line.strip() != "READY":
                pass
            if not line:
                raise SystemExit(f"a job ended before its timed epochs (exit {p.wait()})")
        for p in procs:
            p.stdin.write("GO\n")
            p.stdin.close()
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    results = []
    for p in procs:
        out = p.stdout.read()
        if p.wait() != 0:
            raise SystemExit(f"a job failed (exit {p.returncode})")
        results.append(json.loads(out.splitlines()[-1]))
    rates = [r["images_per_s"] for r in results]
    counts = {}
    if args.count:  # the timed epochs' instructions, every job's, per image delivered
        ir = sum(sum(counting.instructions(f).values()) for f in counted)
        counts["instructions_per_image"] = ir / sum(r["cpu_images"] for r in results)
    return {"pipeline": "sweep_shared" if shared else "sweep_separate",
            "frontend": args.frontend, "jobs": args.jobs,
            "workers_per_job": args.workers, "tf_threads": args.tf_threads,
            "tf_parallel": args.tf_parallel, "tf_autotune": args.tf_autotune,
            "images": args.images, "epochs": args.epochs,
            "per_job_images_per_s": sum(rates) / len(rates),
            "per_job_images_per_s_min": min(rates),
            "first_epoch_s_max": max(r["first_epoch_s"] for r in results),
            # The jobs' CPU time in all per image delivered (each job delivers every one).
            # tf: epochs 1..E-1; torch: every epoch (its workers' CPU time is known
            # only at their end).
            "cpu_us_per_image": 1e6 * sum(r["cpu_secs"] for r in results)
            / sum(r["cpu_images"] for r in results),
            "augmentations_computed": sum(r["computed"] for r in results),
            "bytes_read": sum(r["bytes_read"] for r in results),
            "one_jobs_augmentations": args.images * args.epochs,
            "same_samples": len({r["samples"] for r in results}) == 1,
            "samples": results[0]["samples"], **counts}


def main():
    if sys.argv[1:2] == ["--job"]:
        frontend, data, store, log, epochs, workers = sys.argv[2:8]
        run_job = tf_job if frontend == "tf" else job
        return run_job(data, store, log, int(epochs), int(workers))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--frontend", choices=("torch", "tf"), default="torch")
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tf-parallel", type=int, default=None,
                    help="tf jobs: the map's num_parallel_calls (-1: AUTOTUNE; "
                         "default: the library's, 16 over a shared store)")
    ap.add_argument("--tf-threads", type=int, default=0,
                    help="tf jobs: inter- and intra-op threads and the map's intra-op "
                         "parallelism per job (0: TensorFlow's defaults)")
    ap.add_argument("--tf-autotune", choices=("on", "off"), default="on",
                    help="tf jobs: tf.data's autotuning and injected prefetch (on: "
                         "TensorFlow's default, as users run; the module docs)")
    ap.add_argument("--store-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--count", action="store_true",
                    help="tf jobs: run each under valgrind's callgrind and count the "
                         "instructions of the timed epochs (module docs)")
    args = ap.parse_args()
    if args.count and args.frontend != "tf":
        raise SystemExit("--count: tf jobs only (a DataLoader's workers are processes "
                         "of their own)")
    if args.epochs < 2:
        raise SystemExit("--epochs: at least 2 (epoch 0 is untimed)")
    os.makedirs(args.out, exist_ok=True)
    # The same kind of PNG Examples, written by each front end's bench.
    data = os.path.join(args.out, f"sweep-images-{'tf-' if args.frontend == 'tf' else ''}"
                                  f"{args.images}.tfrecord")
    if not os.path.exists(data):
        write_images(data, args.images)
    root = os.path.join(args.store_root or args.out,
                        f"sweep-bench-{args.frontend}-{os.getpid()}")
    os.makedirs(root)
    if args.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    try:
        rounds = []
        for _ in range(args.rounds):
            separate = sweep(data, root, False, args)
            shared = sweep(data, root, True, args)
            rounds.append((shared["per_job_images_per_s"] / separate["per_job_images_per_s"],
                           separate, shared))
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root)
        speedups = [r[0] for r in rounds]
        _, separate, shared = sorted(rounds, key=lambda r: r[0])[(len(rounds) - 1) // 2]
        shared["speedup_per_job"] = (shared["per_job_images_per_s"]
                                     / separate["per_job_images_per_s"])
        shared["speedups_by_round"] = speedups
        shared["cpu_per_image_over_separate"] = (shared["cpu_us_per_image"]
                                                 / separate["cpu_us_per_image"])
        shared["load_average"] = os.getloadavg()
        shared["computed_over_one_job"] = (shared["augmentations_computed"]
                                           / shared["one_jobs_augmentations"])
        shared["same_samples_as_separate"] = shared["samples"] == separate["samples"]
        if args.count:
            shared["work_per_image_separate_over_shared"] = (
                separate["instructions_per_image"] / shared["instructions_per_image"])
        # One job alone reads what each separate job reads.
        shared["one_jobs_bytes_read"] = separate["bytes_read"] / separate["jobs"]
        shared["bytes_read_over_one_job"] = (shared["bytes_read"]
                                             / max(1.0, shared["one_jobs_bytes_read"]))
        for row in (separate, shared):
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
