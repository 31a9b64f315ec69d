"""Row 16 of `make bench`: the local tier `cache_dir` over s3://.

The fast S3 server (benchmarks/s3-bench-server) in a private network namespace (tests/
s3_server.py's), every object GET delayed by a lognormal draw of mean SERVER_DELAY_MS
(seeded by object and range, as row 15). Contenders, each a full epoch of a `Loader`
(instance order, batches of 256, default settings; opening the files timed apart from
the epoch) in a fresh process:

Each process walks two epochs: the first (cold: every block fetched; warm: every block
checked once) and the second, a training run's steady state, whose rate is compared.

* local: the same files on local disk (in the page cache);
* cache_dir cold: s3:// with an empty cache directory (each 4 MiB block fetched once);
* cache_dir warm: s3:// with the cache filled by the cold run (the target: >= 0.9x
  local, and no GET at all: the server's own count, `/_bench/stats`);
* s3:// without a cache, for scale;
* MosaicML Streaming cold and warm (benchmarks/mosaic_bench.py): the same records as MDS
  shards on the same server, its `StreamingDataset` with a local cache directory, in its
  own venv (`make venv-mosaic`; the row says why if it is missing).

    .venv/bin/python benchmarks/cache_dir_bench.py [--out bench_out] [--quick]
"""

import argparse
import json
import shutil
import statistics
import textwrap
import time
from pathlib import Path

from objstore_common import (FILES, ROOT, run_snippet, server_config, stage_bucket,
                             unavailable, write_records)

RECORDS = 20000
# Repetitions of the local and warm epochs (the median is reported).
REPS = 3

# One epoch in its own process: prints {"rate", "records"}.
EPOCH = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {python!r})
    import tfrecord_lirs
    paths, cache = json.loads(sys.argv[1]), sys.argv[2] or None
    # Opening (the tables; warm, every block checked once) apart from the epoch (cold:
    # fetching the blocks).
    t0 = time.perf_counter()
    loader = tfrecord_lirs.Loader(paths, seed=7, batch_size=256, cache_dir=cache)
    open_s = time.perf_counter() - t0
    rates = []
    for epoch in range(2):
        # The first epoch (cold: the fetches; warm: each block checked once), then the
        # second (a training run's steady state).
        t1 = time.perf_counter()
        records = 0
        for batch in loader:
            records += len(batch)
        rates.append(records / (time.perf_counter() - t1))
    print(json.dumps(dict(rate=rates[1], first_rate=rates[0], records=records,
                          open_s=open_s)))
""")

SNIPPET = """
    endpoint = start_bench_server(cfg)
    env = dict(os.environ, **s3_env(endpoint))
    env.pop("TFRECORD_LIRS_CACHE_DIR", None)
    rows = []

    def epoch(name, paths, cache="", cmd=None, extra_env=None):
        s0 = server_stats(endpoint)
        cmd = cmd or [sys.executable, "-c", cfg["epoch"], json.dumps(paths), cache]
        res = subprocess.run(cmd, env=dict(env, **(extra_env or {})), capture_output=True,
                             text=True)
        if res.returncode:
            # (The server is stopped on the way out, see start_bench_server.)
            sys.exit(f"{name} failed (exit {res.returncode}):\\n{res.stderr[-3000:]}")
        row = dict(json.loads(res.stdout.strip().splitlines()[-1]), name=name,
                   **server_stats(endpoint, since=s0))
        rows.append(row)
        print(json.dumps(row), flush=True)

    cache = os.path.join(cfg["work"], "cache")
    for rep in range(cfg["reps"]):
        epoch("local", cfg["local"])
    epoch("s3 without cache", cfg["urls"])
    epoch("cache_dir cold", cfg["urls"], cache)
    for rep in range(cfg["reps"]):
        epoch("cache_dir warm", cfg["urls"], cache)
    # MosaicML Streaming (benchmarks/mosaic_bench.py): its local cache over the same server.
    if cfg["mosaic"]:
        from mosaic_bench import environment, epoch_command
        local = os.path.join(cfg["work"], "mosaic-cache")
        epoch("MosaicML cold", None, cmd=epoch_command("bench", local),
              extra_env=environment(endpoint))
        for rep in range(cfg["reps"]):
            epoch("MosaicML warm", None, cmd=epoch_command("bench", local),
                  extra_env=environment(endpoint))
    save_results(cfg, rows=rows)
"""


def run_cache_dir(out_dir, quick=False):
    """Measures row 16; returns its results (or why not)."""
    import mosaic_bench
    from s3_server import run_with_s3

    why = unavailable()
    if why:
        return {"skipped": why}
    work = (Path(out_dir) / "cache_dir").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    records = RECORDS // 10 if quick else RECORDS
    files = [work / f"local-{f}.tfrecord" for f in range(FILES)]
    # The same records, framed, for the MosaicML contender's MDS shards.
    framed = work / "records.bin"
    with open(framed, "wb") as out:
        write_records(files, records, 17, lambda record: mosaic_bench.frame(out, record))
    root = work / "s3root"
    urls = stage_bucket(root, files)
    mosaic_why = mosaic_bench.unavailable()
    shards = [] if mosaic_why else mosaic_bench.write_shards(framed, root / "bench")
    cfg = dict(server_config(root), work=str(work), reps=1 if quick else REPS,
               local=[str(d) for d in files], urls=urls,
               epoch=EPOCH.format(python=str(ROOT / "python")), mosaic=not mosaic_why)
    start = time.time()
    out = run_snippet(run_with_s3, work, {}, SNIPPET, cfg, timeout=1800)
    out.update(records=FILES * records, bytes=sum(d.stat().st_size for d in files),
               minutes=(time.time() - start) / 60, mosaic_skipped=mosaic_why,
               mosaic_shards=len([s for s in shards if s.startswith("shard.")]),
               mosaic_shuffle=mosaic_bench.SHUFFLE_ALGO)
    return out


def _rate(res, name):
    rates = [r["rate"] for r in res["rows"] if r["name"] == name]
    return statistics.median(rates) if rates else None


def add_rows(t, res, check, fmt_rate):
    """Adds row 16 to the `make bench` table `t` (run_bench.Table)."""
    sec = "16 cache_dir over s3:// (s3-bench-server, 50 ms mean)"
    if "skipped" in res:
        t.add(sec, "not run", res["skipped"])
        return
    local = _rate(res, "local")
    for name in ("local", "s3 without cache", "cache_dir cold", "cache_dir warm",
                 "MosaicML cold", "MosaicML warm"):
        rate = _rate(res, name)
        if rate is None:
            continue
        gets = max(r["gets"] for r in res["rows"] if r["name"] == name)
        opened = statistics.median(r["open_s"] for r in res["rows"] if r["name"] == name)
        first = statistics.median(r["first_rate"] for r in res["rows"] if r["name"] == name)
        note = (f"{gets} GETs ({res['records']} records, {res['bytes'] >> 20} MiB, 2 "
                f"epochs); first epoch {fmt_rate(first)}; open {opened * 1000:.0f} ms")
        if name.startswith("MosaicML"):
            # Not a full-range shuffle: samples shuffled within blocks of shards.
            note += (f"; {res['mosaic_shards']} MDS shards of 4 MiB, shuffle "
                     f"`{res['mosaic_shuffle']}` (shard blocks, not full-range)")
        if name == "cache_dir warm" and local:
            m = check(t, "16: cache_dir warm vs local", rate / local, 0.9)
            t.add(sec, f"**{name}**", fmt_rate(rate), f"{rate / local:.2f}x local; " + note,
                  ">= 0.9x local, 0 GETs", m and gets == 0)
        else:
            ratio = f"{rate / local:.2f}x local; " if local and name != "local" else ""
            t.add(sec, name, fmt_rate(rate), ratio + note)
    if res.get("mosaic_skipped"):
        t.add(sec, "MosaicML Streaming", "not run", res["mosaic_skipped"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench_out"))
    ap.add_argument("--quick", action="store_true", help="a tenth of the records, one rep")
    args = ap.parse_args()
    print(json.dumps(run_cache_dir(args.out, args.quick), indent=1))


if __name__ == "__main__":
    main()
