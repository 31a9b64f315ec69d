"""One tf.data contender of `make bench`, in a process of its own.

Runs one dataset pipeline (`--contender`) over `--data`, times full epochs, and prints
one JSON line: records per epoch, seconds per timed epoch, and this process's peak RSS
(ru_maxrss). Every contender is consumed the same way: one `Dataset.reduce` inside a
`tf.function` that counts elements (`tf.size`, so a batch of B counts B), traced before
timing so that no tracing is timed. `--limit` times only a prefix of each epoch;
`--source-bound` appends `.batch(1024)` so TF's per-element cost of the consumer is paid
once per 1024 elements.

With BENCH_TF_AUTOTUNE=0 in the environment (`make ab` sets it), the per-element
contenders run with tf.data's autotuning and injected prefetch off. With them on, such a
process on this 2-core VM settles into one of a few speeds and keeps it for all its
epochs, stock and LIRS pipelines alike, at exact halvings of each other (0.64, 1.27,
2.55 s per epoch of row 1's 500,000 records). See benchmarks/PROFILE_NOTES.md.
Batched contenders keep the defaults: without the injected prefetch they lose the
overlap of reading and consuming and vary more, not less.

With `--cold`, the data file is dropped from the page cache (fsync +
posix_fadvise(DONTNEED)) right before the single timed epoch, and mincore(2) checks that
it is really out; there is no warm-up.

With BENCH_CALLGRIND=1 (benchmarks/ab_counts.py, which starts this under valgrind's
callgrind with `--instr-atstart=no`), callgrind counts the timed epochs only: the
import of TensorFlow, the tracing and the warm-up run uninstrumented.
"""

import argparse
import ctypes
import ctypes.util
import inspect
import json
import mmap
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from counting import callgrind  # noqa: E402

SHUFFLE_BUFFER = 10_000

CONTENDERS = [
    "baseline",             # TF + tfrecord_lirs imported, an empty pipeline (RSS floor)
    "tfrecord",             # tf.data.TFRecordDataset(f)
    "tfrecord_shuffle",     # tf.data.TFRecordDataset(f).shuffle(10000)
    "tfrecord_batch",       # tf.data.TFRecordDataset(f).batch(B)
    "tfrecord_shuffle_batch",  # tf.data.TFRecordDataset(f).shuffle(10000).batch(B)
    "lirs",                 # LIRSDataset(f), instance-based full shuffle
    "lirs_batched",         # LIRSDataset(f, batch_size=B), or LIRSDataset(f).batch(B)
    "lirs_page_aware",      # LIRSDataset(padded f, page_aware=True)
]


def lirs_has_batch_size():
    """Whether LIRSDataset batches in the kernel (a `batch_size` argument)."""
    try:
        params = inspect.signature(tfrecord_lirs.LIRSDataset.__init__).parameters
    except (TypeError, ValueError):
        return False
    return "batch_size" in params


def make_dataset(name, data, batch, backend="auto"):
    """(dataset, note) for contender `name`; `backend` is LIRSDataset's I/O backend."""
    if name == "baseline":
        return tf.data.Dataset.range(0).map(lambda x: tf.as_string(x)), ""
    if name == "tfrecord":
        return tf.data.TFRecordDataset(data), ""
    if name == "tfrecord_shuffle":
        return tf.data.TFRecordDataset(data).shuffle(SHUFFLE_BUFFER, seed=1), ""
    if name == "tfrecord_batch":
        return tf.data.TFRecordDataset(data).batch(batch), ""
    if name == "tfrecord_shuffle_batch":
        return tf.data.TFRecordDataset(data).shuffle(SHUFFLE_BUFFER, seed=1).batch(batch), ""
    if name == "lirs":
        return tfrecord_lirs.LIRSDataset(data, seed=1, backend=backend), ""
    if name == "lirs_page_aware":
        return tfrecord_lirs.LIRSDataset(data, seed=1, page_aware=True, backend=backend), ""
    if name == "lirs_batched":
        if lirs_has_batch_size():
            return (tfrecord_lirs.LIRSDataset(data, seed=1, batch_size=batch, backend=backend),
                    "in-kernel")
        return (tfrecord_lirs.LIRSDataset(data, seed=1).batch(batch),
                "via .batch() - in-kernel batching pending")
    raise ValueError(f"unknown contender {name!r}")


@tf.function
def consume(ds):
    """Elements delivered (a batch of B counts B), in one ReduceDataset op."""
    return ds.reduce(np.int64(0), lambda n, x: n + tf.size(x, out_type=tf.int64))


# --- page cache control, from Python -------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_pages(path):
    """(pages of `path` in the page cache, pages of `path`), by mincore(2)."""
    size = os.path.getsize(path)
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    if size == 0:
        return 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = ctypes.create_string_buffer(pages)
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return sum(b & 1 for b in vec.raw), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--contender", required=True, choices=CONTENDERS)
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3, help="timed epochs")
    ap.add_argument("--warmup", type=int, default=20_000,
                    help="elements read once before timing (not with --cold)")
    ap.add_argument("--expect", type=int, default=None, help="records per epoch")
    ap.add_argument("--limit", type=int, default=None,
                    help="time only the first LIMIT records of each epoch")
    ap.add_argument("--source-bound", action="store_true",
                    help="append .batch(1024) before consuming (per-element contenders)")
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--backend", default="auto", choices=["auto", "pread", "mmap", "direct"],
                    help="LIRSDataset's I/O backend (lirs contenders only)")
    args = ap.parse_args()

    ds, note = make_dataset(args.contender, args.data, args.batch, args.backend)
    batched = "batch" in args.contender
    steady = os.environ.get("BENCH_TF_AUTOTUNE", "1") == "0" and not batched
    expect = args.expect
    if args.source_bound:
        if batched:
            raise SystemExit("--source-bound is for per-element contenders")
        ds = ds.batch(1024)
    if args.limit is not None:
        if batched:
            ds = ds.take(-(-args.limit // args.batch))
            cap = -(-args.limit // args.batch) * args.batch
        elif args.source_bound:
            ds = ds.take(-(-args.limit // 1024))
            cap = -(-args.limit // 1024) * 1024
        else:
            ds = ds.take(args.limit)
            cap = args.limit
        expect = None if expect is None else min(expect, cap)
    if steady:
        options = tf.data.Options()
        options.autotune.enabled = False
        options.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(options)
    consume.get_concrete_function(ds)  # trace once, untimed
    out = {"contender": args.contender, "note": note, "batch": args.batch,
           "backend": args.backend if args.contender.startswith("lirs") else None,
           "source_bound": args.source_bound, "cold": args.cold, "autotune": not steady}
    if args.contender == "baseline":
        out.update(records=int(consume(ds)), secs=[])
    else:
        if args.cold:
            drop_from_page_cache(args.data)
            cached, pages = cached_pages(args.data)
            out.update(cached_pages_before=cached, pages=pages)
        elif args.warmup > 0:
            per = 1024 if args.source_bound else (args.batch if batched else 1)
            consume(ds.take(-(-args.warmup // per)))
        secs, records = [], None
        callgrind("on")
        for _ in range(1 if args.cold else args.reps):
            t = time.perf_counter()
            n = int(consume(ds))
            secs.append(time.perf_counter() - t)
            if records is not None and n != records:
                raise SystemExit(f"{args.contender}: epochs differ in size: {records} vs {n}")
            records = n
        callgrind("off")
        if expect is not None and records != expect:
            raise SystemExit(f"{args.contender}: read {records} records, expected {expect}")
        out.update(records=records, secs=secs)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
