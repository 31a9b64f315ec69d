"""Row 15 of `make bench`: object storage at the speed of a sequential read.

One process in a private network namespace (tests/gcs_emulator.py's), one latency model
for every contender: each object GET waits a lognormal draw of mean SERVER_DELAY_MS
(median SERVER_DELAY_MS * exp(-TAIL_SIGMA**2 / 2), log-space sigma TAIL_SIGMA, seeded by
object and byte range, so the same reads wait the same in every run and for every
contender), or a constant SERVER_DELAY_MS in the constant model.

* stock `tf.data.TFRecordDataset(gs://...).shuffle(10000)`: TensorFlow's GCS client
  against the GCS emulator (sequential 256 KB reads; GCS_READ_CACHE_BLOCK_SIZE_MB=0 as
  in row 8);
* a sequential pass over the same objects through the fast S3 server
  (benchmarks/s3-bench-server) in 256 KB ranged GETs, one at a time (the stock
  reader's pattern), by its `load --sequential`;
* `LIRSDataset` and `Loader` over s3:// (the core's object_store client: requests in
  flight on its runtime, no thread each) at num_parallel_reads 32/128/512/2048 and the
  default, in instance and page-aware order, ordered and unordered.

For each: records/s, GETs per record and bytes fetched per byte delivered (from the
server's own counts, `/_bench/stats`), and the client's CPU per record
(`time.process_time`, the reading process only; the servers are other processes).

MosaicML Streaming is measured in row 16 (benchmarks/mosaic_bench.py), beside `cache_dir`,
its local-cache peer: it reads its own MDS shards (written from the same records), not
TFRecords, and runs in its own venv (`make venv-mosaic`: it pins numpy<2.2 and pulls
torch, ~6 GB).

    .venv/bin/python benchmarks/objstore_bench.py [--out bench_out] [--quick]
    .venv-without-tf/bin/python benchmarks/objstore_bench.py --loader   # no TensorFlow
"""

import argparse
import json
import os
import time
from pathlib import Path

from objstore_common import (FILES, ROOT, TAIL_SEED, TAIL_SIGMA, median_ms, run_snippet,
                             server_config, server_missing, stage_bucket, unavailable,
                             write_records)

RECORDS = 6000
IN_FLIGHT = [32, 128, 512, 2048, -1]
# Records timed per contender (after the first batch): the epoch's first part.
TAKE = 16000
TAKE_STOCK = 12000

SNIPPET = """
    endpoint = start_bench_server(cfg)
    os.environ.update(s3_env(endpoint))
    import tensorflow as tf
    import tfrecord_lirs
    rows = []

    def timed(name, make, n, count_server=True, **info):
        # The server's counts cover the iterator's whole life (its table and first
        # reads, and what it read ahead past the last record taken), over every record
        # it handed out: an upper bound of an epoch's GETs per record.
        s0 = server_stats(endpoint)
        it = make()
        first = next(it)
        items = first if isinstance(first, list) else [first]
        delivered, payload = len(items), sum(len(x) for x in items)
        c0, t0 = time.process_time(), time.perf_counter()
        records = 0
        while records < n:
            try:
                batch = next(it)
            except StopIteration:
                break
            items = batch if isinstance(batch, list) else [batch]
            records += len(items)
            payload += sum(len(x) for x in items)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        del it
        counts = server_stats(endpoint, since=s0)
        delivered += records
        row = dict(name=name, records=records, seconds=dt, rate=records / dt,
                   cpu_us_per_record=1e6 * cpu / max(records, 1), **info)
        if count_server:
            row["gets_per_record"] = counts["gets"] / max(delivered, 1)
            row["bytes_per_byte"] = counts["bytes"] / max(payload, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)

    def lirs_dataset(urls, reads, page_aware, deterministic):
        ds = tfrecord_lirs.LIRSDataset(urls, seed=7, num_parallel_reads=reads,
                                       deterministic=deterministic, page_aware=page_aware)
        return (x.numpy() for x in ds)

    for page_aware in (False, True):
        for reads in cfg["in_flight"]:
            for deterministic in (True, False):
                info = dict(reads=reads, page_aware=page_aware, deterministic=deterministic)
                timed("LIRSDataset", lambda: lirs_dataset(cfg["s3_urls"], reads, page_aware,
                                                          deterministic), cfg["take"], **info)
                timed("Loader", lambda: iter(tfrecord_lirs.Loader(
                    cfg["s3_urls"], seed=7, batch_size=256, page_aware=page_aware,
                    deterministic=deterministic, num_parallel_reads=reads)), cfg["take"], **info)
    # The sequential pass: 256 KB GETs one at a time over each object, as the stock
    # reader does.
    s0, t0 = server_stats(endpoint), time.perf_counter()
    for key in cfg["keys"]:
        subprocess.run([cfg["server"], "load", "--endpoint", endpoint, "--bucket", "bench",
                        "--key", key, "--range-bytes", "262144", "--in-flight", "1",
                        "--sequential"], check=True, capture_output=True)
    dt, counts = time.perf_counter() - t0, server_stats(endpoint, since=s0)
    rows.append(dict(name="sequential 256 KB", records=cfg["records"], seconds=dt,
                     rate=cfg["records"] / dt, gets_per_record=counts["gets"] / cfg["records"]))
    print(json.dumps(rows[-1]), flush=True)
    stock = tf.data.TFRecordDataset(cfg["gs_urls"]).shuffle(10000, seed=7)
    timed("stock", lambda: (x.numpy() for x in stock), cfg["take_stock"], count_server=False)
    save_results(cfg, rows=rows)
"""


def run_objstore(out_dir, quick=False, sigma=TAIL_SIGMA):
    """Measures row 15; returns its results (or why not)."""
    from gcs_emulator import BUCKET, run_with_gcs

    why = unavailable()
    if why:
        return {"skipped": why}
    work = Path(out_dir) / "objstore"
    work.mkdir(parents=True, exist_ok=True)
    files = _write_files(work)
    # The S3 server's objects: files in its bucket directory.
    s3_urls = stage_bucket(work / "s3root", files)
    cfg = dict(server_config(work / "s3root", sigma), in_flight=[32, -1] if quick else IN_FLIGHT,
               take=2000 if quick else TAKE, take_stock=2000 if quick else TAKE_STOCK,
               s3_urls=s3_urls, gs_urls=[f"gs://{BUCKET}/bench/{d.name}" for d in files],
               keys=[d.name for d in files], records=FILES * RECORDS)
    objects = {f"bench/{data.name}": data for data in files}
    start = time.time()
    latency = {"median_ms": cfg["median_ms"], "sigma": sigma, "seed": TAIL_SEED}
    out = run_snippet(run_with_gcs, work, objects, SNIPPET, cfg, latency=latency, timeout=3600,
                      env={"GCS_READ_CACHE_BLOCK_SIZE_MB": "0"})
    out.update(latency=latency, records=FILES * RECORDS, minutes=(time.time() - start) / 60)
    return out


# ----------------------------------------------------------------------------------
# Without TensorFlow (the without-tf venv): `Loader` over s3:// through the fast
# server, in the same namespace model and latency as the rows above, every in-flight
# setting (the adaptive default too) in instance and page-aware order, ordered and
# unordered, with the client's CPU per record, GETs per record (the default settings
# over a whole epoch, exact; the others over the records timed and what was read
# ahead, an upper bound) and what an epoch of 10^9 records costs in GETs.

S3_GET_USD_PER_1000 = 0.0004
TAKE_LOADER = 12000

LOADER_SNIPPET = """
    endpoint = start_bench_server(cfg)
    os.environ.update(s3_env(endpoint))
    import tfrecord_lirs
    rows = []

    for page_aware in (False, True):
        for reads in cfg["in_flight"]:
            for deterministic in (True, False):
                s0 = server_stats(endpoint)
                it = iter(tfrecord_lirs.Loader(cfg["s3_urls"], seed=7, batch_size=256,
                                               page_aware=page_aware, deterministic=deterministic,
                                               num_parallel_reads=reads))
                first = next(it)
                delivered, payload = len(first), sum(len(x) for x in first)
                c0, t0 = time.process_time(), time.perf_counter()
                records, timing = 0, None
                for batch in it:
                    records += len(batch)
                    payload += sum(len(x) for x in batch)
                    if timing is None and records >= cfg["take"]:
                        timing = (time.perf_counter() - t0, time.process_time() - c0, records)
                        if reads != -1:
                            break
                if timing is None:
                    timing = (time.perf_counter() - t0, time.process_time() - c0, records)
                seconds, cpu, timed = timing
                whole = reads == -1
                del it
                counts = server_stats(endpoint, since=s0)
                delivered += records
                row = dict(name="Loader", reads=reads, page_aware=page_aware,
                           deterministic=deterministic, records=timed, seconds=seconds,
                           rate=timed / seconds, cpu_us_per_record=1e6 * cpu / max(timed, 1),
                           gets_per_record=counts["gets"] / max(delivered, 1),
                           bytes_per_byte=counts["bytes"] / max(payload, 1),
                           whole_epoch=whole, delivered=delivered)
                rows.append(row)
                print(json.dumps(row), flush=True)
    save_results(cfg, rows=rows)
"""


def _write_files(work):
    """Row 15's data files (and their tables) under `work`."""
    return write_records([work / f"remote-{f}.tfrecord" for f in range(FILES)], RECORDS, 13)


def run_loader_rows(out_dir, sigma=TAIL_SIGMA, take=TAKE_LOADER, in_flight=IN_FLIGHT):
    """The TF-free rows (see above) and the merge-gap table; returns them (or why not)."""
    import shutil

    from s3_server import run_with_s3

    if shutil.which("unshare") is None:
        return {"skipped": "the unshare command is missing (apt-get install util-linux)"}
    if server_missing():
        return {"skipped": server_missing()}
    work = Path(out_dir) / "objstore_loader"
    work.mkdir(parents=True, exist_ok=True)
    files = _write_files(work)
    cfg = dict(server_config(work / "s3root", sigma), in_flight=in_flight, take=take,
               s3_urls=stage_bucket(work / "s3root", files))
    start = time.time()
    out = run_snippet(run_with_s3, work, {}, LOADER_SNIPPET, cfg, timeout=3600)
    for r in out["rows"]:
        r["usd_per_1e9_records"] = r["gets_per_record"] * 1e9 * S3_GET_USD_PER_1000 / 1000
    out.update(latency={"median_ms": median_ms(sigma), "sigma": sigma, "seed": TAIL_SEED},
               records=FILES * RECORDS, minutes=(time.time() - start) / 60,
               merge_gaps=merge_gap_table(files), load=os.getloadavg())
    return out


# ----------------------------------------------------------------------------------
# The merge gap (`MERGE_GAP`, storage/cloud/mod.rs), measured offline: a fetch window's
# runs of consecutive ids become ranged reads, and ranges of one object at most `gap`
# bytes apart one GET (as storage::ranged::merge_ranges does). GETs per record and
# bytes fetched per byte delivered follow from the offset tables and the epoch order
# alone, so every gap is measured on the same windows, exactly, without a server.

MERGE_GAPS = [0, 1024, 4096, 16384, 65536, 262144]
MAX_MERGED_GET = 4 << 20


def _spans(data_files):
    """Each file's spans: (file, start, end) by global id (a span runs to the next
    record's offset, or the end of the file: its fillers included)."""
    import numpy as np

    spans = []
    for f, path in enumerate(data_files):
        offsets = np.fromfile(str(path) + ".offsets", dtype="<u8").tolist()
        ends = offsets[1:] + [os.path.getsize(path)]
        spans.extend((f, a, b) for a, b in zip(offsets, ends))
    return spans


def _windows(order, window, spans, page_size):
    """The order cut into windows of `window` positions, a page-aware window extended
    while the next id continues the last one's page unit (the same page)."""
    k = 0
    while k < len(order):
        end = min(k + window, len(order))
        while end < len(order):
            prev, nxt = spans[order[end - 1]], spans[order[end]]
            if nxt[0] != prev[0] or nxt[1] // page_size != prev[1] // page_size:
                break
            end += 1
        yield order[k:end]
        k = end


def merged_gets(ids, spans, gap):
    """GETs and bytes fetched for one window's `ids`."""
    ids = sorted(set(ids))
    ranges = {}
    run = None
    for i in ids:
        f, a, b = spans[i]
        if run and run[0] == f and run[3] == i - 1:
            run[2], run[3] = b, i
        else:
            if run:
                ranges.setdefault(run[0], []).append((run[1], run[2]))
            run = [f, a, b, i]
    if run:
        ranges.setdefault(run[0], []).append((run[1], run[2]))
    gets = fetched = 0
    for rs in ranges.values():
        rs.sort()
        start, end = rs[0]
        for a, b in rs[1:]:
            if a <= end + gap and max(b, end) - start <= MAX_MERGED_GET:
                end = max(end, b)
            else:
                gets += 1
                fetched += end - start
                start, end = a, b
        gets += 1
        fetched += end - start
    return gets, fetched


def merge_gap_table(data_files, windows=(256, 1024), seed=7, page_size=4096):
    """GETs per record and bytes fetched per byte of spans delivered, by order, window
    and gap, over one whole epoch."""
    import tfrecord_lirs

    spans = _spans(data_files)
    src = tfrecord_lirs.DataSource([str(p) for p in data_files])
    delivered = sum(b - a for _, a, b in spans)
    rows = []
    for page_aware in (False, True):
        order = list(tfrecord_lirs.Sampler(src, seed=seed, page_aware=page_aware))
        for window in windows:
            cut = list(_windows(order, window, spans, page_size))
            for gap in MERGE_GAPS:
                gets = fetched = 0
                for ids in cut:
                    g, b = merged_gets(ids, spans, gap)
                    gets += g
                    fetched += b
                rows.append(dict(page_aware=page_aware, window=window, gap=gap,
                                 gets_per_record=gets / len(order),
                                 bytes_per_byte=fetched / delivered))
    return rows


def _row(res, name, **info):
    for r in res["rows"]:
        if r["name"] == name and all(r.get(k) == v for k, v in info.items()):
            return r
    return None


def add_rows(t, res, check, fmt_rate):
    """Adds row 15 to the `make bench` table `t` (run_bench.Table)."""
    sec = "15 object storage vs a sequential read (s3-bench-server, 50 ms mean)"
    if "skipped" in res:
        t.add(sec, "not run", res["skipped"])
        return
    stock = _row(res, "stock")
    seq = _row(res, "sequential 256 KB")
    if stock:
        t.add(sec, "stock TFRecordDataset(gs://).shuffle(10000)", fmt_rate(stock["rate"]),
              f"GCS emulator, same latency; {stock['cpu_us_per_record']:.0f} us CPU/record")
    if seq:
        t.add(sec, "sequential 256 KB ranged GETs, one at a time", fmt_rate(seq["rate"]),
              f"{seq['gets_per_record']:.3f} GET/record")
    base = max((stock or {}).get("rate", 0), (seq or {}).get("rate", 0)) or None
    for name in ("LIRSDataset", "Loader"):
        for page_aware in (False, True):
            for reads in IN_FLIGHT:
                det = _row(res, name, reads=reads, page_aware=page_aware, deterministic=True)
                un = _row(res, name, reads=reads, page_aware=page_aware, deterministic=False)
                if not det:
                    continue
                label = (f"{name}, {'page-aware' if page_aware else 'instance order'}, "
                         f"{'default' if reads == -1 else reads} in flight")
                note = (f"{det['gets_per_record']:.2f} GET/rec, "
                        f"{det['bytes_per_byte']:.2f} B fetched/B, "
                        f"{det['cpu_us_per_record']:.0f} us CPU/rec")
                if base:
                    note = f"{det['rate'] / base:.2f}x sequential; " + note
                if un:
                    note += f"; unordered {fmt_rate(un['rate'])} ({un['rate'] / det['rate']:.2f}x)"
                if reads == -1 and name == "LIRSDataset" and base:
                    goal = 1.0 if page_aware else 0.5
                    m = check(t, f"15: {label} vs sequential", det["rate"] / base, goal)
                    t.add(sec, f"**{label}**", fmt_rate(det["rate"]), note, f">= {goal}x", m)
                else:
                    t.add(sec, label, fmt_rate(det["rate"]), note)


def add_loader_rows(t, res, check, fmt_rate):
    """Adds row 15's TF-free part (`run_loader_rows`) to the `make bench` table `t`."""
    sec = "15 object storage: Loader over s3-bench-server (50 ms mean), GETs and their cost"
    if "skipped" in res:
        t.add(sec, "not run", res["skipped"])
        return
    for page_aware in (False, True):
        order = "page-aware" if page_aware else "instance order"
        for reads in IN_FLIGHT:
            det = _row(res, "Loader", reads=reads, page_aware=page_aware, deterministic=True)
            un = _row(res, "Loader", reads=reads, page_aware=page_aware, deterministic=False)
            if not det or not un:
                continue
            label = f"Loader, {order}, {'adaptive (default)' if reads == -1 else reads} in flight"
            epoch = "whole epoch" if det["whole_epoch"] else "upper bound"
            note = (f"{det['gets_per_record']:.3f} GET/rec ({epoch}), "
                    f"${det['usd_per_1e9_records']:.0f} per 10^9 records, "
                    f"{det['bytes_per_byte']:.2f} B fetched/B, "
                    f"{det['cpu_us_per_record']:.0f} us CPU/rec; unordered "
                    f"{fmt_rate(un['rate'])} ({un['rate'] / det['rate']:.2f}x)")
            if reads == -1:
                ratio = un["rate"] / det["rate"]
                m = check(t, f"15: {label}: unordered vs ordered", ratio, 1.2)
                t.add(sec, f"**{label}**", fmt_rate(det["rate"]), note,
                      "unordered >= 1.2x", m)
                if page_aware:
                    m = check(t, f"15: {label}: GETs per record", det["gets_per_record"], 0.2,
                              higher_is_better=False)
                    t.add(sec, f"**{label}: GETs per record**",
                          f"{det['gets_per_record']:.3f}", epoch, "<= 0.2", m)
            else:
                t.add(sec, label, fmt_rate(det["rate"]), note)
    for r in res.get("merge_gaps", []):
        if r["window"] != 256:
            continue
        t.add(sec, f"merge gap {r['gap'] // 1024} KiB, "
                   f"{'page-aware' if r['page_aware'] else 'instance order'} (whole epoch)",
              f"{r['gets_per_record']:.3f} GET/rec", f"{r['bytes_per_byte']:.2f} B fetched/B")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench_out"))
    ap.add_argument("--quick", action="store_true", help="32 and default in flight, few records")
    ap.add_argument("--sigma", type=float, default=TAIL_SIGMA, help="0: constant latency")
    ap.add_argument("--loader", action="store_true",
                    help="only the TF-free Loader rows and the merge-gap table")
    args = ap.parse_args()
    if args.loader:
        print(json.dumps(run_loader_rows(args.out, args.sigma), indent=1))
        return
    print(json.dumps(run_objstore(args.out, args.quick, args.sigma), indent=1))


if __name__ == "__main__":
    main()
