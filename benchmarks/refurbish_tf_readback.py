"""The CPU cost of a hit in tf.data's `augment(share=)` (a sample read back from the
store, not computed): one job fills a store under /dev/shm with 2 epochs of row 14's
augmentation (512 PNG Examples), then reads the same epochs back 3 times (every
sample a hit). Prints the fill's and each read-back's images/s and CPU us per image
(this process's, every thread's; steadier than wall time on a shared machine).

    PYTHONPATH=python .venv/bin/python benchmarks/refurbish_tf_readback.py --out DIR
                                            [--parallel N]  (the map's; -1: AUTOTUNE)
"""

import argparse
import json
import os
import resource
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from refurbish_tf_bench import BATCH, SEED, final, partial, sub_seed, write_images  # noqa: E402


def augment(record, seed):
    return final(partial(record, sub_seed(seed, 1)), sub_seed(seed, 2))


def cpu_secs():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run(data, store, parallel):
    ds = tfrecord_lirs.augment([data], augment, seed=SEED, share=store, batch_size=BATCH,
                               epochs=2, augment_name="readback-bench",
                               num_parallel_calls=parallel)
    n, start, cpu = 0, time.perf_counter(), cpu_secs()
    for batch in ds.batch(BATCH).prefetch(tf.data.AUTOTUNE):
        n += batch.shape[0]
    secs, cpu = time.perf_counter() - start, cpu_secs() - cpu
    return {"images_per_s": round(n / secs), "cpu_us_per_image": round(1e6 * cpu / n)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--parallel", type=int, default=-1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, "readback-images-512.tfrecord")
    if not os.path.exists(data):
        write_images(data, 512)
    root = "/dev/shm" if os.path.isdir("/dev/shm") else args.out
    store = os.path.join(root, f"readback-bench-{os.getpid()}")
    try:
        print(json.dumps({"fill": run(data, store, args.parallel)}), flush=True)
        run(data, store, args.parallel)  # warm-up, every sample a hit
        print(json.dumps({"read_back": [run(data, store, args.parallel) for _ in range(3)],
                          "load_average": os.getloadavg()}), flush=True)
    finally:
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
