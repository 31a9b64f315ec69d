"""Epochs after the first on object storage: one `Loader` over s3:// (row 15's data,
server and latency) walked for three epochs, the adaptive limit (default) against a
pinned 2,048, ordered and unordered, instance and page-aware order; rec/s per epoch.
The adaptive limit of a fetch starts where the last fetch over the same reader ended,
so from the second epoch on it should match the pinned limit.

    .venv-without-tf/bin/python benchmarks/objstore_epochs_bench.py [--out bench_out]
"""
import argparse
import shutil
from pathlib import Path

import objstore_bench as ob
from objstore_common import ROOT, server_config, snippet, stage_bucket
from s3_server import run_with_s3

SNIP = """
    endpoint = start_bench_server(cfg)
    os.environ.update(s3_env(endpoint))
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
"""
ap = argparse.ArgumentParser(description=__doc__)
ap.add_argument("--out", default=str(ROOT / "bench_out"))
work = Path(ap.parse_args().out) / "objstore_epochs"; shutil.rmtree(work, ignore_errors=True); work.mkdir(parents=True)
files = ob._write_files(work)
cfg = dict(server_config(work / "s3root"), s3_urls=stage_bucket(work / "s3root", files))
res = run_with_s3(work / "run", {}, snippet(SNIP, cfg), timeout=3600)
print(res.stdout)
