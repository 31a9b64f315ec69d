"""Faults and resumption, real TensorFlow:

* a Rust panic inside each bridged entry point becomes tf.errors.InternalError and
  the process goes on (and the entry point works again once the fault is gone);
  the panic points exist only in the test build of the op library, so these run in
  a child process that loads it (tests/fault_injection.py);
* iterator checkpoints saved at random positions across epochs (reshuffling,
  page-aware, sharded, batched) restore in a *new process* to the identical rest;
* a data file truncated underneath an open dataset is a DataLossError, not a crash.
"""
import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
PYTHON_DIR = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, PYTHON_DIR)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from fault_injection import run_faulty  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402


def _records(n, seed=0):
    rng = np.random.default_rng(seed)
    return [b"%05d:" % i + bytes(rng.integers(97, 123, size=int(rng.integers(0, 300)), dtype=np.uint8))
            for i in range(n)]


def _write(path, recs):
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in recs:
            w.write(r)
    return str(path)


@pytest.fixture
def data(tmp_path):
    recs = _records(300)
    path = _write(tmp_path / "d.tfrecord", recs)
    tfrecord_lirs.build_offset_table(path)
    return path, recs


def _corrupt_payload(path, index):
    table = np.fromfile(path + ".offsets", dtype="<u8")
    raw = bytearray(Path(path).read_bytes())
    raw[int(table[index]) + 12 + 2] ^= 0x08
    Path(path).write_bytes(bytes(raw))


# Each bridged entry point, and a call that reaches it (run in the child, with `path`
# and `tmp` bound).
WRITER = """
    with tfrecord_lirs.PaddedWriter(os.path.join(tmp, 'w.tfrecord')) as w:
        w.write(b'hello')"""
ENTRY_POINTS = {
    "open_reader": "list(LIRSDataset(path, seed=1))",
    "open_dataset": "LIRSDataset(path, seed=1, num_shards=2, shard_index=1)",
    "fetch": "list(LIRSDataset(path, seed=1, num_parallel_reads=2))",
    "next_window": "list(LIRSDataset(path, seed=1, num_parallel_reads=2))",
    "read_batch": "tfrecord_lirs.read(path, [3, 4, 5])",
    "build_offset_table": "tfrecord_lirs.build_offset_table(path, os.path.join(tmp, 't.offsets'))",
    # Called again after the panic: overwrite=True replaces the first call's output.
    "pad_file": "tfrecord_lirs.pad(path, os.path.join(tmp, 'p.tfrecord'), overwrite=True)",
    "create_writer": WRITER,
    "write": WRITER,
    "finish": WRITER,
    "is_filler": "tfrecord_lirs.is_filler(tf.constant([b'abc', b'\\x00LIRSPAD'])).numpy()",
}


@pytest.mark.parametrize("point", sorted(ENTRY_POINTS))
def test_panic_in_each_entry_point_is_internal_error(data, tmp_path, point):
    path, _ = data
    lines = run_faulty(f"""
        def call():
            {textwrap.indent(textwrap.dedent(ENTRY_POINTS[point]).strip(), " " * 12).strip()}
        call()  # works before
        set_panic_point(point)
        message = expect(tf.errors.InternalError, call)
        assert re.search(f"panic.*`{{point}}`", message), message
        set_panic_point("")
        call()  # and again after: the process and the library are fine
        print("OK", point)
    """, path=path, tmp=str(tmp_path), point=point)
    assert f"OK {point}" in lines


def test_panic_in_the_single_read_fallback(data):
    # A failed window read is retried per id inside the Rust fetch job, so a
    # panic there is a panic on a fetch thread: InternalError, not a hidden retry.
    path, recs = data
    _corrupt_payload(path, 10)
    lines = run_faulty("""
        set_panic_point("fetch_worker")
        expect(tf.errors.InternalError,
               lambda: list(LIRSDataset(path, seed=1, num_parallel_reads=2)), "fetch thread")
        set_panic_point("")
        for reads in (None, 2):  # inline (mapped) and on fetch threads
            expect(tf.errors.DataLossError,
                   lambda: list(LIRSDataset(path, seed=1, num_parallel_reads=reads)),
                   "instance 10")
            rest = [x.numpy() for x in
                    LIRSDataset(path, seed=1, num_parallel_reads=reads).ignore_errors()]
            print("REST", reads, len(rest), sorted(rest) == sorted(good))
    """, path=path, good=[r for i, r in enumerate(recs) if i != 10])
    assert "REST None 299 True" in lines
    assert "REST 2 299 True" in lines


def test_truncated_underneath_is_data_loss(tmp_path):
    # Enough records that the truncation lands beyond what is read ahead (windows of
    # ~384 KiB, 4 ahead) when it happens.
    recs = _records(40000, 3)
    path = _write(tmp_path / "t.tfrecord", recs)
    tfrecord_lirs.build_offset_table(path)
    it = iter(LIRSDataset(path, seed=2, num_parallel_reads=2))
    for _ in range(5):
        next(it)
    size = os.path.getsize(path)
    os.truncate(path, size // 2)
    got = 5
    with pytest.raises(tf.errors.DataLossError, match="t.tfrecord: instance") as e:
        for _ in it:
            got += 1
    assert re.search(r"byte \d+", e.value.message), e.value.message
    assert got < len(recs)


@pytest.mark.parametrize("batch_size", [None, 64])
def test_truncated_underneath_the_default_mapped_backend_is_data_loss(tmp_path, batch_size):
    # The default backend maps files of small records under a read lease and reads
    # them on the consumer's thread: the truncation must revoke the map first (it
    # returns, it does not wait for the kernel's lease-break-time), then reads fail
    # cleanly through pread instead of killing the process with SIGBUS.
    recs = _records(40000, 4)  # more than is read ahead (see above)
    path = _write(tmp_path / "m.tfrecord", recs)
    tfrecord_lirs.build_offset_table(path)
    it = iter(LIRSDataset(path, seed=2, batch_size=batch_size))
    first = next(it)
    assert (first.shape == () if batch_size is None else first.shape == (64,))
    size = os.path.getsize(path)
    os.truncate(path, size // 3)
    with pytest.raises(tf.errors.DataLossError, match="m.tfrecord: instance") as e:
        for _ in it:
            pass
    assert re.search(r"byte \d+", e.value.message), e.value.message


# ---------------------------------------------------------------- resumption

CHILD = textwrap.dedent(
    """
    import json, os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    sys.path.insert(0, {python_dir!r})
    import tensorflow as tf
    from tfrecord_lirs import LIRSDataset

    cfg = json.loads(sys.argv[1])
    def build():
        ds = LIRSDataset(cfg["path"], seed=cfg["seed"], page_aware=cfg["page_aware"],
                         num_shards=cfg["num_shards"], shard_index=cfg["shard_index"],
                         batch_size=cfg["batch_size"], num_parallel_reads=cfg["threads"])
        return ds.repeat(cfg["epochs"])
    def key(x):
        x = x.numpy()
        return x.decode("latin-1") if isinstance(x, bytes) else [v.decode("latin-1") for v in x]
    if cfg["mode"] == "save":
        # One pass over all epochs, writing a checkpoint at each chosen position.
        it = iter(build())
        ckpt = tf.train.Checkpoint(iterator=it)
        full, pos = [], 0
        stops = set(cfg["positions"])
        while True:
            if pos in stops:
                ckpt.write(cfg["prefix"] + str(pos))
            try:
                full.append(key(next(it)))
            except StopIteration:
                break
            pos += 1
        print(json.dumps(full))
    else:
        # A new process: restore each checkpoint into a fresh iterator.
        rests = {{}}
        for pos in cfg["positions"]:
            it = iter(build())
            tf.train.Checkpoint(iterator=it).read(cfg["prefix"] + str(pos)).assert_consumed()
            rests[pos] = [key(x) for x in it]
        print(json.dumps(rests))
    """
)


def _child(tmp_path, cfg):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(python_dir=PYTHON_DIR))
    out = subprocess.run([sys.executable, str(script), json.dumps(cfg)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("page_aware,num_shards,batch_size", [
    (False, 1, None), (True, 1, None), (True, 2, None), (False, 3, 16)])
def test_checkpoint_restores_in_a_new_process(tmp_path, page_aware, num_shards, batch_size):
    recs = _records(400, 4)
    src = _write(tmp_path / "src.tfrecord", recs)
    path = str(tmp_path / "p.tfrecord")
    tfrecord_lirs.pad(src, path, page_size=4096)
    cfg = dict(path=path, seed=77, page_aware=page_aware, num_shards=num_shards,
               shard_index=num_shards - 1, batch_size=batch_size, threads=3, epochs=3,
               prefix=str(tmp_path / "ckpt"))
    # Elements per epoch of this shard (batches when batched), from the dataset itself.
    per_epoch = len(LIRSDataset(path, page_aware=page_aware, num_shards=num_shards,
                                shard_index=num_shards - 1, batch_size=batch_size))
    rng = random.Random(f"{page_aware}{num_shards}{batch_size}")
    # Random positions across all three epochs, plus the epoch boundaries.
    positions = sorted({0, 1, per_epoch - 1, per_epoch, per_epoch + 1, 3 * per_epoch - 1,
                        *(rng.randrange(3 * per_epoch) for _ in range(4))})
    full = _child(tmp_path, dict(cfg, mode="save", positions=positions))
    assert len(full) == 3 * per_epoch
    epochs = [full[e * per_epoch:(e + 1) * per_epoch] for e in range(3)]
    # Every epoch is a new order (a new permutation; a shard is a new slice of it), so a
    # restore that replayed the wrong epoch's order would be caught.
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2]
    if num_shards == 1:
        # Unsharded: each epoch is the same multiset, reordered.
        flat = [sorted(v for x in ep for v in ([x] if isinstance(x, str) else x)) for ep in epochs]
        assert flat[0] == flat[1] == flat[2]
    # Restored with a different number of reader threads than the save used: the
    # sequence must not depend on it.
    rests = _child(tmp_path, dict(cfg, mode="restore", threads=1, positions=positions))
    for pos in positions:
        assert rests[str(pos)] == full[pos:], f"restored at {pos}"
