"""`make ab BEFORE=<rev> [AFTER=<rev>]`: is a change as fast as the tree before it?

Builds the tree at BEFORE and at AFTER (default HEAD), each from `git archive` into a
directory of its own with its own target/ (under target/ab/<commit>/, kept between runs
and seeded from this tree's target/release on first use), then runs `make bench` rows
1, 2, 3 and 10 (hot small records per element and batched, hot and cold 100 KB records,
large records) with each tree's own benchmarks/run_bench.py, interleaved for --rounds
rounds (6), the order alternating (before, after; after, before; ...), so that drift of
the machine's load hits both sides alike. Both trees read the same data files (one --out
directory: the first run writes them, every later run reuses them).

Both trees time their pipelines with this tree's benchmarks/tf_contender.py (copied into
each), the harness and not the code under test, and with BENCH_TF_AUTOTUNE=0: the
per-element tf.data rows then run with tf.data's autotuning off, which holds them to
one speed per process (see tf_contender.py) where, with it on, a process took one of
speeds exactly 2x apart and kept it.

Judging. Round i of each side ran next to the other's, so each round gives a paired ratio
after/before; a row is "yes" when the geometric mean of its paired ratios and the ratio of
the sides' bests are both >= --min-ratio (0.95), "SLOWER" when the 95 % interval of that
mean (Student's t) lies below it, and "unclear" otherwise. A row measured in one process with
rows whose code is the same in both trees (row 1's Rust rows, with the gather limits) is
judged on its figure over theirs, round by round. Rows of LIRS code are judged;
the stock contenders' rows (TFRecordDataset, HF Arrow, the copy-out limits) run the same
code on both sides and are printed as the run's noise floor. Exits 1 when a judged row is
SLOWER. `--judge-only` judges the saved results of the last run again.

Why an interval: on this 2-core VM a tf.data row runs in one of a few modes per process,
e.g. row 1's per-element LIRSDataset at ~0.39 M, ~0.79 M or ~1.3 M rec/s with one binary
on one file; an epoch takes 1.28 s or 0.59 s in consecutive repetitions of one process,
and pinned to one CPU it takes 0.84-1.3 s, so the slow mode is the pipeline's threads
sharing one core (2026-11-29). Six rounds of rows 1-3 and 10 at BENCH_SCALE=0.25 then
spread the stock rows' paired ratios 0.85-1.10 (their bests 0.82-1.16), wider than the
5 % to be judged; an "unclear" row needs more rounds, or a paired run of that contender
alone.

    .venv/bin/python benchmarks/ab.py --before main~1 [--after HEAD] [--rounds 6]

Pairs of processes (`--pairs N`, after the rounds or, with `--pairs-only`, on the trees
and data of the last run): row 1's tf.data contenders again, each as N pairs of
`tf_contender.py` processes of the two trees run back to back (order alternating), and
judged as above over the pairs. A round pairs each side's whole bench, minutes apart; in
that time this VM's speed drifts, e.g. LIRSDataset per element 1.12-2.02 M rec/s by
round on one tree in the run of 2026-11-29 17:18, where four processes run back to back
gave 1.45-1.53 M. The stock TFRecordDataset is paired the same way, as the check: the
same code on both sides, so its interval shows what the method resolves (5 pairs at
19:17 the same day: 0.81-1.13, so about +-15 %, not 5 %; 20 pairs at 20:21: 0.96-1.08).
What no timing here resolves, benchmarks/ab_counts.py counts: the same contenders'
instructions per record under valgrind, on the trees and data of the last run.

Environment: BENCH_SCALE (passed to run_bench.py; e.g. 0.02 to try the script quickly).
Needs fio (row 3) and, for row 10, a .venv-bench (`make venv-bench`) in this tree.
"""

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[ab {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(cmd, **kw):
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def commit_of(rev):
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"],
                          check=True, capture_output=True, text=True).stdout.strip()


def prepare(commit, ab_dir, venvs, seed):
    """The tree at `commit`, built for the bench rows; returns its directory."""
    tree = os.path.join(ab_dir, commit[:12])
    if not os.path.exists(os.path.join(tree, ".extracted")):
        shutil.rmtree(tree, ignore_errors=True)
        os.makedirs(tree)
        archive = subprocess.run(["git", "-C", ROOT, "archive", commit],
                                 check=True, capture_output=True).stdout
        # -m: every file dated now, newer than any seeded build output (below); with
        # the commit's dates, cargo and make took this tree's copied artifacts for
        # fresh and built the tree before with the code after.
        subprocess.run(["tar", "-x", "-m", "-C", tree], input=archive, check=True)
        open(os.path.join(tree, ".extracted"), "w").close()
    target = os.path.join(tree, "target")
    # A copy of this tree's release build: most of it (the dependencies) is reused.
    if seed and not os.path.exists(target) and os.path.isdir(os.path.join(ROOT, "target", "release")):
        os.makedirs(target)
        for part in ("release", "cxxbridge", "tf_op"):
            src = os.path.join(ROOT, "target", part)
            if os.path.isdir(src):
                log(f"seeding {target}/{part} from {src}")
                sh(["cp", "-a", src, os.path.join(target, part)])
    # One harness for both sides (the module docstring says why).
    shutil.copy(os.path.join(ROOT, "benchmarks", "tf_contender.py"),
                os.path.join(tree, "benchmarks", "tf_contender.py"))
    # run_bench.py finds its venvs under the tree's root.
    for name, path in venvs.items():
        link = os.path.join(tree, name)
        if path and os.path.exists(path) and not os.path.lexists(link):
            os.symlink(os.path.abspath(path), link)
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    py = os.path.join(tree, ".venv", "bin", "python")
    sh(["make", "-C", tree, "build", "py-ext"], env=env)
    sh(["cargo", "build", "--release", "-p", "tfrecord-lirs", "--example", "lirs_bench"],
       cwd=tree, env=env)
    # The production op library only (not `make tf-op`'s fault-injection builds).
    sh(["make", "-C", os.path.join(tree, "tf_op"), f"PYTHON={py}", f"CARGO_TARGET_DIR={target}"],
       env=env)
    return tree


RATE = re.compile(r"^\s*([\d,]+(?:\.\d+)?)\s*(\S*/s)\b")


# What a cold row's label says of its own run ("(cached before: 0 of 48854 pages;
# 500,000 records in 0.6 s)"): left in, the row's label differed between rounds and the
# row was never paired.
RUN_FACTS = re.compile(r"\s*\(cached before:[^()]*\)")


def rates(results):
    """{(section, label): rate} of every table row whose figure starts with a rate."""
    out = {}
    for row in results.get("rows", []):
        m = RATE.match(str(row[2]))
        if m:
            out[(row[0], RUN_FACTS.sub("", row[1]))] = float(m.group(1).replace(",", ""))
    return out


def judged(label):
    """Rows of this project's code (the rest are stock contenders and machine limits)."""
    return "LIRS" in label or label.startswith("Rust, 1 thread") or "Fetcher" in label


def references(sec, label, keys):
    """The rows measured in the same process as a judged row, by code that is the same
    in both trees: row 1's Rust rows and its gather limits, one lirs_bench run (the
    limits read the map directly). A round's figure over theirs takes out what the
    machine did that minute: in one 6-round run (2026-11-29) the limits' paired ratio
    was 0.79 and 0.84 in two rounds, and the Rust rows' 0.93 +- 0.1 became 1.00 +- 0.03
    divided by them. Rows without such references are judged as measured."""
    if label.startswith("Rust, 1 thread"):
        return [k for k in keys if k[0] == sec and k[1].startswith("limit (Rust")]
    return []


def relative(runs, key, refs):
    """Each round's figure of `key` per side, over the geometric mean of `refs`' that
    round (the figure itself without refs)."""
    out = {}
    for side, rounds in runs.items():
        out[side] = [r[key] / (math.exp(statistics.mean(math.log(r[k]) for k in refs))
                               if refs else 1.0) for r in rounds]
    return out


# Two-sided 95 % quantiles of Student's t by degrees of freedom (rounds - 1).
T95 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
       10: 2.228, 11: 2.201, 12: 2.179, 14: 2.145, 19: 2.093, 29: 2.045}


def paired(before, after):
    """The geometric mean of the rounds' ratios after/before and its 95 % interval: round
    i of each side ran next to the other's, so a slow stretch of the machine hits both."""
    logs = [math.log(a / b) for a, b in zip(after, before)]
    mean = statistics.mean(logs)
    df = len(logs) - 1
    t = T95[max(k for k in T95 if k <= df)]
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


# Row 1's tf.data contenders for `--pairs`: (label, tf_contender.py arguments), with the
# arguments run_bench.py gives them at BENCH_SCALE=0.25 (500,000 records; the
# consumer-bound row reads 50,000 of them per epoch).
PAIRED = [
    ("per element: TFRecordDataset (the check: same code)",
     ["--contender", "tfrecord", "--source-bound"]),
    ("per element: LIRSDataset, default backend",
     ["--contender", "lirs", "--source-bound", "--backend", "auto"]),
    ("per element: LIRSDataset, backend pread",
     ["--contender", "lirs", "--source-bound", "--backend", "pread"]),
    ("batched: LIRSDataset(batch_size=256), default backend",
     ["--contender", "lirs_batched", "--backend", "auto"]),
    ("batched: LIRSDataset(batch_size=256), backend pread",
     ["--contender", "lirs_batched", "--backend", "pread"]),
    ("consumer-bound: LIRSDataset, default backend, reduce per element",
     ["--contender", "lirs", "--backend", "auto", "--limit", "50000"]),
]


def paired_data(ab_dir):
    """(row 1's data file, its records) as the last run with rounds wrote them."""
    data = os.path.join(ab_dir, "out", "kdd.tfrecord")
    if not os.path.exists(data + ".offsets"):
        raise SystemExit(f"{data}: none; a run with rounds writes it (--pairs-only reuses it)")
    return data, os.path.getsize(data + ".offsets") // 8


def contender(tree, data, records, reps, warmup, extra):
    """(command, environment) of one PAIRED contender of `tree`: how the pairs run it,
    and benchmarks/ab_counts.py too."""
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "python"),
               TF_CPP_MIN_LOG_LEVEL="3", BENCH_TF_AUTOTUNE="0")
    cmd = [os.path.join(tree, ".venv", "bin", "python"),
           os.path.join(tree, "benchmarks", "tf_contender.py"), "--data", data,
           "--batch", "256", "--reps", str(reps), "--expect", str(records),
           "--warmup", str(warmup)] + extra
    return cmd, env


def run_pairs(trees, args):
    """{side: [{(section, label): rec/s}, ...]}, one dict per pair (see the docstring)."""
    data, records = paired_data(args.dir)
    runs = {side: [{} for _ in range(args.pairs)] for side in trees}
    for label, extra in PAIRED:
        for i in range(args.pairs):
            for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
                cmd, env = contender(trees[side], data, records, 5, min(records, 20_000),
                                     extra)
                out = subprocess.run(cmd, env=env, check=True, capture_output=True,
                                     text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                rate = r["records"] / statistics.median(r["secs"])
                runs[side][i][("1 pairs", label)] = rate
                log(f"pair {i + 1}/{args.pairs} {side}: {label}: {rate:,.0f} rec/s")
    return runs


def judge_runs(runs, args, sides, rows=None):
    """Prints the table; returns the exit status, 1 when a judged row is slower.

    A row is "yes" when the geometric mean of its paired ratios and the ratio of the bests
    are both >= --min-ratio; "SLOWER" when the interval's top is below it (shown beyond
    this run's noise); "unclear" otherwise (more rounds tell). A row with references
    (`references`) is judged on its figures over theirs, marked "/ref"."""
    keys = [k for k in runs["before"][0] if all(k in r for s in runs for r in runs[s])]
    summary, slower, unclear = [], [], []
    print(f"A/B: before {args.before} ({sides['before'][:12]}), after {args.after} "
          f"({sides['after'][:12]}); rows {rows or args.rows}; "
          f"{len(runs['before'])} interleaved {'pairs' if rows else 'rounds'}; "
          f"BENCH_SCALE={os.environ.get('BENCH_SCALE', '1')}")
    print(f"{'row':<22} {'contender':<62} {'best before':>12} {'best after':>12} {'best':>6} "
          f"{'paired':>6} {'95% interval':>13}  verdict")
    for sec, label in keys:
        judge = judged(label)
        refs = references(sec, label, keys) if judge else []
        # Judged on the figures over the references' (if any); shown as measured.
        figures = relative(runs, (sec, label), refs)
        before, after = figures["before"], figures["after"]
        q = max(after) / max(before) if max(before) else float("nan")
        gm, lo, hi = paired(before, after)
        b = max(r[(sec, label)] for r in runs["before"])
        a = max(r[(sec, label)] for r in runs["after"])
        short = label.replace("**", "")
        if not judge:
            verdict = "(reference)"
        elif gm >= args.min_ratio and q >= args.min_ratio:
            verdict = "yes"
        elif hi < args.min_ratio:
            verdict = "SLOWER"
            slower.append(short)
        else:
            verdict = "unclear"
            unclear.append(short)
        if refs:
            verdict += " /ref"
        print(f"{sec[:22]:<22} {short[:62]:<62} {b:>12,.0f} {a:>12,.0f} {q:>6.3f} "
              f"{gm:>6.3f} {lo:>6.3f}-{hi:<6.3f}  {verdict}")
        summary.append({"row": sec, "contender": label, "before": b, "after": a, "ratio": q,
                        "paired": gm, "paired_low": lo, "paired_high": hi,
                        "judged": judge, "references": [k[1] for k in refs],
                        "verdict": verdict})
    with open(os.path.join(args.dir, "ab-pairs.json" if rows else "ab.json"), "w") as f:
        json.dump({"before": sides["before"], "after": sides["after"], "rows": summary}, f,
                  indent=1)
    n = sum(1 for s in summary if s["judged"])
    ref = [s for s in summary if not s["judged"]]
    if ref:
        # Stock rows run the same code on both sides: their spread is this run's noise.
        print(f"noise floor: {len(ref)} stock rows, best after/best before "
              f"{min(s['ratio'] for s in ref):.3f}-{max(s['ratio'] for s in ref):.3f}, "
              f"paired {min(s['paired'] for s in ref):.3f}-{max(s['paired'] for s in ref):.3f}")
    print(f"{n - len(slower) - len(unclear)}/{n} judged rows as fast (>= {args.min_ratio}); "
          f"slower beyond the noise: {', '.join(slower) or 'none'}; "
          f"unclear: {', '.join(unclear) or 'none'}")
    return 1 if slower or not n else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="git revision of the tree before")
    ap.add_argument("--after", default="HEAD", help="git revision of the tree after (HEAD)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--rows", default="1,2,3,10", help="run_bench.py --only")
    ap.add_argument("--min-ratio", type=float, default=0.95)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "ab"))
    ap.add_argument("--venv", default=os.path.join(ROOT, ".venv"))
    ap.add_argument("--venv-without-tf", default=os.path.join(ROOT, ".venv-without-tf"))
    ap.add_argument("--venv-bench", default=os.path.join(ROOT, ".venv-bench"))
    ap.add_argument("--judge-only", action="store_true",
                    help="judge the results of the last run in --dir again (no build, no run)")
    ap.add_argument("--pairs", type=int, default=0,
                    help="then row 1's tf.data contenders as this many pairs of processes")
    ap.add_argument("--pairs-only", action="store_true",
                    help="only the pairs, on the trees and data of the last run")
    ap.add_argument("--no-seed", action="store_true",
                    help="build each tree from scratch (no copy of this tree's target/)")
    args = ap.parse_args()
    if args.rounds < 3:
        raise SystemExit("--rounds: at least 3 (a median of fewer is one run's noise)")
    if (args.pairs or args.pairs_only) and args.pairs < 3:
        raise SystemExit("--pairs: at least 3 (--pairs-only needs it)")
    if args.judge_only:
        sides = {"before": commit_of(args.before), "after": commit_of(args.after)}
        runs = {side: [] for side in sides}
        for side in sides:
            for rnd in range(1, args.rounds + 1):
                with open(os.path.join(args.dir, f"results-{side}-{rnd}.json")) as f:
                    runs[side].append(rates(json.load(f)))
        sys.exit(judge_runs(runs, args, sides))
    rows = [] if args.pairs_only else args.rows.split(",")
    if "3" in rows and not shutil.which("fio"):
        raise SystemExit("fio is not installed (row 3 needs it: apt-get install -y fio)")
    if "10" in rows and not os.path.exists(args.venv_bench):
        log(f"no {args.venv_bench}: row 10 will not run (make venv-bench)")
    start = time.time()
    sides = {"before": commit_of(args.before), "after": commit_of(args.after)}
    os.makedirs(args.dir, exist_ok=True)
    venvs = {".venv": args.venv, ".venv-without-tf": args.venv_without_tf,
             ".venv-bench": args.venv_bench}
    trees = {}
    for side, commit in sides.items():
        log(f"{side}: {args.before if side == 'before' else args.after} = {commit}")
        trees[side] = prepare(commit, args.dir, venvs, seed=not args.no_seed)
    built = time.time()
    runs = {side: [] for side in sides}
    for rnd in range(1, 0 if args.pairs_only else args.rounds + 1):
        # The order alternates, so that neither side always runs first (page cache, turbo).
        for side in ("before", "after") if rnd % 2 else ("after", "before"):
            tree = trees[side]
            out = os.path.join(args.dir, "out")
            log(f"round {rnd}/{args.rounds}: {side} ({sides[side][:12]})")
            env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(tree, "target"),
                       BENCH_COMMAND=f"benchmarks/ab.py ({side})", BENCH_TF_AUTOTUNE="0")
            sh([os.path.join(tree, ".venv", "bin", "python"),
                os.path.join(tree, "benchmarks", "run_bench.py"), "--only", args.rows,
                "--out", out], env=env, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "results.json")) as f:
                results = json.load(f)
            shutil.copy(os.path.join(out, "results.json"),
                        os.path.join(args.dir, f"results-{side}-{rnd}.json"))
            runs[side].append(rates(results))
    status = 0 if args.pairs_only else judge_runs(runs, args, sides)
    if args.pairs:
        status = max(status, judge_runs(run_pairs(trees, args), args, sides,
                                        rows="1's tf.data contenders, pairs of processes"))
    print(f"runtime: {(time.time() - start) / 60:.1f} min "
          f"(builds {(built - start) / 60:.1f}, bench {(time.time() - built) / 60:.1f})")
    sys.exit(status)


if __name__ == "__main__":
    main()
