"""What row 14's per-batch spread would be from the augmentation's own costs alone.

    python refurbish_spread_model.py --out DIR    (DIR: row 14's, with its image file)

Times each piece of `refurbish_bench.py`'s augmentation in this process (the decode,
each of the 5 layer kinds), then draws batches of 32 as the pipelines make them: the
layer kinds at random, as the augmentation does, with a batch's refreshes per the
placement (standard: every use a refresh; refurbish r: the schedule's 10-11 (r=3) or
16 (r=2) a batch; random placement: a hypergeometric draw, the same refreshes at
random positions). Prints p95/p50 of the modelled batch times: no scheduling, no
processes, no store, so the difference between pipelines is the user function's cost
spread over fewer random layers a batch.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refurbish_bench as rb  # noqa: E402


class Fixed:
    """An rng whose layer draw is `op` (and mid-range strengths)."""

    def __init__(self, op):
        self.op = op

    def integers(self, k, *_):
        return self.op if k == 5 else 0

    def uniform(self, a, b):
        return (a + b) / 2


def per_use_seconds(fn, items):
    start = time.perf_counter()
    for x in items:
        fn(x)
    return (time.perf_counter() - start) / len(items)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", type=int, default=20000)
    args = ap.parse_args()
    source = rb.tfrecord_lirs.DataSource([os.path.join(args.out, "refurbish-images.tfrecord")])
    records = [source[i] for i in range(200)]
    decode = per_use_seconds(rb.decode, records)
    crops = [rb.decode(r)[:rb.CROP, :rb.CROP].copy() for r in records]
    layers = np.array([per_use_seconds(lambda x, op=op: rb.layer(x, Fixed(op)), crops)
                       for op in range(5)])
    rng = np.random.default_rng(0)
    n, batch = 1024, rb.BATCH

    def batch_time(refreshes):
        draws = rng.integers(5, size=refreshes * rb.PARTIAL_LAYERS)
        partial = refreshes * decode + layers[draws].sum()
        return partial + layers[rng.integers(5, size=batch * rb.FINAL_LAYERS)].sum()

    rows = {"decode_us": decode * 1e6, "layer_us": [round(v * 1e6) for v in layers]}
    rows["standard"] = rb.spread([batch_time(batch) for _ in range(args.batches)])
    for r in (2, 3):
        share = n // r / n * batch
        lo = int(share)
        fixed = [batch_time(lo + (rng.random() < share - lo)) for _ in range(args.batches)]
        rows[f"refurbish_{r}"] = rb.spread(fixed)
        drawn = rng.hypergeometric(n // r, n - n // r, batch, size=args.batches)
        rows[f"refurbish_{r}_random_placement"] = rb.spread([batch_time(k) for k in drawn])
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
