"""The A/B's row 1 tf.data contenders counted instead of timed: instructions per record.

`make ab` times both trees and, on this 2-core VM, resolves about +-15 % on a tf.data
row by rounds and about +-6 % by 20 pairs of processes (its check row: the stock
TFRecordDataset, the same code on both sides; see benchmarks/ab.py). This script runs
each of row 1's tf.data contenders (ab.py's PAIRED) once per tree under valgrind's
callgrind, on the trees and data file of the last `ab.py` run, and prints the work done
per record in one timed epoch (the harness's BENCH_CALLGRIND=1: TensorFlow's import, the
tracing and the warm-up are not counted):

* `op`: instructions executed in the tree's `_lirs_ops.so` (the C++ glue and the Rust
  engine linked into it), on every thread. The epoch's own setup (its order, the
  iterator's reader) is in it, spread over the records.
* `process`: instructions of the whole process, TensorFlow's included. Its thread pools
  spin before they sleep, for as long as valgrind's one-thread-at-a-time scheduling
  lets them, so this column is noisier; the check row (no LIRS code) shows by how much.
* `D1 miss` / `LL miss`: the op library's simulated data-cache misses (reads and writes),
  from `--cache-sim=yes`. The last level's geometry is the kernel's (sysfs): valgrind's
  own guess from this VM's cpuid was a direct-mapped 256 MB cache, where the L3 is
  32 MB 16-way, and in a direct-mapped model two buffers that happen to share an index
  evict each other: the pread rows' LL misses then differed 29x between the trees
  (2026-11-29), with D1 misses equal.

Ratios are after/before: above 1 is more work after the change. PYTHONHASHSEED=0 and
BENCH_TF_AUTOTUNE=0, as ab.py's pairs. Two runs go at once (`--jobs`): counts do not
depend on the machine's load. ~15 min for row 1's six contenders on this VM.

    .venv/bin/python benchmarks/ab.py --before REV --after REV   (the data file)
    .venv/bin/python benchmarks/ab_counts.py --before REV [--after HEAD]
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ab  # noqa: E402
import counting  # noqa: E402

OP_LIBRARY = "_lirs_ops.so"


def last_level_cache():
    """valgrind's `--LL=size,ways,line` for this machine's last-level cache, from sysfs;
    None if the kernel does not say."""
    best = None
    base = "/sys/devices/system/cpu/cpu0/cache"
    for index in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            def read(name, index=index):
                with open(os.path.join(base, index, name)) as f:
                    return f.read().strip()
            level, kind = int(read("level")), read("type")
            size = read("size")
            size = int(size[:-1]) * 1024 if size.endswith("K") else int(size)
            ways, line = int(read("ways_of_associativity")), int(read("coherency_line_size"))
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and (best is None or level > best[0]):
            best = (level, f"--LL={size},{ways},{line}")
    return best and best[1]


def count(valgrind, tree, data, records, extra, out_file):
    """Runs one contender of `tree` under callgrind with the options `valgrind`; returns
    its counts."""
    cmd, env = ab.contender(tree, data, records, 1, 0, extra)
    cmd = counting.command(out_file, *valgrind) + cmd
    env.update(PYTHONHASHSEED="0", BENCH_CALLGRIND="1")
    t = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    events, cost = counting.cost_by_object(out_file)
    col = {e: i for i, e in enumerate(events)}

    def total(objs, *names):
        return sum(sum(r[col[n]] for n in names) for _, r in objs)

    ops = [(o, r) for o, r in cost.items() if o.endswith(OP_LIBRARY)]
    return {"records": result["records"], "secs": time.time() - t,
            "process": total(cost.items(), "Ir"), "op": total(ops, "Ir"),
            "d1": total(ops, "D1mr", "D1mw"), "ll": total(ops, "DLmr", "DLmw")}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--dir", default=os.path.join(ab.ROOT, "target", "ab"))
    ap.add_argument("--limit", type=int, default=None,
                    help="records per counted epoch (default: a whole epoch; the "
                         "consumer-bound row reads its 50,000)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    sides = {"before": ab.commit_of(args.before), "after": ab.commit_of(args.after)}
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    venvs = {".venv": os.path.join(ab.ROOT, ".venv")}
    # Each tree as ab.py builds it (quick when built), with this tree's harness.
    trees = {s: ab.prepare(c, args.dir, venvs, seed=False) for s, c in sides.items()}
    data, records = ab.paired_data(args.dir)
    ll = last_level_cache()
    valgrind = ["--cache-sim=yes"] + ([ll] if ll else [])  # callgrind's options
    work = os.path.join(args.dir, "counts")
    os.makedirs(work, exist_ok=True)
    rows = []
    for label, extra in ab.PAIRED:
        if args.limit is not None and "--limit" not in extra:
            extra = extra + ["--limit", str(args.limit)]
        rows.append((label, extra))
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for i, (label, extra) in enumerate(rows):
            for side, tree in trees.items():
                out_file = os.path.join(work, f"callgrind.{side}.{i}")
                jobs[label, side] = pool.submit(count, valgrind, tree, data, records,
                                                extra, out_file)
        counts = {k: f.result() for k, f in jobs.items()}
    for (label, side), c in sorted(counts.items()):
        ab.log(f"{side}: {label}: {c['records']:,} records, {c['secs']:.0f} s under callgrind")
    print(f"Counts per record: before {args.before} ({sides['before'][:12]}), after "
          f"{args.after} ({sides['after'][:12]}); callgrind, one epoch per contender")
    print(f"{'contender':<62} {'records':>8} {'op before':>9} {'op after':>9} {'ratio':>6} "
          f"{'process before':>14} {'after':>6} {'ratio':>6} {'D1 miss':>7} {'LL miss':>7}")
    summary = []
    for label, _ in rows:
        b, a = counts[label, "before"], counts[label, "after"]
        if b["records"] != a["records"]:
            raise SystemExit(f"{label}: {b['records']} records before, {a['records']} after")
        n = b["records"]

        def ratio(key, b=b, a=a):
            return a[key] / b[key] if b[key] else float("nan")

        proc = ratio("process")
        print(f"{label[:62]:<62} {n:>8,} {b['op'] / n:>9,.0f} {a['op'] / n:>9,.0f} "
              f"{ratio('op'):>6.3f} {b['process'] / n:>14,.0f} {a['process'] / n:>6,.0f} "
              f"{proc:>6.3f} {ratio('d1'):>7.3f} {ratio('ll'):>7.3f}")
        summary.append({"contender": label, "records": n, "before": b, "after": a,
                        "op_ratio": ratio("op"), "process_ratio": proc,
                        "d1_ratio": ratio("d1"), "ll_ratio": ratio("ll")})
    with open(os.path.join(args.dir, "ab-counts.json"), "w") as f:
        json.dump({"before": sides["before"], "after": sides["after"],
                   "rows": summary}, f, indent=1)


if __name__ == "__main__":
    main()
