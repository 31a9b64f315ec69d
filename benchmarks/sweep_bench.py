"""`make bench` row 14, sweep: JOBS concurrent PyTorch jobs (processes, each a
DataLoader with WORKERS worker processes) with the same data, seed and augmentation,
sharing one store directory (`tfrecord_lirs.torch.AugmentDataset(..., share=dir)`:
each augmented sample is computed by the first job to need it, the others wait for it
or read it), against the same jobs each on a store of its own (every job computes
every sample). The augmentation is row 14's whole one (decode, crop, flip, 5
RandAugment-like layers), every epoch a new one (reuse_factor 1). Run with the
TensorFlow-free venv's python. Prints one JSON line per setting: per-job images/s
(mean, min), augmentations computed in all (each reads its record once: the records
read), and whether every job saw the same samples.

    python sweep_bench.py --out DIR [--images N] [--epochs E] [--jobs J] [--workers W]
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import torch.utils.data as tud

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import tfrecord_lirs  # noqa: E402
from refurbish_bench import BATCH, SEED, Counted, calls, whole, write_images  # noqa: E402
from tfrecord_lirs.torch import AugmentDataset  # noqa: E402


def digest(batch):
    return [hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=8).hexdigest()
            for x in batch]


def job(data, store, log, epochs, workers):
    """One job: prints its images/s over every epoch and a hash of its samples."""
    source = tfrecord_lirs.DataSource([data])
    dataset = AugmentDataset(source, Counted(whole, log), seed=SEED, batch_size=BATCH,
                             share=store, augment_name="sweep-bench-1")
    loader = tud.DataLoader(dataset, sampler=dataset.sampler, batch_size=BATCH,
                            num_workers=workers, collate_fn=digest, persistent_workers=True)
    seen = hashlib.blake2b(digest_size=8)
    start = time.perf_counter()
    for epoch in range(epochs):
        dataset.sampler.set_epoch(epoch)
        for hashes in loader:
            seen.update("".join(hashes).encode())
    secs = time.perf_counter() - start
    print(json.dumps({"images_per_s": len(source) * epochs / secs,
                      "samples": seen.hexdigest()}), flush=True)


def sweep(data, root, shared, args):
    """Starts the jobs at once; their results and the augmentations computed in all."""
    stores = [os.path.join(root, "shared" if shared else f"own-{j}") for j in range(args.jobs)]
    logs = [os.path.join(root, f"{'shared' if shared else 'own'}-{j}.calls")
            for j in range(args.jobs)]
    procs = [subprocess.Popen([sys.executable, __file__, "--job", data, store, log,
                               str(args.epochs), str(args.workers)],
                              stdout=subprocess.PIPE, text=True)
             for store, log in zip(stores, logs)]
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a job failed (exit {p.returncode})")
        results.append(json.loads(out.splitlines()[-1]))
    rates = [r["images_per_s"] for r in results]
    return {"pipeline": "sweep_shared" if shared else "sweep_separate", "jobs": args.jobs,
            "workers_per_job": args.workers, "images": args.images, "epochs": args.epochs,
            "per_job_images_per_s": sum(rates) / len(rates),
            "per_job_images_per_s_min": min(rates),
            "augmentations_computed": sum(calls(log) for log in logs),
            "one_jobs_augmentations": args.images * args.epochs,
            "same_samples": len({r["samples"] for r in results}) == 1,
            "samples": results[0]["samples"]}


def main():
    if sys.argv[1:2] == ["--job"]:
        data, store, log, epochs, workers = sys.argv[2:7]
        return job(data, store, log, int(epochs), int(workers))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--store-root", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, f"sweep-images-{args.images}.tfrecord")
    if not os.path.exists(data):
        write_images(data, args.images)
    root = os.path.join(args.store_root or args.out, f"sweep-bench-{os.getpid()}")
    os.makedirs(root)
    try:
        separate = sweep(data, root, False, args)
        shared = sweep(data, root, True, args)
        shared["speedup_per_job"] = (shared["per_job_images_per_s"]
                                     / separate["per_job_images_per_s"])
        shared["computed_over_one_job"] = (shared["augmentations_computed"]
                                           / shared["one_jobs_augmentations"])
        shared["same_samples_as_separate"] = shared["samples"] == separate["samples"]
        for row in (separate, shared):
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
