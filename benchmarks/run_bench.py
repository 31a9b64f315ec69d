"""`make bench`: LIRS vs stock tf.data, every contender in the same run.

Generates its own data in bench_out/ (Rust example binary + the CLI), runs each
benchmark, prints one table of figures, ratios and targets, and writes it with a
description of the machine into BENCHMARKS.md.

    .venv/bin/python benchmarks/run_bench.py [--out bench_out] [--report BENCHMARKS.md]

Environment:
  BENCH_SCALE   multiplies every record count (default 1.0 = the issue's sizes:
                2M kdd-like records, 10K x 100 KB, 10M ids). Use e.g. 0.02 to develop.
  CARGO_TARGET_DIR  where the release binaries are (default target/).

Needs (built by the Makefile recipe): target/release/tfrecord-lirs,
target/release/examples/lirs_bench, python/tfrecord_lirs/_lirs_ops.so, fio.
"""

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
TARGET_DIR = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
CLI = os.path.join(TARGET_DIR, "release", "tfrecord-lirs")
RUST = os.path.join(TARGET_DIR, "release", "examples", "lirs_bench")
CONTENDER = os.path.join(ROOT, "benchmarks", "tf_contender.py")
PROFILE_NOTES = os.path.join(ROOT, "benchmarks", "PROFILE_NOTES.md")

N_MIX = max(2_000, round(2_000_000 * SCALE))     # kdd-like mix, ~755 MB at full scale
N_BIG = max(200, round(10_000 * SCALE))          # 100 KB records
BIG_SIZE = 100 * 1024
N_TINY = max(10_000, round(10_000_000 * SCALE))  # ids for the order micro-benchmarks
BATCH = 256
# Per-element contenders are bound by TF's per-element cost; each timed rep reads this
# many elements (a prefix of the epoch; the full epoch if smaller).
PER_ELEMENT_LIMIT = max(5_000, round(200_000 * SCALE))
REPS = 5
DEPTH = 32                                       # cold-cache parallelism (threads = depth)
COLD_WINDOW, COLD_WINDOWS_IN_FLIGHT = 2048, 8    # Fetcher window (ids) and depth (windows)
FIO_SECS = 10 if SCALE >= 0.5 else 3
COLD_MAX_SECS = 20 if SCALE >= 0.5 else 5
MICRO_SECS = 2 if SCALE >= 0.5 else 1
LIMIT_ROUNDS = 7 if SCALE >= 0.5 else 3          # interleaved rounds of `lirs_bench limit`

# Row 10, large records: (label, records, payload bytes); every contender a fresh
# process, LARGE_ROUNDS interleaved rounds of LARGE_EPOCHS timed epochs each.
LARGE = [("100 KB", max(500, round(20_000 * SCALE)), 100 * 1024),
         ("1 MB", max(50, round(2_000 * SCALE)), 1 << 20)]
LARGE_ROUNDS = 2
LARGE_EPOCHS = 3
BENCH_VENV_PY = os.path.join(ROOT, ".venv-bench", "bin", "python")
LARGE_CONTENDER = os.path.join(ROOT, "benchmarks", "large_contender.py")

# The figures of an earlier run (BENCHMARKS.md of 2026-11-23 01:56, same machine,
# BENCH_SCALE=1), shown next to today's for the rows that must not regress.
BEFORE = {
    "big_per_element": 26_305,       # row 2, per element: LIRSDataset (pread)
    "big_consumer": 12_856,          # row 2, consumer-bound: LIRSDataset (pread)
    "big_rss_over_baseline": 102,    # MB, same row
    "big_batched": 34_065,           # row 2, LIRSDataset(batch_size=256) (pread)
    "cold_pages": 45_311,            # row 3, pages/s
    "cold_vs_fio": 1.18,
    "batched_mmap": 760_601,         # row 1
    "batched_pread": 388_733,
    "per_element_pread": 393_527,
    "per_element_mmap": 388_210,
    "index_vs_cat": 0.31,
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    """Runs `cmd`, returns stdout; raises with stderr on failure."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-4000:]}")
    return p.stdout


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def timed(cmd, **kw):
    t = time.perf_counter()
    out = run(cmd, **kw)
    return time.perf_counter() - t, out


def cat_to_null(path):
    """Reads `path` the way `cat FILE > /dev/null` does (it is exactly that)."""
    t = time.perf_counter()
    subprocess.run(f"cat '{path}' > /dev/null", shell=True, check=True)
    return time.perf_counter() - t


# --- the machine -------------------------------------------------------------------------

def read_first(path, default="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def machine(out_dir):
    cpu = "?"
    for line in read_first("/proc/cpuinfo", "").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in read_first("/proc/meminfo", "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    df = run(["df", "-T", "-P", out_dir]).splitlines()[-1].split()
    device, fstype = df[0], df[1]
    dev = os.path.basename(device)
    block = dev if os.path.exists(f"/sys/block/{dev}") else re.sub(r"p?\d+$", "", dev)
    rot = read_first(f"/sys/block/{block}/queue/rotational")
    sched = read_first(f"/sys/block/{block}/queue/scheduler")
    picked = re.search(r"\[(\S+)\]", sched)
    sched = picked.group(1) if picked else sched
    size_gb = int(read_first(f"/sys/block/{block}/size", "0") or 0) * 512 / 1e9
    virtio = os.path.exists(f"/sys/block/{block}/device/driver") and "virtio" in os.path.realpath(
        f"/sys/block/{block}/device/driver")
    try:
        tf_version = importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        tf_version = importlib.metadata.version("tensorflow")
    rustc = run(["rustc", "-V"]).strip() if shutil.which("rustc") else "?"
    fio = run(["fio", "--version"]).strip() if shutil.which("fio") else "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": mem_kb / 1024 / 1024,
        "disk": (f"{device} ({'virtio ' if virtio else ''}block device, {size_gb:.0f} GB, "
                 f"rotational={rot}, scheduler {sched})"),
        "filesystem": f"{fstype} on {device}",
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tensorflow": tf_version,
        "rustc": rustc,
        "fio": fio,
    }


def loadavg():
    return read_first("/proc/loadavg").split()[:3]


# --- data --------------------------------------------------------------------------------

def generate(out):
    d = {}
    d["mix"] = os.path.join(out, "kdd.tfrecord")
    d["next"] = os.path.join(out, "kdd.next.tfrecord")
    d["best"] = os.path.join(out, "kdd.best.tfrecord")
    d["big"] = os.path.join(out, "big100k.tfrecord")
    d["tiny"] = os.path.join(out, "tiny.tfrecord")
    log(f"generating {N_MIX} kdd-like records")
    d["mix_gen"] = json_lines(run([RUST, "gen-mix", d["mix"], str(N_MIX), "42"]))[0]
    run([CLI, "index", d["mix"]])
    pads = {}
    for fit in ("next", "best"):
        log(f"padding ({fit}-fit)")
        secs, text = timed([CLI, "pad", d["mix"], d[fit], "--fit", fit])
        m = re.search(r"overhead: ([0-9.]+)%", text)
        f = re.search(r"filler bytes: (\d+)", text)
        pads[fit] = {"secs": secs, "overhead_percent": float(m.group(1)),
                     "filler_bytes": int(f.group(1)), "size": os.path.getsize(d[fit])}
    d["pads"] = pads
    log(f"generating {N_BIG} x {BIG_SIZE} B records and {N_TINY} tiny records")
    run([RUST, "gen-fixed", d["big"], str(N_BIG), str(BIG_SIZE)])
    run([CLI, "index", d["big"]])
    run([RUST, "gen-fixed", d["tiny"], str(N_TINY), "4"])
    run([CLI, "index", d["tiny"]])
    subprocess.run(["sync"], check=True)  # no writeback during the measurements
    return d


# --- tf.data contenders (each in its own process) ------------------------------------------

def contender(name, data, expect, limit=None, reps=REPS, cold=False, source_bound=False,
              backend="auto"):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, CONTENDER, "--contender", name, "--data", data,
           "--batch", str(BATCH), "--reps", str(reps), "--expect", str(expect),
           "--warmup", str(min(expect, 20_000)), "--backend", backend]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    if cold:
        cmd.append("--cold")
    if source_bound:
        cmd.append("--source-bound")
    r = json_lines(run(cmd, env=env))[-1]
    if r["secs"]:
        r["best_secs"] = min(r["secs"])
        r["median_secs"] = statistics.median(r["secs"])
        r["rate"] = r["records"] / r["median_secs"]
    log(f"  {name}{'' if backend == 'auto' else f' [{backend}]'}"
        f"{' (cold)' if cold else ''}{' (source-bound)' if source_bound else ''}: "
        f"{r.get('rate', 0):,.0f} rec/s, peak RSS {r['peak_rss_mb']:.0f} MB")
    return r


# --- the TensorFlow-free front ends (row 9), in the venv without TensorFlow ----------------

WITHOUT_TF_PY = os.path.join(ROOT, ".venv-without-tf", "bin", "python")
WITHOUT_TF = os.path.join(ROOT, "benchmarks", "without_tf_contender.py")
# Records timed per rep: the ArrayRecord contenders are ~50 K rec/s or less.
WITHOUT_TF_RECORDS = max(20_000, round(200_000 * SCALE))
WITHOUT_TF_SLOW_RECORDS = max(5_000, round(20_000 * SCALE))


def without_tf(name, data, arrayrecord, records, reps=3):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = json_lines(run([WITHOUT_TF_PY, WITHOUT_TF, "--contender", name, "--data", data,
                        "--arrayrecord", arrayrecord, "--records", str(records),
                        "--reps", str(reps)], env=env))[-1]
    if r.get("secs"):
        r["rate"] = r["records"] / statistics.median(r["secs"])
        log(f"  {name}: {r['rate']:,.0f} rec/s, peak RSS {r['peak_rss_mb']:.0f} MB")
    return r


def bench_without_tf(t, d, out):
    """Row 9: DataSource, Sampler and Loader (no TensorFlow) against ArrayRecord, Grain
    over ArrayRecord, the `tfrecord` package's PyTorch reader and LIRSDataset's batches,
    on the kdd-like mix."""
    if not os.path.exists(WITHOUT_TF_PY):
        t.add("9 without TensorFlow", "not run", "make venv-without-tf first")
        return {"skipped": "no .venv-without-tf"}
    log("row 9: TensorFlow-free front ends (Grain, PyTorch)")
    ar = os.path.join(out, "kdd.arrayrecord")  # a prefix: files of 10K records
    if not os.path.exists(ar + "-00000"):
        log("  writing the same payloads as ArrayRecord (group_size:1)")
        without_tf("write_arrayrecord", d["mix"], ar, 0, reps=0)
    cat_to_null(d["mix"])
    from without_tf_contender import arrayrecord_files

    for f in arrayrecord_files(ar):
        cat_to_null(f)
    res = {}
    for name, records in [("lirs_getitems", WITHOUT_TF_RECORDS),
                          ("arrayrecord_getitems", WITHOUT_TF_SLOW_RECORDS),
                          ("grain_lirs", WITHOUT_TF_RECORDS),
                          ("grain_arrayrecord", WITHOUT_TF_SLOW_RECORDS),
                          ("torch_lirs", WITHOUT_TF_RECORDS),
                          ("torch_tfrecord_pypi", WITHOUT_TF_RECORDS),
                          # Whole epochs, as LIRSDataset's below.
                          ("lirs_loader", N_MIX),
                          ("lirs_loader_unordered", N_MIX)]:
        res[name] = without_tf(name, d["mix"], ar, records)
    # LIRSDataset(batch_size=256) on the same file, in the TensorFlow venv, this run.
    res["lirs_dataset_batched"] = contender("lirs_batched", d["mix"], N_MIX)
    sec = f"9 without TensorFlow, {N_MIX:,} kdd-like"
    lirs, arr = res["lirs_getitems"]["rate"], res["arrayrecord_getitems"]["rate"]
    v = ratio(lirs, arr)
    m = check(t, "9: DataSource.__getitems__ vs ArrayRecord's", v, 10.0)
    t.add(sec, "**`DataSource.__getitems__`** (256 random ids)", fmt_rate(lirs),
          f"{v:.1f}x ArrayRecord's", ">= 10x", m)
    t.add(sec, "ArrayRecordDataSource.__getitems__ (same payloads, group_size:1, files of 10K)",
          fmt_rate(arr))
    g, ga = res["grain_lirs"]["rate"], res["grain_arrayrecord"]["rate"]
    t.add(sec, "Grain: `tfrecord_lirs.grain.shuffle(source).batch(256)`", fmt_rate(g),
          f"{ratio(g, ga):.1f}x Grain over ArrayRecord")
    t.add(sec, "Grain: `MapDataset.source(ArrayRecord).shuffle().batch(256)`", fmt_rate(ga))
    lo, lu = res["lirs_loader"]["rate"], res["lirs_loader_unordered"]["rate"]
    ld = res["lirs_dataset_batched"]["rate"]
    v = ratio(lo, ga)
    m = check(t, "9: Loader vs Grain over ArrayRecord", v, 20.0)
    t.add(sec, "**`tfrecord_lirs.Loader(batch_size=256)`** (list[bytes], whole epochs)",
          fmt_rate(lo), f"{v:.1f}x Grain over ArrayRecord", ">= 20x", m)
    v = ratio(lo, ld)
    m = check(t, "9: Loader vs LIRSDataset(batch_size=256)", v, 0.5)
    t.add(sec, "`tfrecord_lirs.Loader` vs `LIRSDataset(batch_size=256)` (TF venv, same run)",
          fmt_rate(ld), f"Loader {v:.2f}x LIRSDataset", ">= 0.5x", m)
    t.add(sec, "`tfrecord_lirs.Loader(batch_size=256, deterministic=False)`", fmt_rate(lu),
          f"{ratio(lu, lo):.2f}x ordered")
    tl, tp = res["torch_lirs"]["rate"], res["torch_tfrecord_pypi"]["rate"]
    t.add(sec, "PyTorch DataLoader(DataSource, Sampler, 2 workers, batch 256)",
          fmt_rate(tl), f"{ratio(tl, tp):.2f}x the `tfrecord` package's reader")
    t.add(sec, "PyTorch: `tfrecord` package reader, 10,000-record shuffle buffer",
          fmt_rate(tp))
    return res


# --- row 13: decoding tf.train.Example ------------------------------------------------------

EXAMPLE = os.path.join(ROOT, "benchmarks", "example_contender.py")
EXAMPLE_RECORDS = max(5_000, round(20_000 * SCALE))


def example_contender(name, data):
    """One contender of row 13 in its own process of this (the TF) venv: the `tfrecord`
    package and parse_example import no TensorFlow there, tf.io.parse_example does."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = json_lines(run([sys.executable, EXAMPLE, "--contender", name, "--data", data,
                        "--reps", str(REPS)], env=env))[-1]
    r["rate"] = r["records"] / statistics.median(r["secs"])
    log(f"  {name}: {r['rate']:,.0f} rec/s")
    return r


def bench_examples(t, out):
    """Row 13: `tfrecord_lirs.parse_example` on batches of 256 against the `tfrecord`
    package's protobuf path per record and tf.io.parse_example on the same batches."""
    log("row 13: decoding tf.train.Example")
    data = os.path.join(out, "examples.bin")
    run([sys.executable, EXAMPLE, "--write", data, "--records", str(EXAMPLE_RECORDS)])
    res = {name: example_contender(name, data)
           for name in ("lirs_parse_example", "tfrecord_pypi", "tf_parse_example",
                        "tf_parse_example_tensors")}
    os.remove(data)
    sec = f"13 Example decoding, {EXAMPLE_RECORDS:,} image Examples"
    lirs, pypi, tfp = (res[n]["rate"] for n in ("lirs_parse_example", "tfrecord_pypi",
                                                "tf_parse_example"))
    v_pypi, v_tf = ratio(lirs, pypi), ratio(lirs, tfp)
    m1 = check(t, "13: parse_example vs the tfrecord package", v_pypi, 5.0)
    m2 = check(t, "13: parse_example vs tf.io.parse_example", v_tf, 1.0)
    t.add(sec, "**`tfrecord_lirs.parse_example(batch, spec)`** (256 per batch; image bytes, "
          "label, 32 floats, 0-19 ids)", fmt_rate(lirs),
          f"{v_pypi:.1f}x the `tfrecord` package, {v_tf:.2f}x tf.io.parse_example",
          ">= 5x, >= 1x", m1 and m2)
    t.add(sec, "`tfrecord` package: `Example.ParseFromString` + `extract_feature_dict` per "
          "record", fmt_rate(pypi))
    t.add(sec, "`tf.io.parse_example` (eager, the same batches as string tensors), "
          "results as numpy", fmt_rate(tfp))
    tft = res["tf_parse_example_tensors"]["rate"]
    t.add(sec, "`tf.io.parse_example`, results left as tensors (a tf.data pipeline's case)",
          fmt_rate(tft), f"parse_example {ratio(lirs, tft):.2f}x this")


# --- row 14: data refurbishing against standard training and data echoing ------------------

REFURBISH = os.path.join(ROOT, "benchmarks", "refurbish_bench.py")


def bench_refurbish(t, out):
    """Row 14: PyTorch DataLoader (2 workers) over PNG Examples with a CPU-heavy
    augmentation: standard vs refurbish r=2,3 vs data echoing r=2,3, one run."""
    if not os.path.exists(WITHOUT_TF_PY):
        t.add("14 data refurbishing", "not run", "make venv-without-tf first")
        return {"skipped": "no .venv-without-tf"}
    log("row 14: data refurbishing (PyTorch, 2 workers)")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    rows = json_lines(run([WITHOUT_TF_PY, REFURBISH, "--out", out,
                           "--images", str(max(256, int(1024 * SCALE)))], env=env))
    res = {f"{r['pipeline']}_{r['r']}": r for r in rows}
    std = res["standard_1"]
    sec = (f"14 data refurbishing, {std['images']:,} PNG Examples, {std['epochs']} epochs "
           f"(the first untimed), stores under {res['refurbish_2']['store']}")
    t.add(sec, "standard: decode, crop, flip, 5 RandAugment-like layers every use",
          fmt_rate(std["images_per_s"], "img/s"),
          f"batch p95/p50 {std['batch_p95_over_p50']:.2f} (arrivals "
          f"{std['arrival_p95_over_p50']:.2f}), diversity {std['diversity']:.3f}")
    for r, goal in [(2, 1.5), (3, 1.8)]:
        x = res[f"refurbish_{r}"]
        v = ratio(x["images_per_s"], std["images_per_s"])
        m = check(t, f"14: refurbish r={r} vs standard", v, goal)
        lo, hi = x["refreshes_per_batch"]
        t.add(sec, f"**refurbish r={r}** (partial: decode..4 layers, stored; final: 1 layer)",
              fmt_rate(x["images_per_s"], "img/s"), f"{v:.2f}x standard", f">= {goal}x", m)
        m = check(t, f"14: refurbish r={r} batch p95/p50 vs standard's",
                  x["batch_p95_over_p50"], std["batch_p95_over_p50"], higher_is_better=False)
        t.add(sec, f"refurbish r={r}: refreshes per batch; a worker's time per batch p95/p50 "
              "(arrivals'); diversity",
              f"{lo}..{hi}", f"p95/p50 {x['batch_p95_over_p50']:.2f} "
              f"({x['arrival_p95_over_p50']:.2f}); diversity "
              f"{ratio(x['diversity'], std['diversity']):.3f}x standard's",
              f"<= standard's {std['batch_p95_over_p50']:.2f}", m)
    x = res["refurbish_disk_3"]
    t.add(sec, f"refurbish r=3, the store on disk (under {x['store']})",
          fmt_rate(x["images_per_s"], "img/s"),
          f"{ratio(x['images_per_s'], std['images_per_s']):.2f}x standard")
    x = res["refurbish_random_3"]
    lo, hi = x["refreshes_per_batch"]
    t.add(sec, "refurbish r=3, the same uses at random positions (no cache-aware shuffle): "
          "refreshes per batch; a worker's time per batch p95/p50",
          f"{lo}..{hi}", f"p95/p50 {x['batch_p95_over_p50']:.2f}, "
          f"{ratio(x['images_per_s'], std['images_per_s']):.2f}x standard's img/s")
    for r in (2, 3):
        x = res[f"echo_{r}"]
        t.add(sec, f"data echoing r={r} (the whole augmentation reused)",
              fmt_rate(x["images_per_s"], "img/s"),
              f"{ratio(x['images_per_s'], std['images_per_s']):.2f}x standard, diversity "
              f"{ratio(x['diversity'], std['diversity']):.3f}x standard's")
    x = res["second_job_3"]
    share = ratio(x["partial_computed"], x["own_job_partial_computed"])
    m = check(t, "14: second job's partial augmentations / a job of its own's", share, 0.05,
              higher_is_better=False) and x["same_outputs"]
    t.add(sec, "**second job on the first one's store** vs a job of its own (r=3, same "
          "epochs): partial augmentations computed"
          + ("" if x["same_outputs"] else " (OUTPUTS DIFFER)"),
          f"{x['partial_computed']:,} vs {x['own_job_partial_computed']:,}",
          f"{share:.1%}", "< 5 %", m)
    res["sweep"] = bench_sweep(t, out, env)
    return res


SWEEP = os.path.join(ROOT, "benchmarks", "sweep_bench.py")


def bench_sweep(t, out, env):
    """Row 14, sweep: 4 concurrent jobs with the same data, seed and augmentation
    sharing one store against 4 separate jobs: PyTorch (`AugmentDataset(share=...)`)
    and tf.data (`tfrecord_lirs.augment(share=...)`)."""
    res = {}
    tf_env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                  TF_CPP_MIN_LOG_LEVEL="3")
    for frontend, py, run_env, who, how in [
            ("torch", WITHOUT_TF_PY, env, "PyTorch", "AugmentDataset(share=...)"),
            ("tf", sys.executable, tf_env, "tf.data", "tfrecord_lirs.augment(share=...)")]:
        log(f"row 14: sweep, 4 jobs sharing one store vs 4 separate ({who})")
        rows = json_lines(run([py, SWEEP, "--out", out, "--frontend", frontend,
                               "--images", str(max(128, int(512 * SCALE)))], env=run_env))
        got = {r["pipeline"]: r for r in rows}
        sep, sh = got["sweep_separate"], got["sweep_shared"]
        key = "" if frontend == "torch" else "_tf"
        res[f"sweep_separate{key}"], res[f"sweep_shared{key}"] = sep, sh
        each = (f"{sh['workers_per_job']} worker each" if frontend == "torch"
                else "the map's default depth, 16 over a shared store")
        sec = (f"14 sweep: {sh['jobs']} {who} jobs at once ({each}), {sh['images']:,} PNG "
               f"Examples, {sh['epochs']} epochs (epoch 0 untimed), row 14's whole augmentation "
               "every epoch")
        t.add(sec, "separate: each job on a store of its own (per-job img/s; augmentations "
              "computed in all)", fmt_rate(sep["per_job_images_per_s"], "img/s"),
              f"{sep['augmentations_computed']:,} computed")
        same = sh["same_samples"] and sh["same_samples_as_separate"]
        v = sh["speedup_per_job"]
        m = check(t, f"14: sweep ({who}), per-job img/s shared vs separate", v, 2.5) and same
        t.add(sec, f"**shared**: the jobs on one store directory (`{how}`), per-job img/s"
              + ("" if same else " (SAMPLES DIFFER)"),
              fmt_rate(sh["per_job_images_per_s"], "img/s"), f"{v:.2f}x separate",
              ">= 2.5x", m)
        c = sh["computed_over_one_job"]
        m = check(t, f"14: sweep ({who}), augmentations in all vs one job's", c, 1.1,
                  higher_is_better=False)
        t.add(sec, "shared: augmentations computed in all vs one job's",
              f"{sh['augmentations_computed']:,} vs {sh['one_jobs_augmentations']:,}",
              f"{c:.2f}x", "<= 1.1x", m)
        b = sh["bytes_read_over_one_job"]
        m = check(t, f"14: sweep ({who}), bytes read in all vs one job's", b, 1.1,
                  higher_is_better=False)
        t.add(sec, "shared: bytes read from the data file in all (the engine's read "
              "counters) vs one job's (separate: "
              f"{sep['bytes_read'] / max(1, sh['one_jobs_bytes_read']):.2f}x)",
              f"{sh['bytes_read'] / 1e6:,.1f} MB vs {sh['one_jobs_bytes_read'] / 1e6:,.1f} MB",
              f"{b:.2f}x", "<= 1.1x", m)
    return res


REFURBISH_TF = os.path.join(ROOT, "benchmarks", "refurbish_tf_bench.py")


def bench_refurbish_tf(t, out):
    """Row 14, tf.data: `tfrecord_lirs.refurbish` (no Python per sample) r=2,3 against
    standard tf.data augmentation, row 14's augmentation as TensorFlow ops: the median
    of 3 alternated rounds (each pipeline in a process of its own)."""
    log("row 14 (tf.data): data refurbishing against standard tf.data augmentation")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    rows = json_lines(run([sys.executable, REFURBISH_TF, "--out", out,
                           "--images", str(max(256, int(1024 * SCALE)))], env=env))
    res = {f"{r['pipeline']}_{r['r']}": r for r in rows}
    std = res["standard_1"]
    sec = (f"14 data refurbishing, tf.data, {std['images']:,} PNG Examples, "
           f"{std['epochs']} epochs (the first untimed), standard's map AUTOTUNE, "
           "refurbish's the library's default (16 calls); medians of "
           f"{std['rounds']} alternated rounds")
    t.add(sec, "standard tf.data: decode, crop, flip, 5 RandAugment-like layers (TF ops) "
          "every use", fmt_rate(std["images_per_s"], "img/s"),
          f"{std['cpu_us_per_image']:.0f} us CPU/img")
    for r, goal in [(2, 1.5), (3, 1.8)]:
        x = res[f"refurbish_{r}"]
        v = x["vs_standard"]
        m = check(t, f"14 (tf.data): refurbish r={r} vs standard", v, goal)
        rounds = ", ".join(f"{b:.2f}x" for b in x["vs_standard_by_round"])
        t.add(sec, f"**refurbish r={r}** (tfrecord_lirs.refurbish, its store in memory)",
              fmt_rate(x["images_per_s"], "img/s"),
              f"{v:.2f}x standard (rounds {rounds})", f">= {goal}x", m)
        t.add(sec, f"refurbish r={r}: CPU per image",
              f"{x['cpu_us_per_image']:.0f} us",
              f"{ratio(std['cpu_us_per_image'], x['cpu_us_per_image']):.2f}x less than "
              "standard's")
    x = res["refurbish_dir_3"]
    t.add(sec, "refurbish r=3, a directory store under /dev/shm (what processes and jobs "
          "share)", fmt_rate(x["images_per_s"], "img/s"), f"{x['vs_standard']:.2f}x standard",
          f"{x['cpu_us_per_image']:.0f} us CPU/img")
    return res


# --- row 10: large records against Arrow and the copy-out limit ----------------------------

def large_contender(name, data, arrow_dir):
    """One large-record contender in a fresh process: (rec/s over its median epoch, JSON)."""
    if name == "copy_limit":
        r = json_lines(run([RUST, "copy-limit", data, str(LARGE_EPOCHS)]))[-1]
    else:
        py = BENCH_VENV_PY if name == "hf_arrow" else sys.executable
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"),
                   TF_CPP_MIN_LOG_LEVEL="3")
        cmd = [py, LARGE_CONTENDER, "--contender", name, "--data", data,
               "--epochs", str(LARGE_EPOCHS)]
        if name == "hf_arrow":
            cmd += ["--arrow-dir", arrow_dir]
        r = json_lines(run(cmd, env=env))[-1]
    return r["records"] / statistics.median(r["secs"]), r


def bench_large(t, out):
    """Row 10: hot cache, 100 KB and 1 MB records; every epoch a checked permutation."""
    if not os.path.exists(BENCH_VENV_PY):
        t.add("10 large records", "not run", "make venv-bench first")
        return {"skipped": "no .venv-bench"}
    names = [("lirs_batched", "**LIRSDataset(batch_size=256)** (every CRC checked)"),
             ("lirs_per_element", "LIRSDataset(...) per element + `.batch(256)`"),
             ("hf_arrow", "HF `datasets` Arrow: `shuffle().iter(256)` + one copy of each batch"),
             ("copy_limit", "copy-out limit: a permutation, 256 per batch memcpy'd out of a "
                            "map kept across epochs (Rust, 1 thread, no CRC)")]
    res = {}
    for label, n, size in LARGE:
        log(f"row 10: {n:,} x {label} records")
        data = os.path.join(out, f"large{size}.tfrecord")
        arrow_dir = os.path.join(out, f"large{size}.arrow")
        run([RUST, "gen-ids", data, str(n), str(size)])
        run([CLI, "index", data])
        shutil.rmtree(arrow_dir, ignore_errors=True)
        run([BENCH_VENV_PY, LARGE_CONTENDER, "--contender", "hf_arrow", "--data", data,
             "--arrow-dir", arrow_dir, "--prepare"])
        subprocess.run(["sync"], check=True)
        rates = {name: [] for name, _ in names}
        rss = {}
        try:
            for _ in range(LARGE_ROUNDS):
                cat_to_null(data)
                for name, _ in names:
                    rate, r = large_contender(name, data, arrow_dir)
                    rates[name].append(rate)
                    rss[name] = max(rss.get(name, 0), r.get("peak_rss_mb", 0))
                    log(f"  {name}: {rate:,.0f} rec/s ({rate * size / 1e9:.1f} GB/s)")
        finally:
            # 2 GB each: not kept for --only reruns.
            for path in (data, data + ".offsets"):
                if os.path.exists(path):
                    os.remove(path)
            shutil.rmtree(arrow_dir, ignore_errors=True)
        mean = {name: statistics.mean(v) for name, v in rates.items()}
        sec = f"10 hot, {n:,} x {label}"
        hf, lim = mean["hf_arrow"], mean["copy_limit"]
        for name, what in names:
            r = mean[name]
            fig = (f"{fmt_rate(r)} ({r * size / 1e9:.1f} GB/s; rounds: "
                   + " / ".join(f"{x / 1e3:,.0f} K" for x in rates[name]) + ")")
            if name in ("hf_arrow", "copy_limit"):
                t.add(sec, what, fig + (f"; peak RSS {rss[name]:,.0f} MB" if name == "hf_arrow" else ""))
                continue
            vs = f"{ratio(r, hf):.2f}x HF Arrow, {ratio(r, lim):.2f}x the limit; peak RSS {rss[name]:,.0f} MB"
            if name == "lirs_batched":
                m = (check(t, f"10: {label} batched vs HF Arrow copy-out", ratio(r, hf), 1.0)
                     & check(t, f"10: {label} batched vs the copy-out limit", ratio(r, lim), 0.8))
                t.add(sec, what, fig, vs, ">= 1.0x HF, >= 0.8x limit", m)
            else:
                m = check(t, f"10: {label} per element vs the copy-out limit", ratio(r, lim), 0.6)
                t.add(sec, what, fig, vs, ">= 0.6x limit", m)
        res[label] = {"rates": rates, "peak_rss_mb": rss, "records": n, "size": size}
    return res


# --- the table -----------------------------------------------------------------------------

class Table:
    def __init__(self):
        self.rows = []
        self.targets = []

    def add(self, section, what, figure, ratio="", target="", met=None):
        self.rows.append([section, what, figure, ratio, target,
                          "" if met is None else ("met" if met else "**missed**")])

    def target(self, name, value, goal, met, how_much):
        self.targets.append((name, value, goal, met, how_much))

    def markdown(self):
        head = ["#", "benchmark / contender", "figure", "ratio", "target", "met?"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            lines.append("| " + " | ".join(str(c) for c in r) + " |")
        return "\n".join(lines)


def fmt_rate(x, unit="rec/s"):
    return f"{x:,.0f} {unit}"


def ratio(a, b):
    return a / b if b else float("nan")


def missed_by(value, goal, higher_is_better=True):
    """How far `value` is from `goal`, as a sentence fragment."""
    if higher_is_better:
        return f"{value:.2f}x vs >= {goal:.2f}x: short by {(1 - value / goal) * 100:.0f} %"
    return f"{value:.3f} vs <= {goal:.3f}: over by {(value / goal - 1) * 100:.0f} %"


def check(table, name, value, goal, higher_is_better=True, exact=False):
    if exact:
        met = abs(value - goal) < 0.005
    elif higher_is_better:
        met = value >= goal
    else:
        met = value <= goal
    table.target(name, value, goal, met,
                 "" if met else (f"{value:.3f} vs exactly {goal:.2f}" if exact
                                 else missed_by(value, goal, higher_is_better)))
    return met


# --- the benchmarks ------------------------------------------------------------------------

def bench_limit(d):
    """The gather limit (a plain Rust loop over a map: table, CRCs, copy into a batch
    buffer, 1 thread) and `Reader::read_batch`, interleaved in one process."""
    log("row 1: the gather limit and Reader::read_batch (lirs_bench limit)")
    res = json_lines(run([RUST, "limit", d["mix"], str(LIMIT_ROUNDS)]))
    for r in res:
        log(f"  {r['name']}: {r['rec_per_sec']:,.0f} rec/s (median; min "
            f"{r['ns_per_rec_min']:.0f} ns/rec)")
    return {r["name"]: r for r in res}


def bench_hot_small(t, d):
    """Row 1: hot cache, kdd-like mix.

    Targets are judged on each source's own per-element rate: the epoch consumed in-graph
    through `.batch(1024)` (the regime of the issue's reference figures, ~360 K/s plain
    and ~195 K/s shuffle(10000)). A reduce over single elements is shown too: there TF's
    per-element dispatch (~40 us) sets every contender's rate. Every LIRS row also shows
    its ratio to the gather limit with CRC (`lirs_bench limit`, same run)."""
    log("row 1: hot cache, kdd-like mix")
    cat_to_null(d["mix"])
    cat_to_null(d["next"])
    lim = bench_limit(d)
    src = {}
    for key, name, data, backend in [
            ("tfrecord", "tfrecord", d["mix"], "auto"),
            ("tfrecord_shuffle", "tfrecord_shuffle", d["mix"], "auto"),
            ("lirs", "lirs", d["mix"], "auto"),
            ("lirs_pread", "lirs", d["mix"], "pread"),
            ("lirs_mmap", "lirs", d["mix"], "mmap"),
            ("lirs_page_aware", "lirs_page_aware", d["next"], "auto")]:
        src[key] = contender(name, data, N_MIX, source_bound=True, backend=backend)
    bat = {}
    for key, name, backend in [("lirs_batched", "lirs_batched", "auto"),
                               ("lirs_batched_pread", "lirs_batched", "pread"),
                               ("lirs_batched_mmap", "lirs_batched", "mmap"),
                               ("tfrecord_batch", "tfrecord_batch", "auto"),
                               ("tfrecord_shuffle_batch", "tfrecord_shuffle_batch", "auto")]:
        bat[key] = contender(name, d["mix"], N_MIX, backend=backend)
    per = {}
    for key, name, backend in [("tfrecord", "tfrecord", "auto"),
                               ("tfrecord_shuffle", "tfrecord_shuffle", "auto"),
                               ("lirs", "lirs", "auto")]:
        per[key] = contender(name, d["mix"], N_MIX, limit=min(N_MIX, PER_ELEMENT_LIMIT),
                             backend=backend)

    sec = "1 hot, 2M x 362 B" if SCALE == 1 else f"1 hot, {N_MIX:,} x 362 B"
    shuf = src["tfrecord_shuffle"]["rate"]
    plain = src["tfrecord"]["rate"]
    limit_crc = lim["gather limit: mmap + CRC32C + copy, prefetch"]["rec_per_sec"]

    def lim_of(r):
        return f"{ratio(r, limit_crc):.2f}x gather limit"

    def vs(r, lirs=True):
        out = f"{ratio(r, shuf):.2f}x shuffle; {ratio(r, plain):.2f}x plain"
        return out + (f"; {lim_of(r)}" if lirs else "")

    # The limit rows and Reader::read_batch (Rust, 1 thread, no TensorFlow).
    for name, r in lim.items():
        rate = r["rec_per_sec"]
        fig = f"{fmt_rate(rate)} ({r['ns_per_rec_median']:.0f} ns/rec; min {r['ns_per_rec_min']:.0f})"
        if name.startswith("gather limit"):
            t.add(sec, f"limit (Rust, 1 thread, no TF): {name}", fig,
                  f"{ratio(rate, limit_crc):.2f}x gather limit")
        elif "default backend" in name:
            m = check(t, "1: Reader::read_batch, default backend, 1 thread, M rec/s",
                      rate / 1e6, 3.0)
            t.add(sec, f"Rust, 1 thread: **{name}**"
                  f"{' (mapped under a lease)' if r.get('auto_mapped') else ' (NOT mapped)'}",
                  fig, lim_of(rate), ">= 3 M rec/s", m)
        else:
            t.add(sec, f"Rust, 1 thread: {name}", fig, lim_of(rate))
    t.add(sec, "per element: TFRecordDataset", fmt_rate(plain), vs(plain, False))
    t.add(sec, "per element: TFRecordDataset.shuffle(10000)", fmt_rate(shuf), vs(shuf, False))
    r = src["lirs"]["rate"]
    m1 = check(t, "1: LIRSDataset (default backend) per-element vs TFRecordDataset",
               ratio(r, plain), 1.5)
    m2 = check(t, "1: LIRSDataset (default backend) per-element vs shuffle(10000)",
               ratio(r, shuf), 1.5)
    t.add(sec, "per element: **LIRSDataset (full shuffle), default backend**", fmt_rate(r),
          vs(r), ">= 1.5x plain; >= 1.5x shuffle", m1 and m2)
    for key, backend in [("lirs_pread", "pread"), ("lirs_mmap", "mmap")]:
        r = src[key]["rate"]
        t.add(sec, f"per element: LIRSDataset (full shuffle), backend {backend}", fmt_rate(r),
              f"{vs(r)}; before: {BEFORE['per_element_' + backend]:,} rec/s")
    r = src["lirs_page_aware"]["rate"]
    t.add(sec, "per element: LIRSDataset(page_aware), padded file, default backend",
          fmt_rate(r), vs(r))
    sb = bat["tfrecord_shuffle_batch"]["rate"]

    def bvs(r):
        return (f"{ratio(r, sb):.2f}x shuffle(10000).batch(256); {ratio(r, shuf):.2f}x "
                f"shuffle per element; {lim_of(r)}")

    r = bat["lirs_batched"]["rate"]
    m1 = check(t, "1: LIRSDataset(batch_size=256), default backend, vs shuffle(10000).batch(256)",
               ratio(r, sb), 5.0)
    m2 = check(t, "1: LIRSDataset(batch_size=256), default backend, vs the gather limit",
               ratio(r, limit_crc), 0.5)
    t.add(sec, "batched: **LIRSDataset(batch_size=256), default backend**", fmt_rate(r), bvs(r),
          ">= 5x shuffle(10000).batch(256); >= 0.5x limit", m1 and m2)
    best_key = max(["lirs_batched", "lirs_batched_pread", "lirs_batched_mmap"],
                   key=lambda k: bat[k]["rate"])
    best = bat[best_key]["rate"]
    m1 = check(t, "1: LIRSDataset(batch_size=256), best backend, vs shuffle(10000).batch(256)",
               ratio(best, sb), 8.0)
    m2 = check(t, "1: LIRSDataset(batch_size=256), best backend, vs the gather limit",
               ratio(best, limit_crc), 0.5)
    for key, backend in [("lirs_batched_pread", "pread"), ("lirs_batched_mmap", "mmap")]:
        r = bat[key]["rate"]
        is_best = key == best_key
        t.add(sec, f"batched: LIRSDataset(batch_size=256), backend {backend}",
              fmt_rate(r), f"{bvs(r)}; before: {BEFORE['batched_' + backend]:,} rec/s",
              ">= 8x shuffle(10000).batch(256); >= 0.5x limit (best backend)" if is_best
              else "", (m1 and m2) if is_best else None)
    if best_key == "lirs_batched":
        t.add(sec, "batched: best backend is the default backend", "", "",
              ">= 8x shuffle(10000).batch(256); >= 0.5x limit (best backend)", m1 and m2)
    for key, label in [("tfrecord_batch", "TFRecordDataset.batch(256)"),
                       ("tfrecord_shuffle_batch", "TFRecordDataset.shuffle(10000).batch(256)")]:
        r = bat[key]["rate"]
        t.add(sec, f"batched: {label}", fmt_rate(r), vs(r, False))
    c_shuf = per["tfrecord_shuffle"]["rate"]
    n_elems = per["tfrecord"]["records"]
    for key, label in [("tfrecord", "TFRecordDataset"),
                       ("tfrecord_shuffle", "TFRecordDataset.shuffle(10000)"),
                       ("lirs", "LIRSDataset, default backend")]:
        r = per[key]["rate"]
        t.add(sec, f"consumer-bound: {label}, reduce per element ({n_elems:,}/rep)",
              fmt_rate(r), f"{ratio(r, c_shuf):.2f}x shuffle (this regime)")
    r = bat["lirs_batched"]["rate"]
    t.add(sec, "consumer-bound: LIRSDataset(batch_size=256, default backend) vs the "
          "per-element shuffle(10000) pipeline", fmt_rate(r),
          f"{ratio(r, c_shuf):.1f}x shuffle (this regime)")
    return {"limit": lim, "source_bound": src, "batched": bat, "per_element": per}


def bench_hot_large(t, d):
    """Row 2: hot cache, 100 KB records: rates in both regimes, peak RSS per element."""
    log("row 2: hot cache, 100 KB records")
    cat_to_null(d["big"])
    res = {}
    for name in ["baseline", "tfrecord", "tfrecord_shuffle", "lirs", "lirs_batched"]:
        res[name] = contender(name, d["big"], N_BIG)
    src = {}
    for name in ["tfrecord", "tfrecord_shuffle", "lirs"]:
        src[name] = contender(name, d["big"], N_BIG, source_bound=True)
    sec = f"2 hot, {N_BIG:,} x 100 KB"
    base = res["baseline"]["peak_rss_mb"]
    shuf_rss = res["tfrecord_shuffle"]["peak_rss_mb"]
    plain = res["tfrecord"]["rate"]
    s_plain = src["tfrecord"]["rate"]
    t.add(sec, "baseline process (TF + tfrecord_lirs imported, empty pipeline)",
          f"peak RSS {base:,.0f} MB")
    r = src["lirs"]["rate"]
    m1 = check(t, "2: LIRSDataset 100 KB per-element vs TFRecordDataset", ratio(r, s_plain), 1.0)
    for name, label in [("tfrecord", "TFRecordDataset"),
                        ("tfrecord_shuffle", "TFRecordDataset.shuffle(10000)"),
                        ("lirs", "**LIRSDataset** (default backend: pread for 100 KB records)")]:
        r = src[name]["rate"]
        before = f"; before: {BEFORE['big_per_element']:,} rec/s" if name == "lirs" else ""
        t.add(sec, f"per element: {label}", fmt_rate(r),
              f"{ratio(r, s_plain):.2f}x plain{before}",
              ">= 1.0x plain" if name == "lirs" else "", m1 if name == "lirs" else None)
    for name, label in [("tfrecord", "TFRecordDataset"),
                        ("tfrecord_shuffle", "TFRecordDataset.shuffle(10000)"),
                        ("lirs", "**LIRSDataset** (default backend)"),
                        ("lirs_batched", "LIRSDataset(batch_size=256) (default backend)")]:
        r = res[name]
        rss = r["peak_rss_mb"]
        fig = f"{fmt_rate(r['rate'])}; peak RSS {rss:,.0f} MB ({rss - base:+,.0f} MB over baseline)"
        rat = (f"{ratio(r['rate'], plain):.2f}x plain; RSS {ratio(rss, shuf_rss):.3f}x shuffle's"
               f" ({ratio(rss - base, shuf_rss - base):.3f}x over baseline)")
        if name == "lirs":
            rat += (f"; before: {BEFORE['big_consumer']:,} rec/s, "
                    f"+{BEFORE['big_rss_over_baseline']} MB")
        elif name == "lirs_batched":
            rat += f"; before: {BEFORE['big_batched']:,} rec/s"
        if name == "lirs":
            # Judged on the memory the pipeline adds to the process: TF's own import
            # (the baseline row) is already ~0.2-0.35x of shuffle(10000)'s raw peak.
            m2 = check(t, "2: LIRSDataset peak RSS over the TF baseline vs shuffle(10000)'s",
                       ratio(rss - base, shuf_rss - base), 0.1, higher_is_better=False)
            t.add(sec, f"consumer-bound + RSS: {label}", fig, rat,
                  "RSS over baseline <= 0.1x shuffle's", m2)
        else:
            t.add(sec, f"consumer-bound + RSS: {label}", fig, rat)
    return {"per_element": res, "source_bound": src}


def bench_pages(t, d):
    """Row 4: page reads per data page per epoch."""
    log("row 4: page reads per data page")
    res = json_lines(run([RUST, "pages", d["mix"], d["next"]]))
    sec = "4 page reads / data page / epoch"
    for r in res:
        kind = "page-aware (Fetcher)" if r["page_aware"] else "instance-based (read per id)"
        v = r["page_reads_per_data_page"]
        label = f"{r['file']} (next-fit) file, {kind}" if r["file"] == "padded" else \
            f"{r['file']} file, {kind}"
        extra = (f"{r['page_reads']:,} page reads / {r['data_pages']:,} pages; "
                 f"{r['reads']:,} reads")
        if r["file"] == "padded" and r["page_aware"]:
            m = check(t, "4: padded + page-aware page reads per data page", v, 1.0, exact=True)
            t.add(sec, f"**{label}**", f"{v:.3f}", extra, "exactly 1.00", m)
        else:
            t.add(sec, label, f"{v:.3f}", extra)
    return res


def bench_cold(t, d, hot):
    """Row 3: cold cache, padded + page-aware, parallel O_DIRECT vs fio vs stock."""
    log("row 3: cold cache")
    padded = d["next"]
    rust = json_lines(run([RUST, "cold", padded, str(DEPTH), str(COLD_WINDOW),
                           str(COLD_WINDOWS_IN_FLIGHT), str(COLD_MAX_SECS)]))[0]
    fio = {}
    for engine in ("psync", "libaio"):
        run([RUST, "cache", "drop", padded])
        cmd = ["fio", "--name=r", f"--filename={padded}", "--rw=randread", "--bs=4k",
               "--direct=1", "--readonly", "--group_reporting", "--time_based",
               f"--runtime={FIO_SECS}", "--output-format=json"]
        if engine == "psync":
            cmd += ["--ioengine=psync", f"--numjobs={DEPTH}", "--thread"]
        else:
            cmd += ["--ioengine=libaio", f"--iodepth={DEPTH}", "--numjobs=1"]
        text = run(cmd)
        j = json.loads(text[text.index("{"):])
        fio[engine] = j["jobs"][0]["read"]["iops"]
        log(f"  fio {engine} depth {DEPTH}: {fio[engine]:,.0f} IOPS")
    stock = contender("tfrecord", d["mix"], N_MIX, cold=True, source_bound=True, reps=1)
    stock_pe = contender("tfrecord", d["mix"], N_MIX, cold=True, reps=1,
                         limit=min(N_MIX, PER_ELEMENT_LIMIT))
    sec = "3 cold"
    pps = rust["pages_per_sec"]
    t.add(sec, f"fio randread 4 KiB, O_DIRECT, psync x {DEPTH} threads",
          fmt_rate(fio["psync"], "IOPS"))
    t.add(sec, f"fio randread 4 KiB, O_DIRECT, libaio iodepth {DEPTH}",
          fmt_rate(fio["libaio"], "IOPS"), f"{ratio(fio['libaio'], fio['psync']):.2f}x psync")
    m = check(t, "3: cold parallel O_DIRECT pages/s vs fio IOPS", ratio(pps, fio["psync"]), 0.8)
    t.add(sec, f"**padded + page-aware, Fetcher, O_DIRECT, {DEPTH} threads** "
          f"(cached before: {rust['cached_pages_before']} of {rust['pages']} pages; "
          f"{rust['records']:,} records in {rust['secs']:.1f} s)",
          f"{fmt_rate(pps, 'pages/s')}; {fmt_rate(rust['records_per_sec'])}",
          f"{ratio(pps, fio['psync']):.2f}x fio psync; "
          f"{ratio(pps, fio['libaio']):.2f}x fio libaio; before: "
          f"{BEFORE['cold_pages']:,} pages/s ({BEFORE['cold_vs_fio']:.2f}x fio psync)",
          ">= 0.8x fio IOPS", m)
    mb = os.path.getsize(d["mix"]) / 1e6
    t.add(sec, "stock sequential TFRecordDataset, unpadded file, consumed via .batch(1024) "
          f"(cached before: {stock['cached_pages_before']} of {stock['pages']} pages)",
          f"{fmt_rate(stock['rate'])}; {mb / stock['median_secs']:,.0f} MB/s",
          f"LIRS cold is {ratio(rust['records_per_sec'], stock['rate']):.2f}x this")
    t.add(sec, "stock sequential TFRecordDataset, per element "
          f"(cached before: {stock_pe['cached_pages_before']} of {stock_pe['pages']} pages)",
          fmt_rate(stock_pe["rate"]),
          f"LIRS cold is {ratio(rust['records_per_sec'], stock_pe['rate']):.2f}x this")
    return {"rust": rust, "fio": fio, "stock": stock, "stock_per_element": stock_pe}


def bench_index(t, d):
    """Row 5: offset table build vs cat."""
    log("row 5: index vs cat")
    f = d["mix"]
    size = os.path.getsize(f)
    out = os.path.join(os.path.dirname(f), "index-bench.offsets")
    cat_to_null(f)
    cats = [cat_to_null(f) for _ in range(3)]
    idx = []
    for _ in range(3):
        # `index` leaves a current table as it is: each timed run builds one.
        if os.path.exists(out):
            os.remove(out)
        idx.append(timed([CLI, "index", f, "--out", out])[0])
    cat_gbs = size / min(cats) / 1e9
    idx_gbs = size / min(idx) / 1e9
    sec = "5 offset table build (hot)"
    t.add(sec, f"`cat FILE > /dev/null` ({size / 1e6:,.0f} MB, best of 3)", f"{cat_gbs:.2f} GB/s")
    m = check(t, "5: index build vs cat bandwidth", ratio(idx_gbs, cat_gbs), 0.8)
    t.add(sec, "**`tfrecord-lirs index FILE`** (CRC-checked scan + table write, best of 3)",
          f"{idx_gbs:.2f} GB/s",
          f"{ratio(idx_gbs, cat_gbs):.2f}x cat; before: {BEFORE['index_vs_cat']:.2f}x cat",
          ">= 0.8x cat", m)
    return {"cat_secs": cats, "index_secs": idx, "bytes": size}


def bench_filler(t, d):
    """Row 6: filler overhead, next-fit vs best-fit."""
    sec = "6 filler overhead (kdd-like mix, P=4096)"
    for fit in ("next", "best"):
        p = d["pads"][fit]
        t.add(sec, f"`tfrecord-lirs pad --fit {fit}`",
              f"{p['overhead_percent']:.2f} % filler",
              f"{p['filler_bytes']:,} filler bytes; pad took {p['secs']:.1f} s")


def bench_micro(t, d):
    """Row 7: Rust micro-benchmarks."""
    log("row 7: micro-benchmarks")
    res = json_lines(run([RUST, "micro", d["mix"], d["tiny"], str(MICRO_SECS)]))
    sec = "7 Rust micro"
    for r in res:
        ns = r["ns_per_op"]
        if "gb_per_sec" in r:
            fig = f"{r['gb_per_sec']:.2f} GB/s"
            extra = f"{ns:,.0f} ns per {r['bytes_per_op']:,} B"
        elif r["ops"] == 1:
            fig = f"{ns / 1e6:,.1f} ms"
            extra = f"{r['n']:,} ids"
        else:
            fig = f"{ns:,.1f} ns/op"
            extra = f"{1e9 / ns:,.0f} ops/s; {r['n']:,} ids"
        t.add(sec, r["name"], fig, extra)
    return res


# --- the report ----------------------------------------------------------------------------

def report(path, t, m, meta, results):
    P = meta["params"]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{meta['command']}` on {meta['date']}; "
        f"the measurements took {meta['minutes']:.1f} minutes. {meta.get('note', '')}"
        f"Scale: BENCH_SCALE={P['scale']:g}. "
        "Every contender ran in this same run; raw figures are in "
        "`bench_out/results.json`.",
        "",
        "## Machine",
        "",
        f"* CPU: {m['cpu']}, {m['cores']} cores",
        f"* RAM: {m['ram_gb']:.1f} GiB",
        f"* Disk: {m['disk']}",
        f"* Filesystem: {m['filesystem']}",
        f"* Kernel: {m['kernel']}",
        f"* TensorFlow {m['tensorflow']} (tensorflow-cpu), Python {m['python']}, {m['rustc']}, "
        f"{m['fio']}",
        f"* Load average at start / end: {' '.join(meta['load_start'])} / "
        f"{' '.join(meta['load_end'])} (the machine is shared; figures are the median of "
        f"{P['reps']} timed epochs unless noted)",
        "",
        "## Results",
        "",
        t.markdown(),
        "",
        "## Targets",
        "",
    ]
    for name, value, goal, met, how in t.targets:
        lines.append(f"* {'met' if met else '**missed**'}: {name}: {value:.3f}"
                     + ("" if met else f" ({how})"))
    lines += [
        "",
        "## How it is measured",
        "",
        "* Data: `lirs_bench gen-mix` writes the kdd-like file (payload sizes normal, mean "
        "362 B, sd 30 %, deterministic) with the crate's `TFRecordWriter`; "
        "`tfrecord-lirs pad --fit next|best` makes the padded copies, `tfrecord-lirs index` "
        "the tables. Everything lives in `bench_out/`.",
        "* tf.data contenders each run in a fresh process (`benchmarks/tf_contender.py`) and "
        "are consumed identically: one `Dataset.reduce` counting elements inside a "
        "`tf.function` traced before timing, after a warm-up of 20 000 elements. "
        f"Consumer-bound rows of row 1 time a prefix of {P['per_element_limit']:,} "
        "elements of the epoch per rep (the LIRS order is still a permutation of the whole "
        "file); all other rows time the full epoch. Peak RSS is `ru_maxrss` of that "
        "process. Figures are medians over the timed epochs: with tf.data's default "
        "Options (autotune on) an epoch now and then takes about twice as long, for stock "
        "and LIRS contenders alike (not seen with autotune off), so single epochs mislead.",
        "* \"per element\" rows of rows 1 and 2 append `.batch(1024)` before the same "
        "reduce, so TF's per-element function call is paid once per 1024 elements and the "
        "figure is the source's own per-element rate (each source still yields one element "
        "per `GetNext`); the whole epoch is timed. This is the regime of the issue's "
        "reference figures (~360 K/s plain, ~195 K/s shuffle(10000)), and the per-element "
        "targets are judged on it. \"consumer-bound\" rows reduce over single elements: "
        "there TF's per-element dispatch (~40 us/element on this box) sets every "
        "contender's rate, so they show what a per-element consumer gets (and what "
        "in-kernel batching saves), not how fast a source is.",
        "* Peak RSS target (row 2): judged on what each pipeline adds to its process's "
        "peak RSS over the baseline process (TF + tfrecord_lirs imported, an empty "
        "pipeline, same script): the baseline alone is about a quarter to a third of "
        "shuffle(10000)'s raw peak, so a raw ratio of 0.1 is out of reach for any pipeline "
        "inside a TensorFlow process. The raw ratios are in the row too.",
        "* Backends: \"default backend\" is `LIRSDataset(...)` as a user gets it "
        "(`backend=\"auto\"`: `pread` plus a memory map held under a read lease for files "
        "of small records, so the kdd-like file is mapped and the 100 KB file is not); "
        "`backend pread` / `backend mmap` force one. Mapped file pages count in peak RSS.",
        "* Limit rows: `lirs_bench limit` (Rust, no TensorFlow, 1 thread): a plain loop over "
        "one LIRS epoch order of the kdd-like file: the offset table, a memory map, the "
        "header and payload CRC32C, a copy of each payload into one batch buffer of 256; "
        "with and without software prefetch (table entries 48 and records 16 positions "
        "ahead), with and without CRC; `Reader::read_batch` in windows of 256 ids of the "
        "same order per backend, all interleaved over 7 rounds (median ns/record). "
        "\"x gather limit\" = rate / the limit with CRC and prefetch.",
        "* Cold: the file is dropped with `posix_fadvise(DONTNEED)` after `fsync` and "
        "`mincore` confirms it is out (pages still cached are printed in the row). The LIRS "
        f"cold row is `lirs_bench cold`: a page-aware epoch order, `Fetcher` with "
        f"{P['depth']} threads (window {P['cold_window']} ids, {P['cold_in_flight']} windows in "
        f"flight) over a `Backend::Direct` reader, run for up to {P['cold_max_secs']} s; "
        "pages/s = the reader's `page_reads` / time. fio reads the same padded file.",
        "* Page reads per data page: `Reader::io_stats()` `page_reads / data_pages` over "
        "one epoch; instance-based reads each id alone, page-aware goes through `Fetcher` "
        "(one coalesced read per unit).",
        "* Rust micro-benchmarks: best of repeated runs of `lirs_bench micro`.",
        "* High-latency storage (row 8, `benchmarks/latency_bench.py`): one process inside "
        "a private network namespace reads `gs://` through TensorFlow's own GCS client "
        "(libcurl, TLS) from the GCS emulator of `tests/gcs_emulator.py` on loopback; every "
        "object read waits a lognormal latency (median and sigma in the row) seeded by the "
        "read's object and byte range (the same in every run) before "
        "the emulator answers, and the emulator serves requests concurrently, as remote "
        "storage does. Each contender times a prefix of one epoch after its first element; "
        "TensorFlow's 64 MB GCS read-ahead buffer is off for the run "
        "(`GCS_READ_CACHE_BLOCK_SIZE_MB=0`: with it each random read fetches up to 64 MB).",
        "* S3 with latency (row 11, `benchmarks/s3_latency_bench.py`): `LIRSDataset` over "
        "`s3://` (read by the op through the core's object_store client) from moto's S3 "
        "server in a private network namespace whose loopback delays every packet 25 ms in "
        "the kernel (`tc qdisc add dev lo root netem delay 25ms`, a 50 ms round trip). "
        "Where the kernel has no netem, that row says why and the same contenders run with "
        "each object GET held by the server instead, labelled so: 50 ms constant, and a "
        "lognormal draw of mean 50 ms. Each runs in instance order (one GET per record; "
        "32 reads in flight vs 1 is judged there) and page-aware order (one coalesced GET "
        "per page; unordered vs deterministic is judged there, on the lognormal model: "
        "the bench's docstring says why).",
        "* Object storage vs a sequential read (row 15, `benchmarks/objstore_bench.py`): one "
        "process in a private network namespace; `LIRSDataset` and `Loader` over `s3://` "
        "(the core's object_store client, requests in flight on its runtime) from "
        "`benchmarks/s3-bench-server` (s3s + s3s-fs, async; 18 us of server CPU per GET, "
        "so not the limit), stock `TFRecordDataset(gs://).shuffle(10000)` from the GCS "
        "emulator, and a sequential pass in 256 KB ranged GETs, one at a time, over the "
        "S3 server; every object GET of both servers waits the same lognormal draw (mean "
        "50 ms) keyed by object and range. GETs per record and bytes fetched per byte "
        "delivered are the S3 server's own counts; CPU per record is the reading "
        "process's `time.process_time`.",
        "* The local tier `cache_dir` (row 16, `benchmarks/cache_dir_bench.py`): the same "
        "S3 server and latency; a `Loader` (instance order, default settings) walks two "
        "epochs in a fresh process over the files on local disk, over `s3://` without a "
        "cache, and with `cache_dir` cold (empty) then warm (filled by the cold run); the "
        "second epoch's rate is compared (the first is in the note), and the warm runs' "
        "GETs are the server's own count (the target: none). MosaicML Streaming "
        "(`benchmarks/mosaic_bench.py`, its own venv) reads the same records as MDS "
        "shards of 4 MiB from the same server into its local cache, cold then warm, "
        "sample by sample with its default shuffle (`py1e`: within blocks of shards, "
        "not full-range).",
        "* Data refurbishing (row 14, `benchmarks/refurbish_bench.py`, the TensorFlow-free "
        "venv): a PyTorch DataLoader with 2 persistent worker processes over PNG Examples; "
        "the augmentation is numpy and Pillow (decode, crop, flip, 5 RandAugment-like "
        "layers; refurbish stores the output after the 4th, data echoing after the 5th); "
        "the stores are directories under /dev/shm (shared by the workers in memory), and "
        "one row puts the r=3 store on disk. Epoch 0 refreshes everything and is not "
        "timed. The per-batch spread is p95/p50 of the time a worker spends on each batch "
        "(from the end of its previous one), the CPU per step the cache-aware shuffle "
        "keeps even; the spread of the batches' arrivals is printed beside it (two "
        "workers' batches interleave there, so it swings with their phase).",
        "* Cold reads in a memory cgroup (row 17, `benchmarks/cold_cgroup_bench.py`): one "
        "stock TFRecord file of ~100 KB records (1.5 GB), one epoch per contender with "
        "default arguments, each a fresh process in a fresh child of a v1 memory cgroup "
        "limited to 500 MB, the file evicted first; 2 interleaved rounds, medians. Bytes "
        "fetched per byte are the process's `read_bytes` (/proc/self/io) over the epoch "
        "divided by the file's size.",
        "* Sweep (row 14, `benchmarks/sweep_bench.py`): 4 PyTorch jobs (processes, a "
        "DataLoader with 1 worker each) started at once with the same data, seed and row "
        "14's whole augmentation, each epoch a new one: on a store directory of their "
        "own each, then all on one (`tfrecord_lirs.torch.AugmentDataset(share=...)`, "
        "under /dev/shm); per-job images/s over every epoch and the augmentations "
        "computed in all (counted by the jobs; each reads its record once); the same "
        "with 4 tf.data jobs (`tfrecord_lirs.augment(share=...)`, row 14's augmentation as "
        "TensorFlow ops). Bytes read: the engine's read counters of every process that "
        "read the data file (DataLoader workers, tf.data jobs), in all, against one "
        "separate job's. Separate and shared alternate 3 times; the figures are the round "
        "with the median speedup.",
        "",
    ]
    if os.path.exists(PROFILE_NOTES):
        with open(PROFILE_NOTES) as f:
            lines += [f.read().rstrip(), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench_out"))
    ap.add_argument("--report", default=os.path.join(ROOT, "BENCHMARKS.md"))
    ap.add_argument("--only", default="",
                    help="comma-separated subset of rows to run, e.g. 'limit,1' or '5' "
                         "(for iterating; the report is then written only with --report)")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite the report from OUT/results.json without measuring "
                         "(e.g. after editing benchmarks/PROFILE_NOTES.md)")
    args = ap.parse_args()
    if args.render_only:
        with open(os.path.join(args.out, "results.json")) as f:
            results = json.load(f)
        t = Table()
        t.rows, t.targets = results["rows"], [tuple(x) for x in results["targets"]]
        report(args.report, t, results["machine"], results["meta"], results)
        log(f"rewrote {args.report} from {args.out}/results.json")
        return
    only = set(filter(None, args.only.split(",")))
    # Rows 13 and 14 need neither the binaries nor fio (nor the shared data).
    if not only or not only <= {"13", "14"}:
        for tool in (CLI, RUST):
            if not os.path.exists(tool):
                raise SystemExit(f"{tool} is missing: build it first (see the Makefile's bench)")
        if not shutil.which("fio"):
            raise SystemExit("fio is not installed (apt-get install -y fio)")
    start = time.time()
    load_start = loadavg()
    os.makedirs(args.out, exist_ok=True)
    data_json = os.path.join(args.out, "data.json")
    # A partial run (--only) reuses the data of the previous run at the same scale.
    reuse = None
    if only and os.path.exists(data_json):
        with open(data_json) as f:
            reuse = json.load(f)
        if reuse.get("scale") != SCALE:
            reuse = None
    # Row 10 makes (and removes) its own data.
    own_data = bool(only) and only <= {"10", "13", "14", "17"}
    if reuse is None and not own_data:
        for name in os.listdir(args.out):  # only what a previous run left
            if name.endswith((".tfrecord", ".offsets", ".json")):
                os.remove(os.path.join(args.out, name))
    m = machine(args.out)
    log(f"scale {SCALE:g}: {N_MIX:,} kdd-like, {N_BIG:,} x 100 KB, {N_TINY:,} tiny records")
    if own_data:
        d = {}
    elif reuse is None:
        d = generate(args.out)
        with open(data_json, "w") as f:
            json.dump({"scale": SCALE, "d": d}, f)
    else:
        d = reuse["d"]
        log("reusing the data of the previous run (--only)")
    t = Table()
    results = {"scale": SCALE, "machine": m, "data": {k: v for k, v in d.items()}}
    if "limit" in only:
        results["limit"] = bench_limit(d)
    if not only or "5" in only:
        results["index"] = bench_index(t, d)
    if not only or "6" in only:
        bench_filler(t, d)
    if not only or "1" in only:
        results["hot_small"] = bench_hot_small(t, d)
    if not only or "2" in only:
        results["hot_large"] = bench_hot_large(t, d)
    if not only or "4" in only:
        results["pages"] = bench_pages(t, d)
    if not only or "7" in only:
        results["micro"] = bench_micro(t, d)
    if not only or "3" in only:
        results["cold"] = bench_cold(t, d, results)
    if not only or "8" in only:
        # Row 8: gs:// through TensorFlow's GCS client, emulator with injected latency.
        import latency_bench
        log("row 8: high-latency storage (gs:// emulator)")
        results["latency"] = latency_bench.run_latency(args.out)
        latency_bench.add_rows(t, results["latency"], check, fmt_rate)
    if not only or "9" in only:
        results["without_tf"] = bench_without_tf(t, d, args.out)
    if not only or "10" in only:
        results["large"] = bench_large(t, args.out)
    if not only or "11" in only:
        # Row 11: s3:// through object_store, moto with kernel (netem) latency.
        import s3_latency_bench
        log("row 11: S3 with latency (moto, netem)")
        results["s3_latency"] = s3_latency_bench.run_s3_latency(args.out)
        s3_latency_bench.add_rows(t, results["s3_latency"], check, fmt_rate)
    if not only or "15" in only:
        # Row 15: object storage vs a sequential read (s3-bench-server, GCS emulator).
        import objstore_bench
        log("row 15: object storage vs a sequential read (s3-bench-server)")
        results["objstore"] = objstore_bench.run_objstore(args.out)
        objstore_bench.add_rows(t, results["objstore"], check, fmt_rate)
        # Its TF-free part: Loader at every in-flight setting, both orders and
        # deliveries, GETs per record and their cost, and the merge-gap table.
        log("row 15: Loader over s3-bench-server, the merge gap")
        results["objstore_loader"] = objstore_bench.run_loader_rows(args.out)
        objstore_bench.add_loader_rows(t, results["objstore_loader"], check, fmt_rate)
    if not only or "12" in only:
        # Row 12: trainers sharing one LIRS read (tf.data service, cross-trainer cache).
        import shared_read_bench
        log("row 12: several trainers on one read (tf.data service)")
        results["shared_read"] = shared_read_bench.run(args.out)
        shared_read_bench.add_rows(t, results["shared_read"], check, row="12")
    if not only or "13" in only:
        results["examples"] = bench_examples(t, args.out)
    if not only or "14" in only:
        results["refurbish"] = bench_refurbish(t, args.out)
        results["refurbish_tf"] = bench_refurbish_tf(t, args.out)
    if not only or "16" in only:
        # Row 16: the local tier cache_dir over s3:// (s3-bench-server).
        import cache_dir_bench
        log("row 16: cache_dir and MosaicML Streaming cold and warm vs local disk "
            "(s3-bench-server)")
        results["cache_dir"] = cache_dir_bench.run_cache_dir(args.out)
        cache_dir_bench.add_rows(t, results["cache_dir"], check, fmt_rate)
    if not only or "17" in only:
        # Row 17: cold reads inside a memory cgroup whose limit is below the data.
        import cold_cgroup_bench
        log("row 17: cold reads in a memory cgroup (limit below the data)")
        results["cold_cgroup"] = cold_cgroup_bench.run_cold_cgroup(
            args.out, without_tf_python=WITHOUT_TF_PY)
        cold_cgroup_bench.add_rows(t, results["cold_cgroup"], check, fmt_rate)
    # Table order: rows 1..17.
    t.rows.sort(key=lambda r: int(r[0].split()[0]))
    meta = {
        "command": os.environ.get("BENCH_COMMAND", "make bench"),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M %Z").strip(),
        "minutes": (time.time() - start) / 60,
        "load_start": load_start,
        "load_end": loadavg(),
        "params": {"scale": SCALE, "reps": REPS, "per_element_limit": min(N_MIX, PER_ELEMENT_LIMIT),
                   "depth": DEPTH, "cold_window": COLD_WINDOW,
                   "cold_in_flight": COLD_WINDOWS_IN_FLIGHT, "cold_max_secs": COLD_MAX_SECS},
    }
    results["meta"] = meta
    results["targets"] = t.targets
    results["rows"] = t.rows
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    print(t.markdown())
    print()
    for name, value, goal, met, how in t.targets:
        print(f"{'met   ' if met else 'MISSED'} {name}: {value:.3f}" + ("" if met else f" ({how})"))
    if only and args.report == os.path.join(ROOT, "BENCHMARKS.md"):
        log("--only: BENCHMARKS.md not rewritten (a partial run)")
        return
    report(args.report, t, m, meta, results)
    log(f"wrote {args.report} ({meta['minutes']:.1f} min)")


if __name__ == "__main__":
    main()
