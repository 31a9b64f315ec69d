"""`make bench` row 14: data refurbishing (docs/FORMAT.md §7) against standard training and
data echoing, in a PyTorch DataLoader with 2 persistent worker processes, run with the
TensorFlow-free venv's python. Prints one JSON line per pipeline.

    python refurbish_bench.py --out DIR [--images N] [--epochs E] [--store-root DIR]

The data: PNG images in `tf.train.Example`s (the `tfrecord` package's protobuf), in a
padded TFRecord file. The augmentation (numpy and Pillow, CPU-bound): decode, random crop
and flip, then RandAugment-like layers; `partial` is decode + crop + flip + PARTIAL_LAYERS
layers, `final` FINAL_LAYERS more. Pipelines, side by side in one run:

* standard: `final(partial(record))` every use (a plain map-style Dataset and Sampler);
* refurbish r: `RefurbishSampler` + `RefurbishDataset` with a directory store under
  `--store-root` (default /dev/shm: the store shared by the workers in memory, where the
  README puts it; the paper's store is in memory too);
* refurbish r=3, store on disk: the same with the store under `--out`;
* refurbish r=3, random placement: the same uses in a random order, without the
  cache-aware shuffle (what the per-batch spread would be without it);
* echo r: the same machinery with the whole augmentation as `partial` and no `final`
  (data echoing: a fully augmented sample reused r epochs).

* second job: after refurbish r=3, a second job (fresh sampler, dataset and workers) with
  the same data, seed and partial function walks the same epochs on the first one's
  store: partial augmentations it computed against the first job's (a job of its own).

Figures, over epochs 1..E-1 (epoch 0 refreshes everything in every pipeline; the default
E=7 times 6 epochs, whole reuse cycles of r=2 and r=3): images/s; refreshes per batch
(min/max, from the schedule); the per-batch time spread: p95/p50 of the time a worker
spends on each batch (from the end of its previous batch, leaving out each worker's
first batch of an epoch), the CPU time per step the cache-aware shuffle keeps even, and,
for reference, of the time between the batches' arrivals in the training loop (two
workers' batches interleave there, so it swings with their phase); and diversity:
distinct (id, output) pairs per use (1.0 = every use a new output).
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
    """The stock pipeline: the whole augmentation on every use of `(id, epoch)`."""

    def __init__(self, source):
        self.source = source

    def __len__(self):
        return len(self.source)

    def __getitem__(self, use):
        i, epoch = use
        seed = tfrecord_lirs.refurbishing.final_seed(SEED, i, epoch)
        return whole(self.source[i], seed)


class EpochSampler(tud.Sampler):
    """`tfrecord_lirs.Sampler`'s order, each id with its epoch (persistent workers keep
    their copy of the dataset, so the epoch travels with the index)."""

    def __init__(self, n):
        self.sampler = tfrecord_lirs.Sampler(n, seed=SEED)
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.sampler.set_epoch(epoch)

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        return ((i, self.epoch) for i in self.sampler)


class RandomPlacement(tud.Sampler):
    """The schedule's uses of each epoch in a random order (seeded): the same refreshes
    and reuses, without the cache-aware shuffle that gives every batch its share."""

    def __init__(self, sampler):
        self.sampler, self.schedule = sampler, sampler.schedule

    def set_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        self.epoch = epoch

    def order(self, epoch):
        return np.random.default_rng([SEED, epoch]).permutation(len(self.sampler))

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        uses = list(self.sampler)
        return (uses[k] for k in self.order(self.epoch))


def collate(batch):
    """The outputs' hashes, and when and in which worker the batch was done."""
    hashes = [hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=8).digest()
              for x in batch]
    return hashes, os.getpid(), time.perf_counter()


def run(kind, r, source, epochs, store, log=None, random_placement=False):
    """Per epoch: the batches' arrival times, their (worker, done time), the output
    hashes by id and the refreshes per batch (`log`: count the partial augmentations
    in that file; `random_placement`: the uses in a random order, see
    `RandomPlacement`)."""
    n = len(source)
    if kind == "standard":
        sampler, data = EpochSampler(n), Standard(source)
    else:
        sampler = RefurbishSampler(source, seed=SEED, reuse_factor=r, batch_size=BATCH)
        fns = (partial, final) if kind == "refurbish" else (whole, identity)
        if log is not None:
            fns = (Counted(fns[0], log), fns[1])
        data = RefurbishDataset(source, *fns, sampler, store=store,
                                partial_name=f"{kind}-bench-1")
        if random_placement:
            sampler = RandomPlacement(sampler)
    loader = tud.DataLoader(data, sampler=sampler, batch_size=BATCH, num_workers=2,
                            collate_fn=collate, persistent_workers=True)
    times, done, outputs, refreshes = [], [], [], []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        if kind == "standard":
            ids = [i for i, _ in sampler]
        else:
            ids, refresh, _ = sampler.schedule.epoch(epoch)
            if random_placement:
                order = sampler.order(epoch)
                ids, refresh = ids[order], refresh[order]
            ids = ids.tolist()
            refreshes.append([int(refresh[b:b + BATCH].sum()) for b in range(0, n, BATCH)])
        epoch_times, epoch_done, got = [time.perf_counter()], [], []
        for hashes, worker, at in loader:
            got.extend(hashes)
            epoch_times.append(time.perf_counter())
            epoch_done.append((worker, at))
        times.append(epoch_times)
        done.append(epoch_done)
        outputs.append(list(zip(ids, got)))
    return times, done, outputs, refreshes


def spread(values):
    values = sorted(values)
    return values[int(len(values) * 0.95)] / values[len(values) // 2]


def summary(kind, r, times, done, outputs, refreshes, n):
    steady = range(1, len(times))
    secs = sum(times[e][-1] - times[e][0] for e in steady)
    per_batch = []
    for e in steady:
        last = {}
        for worker, at in sorted(done[e], key=lambda d: d[1]):
            if worker in last:
                per_batch.append(at - last[worker])
            last[worker] = at
    # From the first batch on (the wait for the first one is the workers' start).
    arrivals = [b - a for e in steady for a, b in zip(times[e][1:], times[e][2:])]
    uses = [pair for e in steady for pair in outputs[e]]
    out = {"pipeline": kind, "r": r, "images_per_s": len(uses) / secs,
           "batch_p95_over_p50": spread(per_batch),
           "arrival_p95_over_p50": spread(arrivals),
           "diversity": len(set(uses)) / len(uses), "images": n, "epochs": len(times)}
    if refreshes:
        full = [k for e in steady for k in refreshes[e][:-1]]  # full batches
        out["refreshes_per_batch"] = [min(full), max(full)]
        out["refreshes_per_batch_mean"] = statistics.mean(full)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=7)
    ap.add_argument("--store-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None,
                    help="where the stores go (default /dev/shm; the disk row uses --out)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "refurbish-images.tfrecord")
    if not os.path.exists(path):
        write_images(path, args.images)
    source = tfrecord_lirs.DataSource([path])
    memory_root = args.store_root or args.out
    stores = []
    try:
        for kind, r, disk in [("standard", 1, False), ("refurbish", 2, False),
                              ("refurbish", 3, False), ("refurbish_disk", 3, True),
                              ("refurbish_random", 3, False), ("echo", 2, False),
                              ("echo", 3, False)]:
            # A new directory each, all removed at the end (entries put into a path
            # just emptied of 3,000 cost 93-106 us a put against 65-75 us in a new
            # directory, ext4 here).
            store = os.path.join(args.out if disk else memory_root,
                                 f"refurbish-store-{os.getpid()}-{len(stores)}")
            stores.append(store)
            logs = [os.path.join(args.out, f"refurbish-{job}.calls")
                    for job in ("own", "second")]
            for log in logs:
                if os.path.exists(log):
                    os.remove(log)
            second = kind == "refurbish" and r == 3
            times, done, outputs, refreshes = run(kind.split("_")[0], r, source,
                                                  args.epochs, store,
                                                  logs[0] if second else None,
                                                  random_placement=kind.endswith("_random"))
            row = summary(kind, r, times, done, outputs, refreshes, len(source))
            row["store"] = os.path.dirname(store)
            print(json.dumps(row), flush=True)
            if second:
                _, _, again, _ = run(kind, r, source, args.epochs, store, logs[1])
                print(json.dumps({"pipeline": "second_job", "r": r,
                                  "partial_computed": calls(logs[1]),
                                  "own_job_partial_computed": calls(logs[0]),
                                  "same_outputs": again == outputs}), flush=True)
    finally:
        for store in stores:
            shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    main()
