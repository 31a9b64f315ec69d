"""Concurrent jobs share one read: LIRSDataset behind tf.data service's
cross-trainer cache (examples/shared_read.py), storage reads counted by the op
library's process totals (tfrecord_lirs.process_io_totals)."""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfrecord_lirs
from tfrecord_lirs import LIRSDataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "shared_read.py")
N = 20000
BATCH = 64
# 2,000 batches of 64 = 6.4 epochs: long enough that the worker's read-ahead
# (measured ~8,000 records here) stays a few percent of what a trainer consumes.
STEPS = 2000


# Run in a process of its own: the totals are the process's, and a reader another test
# left behind (a prefetch not yet cancelled) would count into them here.
TOTALS_CASE = """
import json, sys
import tfrecord_lirs
from tfrecord_lirs import LIRSDataset
path = sys.argv[1]
before = tfrecord_lirs.process_io_totals()
got = list(LIRSDataset([path], seed=1, backend="pread").as_numpy_iterator())
after = tfrecord_lirs.process_io_totals()
again = tfrecord_lirs.process_io_totals()
print(json.dumps({"got": len(got), "before": before, "after": after, "again": again}))
"""


def test_process_totals_count_what_readers_read(tmp_path):
    path = str(tmp_path / "a.tfrecord")
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(500):
            w.write(b"%04d" % i + b"y" * 60)
    out = subprocess.run([sys.executable, "-c", TOTALS_CASE, path], capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("{")]
    case = json.loads(line)
    before, after = case["before"], case["after"]
    assert case["got"] == 500
    # Every instance was read (each record is 64 payload bytes + 16 framing bytes;
    # neighbours are read together, so fewer reads than records) and nothing else.
    assert after["reads"] - before["reads"] >= 1
    assert 500 * 80 <= after["bytes_read"] - before["bytes_read"] <= os.path.getsize(path)
    assert case["again"] == after  # counting is not reading


def run_case(path, mode):
    """One case in a fresh process (its own dispatcher, worker and totals)."""
    out = subprocess.run(
        [sys.executable, EXAMPLE, "--file", path, "--mode", mode, "--steps", str(STEPS),
         "--batch-size", str(BATCH)],
        capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("{")]
    return json.loads(line)


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("shared") / "sweep.tfrecord")
    with tfrecord_lirs.PaddedWriter(path) as w:
        for i in range(N):
            w.write(b"%d:" % i + b"x" * 200)
    return path


def test_three_trainers_on_one_cached_job_read_what_one_trainer_reads(sweep_file):
    one = run_case(sweep_file, "one")
    shared = run_case(sweep_file, "shared")
    separate = run_case(sweep_file, "separate")
    consumed = STEPS * BATCH * (200 + 6 + 16)  # at least what a trainer takes
    assert one["bytes_read"] >= consumed * 0.9
    # One read serves three trainers, each seeing the same shuffled stream ...
    assert shared["same_stream"]
    assert shared["bytes_read"] <= 1.1 * one["bytes_read"], (one, shared)
    # ... where three separate jobs read it three times.
    assert separate["bytes_read"] >= 2.5 * one["bytes_read"], (one, separate)
