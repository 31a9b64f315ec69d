"""`make bench` row 14, tf.data: data refurbishing (`tfrecord_lirs.refurbish`) against
standard tf.data augmentation, with row 14's CPU-bound augmentation written as TensorFlow
ops (a graph with no Python per sample). Prints one JSON line per pipeline.

    python refurbish_tf_bench.py --out DIR [--images N] [--epochs E] [--rounds R]
                                 [--store-root DIR] [--count]

The data: row 14's kind (96x96 PNG images in `tf.train.Example`s, a padded TFRecord
file). The augmentation, seeded by TensorFlow's stateless seeds: decode, random 80x80 crop
and flip, then RandAugment-like layers (rotate, 5x5 blur, contrast, colour, 3x3
sharpness, one drawn per layer); `partial` is decode + crop + flip + PARTIAL_LAYERS
layers, `final` FINAL_LAYERS more. Pipelines:

* standard: `LIRSDataset` (the same full-range shuffle) mapped by `final(partial(...))`
  every use, `num_parallel_calls=AUTOTUNE`;
* refurbish r: `tfrecord_lirs.refurbish` with its default store (this process's
  memory) and map depth (16 calls);
* refurbish_dir r=3: the same with a directory store under `--store-root` (default
  /dev/shm: what processes and jobs share).

Each pipeline runs in a process of its own (in one process, a paused parallel map
keeps computing ahead on the threads the next one uses), the four in turn, for R
rounds: a VM's rate drifts by tens of percent within minutes, and a ratio taken within
a round of back-to-back runs follows less of it than one of runs minutes apart.

`--count` runs each pipeline once under valgrind's callgrind instead (two at a time;
~12 min at its default of 256 images) and prints the instructions each executed per
image over epochs 1..E-1 (`benchmarks/counting.py`: the import, the tracing and epoch 0
are not counted), whole and in TensorFlow's kernels (`libtensorflow_cc`), and
standard's over each (`vs_standard`): the work ratio, which the machine's speed does
not move. It also counts `partial` alone in the standard pipeline's map, for the ratio
a refurbish step that cost nothing would reach (`ceiling_vs_standard`). On this VM one
pipeline's CPU time per image moved by up to 30 % from one process to the next, with
the same profile (2026-11-30), and so did the timed ratios.
valgrind runs the AVX2 code paths (it has no AVX-512), and thread pools spin while
valgrind runs one thread at a time, so the counts are not the timed runs' instructions;
the ratio is the figure.

Figures over epochs 1..E-1 (epoch 0 refreshes everything): images/s, batches of
BATCH consumed as fast as the pipeline delivers them, and CPU time per image (the
pipeline's process, every thread's: what the pipeline costs, whatever else runs on the
machine). A pipeline's line: the medians over the rounds, and its images/s over the
standard's in each round (`vs_standard_by_round`) and their median (`vs_standard`).
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs.refurbish_tf import refurbish  # noqa: E402
import counting  # noqa: E402
from counting import callgrind  # noqa: E402

SIZE, CROP = 96, 80
PARTIAL_LAYERS, FINAL_LAYERS = 4, 1
BATCH = 32
SEED = 42


def write_images(path, n):
    rng = np.random.default_rng(0)
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(n):
            base = rng.integers(0, 256, (SIZE // 8, SIZE // 8, 3), dtype=np.uint8)
            img = tf.cast(tf.image.resize(base, [SIZE, SIZE], "bilinear"), tf.uint8)
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[tf.io.encode_png(img).numpy()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
            }))
            w.write(ex.SerializeToString())


FEATURES = {"image": tf.io.FixedLenFeature([], tf.string)}


def sub_seed(seed, k):
    return tf.random.experimental.stateless_fold_in(seed, k)


def box_blur(f, k):
    kernel = tf.ones([k, k, 3, 1], tf.float32) / (k * k)
    return tf.nn.depthwise_conv2d(f[None], kernel, [1, 1, 1, 1], "SAME")[0]


def layer(x, seed):
    """One RandAugment-like distortion of a uint8 image, drawn by `seed`."""
    op = tf.random.stateless_uniform([], seed, maxval=5, dtype=tf.int32)
    u = tf.random.stateless_uniform([], sub_seed(seed, 1))
    f = tf.cast(x, tf.float32)

    def rotate():
        a = (u * 60.0 - 30.0) * math.pi / 180.0
        c, s = tf.cos(a), tf.sin(a)
        h = tf.cast(tf.shape(f)[0], tf.float32) / 2.0
        transform = [c, -s, h - c * h + s * h, s, c, h - s * h - c * h, 0.0, 0.0]
        return tf.raw_ops.ImageProjectiveTransformV3(
            images=f[None], transforms=tf.stack(transform)[None],
            output_shape=tf.shape(f)[:2], fill_value=0.0, interpolation="BILINEAR")[0]

    def blur():
        return f + (box_blur(f, 5) - f) * (0.3 + 0.7 * u)

    def contrast():
        m = tf.reduce_mean(f)
        return (f - m) * (0.5 + u) + m

    def colour():
        gray = tf.reduce_mean(f, axis=2, keepdims=True)
        return gray + (f - gray) * (0.2 + 1.6 * u)

    def sharpness():
        return f + (f - box_blur(f, 3)) * (0.5 + 1.5 * u)

    out = tf.switch_case(op, [rotate, blur, contrast, colour, sharpness])
    return tf.cast(tf.clip_by_value(out, 0.0, 255.0), tf.uint8)


def partial(record, seed):
    png = tf.io.parse_single_example(record, FEATURES)["image"]
    x = tf.io.decode_png(png, channels=3)
    x = tf.image.stateless_random_crop(x, [CROP, CROP, 3], seed)
    x = tf.image.stateless_random_flip_left_right(x, sub_seed(seed, 2))
    for k in range(PARTIAL_LAYERS):
        x = layer(x, sub_seed(seed, 10 + k))
    x.set_shape([CROP, CROP, 3])
    return x


def final(sample, seed):
    for k in range(FINAL_LAYERS):
        sample = layer(sample, sub_seed(seed, 20 + k))
    return sample


def standard(path, epochs, with_final=True):
    # Reshuffled every epoch; each use its own seed (its position in the run).
    # `with_final=False`: `partial` alone (--count's ceiling).
    ds = tfrecord_lirs.LIRSDataset([path], seed=SEED).repeat(epochs).enumerate()

    def use(k, rec):
        out = partial(rec, tf.stack([k, 0]))
        return final(out, tf.stack([k, 1])) if with_final else out

    return ds.map(use, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def timed(ds, n, epochs):
    """Seconds and this process's CPU seconds of epochs 1..E-1, and the images they
    delivered (CPU time per image holds on a machine shared with other work, where the
    wall time swings)."""
    it = iter(ds.batch(BATCH).prefetch(tf.data.AUTOTUNE))
    per_epoch = n // BATCH  # whole batches: the pipelines batch across epochs
    for _ in range(per_epoch):  # epoch 0
        next(it)
    seen = 0
    callgrind("on")  # --count only
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range((epochs - 1) * per_epoch):
        seen += len(next(it))
    secs, cpu = time.perf_counter() - start, time.process_time() - cpu
    callgrind("off")
    return secs, cpu, seen


def run_one(kind, r, path, epochs, store_root):
    """One pipeline in this process: its JSON figures."""
    n = len(tfrecord_lirs.DataSource([path]))
    store = None
    if kind in ("standard", "partial_alone"):
        ds = standard(path, epochs, with_final=kind == "standard")
    else:
        if kind == "refurbish_dir":  # else tf.data's default: this process's memory
            store = os.path.join(store_root, f"refurbish-tf-store-{os.getpid()}-{r}")
        ds = refurbish([path], partial, final, seed=SEED, reuse_factor=r,
                       batch_size=BATCH, store=store, epochs=epochs,
                       partial_name="refurbish-tf-bench-1")
    try:
        secs, cpu, seen = timed(ds, n, epochs)
    finally:
        if store is not None:
            shutil.rmtree(store, ignore_errors=True)
    return {"pipeline": kind, "r": r, "images": n, "epochs": epochs,
            "images_per_s": seen / secs, "cpu_us_per_image": cpu / seen * 1e6,
            "timed_images": seen}


PIPELINES = [("standard", 1), ("refurbish", 2), ("refurbish", 3), ("refurbish_dir", 3)]
KERNELS = "libtensorflow_cc.so"  # TensorFlow's kernels: the augmentation's work


def pipeline_command(args, kind, r):
    return [sys.executable, os.path.abspath(__file__), "--out", args.out,
            "--images", str(args.images), "--epochs", str(args.epochs),
            "--store-root", args.store_root or args.out, "--pipeline", kind, str(r)]


def count(args, kind, r):
    """One pipeline under callgrind: instructions per image over epochs 1..E-1."""
    out_file = os.path.join(args.out, f"callgrind-{kind}-{r}.out")
    cmd = counting.command(out_file) + pipeline_command(args, kind, r)
    env = dict(os.environ, BENCH_CALLGRIND="1", PYTHONHASHSEED="0", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    seen = json.loads(done.stdout.strip().splitlines()[-1])["timed_images"]
    by_object = counting.instructions(out_file)
    return {"pipeline": kind, "r": r, "images": args.images, "epochs": args.epochs,
            "instructions_per_image": sum(by_object.values()) / seen,
            "kernel_instructions_per_image":
                sum(n for o, n in by_object.items() if KERNELS in o) / seen}


def count_all(args):
    """--count: every pipeline counted, two at a time; one JSON line each."""
    import concurrent.futures
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        rows = list(pool.map(lambda p: count(args, *p), PIPELINES + [("partial_alone", 1)]))
    std, alone = rows[0], rows.pop()
    # The ceiling: a refurbish use whose step cost nothing is a 1/r share of `partial`
    # and the rest of a standard use (`final`, the map's call).
    rest = std["instructions_per_image"] - alone["instructions_per_image"]
    for row in rows:
        row["vs_standard"] = std["instructions_per_image"] / row["instructions_per_image"]
        row["kernel_vs_standard"] = (std["kernel_instructions_per_image"]
                                     / row["kernel_instructions_per_image"])
        row["partial_alone_instructions_per_image"] = alone["instructions_per_image"]
        row["ceiling_vs_standard"] = std["instructions_per_image"] / (
            alone["instructions_per_image"] / row["r"] + rest)
        print(json.dumps(row), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", type=int, default=None,
                    help="PNG Examples in the data file (default 1024; --count: 256)")
    ap.add_argument("--epochs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--store-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--pipeline", nargs=2, metavar=("KIND", "R"),
                    help="run only this pipeline, in this process (what a round runs)")
    ap.add_argument("--count", action="store_true",
                    help="count instructions per image under callgrind (module docs)")
    args = ap.parse_args()
    args.images = args.images or (256 if args.count else 1024)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"refurbish-tf-images-{args.images}.tfrecord")
    if not os.path.exists(path):
        write_images(path, args.images)
    root = args.store_root or args.out
    if args.pipeline:
        kind, r = args.pipeline[0], int(args.pipeline[1])
        print(json.dumps(run_one(kind, r, path, args.epochs, root)), flush=True)
        return
    if args.count:
        return count_all(args)
    rounds = []
    for _ in range(args.rounds):
        one = {}
        for kind, r in PIPELINES:
            out = subprocess.run(pipeline_command(args, kind, r), check=True,
                                 stdout=subprocess.PIPE, text=True).stdout
            one[(kind, r)] = json.loads(out.splitlines()[-1])
        rounds.append(one)
    for kind, r in PIPELINES:
        runs = [one[(kind, r)] for one in rounds]
        by_round = [one[(kind, r)]["images_per_s"] / one[("standard", 1)]["images_per_s"]
                    for one in rounds]
        print(json.dumps(dict(
            runs[0], rounds=len(runs),
            images_per_s=statistics.median(x["images_per_s"] for x in runs),
            cpu_us_per_image=statistics.median(x["cpu_us_per_image"] for x in runs),
            images_per_s_by_round=[x["images_per_s"] for x in runs],
            vs_standard=statistics.median(by_round), vs_standard_by_round=by_round)),
            flush=True)


if __name__ == "__main__":
    main()
