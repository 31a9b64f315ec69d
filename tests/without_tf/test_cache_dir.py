"""The local tier `cache_dir` over s3:// (moto in a private network namespace,
tests/s3_server.py): two PyTorch DataLoader worker processes share one cache directory
and read every instance; then, with the endpoint pointing at a port nothing listens on
(any request would fail), a fresh process reads everything from the cache alone
(`DataSource(cache_dir=...)`, the environment variable, and the CLI's `--cache-dir`).
Expectations come from the tests' own framing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import affine_payload, framed  # noqa: E402
from s3_server import BUCKET, run_with_s3  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("TFRECORD_LIRS_CLI") or REPO / "target" / "release" / "tfrecord-lirs")

# ~5.6 MB: two blocks of the cache (4 MiB each), and a small table.
PAYLOADS = [affine_payload(i, 200 + (i * 37) % 3000) for i in range(3400)]
DATA, TABLE = framed(PAYLOADS)
OBJECTS = {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE}

SNIPPET = f"""
import json, os, subprocess, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import torch.utils.data as tud
import tfrecord_lirs

URL = "s3://{BUCKET}/train.tfrecord"
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")
out = {{}}

if __name__ == "__main__":
    # Cold: two worker processes (spawned: each re-opens the source, cache_dir with it).
    src = tfrecord_lirs.DataSource(URL, cache_dir=CACHE)
    sampler = tfrecord_lirs.Sampler(src, seed=3)
    data = tud.DataLoader(src, sampler=sampler, batch_size=64, num_workers=2,
                          multiprocessing_context="spawn", collate_fn=list)
    got = [p for batch in data for p in batch]
    out["order"] = [int(i) for i in sampler.order(0)]  # the epoch walked
    out["cold"] = [g.hex() for g in got]
    out["files"] = sorted(os.path.relpath(os.path.join(d, f), CACHE)
                          for d, _, fs in os.walk(CACHE) for f in fs)

    # Warm, the storage unreachable: a fresh process, by argument and by environment.
    gone = dict(os.environ, AWS_ENDPOINT="http://127.0.0.1:9")
    warm = '''
import json, os, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
kw = {{"cache_dir": sys.argv[1]}} if sys.argv[1] else {{}}
src = tfrecord_lirs.DataSource("s3://{BUCKET}/train.tfrecord", **kw)
print(json.dumps([src[i].hex() for i in range(len(src))]))
'''
    res = subprocess.run([sys.executable, "-c", warm, CACHE], env=gone,
                         capture_output=True, text=True, timeout=120)
    out["warm"] = json.loads(res.stdout) if res.returncode == 0 else res.stderr
    env = dict(gone, TFRECORD_LIRS_CACHE_DIR=CACHE)
    res = subprocess.run([sys.executable, "-c", warm, ""], env=env,
                         capture_output=True, text=True, timeout=120)
    out["warm_env"] = json.loads(res.stdout) if res.returncode == 0 else res.stderr
    res = subprocess.run([{str(CLI)!r}, "get", URL, "7", "--cache-dir", CACHE], env=gone,
                         capture_output=True, timeout=120)
    out["cli"] = [res.returncode, res.stdout.hex(), res.stderr.decode()]
    print(json.dumps(out))
"""


def test_workers_share_one_cache_and_warm_reads_need_no_storage(tmp_path):
    if not CLI.exists():
        pytest.skip(f"no CLI at {CLI} (cargo build --release, or set TFRECORD_LIRS_CLI)")
    res = run_with_s3(tmp_path, OBJECTS, SNIPPET, timeout=400)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert [bytes.fromhex(g) for g in r["cold"]] == [PAYLOADS[i] for i in r["order"]]
    # The data's two blocks and the table's one, each once, under its object's identity.
    blocks = [f for f in r["files"] if f.split("/")[-1].isdigit()]
    assert sorted(f.split("/")[-1] for f in blocks) == ["0", "0", "1"], r["files"]
    assert not [f for f in r["files"] if "/.tmp-" in f], r["files"]
    assert isinstance(r["warm"], list), r["warm"]
    assert [bytes.fromhex(g) for g in r["warm"]] == PAYLOADS
    assert isinstance(r["warm_env"], list), r["warm_env"]
    assert [bytes.fromhex(g) for g in r["warm_env"]] == PAYLOADS
    code, payload, err = r["cli"]
    assert code == 0 and bytes.fromhex(payload) == PAYLOADS[7], err


def test_a_bound_without_a_directory_is_refused(monkeypatch):
    import tfrecord_lirs
    from tfrecord_lirs import errors

    monkeypatch.delenv("TFRECORD_LIRS_CACHE_DIR", raising=False)
    with pytest.raises(errors.InvalidArgumentError, match="cache_bytes"):
        tfrecord_lirs.DataSource(f"s3://{BUCKET}/train.tfrecord", cache_bytes=1 << 20)


def test_the_cli_refuses_a_zero_bound_and_names_a_bad_directory(tmp_path):
    import subprocess

    if not CLI.exists():
        pytest.skip(f"no CLI at {CLI} (cargo build --release, or set TFRECORD_LIRS_CLI)")
    data = tmp_path / "d.tfrecord"
    data.write_bytes(DATA)
    (tmp_path / "d.tfrecord.offsets").write_bytes(TABLE)
    res = subprocess.run([str(CLI), "get", str(data), "3", "--cache-dir", str(tmp_path / "c"),
                          "--cache-bytes", "0"], capture_output=True, text=True)
    assert res.returncode == 2 and "cache_bytes must be at least 1" in res.stderr, res.stderr
    a_file = tmp_path / "not-a-dir"
    a_file.write_bytes(b"x")
    res = subprocess.run([str(CLI), "get", str(data), "3", "--cache-dir", str(a_file)],
                         capture_output=True, text=True)
    assert res.returncode == 1 and str(a_file) in res.stderr and "cache_dir" in res.stderr, (
        res.stderr)
    # A local file is read as it is, the cache directory made but left empty.
    res = subprocess.run([str(CLI), "get", str(data), "3", "--cache-dir", str(tmp_path / "c")],
                         capture_output=True)
    assert res.returncode == 0 and res.stdout == PAYLOADS[3], res.stderr
    assert not [f for _, _, fs in os.walk(tmp_path / "c") for f in fs]


GLOB_OBJECTS = {"train-0.tfrecord": framed(PAYLOADS[:1700])[0],
                "train-0.tfrecord.offsets": framed(PAYLOADS[:1700])[1],
                "train-1.tfrecord": framed(PAYLOADS[1700:])[0],
                "train-1.tfrecord.offsets": framed(PAYLOADS[1700:])[1]}

GLOB_SNIPPET = f"""
import json, os, subprocess, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs

PATTERN = "s3://{BUCKET}/train-*.tfrecord"
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache")
read = '''
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
src = tfrecord_lirs.DataSource(sys.argv[1], cache_dir=sys.argv[2])
print(json.dumps([src[i].hex() for i in range(len(src))]))
'''
out = {{}}
# Listed (and read) with the storage up.
res = subprocess.run([sys.executable, "-c", read, PATTERN, CACHE], capture_output=True,
                     text=True, timeout=120)
out["up"] = json.loads(res.stdout) if res.returncode == 0 else res.stderr
# The storage unreachable: the same glob and cache_dir, then a glob never listed.
gone = dict(os.environ, AWS_ENDPOINT="http://127.0.0.1:9")
for name, pattern in [("down", PATTERN), ("never", "s3://{BUCKET}/train-?.tfrecord")]:
    res = subprocess.run([sys.executable, "-c", read, pattern, CACHE], env=gone,
                         capture_output=True, text=True, timeout=300)
    out[name] = [res.returncode, res.stdout, res.stderr]
# The CLI, with the storage unreachable: the same pattern through the same --cache-dir.
res = subprocess.run([{str(CLI)!r}, "--cache-dir", CACHE, "order", PATTERN, "--seed", "1",
                      "--epoch", "0"], env=gone, capture_output=True, text=True, timeout=300)
out["cli_down"] = [res.returncode, res.stdout, res.stderr]
print(json.dumps(out))
"""


def test_a_glob_listed_once_opens_with_the_storage_unreachable(tmp_path):
    res = run_with_s3(tmp_path, GLOB_OBJECTS, GLOB_SNIPPET, timeout=700)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert isinstance(r["up"], list), r["up"]
    assert [bytes.fromhex(g) for g in r["up"]] == PAYLOADS
    code, stdout, stderr = r["down"]
    assert code == 0, stderr
    assert [bytes.fromhex(g) for g in json.loads(stdout)] == PAYLOADS
    # Said so: the listing came from the cache.
    assert "remembered in cache_dir" in stderr and "train-*.tfrecord" in stderr, stderr
    # A pattern never listed is not guessed.
    code, _, stderr = r["never"]
    assert code != 0 and "train-?.tfrecord" in stderr, stderr
    # The CLI lists through its --cache-dir the same way: every id of the epoch.
    code, stdout, stderr = r["cli_down"]
    assert code == 0, stderr
    assert sorted(int(x) for x in stdout.split()) == list(range(len(PAYLOADS))), stdout[:200]
    assert "remembered in cache_dir" in stderr, stderr
