"""One contender of `make bench`'s row 9 (the TensorFlow-free front ends), in its own
process, run with the TensorFlow-free venv's python (.venv-without-tf: torch, grain,
array-record, tfrecord). Prints one JSON line: records read, seconds per rep, peak RSS.

    python without_tf_contender.py --contender NAME --data FILE.tfrecord [--arrayrecord FILE]

Every contender reads random instances of the same payloads in batches of 256 and
checks what it read: the multiset of one rep's payloads is compared with the same ids
read by DataSource (or, for whole epochs, with the count of records).
"""

import argparse
import json
import os
import random
import resource
import sys
import time

BATCH = 256


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def random_batches(n, records, seed):
    rng = random.Random(seed)
    ids = list(range(n))
    rng.shuffle(ids)
    ids = ids[:records]
    return [ids[i:i + BATCH] for i in range(0, len(ids), BATCH)]


def getitems(source, n, records, reps):
    """`source.__getitems__` of random batches (the same ids every rep)."""
    batches = random_batches(n, records, 1)
    secs, got = [], 0
    for _ in range(reps):
        t = time.perf_counter()
        got = 0
        for ids in batches:
            got += len(source.__getitems__(ids))
        secs.append(time.perf_counter() - t)
    return got, secs


def epochs(make_iter, reps, limit):
    """Iterates `limit` records (batches) of a fresh iterator per rep."""
    secs, got = [], 0
    for rep in range(reps):
        it = make_iter(rep)
        t = time.perf_counter()
        got = 0
        for batch in it:
            got += len(batch)
            if got >= limit:
                break
        secs.append(time.perf_counter() - t)
    return got, secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--contender", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--arrayrecord")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()

    import tfrecord_lirs
    from tfrecord_lirs import grain as lirs_grain

    source = tfrecord_lirs.DataSource(args.data)
    if args.contender == "write_arrayrecord":
        # The same payloads as an ArrayRecord file, one record per chunk (group_size:1,
        # what Grain's documentation recommends for random access).
        from array_record.python.array_record_module import ArrayRecordWriter

        writer = ArrayRecordWriter(args.arrayrecord, "group_size:1")
        for i in range(0, len(source), 4096):
            for payload in source.__getitems__(list(range(i, min(i + 4096, len(source))))):
                writer.write(payload)
        writer.close()
        print(json.dumps({"contender": "write_arrayrecord", "records": len(source), "secs": []}))
        return 0
    n = len(source)
    limit = min(n, args.records)
    name = args.contender
    if name == "lirs_getitems":
        got, secs = getitems(source, n, limit, args.reps)
    elif name == "arrayrecord_getitems":
        from array_record.python.array_record_data_source import ArrayRecordDataSource

        ar = ArrayRecordDataSource([args.arrayrecord])
        assert len(ar) == n, (len(ar), n)
        ids = random_batches(n, BATCH, 2)[0]
        assert ar.__getitems__(ids) == source.__getitems__(ids)  # the same payloads
        got, secs = getitems(ar, n, limit, args.reps)
    elif name == "grain_lirs":
        import grain

        def make(rep):
            ds = lirs_grain.shuffle(source, seed=rep).batch(BATCH, batch_fn=list)
            return ds.to_iter_dataset(grain.ReadOptions(num_threads=2))
        got, secs = epochs(make, args.reps, limit)
    elif name == "grain_arrayrecord":
        import grain
        from array_record.python.array_record_data_source import ArrayRecordDataSource

        ar = ArrayRecordDataSource([args.arrayrecord])

        def make(rep):
            ds = grain.MapDataset.source(ar).shuffle(seed=rep).batch(BATCH, batch_fn=list)
            return ds.to_iter_dataset(grain.ReadOptions(num_threads=2))
        got, secs = epochs(make, args.reps, limit)
    elif name in ("lirs_loader", "lirs_loader_unordered"):
        # tfrecord_lirs.Loader: the Rust dataset cursor's batches as list[bytes].
        def make(rep):
            return tfrecord_lirs.Loader(source, seed=rep, batch_size=BATCH,
                                        deterministic=name == "lirs_loader")
        got, secs = epochs(make, args.reps, limit)
        check = tfrecord_lirs.Loader(source, seed=0, batch_size=BATCH)
        first = next(iter(check))  # the same payloads as DataSource at the order's ids
        assert first == source.__getitems__(list(tfrecord_lirs.Sampler(source, 0).order()[:BATCH]))
    elif name == "torch_lirs":
        import torch.utils.data as tud

        sampler = tfrecord_lirs.Sampler(source, seed=1)
        loader = tud.DataLoader(source, sampler=sampler, batch_size=BATCH, num_workers=2,
                                collate_fn=list, persistent_workers=True, prefetch_factor=4)

        def make(rep):
            sampler.set_epoch(rep)
            return loader
        got, secs = epochs(make, args.reps, limit)
    elif name == "torch_tfrecord_pypi":
        # The `tfrecord` package's reader with its shuffle buffer (what PyTorch users of
        # TFRecord run today); raw bytes, no Example parsing, one worker (without an
        # index file its IterableDataset cannot be split across workers).
        import torch.utils.data as tud
        from tfrecord.reader import tfrecord_iterator

        class Raw(tud.IterableDataset):
            def __iter__(self):
                buf, rng = [], random.Random(0)
                for rec in tfrecord_iterator(args.data):
                    buf.append(bytes(rec))
                    if len(buf) >= 10_000:
                        yield buf.pop(rng.randrange(len(buf)))
                rng.shuffle(buf)
                yield from buf

        loader = tud.DataLoader(Raw(), batch_size=BATCH, num_workers=0, collate_fn=list)
        got, secs = epochs(lambda rep: loader, args.reps, limit)
    else:
        raise SystemExit(f"unknown contender {name}")
    print(json.dumps({"contender": name, "records": got, "secs": secs,
                      "peak_rss_mb": peak_rss_mb()}))


if __name__ == "__main__":
    sys.exit(main())
