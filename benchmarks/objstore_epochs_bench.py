"""Epochs after the first on object storage: one `Loader` over s3:// (row 15's data,
server and latency) walked for three epochs, the adaptive limit (default) against a
pinned 2,048, ordered and unordered, instance and page-aware order; rec/s per epoch.
The adaptive limit of a fetch starts where the last fetch over the same reader ended,
so from the second epoch on it should match the pinned limit.

    .venv-without-tf/bin/python benchmarks/objstore_epochs_bench.py [--out bench_out]
"""
import argparse
import json, math, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks")); sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "python"))
import objstore_bench as ob
from s3_server import run_with_s3
import shutil, textwrap
ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--out", default=str(ROOT / "bench_out"))
work = Path(ap.parse_args().out) / "objstore_epochs"; shutil.rmtree(work, ignore_errors=True); work.mkdir(parents=True)
root = work / "s3root"; (root / "bench").mkdir(parents=True)
files = ob._write_files(work)
for d in files:
    shutil.copy(d, root / "bench" / d.name); shutil.copy(str(d) + ".offsets", root / "bench" / (d.name + ".offsets"))
median = ob.SERVER_DELAY_MS * math.exp(-ob.TAIL_SIGMA ** 2 / 2)
cfg = dict(server=str(ob.SERVER), root=str(root), median_ms=median, sigma=ob.TAIL_SIGMA, seed=ob.TAIL_SEED,
           s3_urls=[f"s3://bench/{d.name}" for d in files])
SNIP = textwrap.dedent("""
    import json, os, subprocess, sys, time
    sys.path.insert(0, {python!r})
    cfg = {cfg!r}
    srv = subprocess.Popen([cfg["server"], "serve", "--root", cfg["root"], "--latency-ms", str(cfg["median_ms"]),
                            "--sigma", str(cfg["sigma"]), "--seed", str(cfg["seed"])], stdout=subprocess.PIPE, text=True)
    endpoint = srv.stdout.readline().split()[-1]
    os.environ.update(AWS_ENDPOINT=endpoint, AWS_ALLOW_HTTP="true", AWS_SKIP_SIGNATURE="true", AWS_REGION="us-east-1")
    import tfrecord_lirs
    for page_aware in (False, True):
        for det in (True, False):
            for reads in (-1, 2048):
                ld = tfrecord_lirs.Loader(cfg["s3_urls"], seed=7, batch_size=256, page_aware=page_aware,
                                          deterministic=det, num_parallel_reads=reads)
                rates = []
                for e in range(3):
                    ld.set_epoch(e)
                    t0 = time.perf_counter(); n = 0
                    for b in ld:
                        n += len(b)
                    rates.append(round(n / (time.perf_counter() - t0)))
                print(json.dumps(dict(page_aware=page_aware, ordered=det, reads=reads, rates=rates)), flush=True)
    srv.terminate(); srv.wait()
""")
res = run_with_s3(work / "run", {}, SNIP.format(python=str(ROOT / "python"), cfg=cfg), timeout=3600)
print(res.stdout)
