"""Panics inside the Rust side of LIRSDataset, real TensorFlow:

* a panic on a fetch I/O thread surfaces as tf.errors.InternalError, never as a
  hang, a retry that hides it, or a dead process;
* a cursor or writer whose method panicked is never used again as if whole.

The panic points exist only in the test build of the op library: every scenario
runs in a child process that loads it (tests/fault_injection.py), with a timeout:
a hang fails the test instead of stalling the suite, and the child proves the
process goes on.
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
PYTHON_DIR = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, PYTHON_DIR)

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from fault_injection import run_faulty as _run  # noqa: E402

N = 120


@pytest.fixture
def data(tmp_path):
    # ~4 KB records: the fetch's windows (~384 KiB of data) then cut the file into
    # more than one.
    recs = [b"%05d:" % i + b"x" * (4000 + i % 50) for i in range(N)]
    path = str(tmp_path / "d.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in recs:
            w.write(r)
    tfrecord_lirs.build_offset_table(path)
    return path, recs


def test_panic_in_a_fetch_thread_is_internal_error_not_a_hang(data):
    path, recs = data
    lines = _run("""
        for threads in (1, 4):
            for batch_size in (None, 16):
                ds = LIRSDataset(path, seed=1, num_parallel_reads=threads,
                                 batch_size=batch_size)
                set_panic_point("fetch_worker")
                m = expect(tf.errors.InternalError, lambda: list(ds), "fetch thread")
                assert "panic" in m, m
                # Skipping errors ends too: each error passes one position.
                assert list(ds.ignore_errors()) == []
                set_panic_point("")
        # An iterator that met the panic goes on once it is gone: only the
        # position the error reported is passed, nothing else is lost.
        ds = LIRSDataset(path, seed=1, num_parallel_reads=4)
        full = [x.numpy() for x in ds]
        it = iter(LIRSDataset(path, seed=1, num_parallel_reads=4))
        set_panic_point("fetch_worker")
        expect(tf.errors.InternalError, lambda: next(it))
        set_panic_point("")
        rest = [x.numpy() for x in it]
        print("REST", len(rest), rest == full[1:])
        print("ALIVE", len(list(LIRSDataset(path, num_parallel_reads=1))))
    """, path=path)
    assert f"REST {N - 1} True" in lines
    assert f"ALIVE {N}" in lines


def test_panicked_cursor_is_rebuilt_not_reused(data):
    # A panic taking the next window (`next_window`) may leave that fetch
    # half-updated; the Rust cursor drops it and the next call reads on with a
    # fresh one.
    path, _ = data
    lines = _run("""
        full = [x.numpy() for x in LIRSDataset(path, seed=3)]
        for batch_size in (None, 7):
            it = iter(LIRSDataset(path, seed=3, batch_size=batch_size))
            first = next(it).numpy()
            set_panic_point("next_window")
            # The first window is already fetched: drain it.
            got = [first]
            while True:
                try:
                    got.append(next(it).numpy())
                except tf.errors.InternalError as e:
                    assert "next_window" in e.message, e.message
                    break
            set_panic_point("")
            got += [x.numpy() for x in it]
            flat = [r for x in got for r in (x if batch_size else [x])]
            # Exactly the position whose window failed is passed: the one after the
            # fetch's first window, then the rest of the order.
            w = next((i for i, (a, b) in enumerate(zip(flat, full)) if a != b), len(flat))
            print("SEQ", batch_size, len(flat),
                  0 < w < len(full) and flat == full[:w] + full[w + 1:])
            print("WINDOW", batch_size, w)
    """, path=path)
    assert f"SEQ None {N - 1} True" in lines
    assert f"SEQ 7 {N - 1} True" in lines
    # A fetch's first window is one batch, or 64 records unbatched (it ramps up).
    windows = {line.split()[1]: line.split()[2] for line in lines if line.startswith("WINDOW")}
    assert windows == {"None": "64", "7": "7"}, lines


def test_failed_restore_is_internal_error_and_the_iterator_lives_on(data, tmp_path):
    # A panic while restore builds the cursor: InternalError; TensorFlow keeps
    # the iterator it had, which still works.
    path, _ = data
    lines = _run("""
        ds = LIRSDataset(path, seed=5)
        it = iter(ds)
        next(it)
        prefix = tf.train.Checkpoint(iterator=it).save(ckpt)
        it2 = iter(ds)
        set_panic_point("fetch")
        expect(tf.errors.InternalError,
               lambda: tf.train.Checkpoint(iterator=it2).restore(prefix), "`fetch`")
        set_panic_point("")
        print("AFTER", len([x for x in it2]))
        tf.train.Checkpoint(iterator=it2).restore(prefix)
        print("RESTORED", len([x for x in it2]))
    """, path=path, ckpt=str(tmp_path / "ckpt"))
    assert f"AFTER {N}" in lines
    assert f"RESTORED {N - 1}" in lines


def test_panicked_writer_is_poisoned(tmp_path):
    out = str(tmp_path / "w.tfrecord")
    lines = _run("""
        w = tfrecord_lirs.PaddedWriter(out, page_size=4096)
        w.write(b"fine")
        set_panic_point("write")
        expect(tf.errors.InternalError, lambda: w.write(b"boom"), "`write`")
        set_panic_point("")
        expect(tf.errors.InternalError, lambda: w.write(b"again"), "unusable")
        expect(tf.errors.InternalError, w.close, "unusable")
        # Nothing half-written appears under the final names.
        print("EXISTS", os.path.exists(out), os.path.exists(out + ".offsets"))
        with tfrecord_lirs.PaddedWriter(out, page_size=4096) as w2:
            w2.write(b"ok")
        print("READ", tfrecord_lirs.read(out, [0]).numpy()[0].decode())
    """, out=out)
    assert "EXISTS False False" in lines
    assert "READ ok" in lines
