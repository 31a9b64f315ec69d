"""One contender of `make bench`'s large-record rows (row 10), in a process of its own.

Each payload of the data file starts with its index (u64 LE; `lirs_bench gen-ids`), so
every epoch is checked to be a full permutation of the file: each contender delivers
batches of 256 payloads, the indices are read from what was delivered, and an epoch
that is not a permutation fails the run. Prints one JSON line: records per epoch,
seconds per timed epoch (after one untimed warm-up epoch), and peak RSS (ru_maxrss).

Contenders:
  lirs_batched      LIRSDataset(f, batch_size=256): the batch tensor as delivered (its
                    strings are the consumer's memory; every CRC checked)
  lirs_per_element  LIRSDataset(f).batch(256): the same, one element at a time
  hf_arrow          HuggingFace `datasets` over the same payloads saved as Arrow
                    (memory-mapped): `shuffle(seed=epoch)`, `.iter(batch_size=256)` in
                    the "arrow" format, and one copy of each batch's payload bytes out
                    of Arrow into a NumPy buffer (Arrow checks no CRC); `--prepare`
                    writes the Arrow copy from the TFRecord file first

The TensorFlow contenders run in the dev venv; hf_arrow in the bench venv
(.venv-bench), which has `datasets` and no TensorFlow.
"""

import argparse
import json
import os
import resource
import struct
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

BATCH = 256


def check_permutation(ids, n, what):
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) != n or not np.array_equal(np.sort(ids), np.arange(n)):
        raise SystemExit(f"{what}: an epoch of {len(ids)} records is not a permutation of {n}")


def tfrecord_payloads(path):
    """The payloads of a TFRecord file, in file order (for --prepare; untimed)."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            (length,) = struct.unpack("<Q", header[:8])
            payload = f.read(length)
            f.read(4)
            yield payload


def run_tf(name, data, epochs):
    import tensorflow as tf

    import tfrecord_lirs

    if name == "lirs_batched":
        ds = tfrecord_lirs.LIRSDataset(data, seed=1, batch_size=BATCH)
    else:
        ds = tfrecord_lirs.LIRSDataset(data, seed=1).batch(BATCH)
    # The index at the front of each delivered payload.
    ds = ds.map(lambda b: tf.io.decode_raw(tf.strings.substr(b, 0, 8), tf.int64)[:, 0])
    n = None
    secs = []
    for epoch in range(epochs + 1):
        t = time.perf_counter()
        ids = [b for b in ds.as_numpy_iterator()]
        elapsed = time.perf_counter() - t
        ids = np.concatenate(ids)
        n = len(ids) if n is None else n
        check_permutation(ids, n, name)
        if epoch > 0:
            secs.append(elapsed)
    return n, secs


def run_hf(data, arrow_dir, epochs, prepare):
    import datasets

    datasets.disable_progress_bars()
    if prepare:
        features = datasets.Features({"payload": datasets.Value("binary")})
        ds = datasets.Dataset.from_generator(
            lambda: ({"payload": p} for p in tfrecord_payloads(data)),
            features=features, cache_dir=os.path.join(arrow_dir, "cache"))
        ds.save_to_disk(os.path.join(arrow_dir, "saved"))
        return len(ds), []
    ds = datasets.load_from_disk(os.path.join(arrow_dir, "saved"))
    n = len(ds)
    out = None
    secs = []
    for epoch in range(epochs + 1):
        t = time.perf_counter()
        ids = np.empty(n, dtype=np.int64)
        got = 0
        for table in ds.shuffle(seed=epoch).with_format("arrow").iter(batch_size=BATCH):
            col = table.column("payload")
            # A shuffled batch comes as one Arrow chunk per record (zero-copy slices);
            # each is copied to its place in one buffer of the whole batch (reused
            # across batches), as a batch copied out must be. Copying every chunk to
            # the start of one record-sized buffer instead wrote to cache, not memory:
            # 8.4-8.9 GB/s at 1 MB against the copy-out limit's 6.4 GB/s.
            spans = []
            for chunk in col.chunks:
                _, offsets_buf, values_buf = chunk.buffers()
                offs = np.frombuffer(offsets_buf, dtype=np.int32)[
                    chunk.offset:chunk.offset + len(chunk) + 1]
                spans.append((offs, values_buf))
            total = sum(int(offs[-1] - offs[0]) for offs, _ in spans)
            if out is None or len(out) < total:
                out = np.empty(total, dtype=np.uint8)
            at = 0
            for offs, values_buf in spans:
                size = int(offs[-1] - offs[0])
                # The one copy: the batch's payload bytes out of Arrow.
                out[at:at + size] = np.frombuffer(values_buf, dtype=np.uint8)[offs[0]:offs[-1]]
                starts = offs[:-1] - offs[0] + at
                heads = out[starts[:, None] + np.arange(8)]
                ids[got:got + len(offs) - 1] = heads.view("<i8")[:, 0]
                got += len(offs) - 1
                at += size
        elapsed = time.perf_counter() - t
        check_permutation(ids[:got], n, "hf_arrow")
        if epoch > 0:
            secs.append(elapsed)
    return n, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contender", required=True,
                    choices=["lirs_batched", "lirs_per_element", "hf_arrow"])
    ap.add_argument("--data", required=True, help="the TFRecord file (lirs_bench gen-ids)")
    ap.add_argument("--arrow-dir", help="hf_arrow: where the Arrow copy is")
    ap.add_argument("--prepare", action="store_true", help="hf_arrow: write the Arrow copy")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs")
    args = ap.parse_args()
    if args.contender == "hf_arrow":
        if not args.arrow_dir:
            raise SystemExit("hf_arrow needs --arrow-dir")
        n, secs = run_hf(args.data, args.arrow_dir, args.epochs, args.prepare)
    else:
        n, secs = run_tf(args.contender, args.data, args.epochs)
    print(json.dumps({"contender": args.contender, "records": n, "secs": secs,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
