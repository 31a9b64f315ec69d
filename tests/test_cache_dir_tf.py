"""LIRSDataset over s3:// with the local tier: the op takes `TFRECORD_LIRS_CACHE_DIR`
(the core's rule, as DataSource/Loader do when given no `cache_dir`). A first process
reads an epoch through moto (tests/s3_server.py, a private network namespace) into the
cache; a second, with the endpoint pointing at a port nothing listens on (any request
would fail), reads the same epoch from the cache alone. Then `cache_dir=` given to
`LIRSDataset` and to `read`: the argument wins over the variable, and a second pass makes
no data GET (counted by the server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
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


def elements(run):
    """The elements a child reader printed (`run`: its exit code, stdout, stderr)."""
    code, out, err = run
    assert code == 0, err
    return [bytes.fromhex(x) for x in json.loads(out.strip().splitlines()[-1])]


def block_names(files):
    """The block files' names among a cache directory's `files` (block k is `k`)."""
    return sorted(f.split("/")[-1] for f in files if f.split("/")[-1].isdigit())


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
    cold = elements(r["cold"])
    assert sorted(cold) == sorted(PAYLOADS) and cold != PAYLOADS
    # The data's two blocks and the table's one, under their objects' identities.
    assert block_names(r["files"]) == ["0", "0", "1"], r["files"]
    assert elements(r["warm"]) == cold
    # Without the cache the same read fails: the warm one was served by the cache alone.
    assert r["uncached"] != 0


# `cache_dir=` given to LIRSDataset or to `read`, with the environment variable naming
# another directory (the argument wins). argv: cache_dir.
READ_IDS = list(range(0, len(PAYLOADS), 7))
READ_BY_ARGUMENT = {
    "LIRSDataset": f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
ds = tfrecord_lirs.LIRSDataset(["s3://{BUCKET}/train.tfrecord"], seed=5,
                               num_parallel_reads=8, cache_dir=sys.argv[1],
                               cache_bytes=64 << 20)
print(json.dumps([x.numpy().hex() for x in ds]))
""",
    "read": f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
out = tfrecord_lirs.read(["s3://{BUCKET}/train.tfrecord"], {READ_IDS!r},
                         cache_dir=sys.argv[1], cache_bytes=64 << 20)
print(json.dumps([x.hex() for x in out.numpy()]))
""",
}


@pytest.mark.parametrize("reader", sorted(READ_BY_ARGUMENT))
def test_the_cache_dir_argument_wins_over_the_environment_and_serves_a_second_pass(
        tmp_path, reader):
    script = READ_BY_ARGUMENT[reader]
    code = f"""
import json, os, subprocess, sys, urllib.request
here = os.path.dirname(os.path.abspath(__file__))
cache, other = os.path.join(here, "cache"), os.path.join(here, "other")
env = dict(os.environ, TFRECORD_LIRS_CACHE_DIR=other)

def gets():
    with urllib.request.urlopen(os.environ["AWS_ENDPOINT"] + "/_gets") as r:
        return json.load(r)

def files(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, fs in os.walk(root) for f in fs)

def run():
    res = subprocess.run([sys.executable, "-c", {script!r}, cache], env=env,
                         capture_output=True, text=True, timeout=300)
    return [res.returncode, res.stdout, res.stderr[-2000:]]

before = gets()
cold = run()
after_cold = gets()
warm = run()
after_warm = gets()
print(json.dumps({{"cold": cold, "warm": warm, "gets": [before, after_cold, after_warm],
                  "files": files(cache), "other": files(other)}}))
"""
    res = run_with_s3(tmp_path, {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE},
                      code, faults={"count_gets": True}, timeout=900)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    cold = elements(r["cold"])
    if reader == "read":
        assert cold == [PAYLOADS[i] for i in READ_IDS]
    else:
        assert sorted(cold) == sorted(PAYLOADS) and cold != PAYLOADS
    # The argument's directory holds the blocks; the environment's got none.
    assert block_names(r["files"]) == ["0", "0", "1"], r["files"]
    assert r["other"] == [], r["other"]
    assert elements(r["warm"]) == cold
    before, after_cold, after_warm = (
        {k: v for k, v in g.items() if k.endswith("/train.tfrecord")} for g in r["gets"])
    data_gets = lambda g: sum(g.values())  # noqa: E731
    # The cold pass fetched the data; the second pass no byte of it.
    assert data_gets(after_cold) - data_gets(before) > 0, r["gets"]
    assert data_gets(after_warm) == data_gets(after_cold), r["gets"]


def test_a_bound_without_a_directory_and_a_bad_bound_are_the_cores_errors(
        tmp_path, monkeypatch):
    import tensorflow as tf

    import tfrecord_lirs

    data = tmp_path / "d.tfrecord"
    data.write_bytes(DATA)
    (tmp_path / "d.tfrecord.offsets").write_bytes(TABLE)
    monkeypatch.delenv("TFRECORD_LIRS_CACHE_DIR", raising=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache_bytes is given but no"):
        tfrecord_lirs.LIRSDataset([str(data)], cache_bytes=1 << 20)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache_bytes must be at least 1"):
        tfrecord_lirs.LIRSDataset([str(data)], cache_dir=str(tmp_path / "c"), cache_bytes=0)
    with pytest.raises(ValueError, match="cache_bytes must be an int"):
        tfrecord_lirs.LIRSDataset([str(data)], cache_dir=str(tmp_path / "c"), cache_bytes=1.5)
    # `read` takes the same arguments to the same rules.
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache_bytes is given but no"):
        tfrecord_lirs.read([str(data)], [0], cache_bytes=1 << 20)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache_bytes must be at least 1"):
        tfrecord_lirs.read([str(data)], [0], cache_dir=str(tmp_path / "c"), cache_bytes=0)
    with pytest.raises(ValueError, match="cache_bytes must be an int"):
        tfrecord_lirs.read([str(data)], [0], cache_dir=str(tmp_path / "c"), cache_bytes=1.5)
    # A local file is read as it is, through a given cache_dir that stays empty.
    ds = tfrecord_lirs.LIRSDataset([str(data)], cache_dir=tmp_path / "c", seed=1)
    assert sorted(x.numpy() for x in ds) == sorted(PAYLOADS)
    assert tfrecord_lirs.read([str(data)], [3, 1], cache_dir=tmp_path / "c").numpy().tolist() \
        == [PAYLOADS[3], PAYLOADS[1]]
    assert not [f for _, _, fs in os.walk(tmp_path / "c") for f in fs]


def test_the_docs_cache_dir_snippet_runs(tmp_path):
    import re

    page = (REPO / "docs" / "how-to" / "object-storage.md").read_text()
    [snippet] = [b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S)
                 if "LIRSDataset(" in b and "cache_dir=" in b]
    # As written, but for the bucket's name and a cache directory of the test's own.
    code = (f"import sys\nsys.path.insert(0, {str(REPO / 'python')!r})\n"
            + snippet.replace("s3://bucket/", f"s3://{BUCKET}/")
            .replace("/mnt/ssd/lirs-cache", str(tmp_path / "cache")))
    run_with_s3(tmp_path, {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE}, code,
                timeout=600)
    assert [f for _, _, fs in os.walk(tmp_path / "cache") for f in fs if f.isdigit()]


def test_a_glob_listed_once_opens_in_lirsdataset_with_the_storage_unreachable(tmp_path):
    # A pattern LIRSDataset listed with cache_dir is remembered there; with the storage
    # unreachable the same pattern and cache_dir read the same epoch (the listing, the
    # tables and the data from the cache), and the fallback is said on stderr.
    read = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
ds = tfrecord_lirs.LIRSDataset(sys.argv[1], seed=5, cache_dir=sys.argv[2])
print(json.dumps([x.numpy().hex() for x in ds]))
"""
    code = f"""
import json, os, subprocess, sys
cache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")
pattern = "s3://{BUCKET}/train-*.tfrecord"
up = subprocess.run([sys.executable, "-c", {read!r}, pattern, cache], capture_output=True,
                    text=True, timeout=300)
gone = dict(os.environ, AWS_ENDPOINT="http://127.0.0.1:9")
down = subprocess.run([sys.executable, "-c", {read!r}, pattern, cache], env=gone,
                      capture_output=True, text=True, timeout=300)
print(json.dumps({{"up": [up.returncode, up.stdout, up.stderr[-2000:]],
                  "down": [down.returncode, down.stdout, down.stderr[-2000:]]}}))
"""
    half = len(PAYLOADS) // 2
    first, second = framed(PAYLOADS[:half]), framed(PAYLOADS[half:])
    objects = {"train-0.tfrecord": first[0], "train-0.tfrecord.offsets": first[1],
               "train-1.tfrecord": second[0], "train-1.tfrecord.offsets": second[1]}
    res = run_with_s3(tmp_path, objects, code, timeout=900)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    up = elements(r["up"])
    assert sorted(up) == sorted(PAYLOADS)
    assert elements(r["down"]) == up
    assert "remembered in cache_dir" in r["down"][2], r["down"][2]
