"""LIRSDataset over s3:// with the local tier: the op takes `TFRECORD_LIRS_CACHE_DIR`
(the core's rule, as DataSource/Loader do when given no `cache_dir`). A first process
reads an epoch through moto (tests/s3_server.py, a private network namespace) into the
cache; a second, with the endpoint pointing at a port nothing listens on (any request
would fail), reads the same epoch from the cache alone."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import affine_payload, framed
from s3_server import BUCKET, run_with_s3

REPO = Path(__file__).resolve().parents[1]

# ~5 MB: two of the cache's 4 MiB blocks.
PAYLOADS = [affine_payload(i, 300 + (i * 37) % 2500) for i in range(3600)]
DATA, TABLE = framed(PAYLOADS)

READ = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
ds = tfrecord_lirs.LIRSDataset(["s3://{BUCKET}/train.tfrecord"], seed=5, num_parallel_reads=8)
print(json.dumps([x.numpy().hex() for x in ds]))
"""


def test_the_op_reads_through_the_cache_then_from_it_alone(tmp_path):
    code = f"""
import json, os, subprocess, sys
cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")
env = dict(os.environ, TFRECORD_LIRS_CACHE_DIR=cache)
cold = subprocess.run([sys.executable, "-c", {READ!r}], env=env, capture_output=True,
                      text=True, timeout=300)
files = sorted(os.path.relpath(os.path.join(d, f), cache)
               for d, _, fs in os.walk(cache) for f in fs)
env["AWS_ENDPOINT"] = "http://127.0.0.1:9"
warm = subprocess.run([sys.executable, "-c", {READ!r}], env=env, capture_output=True,
                      text=True, timeout=300)
gone = dict(os.environ, AWS_ENDPOINT="http://127.0.0.1:9", AWS_MAX_ATTEMPTS="1")
uncached = subprocess.run([sys.executable, "-c", {READ!r}], env=gone, capture_output=True,
                          text=True, timeout=300)
print(json.dumps({{"cold": [cold.returncode, cold.stdout, cold.stderr[-2000:]],
                  "warm": [warm.returncode, warm.stdout, warm.stderr[-2000:]],
                  "uncached": uncached.returncode, "files": files}}))
"""
    res = run_with_s3(tmp_path, {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE},
                      code, timeout=900)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    code, out, err = r["cold"]
    assert code == 0, err
    cold = [bytes.fromhex(x) for x in json.loads(out.strip().splitlines()[-1])]
    assert sorted(cold) == sorted(PAYLOADS) and cold != PAYLOADS
    # The data's two blocks and the table's one, under their objects' identities.
    blocks = [f for f in r["files"] if f.split("/")[-1].isdigit()]
    assert sorted(f.split("/")[-1] for f in blocks) == ["0", "0", "1"], r["files"]
    code, out, err = r["warm"]
    assert code == 0, err
    assert [bytes.fromhex(x) for x in json.loads(out.strip().splitlines()[-1])] == cold
    # Without the cache the same read fails: the warm one was served by the cache alone.
    assert r["uncached"] != 0
