"""`make bench` row 14: data refurbishing (docs/FORMAT.md §7) against standard training and
data echoing, in a PyTorch DataLoader with 2 worker processes, run with the
TensorFlow-free venv's python. Prints one JSON line per pipeline.

    python refurbish_bench.py --out DIR [--images N] [--epochs E]

The data: PNG images in `tf.train.Example`s (the `tfrecord` package's protobuf), in a
padded TFRecord file. The augmentation (numpy and Pillow, CPU-bound): decode, random crop
and flip, then RandAugment-like layers; `partial` is decode + crop + flip + PARTIAL_LAYERS
layers, `final` FINAL_LAYERS more. Pipelines, side by side in one run:

* standard: `final(partial(record))` every use (a plain map-style Dataset and Sampler);
* refurbish r: `RefurbishSampler` + `RefurbishDataset` with a directory store;
* echo r: the same machinery with the whole augmentation as `partial` and no `final`
  (data echoing: a fully augmented sample reused r epochs).

* second job: after refurbish r=3, a second job (fresh sampler, dataset and workers) with
  the same data, seed and partial function walks the same epochs on the first one's
  store: partial augmentations it computed against the first job's (a job of its own).

Figures: images/s over epochs 1..E-1 (epoch 0 refreshes everything in every pipeline),
refreshes per batch (min/max over those epochs, from the schedule), per-batch time spread
(p95/p50 of the time between batches, from each epoch's first batch on), and diversity: distinct (id, output) pairs over
those epochs per use (1.0 = every use a new output).
"""

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np
import torch.utils.data as tud
from PIL import Image
from tfrecord import example_pb2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tfrecord_lirs  # noqa: E402
from tfrecord_lirs.torch import RefurbishDataset, RefurbishSampler  # noqa: E402

SIZE, CROP = 96, 80
PARTIAL_LAYERS, FINAL_LAYERS = 4, 1
BATCH = 32
SEED = 42


def write_images(path, n):
    rng = np.random.default_rng(0)
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(n):
            base = rng.integers(0, 256, (SIZE // 8, SIZE // 8, 3), dtype=np.uint8)
            img = Image.fromarray(base).resize((SIZE, SIZE), Image.BILINEAR)
            buf = io.BytesIO()
            img.save(buf, format="PNG")
            ex = example_pb2.Example()
            ex.features.feature["image"].bytes_list.value.append(buf.getvalue())
            ex.features.feature["label"].int64_list.value.append(i % 10)
            w.write(ex.SerializeToString())


def decode(record):
    ex = example_pb2.Example.FromString(record)
    png = ex.features.feature["image"].bytes_list.value[0]
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def layer(x, rng):
    """One RandAugment-like distortion, drawn by `rng`."""
    op = rng.integers(5)
    if op == 0:
        img = Image.fromarray(x).rotate(float(rng.uniform(-30, 30)), Image.BILINEAR)
        return np.asarray(img)
    f = x.astype(np.float32)
    if op == 1:  # blur: a 5x5 box, separable, blended by a random strength
        k = np.ones(5, np.float32) / 5
        b = np.apply_along_axis(lambda v: np.convolve(v, k, "same"), 0, f)
        b = np.apply_along_axis(lambda v: np.convolve(v, k, "same"), 1, b)
        f = f + (b - f) * rng.uniform(0.3, 1.0)
    elif op == 2:  # contrast
        f = (f - f.mean()) * rng.uniform(0.5, 1.5) + f.mean()
    elif op == 3:  # colour
        gray = f.mean(axis=2, keepdims=True)
        f = gray + (f - gray) * rng.uniform(0.2, 1.8)
    else:  # sharpness: unsharp mask with a 3x3 box
        k = np.ones(3, np.float32) / 3
        b = np.apply_along_axis(lambda v: np.convolve(v, k, "same"), 0, f)
        b = np.apply_along_axis(lambda v: np.convolve(v, k, "same"), 1, b)
        f = f + (f - b) * rng.uniform(0.5, 2.0)
    return np.clip(f, 0, 255).astype(np.uint8)


def partial(record, seed):
    rng = np.random.default_rng(seed)
    x = decode(record)
    top, left = rng.integers(0, SIZE - CROP + 1, 2)
    x = x[top:top + CROP, left:left + CROP]
    if rng.integers(2):
        x = x[:, ::-1]
    for _ in range(PARTIAL_LAYERS):
        x = layer(np.ascontiguousarray(x), rng)
    return x


def final(sample, seed):
    rng = np.random.default_rng(seed)
    for _ in range(FINAL_LAYERS):
        sample = layer(sample, rng)
    return sample


def whole(record, seed):
    return final(partial(record, seed), seed ^ 0x5DEECE66D)


def identity(sample, seed):
    return sample


class Counted:
    """`fn`, appending one byte to `log` per call (the DataLoader's worker processes
    share the file; appends of one byte do not interleave)."""

    def __init__(self, fn, log):
        self.fn, self.log = fn, log

    def __call__(self, record, seed):
        with open(self.log, "ab") as f:
            f.write(b".")
        return self.fn(record, seed)


def calls(log):
    return os.path.getsize(log) if os.path.exists(log) else 0


class Standard(tud.Dataset):
    """The stock pipeline: the whole augmentation on every use."""

    def __init__(self, source, epoch):
        self.source, self.epoch = source, epoch

    def __len__(self):
        return len(self.source)

    def __getitem__(self, i):
        seed = tfrecord_lirs.refurbishing.final_seed(SEED, i, self.epoch)
        return whole(self.source[i], seed)


def collate(batch):
    return [hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=8).digest()
            for x in batch]


def run(kind, r, source, epochs, store, log=None):
    """Per-batch arrival times and output hashes of `epochs` epochs (`log`: count the
    partial augmentations in that file)."""
    n = len(source)
    sampler = None
    if kind != "standard":
        sampler = RefurbishSampler(source, seed=SEED, reuse_factor=r, batch_size=BATCH)
        fns = (partial, final) if kind == "refurbish" else (whole, identity)
        if log is not None:
            fns = (Counted(fns[0], log), fns[1])
        data = RefurbishDataset(source, *fns, sampler, store=store,
                                partial_name=f"{kind}-bench-1")
    times, outputs, refreshes = [], [], []
    for epoch in range(epochs):
        if sampler is None:
            plain = tfrecord_lirs.Sampler(n, seed=SEED)
            plain.set_epoch(epoch)
            ids = list(plain)
            loader = tud.DataLoader(Standard(source, epoch), sampler=ids, batch_size=BATCH,
                                    num_workers=2, collate_fn=collate)
        else:
            sampler.set_epoch(epoch)
            ids = sampler.schedule.epoch(epoch)[0].tolist()
            refresh = sampler.schedule.epoch(epoch)[1]
            refreshes.append([int(refresh[b:b + BATCH].sum()) for b in range(0, n, BATCH)])
            loader = tud.DataLoader(data, sampler=sampler, batch_size=BATCH, num_workers=2,
                                    collate_fn=collate)
        epoch_times, got = [time.perf_counter()], []
        for batch in loader:
            got.extend(batch)
            epoch_times.append(time.perf_counter())
        times.append(epoch_times)
        outputs.append(list(zip(ids, got)))
    return times, outputs, refreshes


def summary(kind, r, times, outputs, refreshes, n):
    steady = range(1, len(times))
    secs = sum(times[e][-1] - times[e][0] for e in steady)
    # From the first batch on (the wait for the first one is the workers' start).
    gaps = [b - a for e in steady for a, b in zip(times[e][1:], times[e][2:])]
    gaps.sort()
    p50 = gaps[len(gaps) // 2]
    p95 = gaps[int(len(gaps) * 0.95)]
    uses = [pair for e in steady for pair in outputs[e]]
    out = {"pipeline": kind, "r": r, "images_per_s": len(uses) / secs,
           "batch_p95_over_p50": p95 / p50,
           "diversity": len(set(uses)) / len(uses), "images": n, "epochs": len(times)}
    if refreshes:
        per_batch = [k for e in steady for k in refreshes[e][:-1]]  # full batches
        out["refreshes_per_batch"] = [min(per_batch), max(per_batch)]
        out["refreshes_per_batch_mean"] = statistics.mean(per_batch)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "refurbish-images.tfrecord")
    if not os.path.exists(path):
        write_images(path, args.images)
    source = tfrecord_lirs.DataSource([path])
    for kind, r in [("standard", 1), ("refurbish", 2), ("refurbish", 3), ("echo", 2),
                    ("echo", 3)]:
        store = os.path.join(args.out, "refurbish-store")
        shutil.rmtree(store, ignore_errors=True)
        logs = [os.path.join(args.out, f"refurbish-{job}.calls") for job in ("own", "second")]
        for log in logs:
            if os.path.exists(log):
                os.remove(log)
        second = kind == "refurbish" and r == 3
        times, outputs, refreshes = run(kind, r, source, args.epochs, store,
                                        logs[0] if second else None)
        print(json.dumps(summary(kind, r, times, outputs, refreshes, len(source))), flush=True)
        if second:
            _, again, _ = run(kind, r, source, args.epochs, store, logs[1])
            print(json.dumps({"pipeline": "second_job", "r": r,
                              "partial_computed": calls(logs[1]),
                              "own_job_partial_computed": calls(logs[0]),
                              "same_outputs": again == outputs}), flush=True)
        shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
