"""Row 11 of `make bench`: S3 with network latency, through object_store.

LIRSDataset over s3:// (TensorFlow 2.21 has no s3 file system: the op reads it through
the core's object_store client) against moto's S3 server (tests/s3_server.py) in a
private network namespace whose loopback delays every packet by NETEM_DELAY_MS in the
kernel (`tc qdisc add dev lo root netem delay 25ms`: a 50 ms round trip, real latency,
no mock): num_parallel_reads 1 and 32, deterministic and unordered delivery, in
instance order and page-aware order, one after another in one process.

Where the kernel has no netem (sch_netem) or the namespace no CAP_NET_ADMIN, the netem
rows are skipped with the reason, and the same contenders run with the delay put in the
server instead (every object GET held before moto answers it: latency per request, not
per packet), labelled as such, under two latency models of the same 50 ms mean:

* constant: every GET held SERVER_DELAY_MS. With no variance there is no head-of-line
  blocking, so unordered delivery has nothing to win there (shown, not judged);
* tailed: each GET held a lognormal draw (tests/latency.py: seeded by a hash of the
  seed, the object and the byte range, so each GET waits the same in every run) of
  log-space sigma TAIL_SIGMA and median
  SERVER_DELAY_MS * exp(-TAIL_SIGMA**2 / 2), so its mean is SERVER_DELAY_MS: median
  36 ms, p90 101 ms, p99 233 ms, p99.9 428 ms. Object stores' GET latency has such a
  tail (a few percent of requests several times the median), and it is what RINAS's
  unordered delivery is for: a window no longer waits for its slowest read while the
  pool could be fetching the next ones. The targets are judged on this model.

Which order each target is judged on, and why (measured on 2 shared cores, this
server, 32 reads in flight, tailed model):

* 32 reads in flight vs 1: instance order, every record its own ranged GET (1.0 GET
  per record measured at the server).
* unordered vs deterministic: page-aware order. There each unit (the 5-6 records that
  start in one 4 KiB page) is one coalesced GET (0.2 GET per record measured), so a
  window of 64 ids is about 11 GETs and the 4 windows the pool keeps in flight about
  44 for 32 threads: one slow GET holds up deterministic delivery, and unordered
  delivery keeps the pool busy (15.4 against 12.5 GETs in flight at the server, mean
  over the timed span). In instance order a window is 64 GETs, 2 per thread, and the 4
  windows in flight are 8 per thread: the queue behind a slow GET hides all but the
  rarest tail, so deterministic delivery loses little to it; and at 32 reads in flight
  moto is near its own limit (one Python process, 1.7-2.0 ms of CPU per GET, about
  440 GET/s here), which caps both deliveries at the same rate. Instance order's
  unordered ratio is shown, not judged.

    .venv/bin/python benchmarks/s3_latency_bench.py [--out bench_out]   # the row alone
"""

import argparse
import json
import math
import time
from pathlib import Path

from objstore_common import (FILES, ROOT, SERVER_DELAY_MS, TAIL_SEED, TAIL_SIGMA, median_ms,
                             run_snippet, unavailable, write_records)

NETEM_DELAY_MS = 25
# The tailed model is row 15's (objstore_common: mean SERVER_DELAY_MS, log-space sigma
# TAIL_SIGMA, seed TAIL_SEED), here in moto.
# (key, faults for tests/s3_server.py, label) of the server-side latency models.
SERVER_MODELS = [
    ("server_constant", {"latency_ms": SERVER_DELAY_MS, "latency_sigma": 0.0},
     f"server holds each object GET {SERVER_DELAY_MS} ms, constant (no netem here)"),
    ("server_tailed", {"latency_ms": median_ms(TAIL_SIGMA), "latency_sigma": TAIL_SIGMA,
                       "seed": TAIL_SEED},
     f"server holds each object GET a lognormal draw, mean {SERVER_DELAY_MS} ms "
     f"(median {median_ms(TAIL_SIGMA):.0f} ms, sigma {TAIL_SIGMA}, "
     f"p99 {SERVER_DELAY_MS * math.exp(-TAIL_SIGMA ** 2 / 2 + 2.326 * TAIL_SIGMA):.0f} ms; "
     f"seed {TAIL_SEED}; no netem here)"),
]
# FILES objects of RECORDS records each: about 4.9 MB an object, which moto keeps in
# memory (it spools an object of 5 MB or more to a temporary file, and reads the whole
# object for every ranged GET).
RECORDS = 6000
THREADS = [1, 32]
# The orders read: instance-based LIRS (every record its own ranged GET) and page-aware
# (each page-aware unit, the records of one page, fetched by one coalesced GET).
PAGE_AWARE = [False, True]
# Records timed per contender, by (page_aware, threads), after the first window's
# (WARM_RECORDS): whole windows of 64 (with one read in flight a window comes at once,
# every 64 GETs), fewer for one read in flight; page-aware reads 5-6 records per GET.
WARM_RECORDS = 64
TAKE = {(False, 1): 128, (False, 32): 3968, (True, 1): 512, (True, 32): 16000}

SNIPPET = """
    import tensorflow as tf
    import tfrecord_lirs
    urls = cfg["urls"]
    rows = []

    def timed(ds, n, **info):
        it = iter(ds)
        # The first window: opening, table, pool start (and with one read in flight the
        # window read meanwhile, which then comes at once).
        for _ in range(cfg["warm"]):
            next(it)
        t = time.perf_counter()
        for _ in range(n):
            next(it)
        dt = time.perf_counter() - t
        # Dropped outside the timed span: that waits for the reads in flight (one GET
        # per fetch thread).
        del it
        rows.append(dict(records=n, seconds=dt, rate=n / dt, **info))
        print(info, round(n / dt, 1), "rec/s", flush=True)

    for page_aware in cfg["page_aware"]:
        for threads in cfg["threads"]:
            for deterministic in (True, False):
                ds = tfrecord_lirs.LIRSDataset(urls, seed=7, num_parallel_reads=threads,
                                               deterministic=deterministic,
                                               page_aware=page_aware)
                timed(ds, cfg["take"][(page_aware, threads)], threads=threads,
                      deterministic=deterministic, page_aware=page_aware)
    save_results(cfg, rows=rows)
"""


def _measure(work, files, faults):
    from s3_server import BUCKET, run_with_s3

    objects = {}
    for data in files:
        objects[f"bench/{data.name}"] = data
        objects[f"bench/{data.name}.offsets"] = Path(str(data) + ".offsets")
    cfg = dict(urls=[f"s3://{BUCKET}/bench/{data.name}" for data in files], threads=THREADS,
               take=TAKE, page_aware=PAGE_AWARE, warm=WARM_RECORDS)
    return run_snippet(run_with_s3, work, objects, SNIPPET, cfg, faults=faults,
                       timeout=1200)["rows"]


def run_s3_latency(out_dir):
    """Measures row 11; returns its results (rates per latency model, or why not)."""
    from s3_server import netem_unavailable

    why = unavailable(server=False)
    if why:
        return {"skipped": why}
    work = Path(out_dir) / "s3_latency"
    work.mkdir(parents=True, exist_ok=True)
    files = write_records([work / f"remote-{f}.tfrecord" for f in range(FILES)], RECORDS, 10)
    start = time.time()
    out = {"records": FILES * RECORDS, "file_bytes": [data.stat().st_size for data in files]}
    netem_why = netem_unavailable(NETEM_DELAY_MS)
    if netem_why:
        out["netem"] = {"skipped": netem_why}
        for key, faults, _ in SERVER_MODELS:
            out[key] = {"rows": _measure(work, files, faults), "faults": faults}
    else:
        out["netem"] = {"rows": _measure(work, files, {"netem_delay_ms": NETEM_DELAY_MS})}
    out["minutes"] = (time.time() - start) / 60
    return out


def _rate(rows, threads, deterministic, page_aware):
    for r in rows:
        if (r["threads"] == threads and r["deterministic"] == deterministic
                and r.get("page_aware", False) == page_aware):
            return r["rate"]
    return None


def _add_model(t, sec, rows, model, check, fmt_rate, judged, judge_unordered=None, tag="netem"):
    """The rows of one latency model; `judged`: the 32-vs-1 target is checked on it (on
    the instance-based order), `judge_unordered` (default: `judged`): the
    unordered-vs-ordered one too (on the page-aware order; see the module docs)."""
    judge_unordered = judged if judge_unordered is None else judge_unordered
    for page_aware in PAGE_AWARE:
        order = "page_aware=True" if page_aware else "instance order"
        one = _rate(rows, 1, True, page_aware)
        if one is None:
            continue
        for threads in THREADS:
            det, un = _rate(rows, threads, True, page_aware), _rate(rows, threads, False,
                                                                    page_aware)
            label = f"LIRSDataset(s3://, {order}), num_parallel_reads={threads}"
            if threads == 1:
                t.add(sec, label, fmt_rate(det), model)
            elif judged and not page_aware:
                v = det / one
                m = check(t, f"11: S3 ({tag}), 32 reads in flight vs 1", v, 10.0)
                t.add(sec, f"**{label}**", fmt_rate(det), f"{v:.1f}x of 1 read in flight",
                      ">= 10x", m)
            else:
                t.add(sec, label, fmt_rate(det), f"{det / one:.1f}x of 1 read in flight")
            v = un / det
            if threads == 32 and judge_unordered and page_aware:
                m = check(t, f"11: S3 ({tag}, page-aware), unordered vs deterministic "
                             f"(32 in flight)", v, 1.2)
                t.add(sec, f"**{label}, deterministic=False**", fmt_rate(un),
                      f"{v:.2f}x of deterministic", ">= 1.2x", m)
            else:
                t.add(sec, f"{label}, deterministic=False", fmt_rate(un),
                      f"{v:.2f}x of deterministic")


def add_rows(t, res, check, fmt_rate):
    """Adds row 11 to the `make bench` table `t` (run_bench.Table)."""
    sec = "11 S3 with latency (object_store, moto)"
    if "skipped" in res:
        t.add(sec, "not run", res["skipped"])
        return
    netem = res["netem"]
    if "skipped" in netem:
        t.add(sec, f"netem {NETEM_DELAY_MS} ms per packet on loopback", "not run",
              netem["skipped"])
    else:
        _add_model(t, sec, netem["rows"],
                   f"netem: {NETEM_DELAY_MS} ms per packet, {2 * NETEM_DELAY_MS} ms round trip",
                   check, fmt_rate, judged=True)
    # The targets are judged on the server-side models only when netem could not run:
    # 32 reads in flight on both; unordered delivery on the tailed one (with a constant
    # latency no window is held up by a slow read, so there is nothing to reorder).
    no_netem = "skipped" in netem
    for key, _, label in SERVER_MODELS:
        if key in res:
            _add_model(t, sec, res[key]["rows"], label, check, fmt_rate, judged=no_netem,
                       judge_unordered=no_netem and key == "server_tailed", tag=key)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench_out"))
    args = ap.parse_args()
    print(json.dumps(run_s3_latency(args.out), indent=1))


if __name__ == "__main__":
    main()
