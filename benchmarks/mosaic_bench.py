"""MosaicML Streaming in row 16 of `make bench`: the local-cache peer of `cache_dir`.

The records of row 16 (benchmarks/cache_dir_bench.py: the same count, sizes and seed)
written as MDS shards by `streaming.MDSWriter` (one `bytes` column, no compression,
shards of SHARD_BYTES: the 4 MiB blocks of `cache_dir`) into the fast S3 server's root,
then read by `streaming.StreamingDataset(remote="s3://bench/mds", local=<cache dir>,
shuffle=True)` through its boto3 client (`S3_ENDPOINT_URL`) from the same server, under
the same lognormal latency, in the same run. Each contender is a fresh process of the
MosaicML venv (`make venv-mosaic`, requirements-mosaic.txt: it pins numpy<2.2 and pulls
torch) walking two epochs, as the `Loader` contenders do:

* MosaicML cold: an empty local cache (the first epoch downloads every shard);
* MosaicML warm: the cache filled by the cold run (no GET expected).

Its shuffle is its default algorithm (SHUFFLE_ALGO, `py1e`): shards are grouped into
blocks and samples are shuffled within a block, with shard-boundary spreading; not a
full-range shuffle (LIRS's orders are). Samples are iterated one at a time in the
process (no DataLoader workers), as the `Loader` is.

    .venv-mosaic/bin/python benchmarks/mosaic_bench.py --check   # says if it runs here
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOSAIC_PY = ROOT / ".venv-mosaic" / "bin" / "python"
# MDS shard size: cache_dir's block (4 MiB), so both fetch the data in units of one size
# (MDSWriter's own default, 64 MiB, would put row 16's 62 MiB in one shard).
SHARD_BYTES = 4 << 20
SHUFFLE_ALGO = "py1e"
PREFIX = "mds"

# Writes the framed records of argv[1] (u32 length + bytes each) as MDS shards in argv[2].
WRITE = textwrap.dedent("""
    import struct, sys
    from streaming import MDSWriter
    src, out, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(src, "rb") as f, MDSWriter(out=out, columns={"data": "bytes"},
                                         size_limit=limit) as w:
        while True:
            head = f.read(4)
            if not head:
                break
            (n,) = struct.unpack("<I", head)
            w.write({"data": f.read(n)})
""")

# Two epochs of a StreamingDataset in its own process: prints {"rate", "first_rate", ...}.
EPOCH = textwrap.dedent("""
    import json, sys, time
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    remote, local, algo = sys.argv[1], sys.argv[2], sys.argv[3]
    clean_stale_shared_memory()
    t0 = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=local, shuffle=True, shuffle_seed=7,
                          shuffle_algo=algo, batch_size=256)
    open_s = time.perf_counter() - t0
    rates = []
    for epoch in range(2):
        t1 = time.perf_counter()
        records = payload = 0
        for sample in ds:
            records += 1
            payload += len(sample["data"])
        rates.append(records / (time.perf_counter() - t1))
    print(json.dumps(dict(rate=rates[1], first_rate=rates[0], records=records,
                          payload=payload, open_s=open_s,
                          shuffle_algo=ds.shuffle_algo, shuffle_block_size=ds.shuffle_block_size)))
""")


def unavailable():
    """Why the MosaicML contender cannot run here, or None."""
    if not MOSAIC_PY.exists():
        return f"{MOSAIC_PY} is missing (make venv-mosaic)"
    res = subprocess.run([str(MOSAIC_PY), "-c", "import streaming"], capture_output=True,
                         text=True)
    if res.returncode:
        return "import streaming failed: " + res.stderr.strip().splitlines()[-1]
    return None


def frame(records_file, record):
    """Appends one record to the framed input of `write_shards`."""
    records_file.write(struct.pack("<I", len(record)) + record)


def write_shards(records_path, bucket_dir):
    """MDS shards of the framed records in `records_path`, under `bucket_dir`/PREFIX (the
    S3 server's bucket directory: what an upload would leave there)."""
    subprocess.run([str(MOSAIC_PY), "-c", WRITE, str(records_path),
                    str(Path(bucket_dir) / PREFIX), str(SHARD_BYTES)],
                   check=True, capture_output=True, text=True)
    return sorted(p.name for p in (Path(bucket_dir) / PREFIX).iterdir())


def epoch_command(bucket, local):
    """The command of one two-epoch process over s3://`bucket`/PREFIX, cache `local`."""
    return [str(MOSAIC_PY), "-c", EPOCH, f"s3://{bucket}/{PREFIX}", str(local), SHUFFLE_ALGO]


def environment(endpoint):
    """The variables its boto3 client reads: the endpoint and the bench server's one key
    (it always signs; the server checks signed requests against that key)."""
    return dict(S3_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench-secret", AWS_DEFAULT_REGION="us-east-1")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="say whether it runs here")
    args = ap.parse_args()
    if args.check:
        print(json.dumps(dict(unavailable=unavailable())))


if __name__ == "__main__":
    sys.exit(main())
