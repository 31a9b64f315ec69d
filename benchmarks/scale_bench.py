"""Scale rows: LIRSDataset at 10^6..10^8 instances (`make bench-scale`).

For each N (1-byte records: 17 bytes of data and 8 of table per instance), as one
data file and as 1,000 files, for K = 1 and 64 shards (shard 0 is measured) and order
versions 1 and 2, one fresh process each measures:

* time to the first batch (dataset creation + iterator + first batch of 256), wall
  and process CPU (the per-worker epoch-start cost; the report also gives the ratio of
  shard 0 of K to one unsharded worker);
* RssAnon growth over the process's baseline (after TensorFlow and the op library are
  loaded), read from /proc/self/status: anonymous memory only, not the page cache;
* steady records/s over the next batches (up to --steady-seconds or the shard's end).

Files are generated once per N under --workdir (one record framed by TensorFlow's own
writer, repeated; the table computed), used hot (page cache), and deleted at the end
unless --keep. Results: a JSON list (--out) and a Markdown table (--report).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
BATCH = 256
FILES_MANY = 1000

CHILD = r"""
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, {python!r})

def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")

import tensorflow as tf
from tfrecord_lirs import LIRSDataset
tf.constant(0)  # the eager context, before the baseline
files = json.loads({files!r})
base = rss_anon()
wall0, cpu0 = time.perf_counter(), time.process_time()
ds = LIRSDataset(files, seed=1, batch_size={batch}, num_shards={shards}, shard_index=0,
                 order_version={version})
it = iter(ds)
first = next(it)
wall1, cpu1 = time.perf_counter(), time.process_time()
after_first = rss_anon() - base
records, t0 = 0, time.perf_counter()
for b in it:
    records += int(b.shape[0])
    if time.perf_counter() - t0 > {steady}:
        break
elapsed = time.perf_counter() - t0
print(json.dumps({{
    "first_batch_s": wall1 - wall0,
    "first_batch_cpu_s": cpu1 - cpu0,
    "rss_anon_growth_mb": after_first / 2**20,
    "rss_anon_growth_steady_mb": (rss_anon() - base) / 2**20,
    "steady_rec_s": records / elapsed if elapsed > 0 else 0.0,
    "steady_records": records,
}}))
"""


def framed_record(workdir):
    """One TFRecord of payload b"x", framed by TensorFlow's writer (17 bytes)."""
    probe = workdir / "probe.tfrecord"
    subprocess.run(
        [sys.executable, "-c",
         "import os, sys; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'; import tensorflow as tf\n"
         f"with tf.io.TFRecordWriter({str(probe)!r}) as w: w.write(b'x')"],
        check=True)
    frame = probe.read_bytes()
    probe.unlink()
    assert len(frame) == 17, len(frame)
    return frame


def write_files(workdir, n, files, frame):
    """`files` data files of `n` instances in all, each with its table."""
    paths = []
    per = [n // files + (1 if i < n % files else 0) for i in range(files)]
    chunk = 1 << 20
    tiled = np.frombuffer(frame * chunk, dtype=np.uint8)
    for i, count in enumerate(per):
        path = workdir / f"n{n}-f{files}-{i:04d}.tfrecord"
        with open(path, "wb") as data, open(f"{path}.offsets", "wb") as table:
            done = 0
            while done < count:
                step = min(chunk, count - done)
                tiled[: step * len(frame)].tofile(data)
                (np.arange(done, done + step, dtype="<u8") * len(frame)).tofile(table)
                done += step
        paths.append(str(path))
    return paths


def measure(paths, shards, version, steady):
    code = CHILD.format(python=str(REPO / "python"), files=json.dumps(paths), batch=BATCH,
                        shards=shards, version=version, steady=steady)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measurement failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e6,1e7,1e8",
                    help="instance counts, comma-separated (default %(default)s)")
    ap.add_argument("--file-counts", default=f"1,{FILES_MANY}")
    ap.add_argument("--shards", default="1,64")
    ap.add_argument("--versions", default="1,2")
    ap.add_argument("--steady-seconds", type=float, default=3.0)
    ap.add_argument("--workdir", default="/tmp/lirs-scale")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--out", default="bench_out/scale.json")
    ap.add_argument("--report", default="bench_out/scale.md")
    args = ap.parse_args()

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    frame = framed_record(workdir)
    rows = []
    file_counts = [int(f) for f in args.file_counts.split(",")]
    try:
        for n in (int(float(s)) for s in args.sizes.split(",")):
            need = n * (len(frame) + 8) * len(file_counts)  # every layout at once
            free = shutil.disk_usage(workdir).free
            if need > free * 0.8:
                print(f"N={n}: needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free: "
                      "skipped", flush=True)
                continue
            layouts = {}
            for files in file_counts:
                t = time.perf_counter()
                layouts[files] = write_files(workdir, n, files, frame)
                print(f"N={n} files={files}: written in {time.perf_counter() - t:.1f} s",
                      flush=True)
            for files, paths in layouts.items():
                for shards in (int(k) for k in args.shards.split(",")):
                    for version in (int(v) for v in args.versions.split(",")):
                        before = load()
                        r = measure(paths, shards, version, args.steady_seconds)
                        r.update(instances=n, files=files, shards=shards,
                                 order_version=version, loadavg_before=before)
                        rows.append(r)
                        print(json.dumps(r), flush=True)
            for paths in layouts.values():
                for p in paths:
                    os.unlink(p)
                    os.unlink(p + ".offsets")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    lines = [
        "| N | files | K | order | first batch s | epoch-start CPU s | RssAnon +MB "
        "| steady rec/s | load before |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['instances']:.0e} | {r['files']} | {r['shards']} | v{r['order_version']} "
            f"| {r['first_batch_s']:.2f} | {r['first_batch_cpu_s']:.2f} "
            f"| {r['rss_anon_growth_mb']:.0f} | {r['steady_rec_s']:,.0f} "
            f"| {' '.join(r['loadavg_before'])} |")
    # The per-worker epoch-start cost of sharding: shard 0 of 64 against one unsharded
    # worker, same N, files and order (target: <= 1/32).
    cpu = {(r["instances"], r["files"], r["order_version"], r["shards"]): r["first_batch_cpu_s"]
           for r in rows}
    ratios = []
    for (n, files, version, shards), sharded in sorted(cpu.items()):
        whole = cpu.get((n, files, version, 1))
        if shards != 1 and whole:
            ratios.append(f"| {n:.0e} | {files} | v{version} | {shards} | {whole:.3f} "
                          f"| {sharded:.3f} | {sharded / whole:.3f} |")
    if ratios:
        lines += ["", "Epoch-start CPU per worker, sharded against unsharded:", "",
                  "| N | files | order | K | CPU s, K=1 | CPU s, shard 0 of K | ratio |",
                  "|---|---|---|---|---|---|---|", *ratios]
    Path(args.report).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
