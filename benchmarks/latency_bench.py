"""Row 8 of `make bench`: high-latency storage.

LIRSDataset over gs:// through TensorFlow's real GCS client (libcurl, TLS) against
the GCS emulator of tests/gcs_emulator.py, in a private network namespace, with a
latency injected into every object read (lognormal: median LATENCY_MEDIAN_MS, log-
space sigma LATENCY_SIGMA, seeded by each read's object and byte range, so every
contender meets the same latencies for the same reads, whatever the order they come
in; tests/latency.py): num_parallel_reads 1, 8, 32, 64, deterministic
and unordered, and stock TFRecordDataset(url).shuffle(10000) on the same storage,
all in one process, one after another.

TensorFlow's GCS read-ahead buffer (GCS_READ_CACHE_BLOCK_SIZE_MB, 64 MB by default)
is set to 0 for the run: with it, every random read fetches up to 64 MB from its
offset (and reads of one file are serialized behind its lock), which serves
sequential readers, not random access (README: reading from object storage).

    .venv/bin/python benchmarks/latency_bench.py [--out bench_out]   # the row alone
"""

import argparse
import json
import time
from pathlib import Path

from objstore_common import ROOT, run_snippet, unavailable, write_records

LATENCY_MEDIAN_MS = 50
LATENCY_SIGMA = 0.8
RECORDS = 6000
THREADS = [1, 8, 32, 64]
# Records timed per contender (a prefix of an epoch): fewer for one read in flight.
TAKE = {1: 120, 8: 600, 32: 1500, 64: 1500}
TAKE_STOCK = 3000

SNIPPET = """
    import inspect
    import tensorflow as tf
    import tfrecord_lirs
    url = cfg["url"]
    unordered_ok = "deterministic" in inspect.signature(
        tfrecord_lirs.LIRSDataset.__init__).parameters
    rows = []

    def timed(name, ds, n, **info):
        ds = ds.take(n)
        it = iter(ds)
        next(it)  # the first element: opening, table, pool start
        t = time.perf_counter()
        got = 1 + sum(1 for _ in it)
        dt = time.perf_counter() - t
        rows.append(dict(name=name, records=got - 1, seconds=dt, rate=(got - 1) / dt, **info))
        print(name, info, round((got - 1) / dt, 1), "rec/s", flush=True)

    for threads in cfg["threads"]:
        modes = [True, False] if unordered_ok else [True]
        for deterministic in modes:
            kw = {} if deterministic else dict(deterministic=False)
            ds = tfrecord_lirs.LIRSDataset(url, seed=7, num_parallel_reads=threads, **kw)
            timed("lirs", ds, cfg["take"][threads], threads=threads,
                  deterministic=deterministic)
    stock = tf.data.TFRecordDataset(url).shuffle(10000, seed=7)
    timed("stock", stock, cfg["take_stock"])
    save_results(cfg, rows=rows, unordered_available=unordered_ok)
"""


def run_latency(out_dir):
    """Measures row 8; returns its results (rows of rates, the latency model)."""
    from gcs_emulator import BUCKET, run_with_gcs

    why = unavailable(server=False)
    if why:
        return {"skipped": why}
    work = Path(out_dir) / "latency"
    work.mkdir(parents=True, exist_ok=True)
    (data,) = write_records([work / "remote.tfrecord"], RECORDS, 8)
    cfg = dict(url=f"gs://{BUCKET}/bench/remote.tfrecord", threads=THREADS, take=TAKE,
               take_stock=TAKE_STOCK)
    latency = {"median_ms": LATENCY_MEDIAN_MS, "sigma": LATENCY_SIGMA, "seed": 1}
    start = time.time()
    out = run_snippet(run_with_gcs, work,
                      {"bench/remote.tfrecord": data,
                       "bench/remote.tfrecord.offsets": Path(str(data) + ".offsets")},
                      SNIPPET, cfg, latency=latency, timeout=1200,
                      env={"GCS_READ_CACHE_BLOCK_SIZE_MB": "0"})
    out["latency"] = latency
    out["records"] = RECORDS
    out["file_bytes"] = data.stat().st_size
    out["minutes"] = (time.time() - start) / 60
    return out


def rate_of(res, threads, deterministic=True):
    for r in res["rows"]:
        if r["name"] == "lirs" and r["threads"] == threads and r["deterministic"] == deterministic:
            return r["rate"]
    return None


def add_rows(t, res, check, fmt_rate):
    """Adds row 8 to the `make bench` table `t` (run_bench.Table)."""
    sec = "8 high-latency storage (gs://, emulator)"
    if "skipped" in res:
        t.add(sec, "not run", res["skipped"])
        return
    lat = res["latency"]
    model = (f"lognormal latency per object read: median {lat['median_ms']} ms, "
             f"sigma {lat['sigma']}")
    one = rate_of(res, 1)
    for threads in THREADS:
        det = rate_of(res, threads)
        if det is None:
            continue
        label = f"LIRSDataset, num_parallel_reads={threads}"
        if threads == 32:
            v = det / one
            m = check(t, "8: 32 reads in flight vs 1", v, 10.0)
            t.add(sec, f"**{label}**", fmt_rate(det), f"{v:.1f}x of 1 read in flight",
                  ">= 10x", m)
        else:
            t.add(sec, label, fmt_rate(det),
                  model if threads == 1 else f"{det / one:.1f}x of 1 read in flight")
        un = rate_of(res, threads, deterministic=False)
        if un is not None:
            v = un / det
            if threads == 32:
                m = check(t, "8: unordered vs deterministic (32 in flight)", v, 1.2)
                t.add(sec, f"**{label}, deterministic=False**", fmt_rate(un),
                      f"{v:.2f}x of deterministic", ">= 1.2x", m)
            else:
                t.add(sec, f"{label}, deterministic=False", fmt_rate(un),
                      f"{v:.2f}x of deterministic")
    if not res.get("unordered_available"):
        t.add(sec, "LIRSDataset, deterministic=False", "n/a",
              "unordered delivery not available in this build")
    for r in res["rows"]:
        if r["name"] == "stock":
            t.add(sec, "stock TFRecordDataset(url).shuffle(10000)", fmt_rate(r["rate"]),
                  "sequential 256 KB reads: few requests, a 10000-record window")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench_out"))
    args = ap.parse_args()
    res = run_latency(args.out)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
