"""Cold reads inside a memory cgroup whose limit is below the data (a container's view).

One stock TFRecord file of ~100 KB records (as stock writers make them, its table built
by `tfrecord-lirs index`) is read for one epoch by each contender, every one a fresh
process moved into a fresh child of this process's v1 memory cgroup with `--limit-mb`,
the file evicted from the page cache first (fsync + posix_fadvise(DONTNEED)), in
`--rounds` interleaved rounds. Contenders, with default arguments:

  stock         tf.data.TFRecordDataset([f]).shuffle(1024)
  lirs          tfrecord_lirs.LIRSDataset([f], seed=1)
  lirs_batched  tfrecord_lirs.LIRSDataset([f], seed=1, batch_size=256)
  loader        tfrecord_lirs.Loader([f], seed=1)            (no TensorFlow)
  lirs_pread    LIRSDataset([f], seed=1, backend="pread"): what the default chose
                before it judged the cgroup's memory (not run unless named)

Each reports records/s over the epoch and the bytes its process fetched from storage
(`read_bytes` of /proc/self/io, the whole process) per byte of data. Prints one JSON
line per contender, then one with all of them ({"rows": [...]}).

    .venv/bin/python benchmarks/cold_cgroup_bench.py --dir bench_out/cold_cgroup \
        --gb 1 --limit-mb 300 [--without-tf-python .venv-without-tf/bin/python]

Needs root (or a delegated v1 memory cgroup); exits with a message where the v1 memory
controller is not mounted or not writable.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from cgroups import v1_memory_dir  # noqa: E402
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
CLI = os.path.join(TARGET_DIR, "release", "tfrecord-lirs")
RECORD = 100_000
BATCH = 256

# The child's code: read one epoch of contender NAME over FILE, print a JSON line.
CHILD = r"""
import json, os, sys, time
name, path = sys.argv[1], sys.argv[2]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
def read_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
if name == "loader":
    import tfrecord_lirs
    loader = tfrecord_lirs.Loader([path], seed=1)
    b0, t0 = read_bytes(), time.perf_counter()
    n = sum(len(batch) for batch in loader)
else:
    import tensorflow as tf
    import tfrecord_lirs
    if name == "stock":
        ds = tf.data.TFRecordDataset([path]).shuffle(1024)
    elif name == "lirs":
        ds = tfrecord_lirs.LIRSDataset([path], seed=1)
    elif name == "lirs_batched":
        ds = tfrecord_lirs.LIRSDataset([path], seed=1, batch_size=%(batch)d)
    elif name == "lirs_pread":  # the default before it judged the cgroup's memory
        ds = tfrecord_lirs.LIRSDataset([path], seed=1, backend="pread")
    else:
        raise SystemExit("unknown contender " + name)
    count = tf.function(lambda d: d.reduce(tf.constant(0, tf.int64),
                                           lambda c, x: c + tf.cast(tf.size(x), tf.int64)))
    count.get_concrete_function(ds)  # traced before timing
    b0, t0 = read_bytes(), time.perf_counter()
    n = int(count(ds))
secs = time.perf_counter() - t0
print(json.dumps({"contender": name, "records": n, "secs": secs,
                  "read_bytes": read_bytes() - b0}))
""" % {"batch": BATCH}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def masked_crc(data):
    import google_crc32c
    c = google_crc32c.value(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def generate(path, records):
    """A stock TFRecord file of `records` records of ~RECORD bytes (sizes vary by up to
    2 KiB, at most a quarter of RECORD, either way, so records do not line up with
    pages), and its table."""
    if os.path.exists(path) and os.path.exists(path + ".offsets"):
        return
    with open(path + ".tmp", "wb") as f:
        for i in range(records):
            spread = min(2048, RECORD // 4)
            data = os.urandom(RECORD + (i * 7919) % (2 * spread) - spread)
            header = struct.pack("<Q", len(data))
            f.write(header + struct.pack("<I", masked_crc(header)) + data
                    + struct.pack("<I", masked_crc(data)))
    os.rename(path + ".tmp", path)
    subprocess.run([CLI, "index", path], check=True, capture_output=True)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run_in_cgroup(parent, limit, python, name, path, package):
    """Runs contender `name` in a fresh child cgroup of `parent` with `limit` bytes."""
    cg = os.path.join(parent, f"lirs-cold-bench-{os.getpid()}-{name}")
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit))
        procs = os.path.join(cg, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        evict(path)
        env = dict(os.environ, PYTHONPATH=package,
                   TF_CPP_MIN_LOG_LEVEL="3", TFRECORD_LIRS_DEBUG="1")
        res = subprocess.run([python, "-c", CHILD, name, path], capture_output=True,
                             text=True, preexec_fn=join, env=env)
        if res.returncode != 0:
            raise SystemExit(f"{name} failed ({res.returncode}): {res.stderr[-2000:]}")
        row = json.loads(res.stdout.strip().splitlines()[-1])
        chose = [line for line in res.stderr.splitlines() if "backend auto for" in line]
        row["auto"] = chose[0].split(path + ": ", 1)[1].split(": ", 1)[0] if chose else None
        return row
    finally:
        os.rmdir(cg)


def run_cold_cgroup(out_dir, gb=1.5, limit_mb=500, rounds=2, python=None,
                    without_tf_python=None):
    """Row 17 of `make bench`: runs this script (a process of its own) and returns
    {"rows": [...], "gb", "limit_mb"}, or {"skipped": why}."""
    cmd = [python or sys.executable, os.path.abspath(__file__),
           "--dir", os.path.join(out_dir, "cold_cgroup"), "--gb", str(gb),
           "--limit-mb", str(limit_mb), "--rounds", str(rounds)]
    if without_tf_python:
        cmd += ["--without-tf-python", without_tf_python]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return {"skipped": (res.stderr.strip().splitlines() or ["failed"])[-1]}
    last = json.loads(res.stdout.strip().splitlines()[-1])
    return {"rows": last["rows"], "gb": gb, "limit_mb": limit_mb}


def add_rows(t, res, check, fmt_rate):
    """Adds row 17 to the `make bench` table `t` (run_bench.Table): medians over the
    rounds, each against the stock reader's median in the same cgroup."""
    import statistics
    if "skipped" in res:
        t.add("17 cold in a memory cgroup", "not run", res["skipped"])
        return
    sec = (f"17 cold in a memory cgroup ({res['gb']:g} GB of 100 KB records, "
           f"limit {res['limit_mb']} MB, evicted)")

    def med(name, key):
        vals = [r[key] for r in res["rows"] if r["contender"] == name]
        return statistics.median(vals) if vals else None

    stock = med("stock", "rate")
    labels = {"stock": "TFRecordDataset([f]).shuffle(1024)",
              "lirs": "LIRSDataset([f], seed=1), default arguments",
              "lirs_batched": f"LIRSDataset([f], seed=1, batch_size={BATCH})",
              "loader": "Loader([f], seed=1) (no TensorFlow)",
              "lirs_pread": "LIRSDataset([f], seed=1, backend=\"pread\")"}
    for name, label in labels.items():
        rate, bpb = med(name, "rate"), med(name, "bytes_per_byte")
        if rate is None:
            continue
        note = f"{bpb:.3f} bytes fetched per byte of data"
        if name == "stock" or not stock:
            t.add(sec, label, fmt_rate(rate), note)
            continue
        vs = rate / stock
        if name in ("lirs", "lirs_batched", "loader"):
            m1 = check(t, f"17: {name} cold vs stock shuffle(1024), rec/s", vs, 1.0)
            m2 = check(t, f"17: {name} cold, bytes fetched per byte", bpb, 1.05,
                       higher_is_better=False)
            t.add(sec, f"**{label}**", fmt_rate(rate), f"{vs:.2f}x stock; {note}",
                  ">= 1.0x stock, <= 1.05 bytes per byte", m1 and m2)
        else:
            t.add(sec, label, fmt_rate(rate), f"{vs:.2f}x stock; {note}")


def main():
    global RECORD
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "bench_out", "cold_cgroup"))
    ap.add_argument("--gb", type=float, default=1.0, help="data size, GB")
    ap.add_argument("--limit-mb", type=int, default=300, help="the cgroup's limit, MB")
    ap.add_argument("--without-tf-python",
                    default=os.path.join(ROOT, ".venv-without-tf", "bin", "python"))
    ap.add_argument("--contenders", default="stock,lirs,lirs_batched,loader")
    ap.add_argument("--record-bytes", type=int, default=RECORD, help="mean record size")
    ap.add_argument("--package", default=os.path.join(ROOT, "python"),
                    help="the directory holding the tfrecord_lirs package the children "
                         "import (another checkout's, for a before/after)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="interleaved rounds (every contender once per round)")
    args = ap.parse_args()
    parent = v1_memory_dir()
    parent = None if parent is None else str(parent)
    if parent is None or not os.access(parent, os.W_OK):
        raise SystemExit(f"no writable v1 memory cgroup here ({parent}): skipped")
    os.makedirs(args.dir, exist_ok=True)
    RECORD = args.record_bytes
    records = max(100, round(args.gb * 1e9 / RECORD))
    path = os.path.join(args.dir, f"stock-{records}x{RECORD}B.tfrecord")
    generate(path, records)
    size = os.path.getsize(path)
    limit = args.limit_mb * 1_000_000
    rows = []
    for name in [n for _ in range(args.rounds) for n in args.contenders.split(",")]:
        python = args.without_tf_python if name == "loader" else sys.executable
        row = run_in_cgroup(parent, limit, python, name, path, args.package)
        row["rate"] = row["records"] / row["secs"]
        row["bytes_per_byte"] = row["read_bytes"] / size
        row.update(data_bytes=size, limit_bytes=limit)
        log(f"  {name}: {row['rate']:,.0f} rec/s, {row['bytes_per_byte']:.3f} bytes fetched "
            f"per byte of data{'' if not row['auto'] else ', auto: ' + row['auto']}")
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(json.dumps({"rows": rows}), flush=True)


if __name__ == "__main__":
    t0 = time.time()
    main()
    log(f"  ({time.time() - t0:.0f} s)")
