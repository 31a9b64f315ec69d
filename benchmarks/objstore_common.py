"""What the object-storage rows of `make bench` share (rows 8, 11, 15 and 16, and
benchmarks/objstore_epochs_bench.py): the paths, the latency model, the padded data set,
the fast S3 server (benchmarks/s3-bench-server) with its bucket directory, and the
snippet each row runs in a private network namespace (tests/namespace_run.py) through
tests/s3_server.py or tests/gcs_emulator.py.

Imported on both sides: by the benchmark scripts, and by their snippets inside the
namespace (`start_bench_server`, `s3_env`, `server_stats`, `save_results`); so its top
imports only the standard library.
"""

import atexit
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "python"))

SERVER = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "s3-bench-server"
# The latency of every object GET: a lognormal draw of mean SERVER_DELAY_MS and log-space
# sigma TAIL_SIGMA (its median `median_ms`), seeded by TAIL_SEED, the object and the range.
SERVER_DELAY_MS = 50
TAIL_SIGMA = 0.8
TAIL_SEED = 11
# The data set: FILES padded files of records of RECORD_BYTES (low, high) random bytes,
# each after its 8-digit id.
FILES = 4
RECORD_BYTES = (200, 1200)
# The bucket of the fast server (a directory of its root).
SERVER_BUCKET = "bench"

# The lines every snippet starts with, before its own body.
_HEADER = textwrap.dedent("""
    import json, os, subprocess, sys, time
    sys.path.insert(0, {benchmarks!r})
    sys.path.insert(0, {python!r})
    cfg = {cfg!r}
    from objstore_common import s3_env, save_results, server_stats, start_bench_server
""")


def median_ms(sigma, mean_ms=SERVER_DELAY_MS):
    """The median of a lognormal latency of mean `mean_ms` and log-space `sigma`."""
    return mean_ms * math.exp(-sigma ** 2 / 2)


def write_records(paths, records, seed, on_record=None):
    """Writes `records` records into each padded file of `paths` (with their tables), the
    record of global id i being its 8-digit id and random bytes; `on_record(record)` sees
    each one. Returns `paths`."""
    import numpy as np

    import tfrecord_lirs

    rng = np.random.default_rng(seed)
    for f, data in enumerate(paths):
        with tfrecord_lirs.PaddedWriter(str(data)) as w:
            for i in range(records):
                n = int(rng.integers(*RECORD_BYTES))
                record = (b"%08d" % (f * records + i)
                          + bytes(rng.integers(0, 256, size=n, dtype=np.uint8)))
                w.write(record)
                if on_record:
                    on_record(record)
    return paths


def server_missing():
    """Why the fast S3 server cannot run (not built), or None."""
    return None if SERVER.exists() else f"{SERVER} is not built (make bench builds it)"


def unavailable(server=True):
    """Why a row cannot run here (no private namespace; with `server`, no fast S3
    server), or None."""
    from gcs_emulator import namespace_unavailable

    return namespace_unavailable() or (server_missing() if server else None)


def stage_bucket(root, files):
    """The fast server's root `root` (emptied first) holding `files` and their tables in
    its bucket directory, as an upload would leave them; returns the files' s3:// URLs."""
    bucket = Path(root) / SERVER_BUCKET
    shutil.rmtree(root, ignore_errors=True)
    bucket.mkdir(parents=True)
    for data in files:
        shutil.copy(data, bucket / data.name)
        shutil.copy(str(data) + ".offsets", bucket / (data.name + ".offsets"))
    return [f"s3://{SERVER_BUCKET}/{data.name}" for data in files]


def server_config(root, sigma=TAIL_SIGMA):
    """The part of a snippet's `cfg` that `start_bench_server` reads: the server over
    `root`, mean SERVER_DELAY_MS, log-space `sigma`."""
    return dict(server=str(SERVER), root=str(root), median_ms=median_ms(sigma), sigma=sigma,
                seed=TAIL_SEED)


def snippet(body, cfg):
    """The code of a snippet: its `body` (indented as written) after the lines it starts
    with (imports, the package's and this module's paths, `cfg` as a literal)."""
    return (_HEADER.format(benchmarks=str(ROOT / "benchmarks"), python=str(ROOT / "python"),
                           cfg=cfg)
            + textwrap.dedent(body))


def run_snippet(run_with, work, objects, body, cfg, **kw):
    """Runs the snippet `body` in the namespace of `run_with` (tests/s3_server.py's
    run_with_s3 or tests/gcs_emulator.py's run_with_gcs; `objects` and `kw` go to it) in
    `work`/run; the snippet saves its results (`save_results`) to cfg["results"], set
    here to `work`/results.json. Returns those results."""
    results = Path(work) / "results.json"
    run_with(Path(work) / "run", objects, snippet(body, dict(cfg, results=str(results))), **kw)
    return json.loads(results.read_text())


# ----------------------------------------------------------------------------------
# Inside the namespace.

def start_bench_server(cfg):
    """Starts the fast S3 server over cfg's root with cfg's latency (`server_config`);
    returns its endpoint. The server is stopped when the snippet's process ends, however
    it ends (left running, it would hold the runner's pipe)."""
    srv = subprocess.Popen([cfg["server"], "serve", "--root", cfg["root"],
                            "--latency-ms", str(cfg["median_ms"]), "--sigma", str(cfg["sigma"]),
                            "--seed", str(cfg["seed"])], stdout=subprocess.PIPE, text=True)
    atexit.register(_stop, srv)
    return srv.stdout.readline().split()[-1]


def _stop(srv):
    srv.terminate()
    srv.wait()


def s3_env(endpoint):
    """The variables the core's object_store client reads for the fast server."""
    return dict(AWS_ENDPOINT=endpoint, AWS_ALLOW_HTTP="true", AWS_SKIP_SIGNATURE="true",
                AWS_REGION="us-east-1")


def server_stats(endpoint, since=None):
    """The fast server's own counts (`/_bench/stats`: gets, heads, bytes), or what they
    grew by since the counts `since`."""
    with urllib.request.urlopen(endpoint + "/_bench/stats") as r:
        now = json.loads(r.read())
    return now if since is None else {k: v - since[k] for k, v in now.items()}


def save_results(cfg, **results):
    """Writes a snippet's results where `run_snippet` reads them."""
    with open(cfg["results"], "w") as f:
        json.dump(results, f)
