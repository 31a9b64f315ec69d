"""LIRSDataset read in splits by tf.data service: a real DispatchServer and two
WorkerServers (ports from the OS), processing_mode="distributed_epoch" and
ShardingPolicy.DYNAMIC. The dispatcher hands out the parts of the epoch's order, so
every instance arrives exactly once per job and every byte is read once across the
workers (tfrecord_lirs.process_io_totals counts what the readers of the process read,
workers included). Each case runs in a process of its own: the totals are the
process's, and a reader another test left behind would count into them."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import service_case
import tfrecord_lirs

N = 6000
PAGE = 1024

CASE = r"""
import json, sys
import tensorflow as tf
import tfrecord_lirs
from tfrecord_lirs import LIRSDataset

path, mode, page_aware, batch, seed, num_shards = (
    sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5]),
    int(sys.argv[6]))
service = tf.data.experimental.service
dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
address = dispatcher.target.split("://")[1]
workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address, port=0))
           for _ in range(2)]
kwargs = dict(seed=seed or None, page_aware=page_aware, page_size=%(page)d,
              batch_size=batch or None, backend="pread", num_shards=num_shards, shard_index=0)
ds = LIRSDataset(path, **kwargs)
policy = {"distributed_epoch": "distributed_epoch",
          "dynamic": service.ShardingPolicy.DYNAMIC,
          "off": service.ShardingPolicy.OFF,
          "file": service.ShardingPolicy.FILE,
          "file_or_data": service.ShardingPolicy.FILE_OR_DATA}.get(mode)
if policy is not None:
    ds = ds.apply(service.distribute(policy, dispatcher.target))
""" % {"page": PAGE} + service_case.READ_AND_REPORT


def run_case(path, mode, page_aware=False, batch=0, seed=7, num_shards=1):
    return service_case.run_case(CASE, path, mode, int(page_aware), batch, seed, num_shards)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """N instances "<id>:xxx..." of 100 to 160 bytes, padded to 1 KiB pages."""
    path = str(tmp_path_factory.mktemp("splits") / "data.tfrecord")
    with tfrecord_lirs.PaddedWriter(path, page_size=PAGE) as w:
        for i in range(N):
            w.write(b"%d:" % i + b"x" * (100 + i % 61))
    return path


@pytest.mark.parametrize("mode", ["distributed_epoch", "dynamic"])
@pytest.mark.parametrize("page_aware,batch", [(False, 0), (True, 0), (False, 32), (True, 32)])
def test_splits_deliver_each_instance_once_and_read_each_byte_once(data_file, mode,
                                                                   page_aware, batch):
    one = run_case(data_file, "plain", page_aware, batch)
    assert sorted(one["ids"]) == list(range(N))
    split = run_case(data_file, mode, page_aware, batch)
    assert split["error"] is None, split["error"]
    assert split["tasks"] == [1, 1], "the job must run on both workers"
    # Every instance exactly once across the two workers.
    counts = collections.Counter(split["ids"])
    assert counts == collections.Counter(range(N)), (
        [i for i, c in counts.items() if c != 1][:10], len(split["ids"]))
    # What the two workers read together is what one reader reads alone (every
    # byte once; OFF, below, reads it twice): each worker read its share, not the
    # whole.
    assert split["bytes_read"] == one["bytes_read"], (split["bytes_read"], one["bytes_read"])
    if page_aware:
        # Units stay whole: each page is one read (its instances are contiguous),
        # in one part. A page split between two parts would be read by both:
        # about 250 reads more than there are pages.
        pages = len(set(int(o) // PAGE for o in np.fromfile(data_file + ".offsets", "<u8")))
        assert split["reads"] <= pages, (split["reads"], pages)


def test_without_splits_each_worker_reads_everything(data_file):
    """The contrast: ShardingPolicy.OFF, each worker produces (and reads) the whole
    epoch, so two workers read it twice."""
    one = run_case(data_file, "plain")
    off = run_case(data_file, "off")
    assert collections.Counter(off["ids"]) == collections.Counter(list(range(N)) * 2)
    assert off["bytes_read"] >= 1.9 * one["bytes_read"]


@pytest.mark.parametrize("seed,num_shards,want", [
    (0, 1, "needs a fixed seed"),
    (7, 2, "num_shards must be 1 and shard_index 0, got num_shards=2"),
])
def test_splits_refuse_what_would_not_cover_the_epoch(data_file, seed, num_shards, want):
    """Without a fixed seed each worker would walk its own order; with shards of its
    own a worker would read only part of each part: refused when the job starts,
    naming why."""
    got = run_case(data_file, "distributed_epoch", seed=seed, num_shards=num_shards)
    assert got["error"] is not None and want in got["error"], got["error"]
    assert got["error"].startswith("InvalidArgumentError"), got["error"]


SAVE_CASE = r"""
import collections, json, os, sys, time
import tensorflow as tf
from tfrecord_lirs import LIRSDataset

path, out, work = sys.argv[1], sys.argv[2], sys.argv[3]
service = tf.data.experimental.service
dispatcher = service.DispatchServer(service.DispatcherConfig(
    port=0, work_dir=work, fault_tolerant_mode=True))
address = dispatcher.target.split("://")[1]
workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=address, port=0))
           for _ in range(2)]
tf.data.experimental.distributed_save(LIRSDataset(path, seed=3), out, address)
while not any(os.path.exists(os.path.join(out, f)) for f in ("DONE", "ERROR")):
    time.sleep(0.2)
error = open(os.path.join(out, "ERROR")).read() if os.path.exists(os.path.join(out, "ERROR")) else None
ids = [] if error else [int(x.split(b":", 1)[0])
                        for x in tf.data.Dataset.load(out).as_numpy_iterator()]
print(json.dumps({"ids": ids, "error": error,
                  "streams": sorted(os.listdir(os.path.join(out, "streams")))}))
"""


def test_distributed_save_reads_splits_and_checkpoints_its_workers(data_file, tmp_path):
    """tf.data.experimental.distributed_save: the dispatcher hands the parts to two
    workers, whose snapshot writers checkpoint their LIRSDataset iterators (split
    provider, seeds, part and position) when their streams end; a failed save would
    end the snapshot in ERROR."""
    out = subprocess.run(
        [sys.executable, "-c", SAVE_CASE, data_file, str(tmp_path / "snap"),
         str(tmp_path / "work")],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})  # the writers' log lines
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("{")]
    got = json.loads(line)
    assert got["error"] is None, got["error"]
    assert got["streams"] == ["stream_0", "stream_1"]
    assert collections.Counter(got["ids"]) == collections.Counter(range(N))
    assert "Wrote checkpoint file" in out.stderr
