"""s3:// in DataLoader worker processes forked after the parent read the bucket: the
object-store client's runtime was started in the parent, and its threads do not exist
in a forked child, so the child must read through a runtime of its own (a regression
hangs the workers: DataLoader's `timeout` turns that into a failure). Against moto on
loopback in a private network namespace (tests/s3_server.py). Expectations come from
the tests' own framing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import affine_payload, framed  # noqa: E402
from s3_server import BUCKET, run_with_s3  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

PAYLOADS = [affine_payload(i, 30 + (i * 17) % 900) for i in range(1500)]
DATA, TABLE = framed(PAYLOADS)
OBJECTS = {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE}

FORKED_WORKERS = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import torch.utils.data as tud
import tfrecord_lirs
import tfrecord_lirs.torch

url = "s3://{BUCKET}/train.tfrecord"
src = tfrecord_lirs.DataSource(url)
# The parent reads first: the runtime and the bucket's client start here.
parent = src.__getitems__(list(range(0, len(src), 7)))

def collate(batch):
    return batch

# Workers forked from this process read with the reader opened above. A worker that
# hangs makes DataLoader raise after `timeout` seconds instead of waiting forever.
mapped = tud.DataLoader(src, batch_size=100, num_workers=2, collate_fn=collate,
                        multiprocessing_context="fork", timeout=120)
by_index = [r for batch in mapped for r in batch]

loader = tfrecord_lirs.torch.Loader([url], seed=5, batch_size=64)
walked = tud.DataLoader(loader, batch_size=None, num_workers=2,
                        multiprocessing_context="fork", timeout=120)
shuffled = [r for batch in walked for r in batch]
again = src[len(src) - 1]
print(json.dumps({{"parent": [p.hex() for p in parent],
                  "by_index": [r.hex() for r in by_index],
                  "shuffled": sorted(r.hex() for r in shuffled),
                  "again": again.hex()}}))
"""


def test_forked_dataloader_workers_read_s3(tmp_path):
    res = run_with_s3(tmp_path, OBJECTS, FORKED_WORKERS, timeout=400)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert [bytes.fromhex(p) for p in r["parent"]] == PAYLOADS[::7]
    assert [bytes.fromhex(p) for p in r["by_index"]] == PAYLOADS
    # The Loader's workers read disjoint shares that together are every instance.
    assert r["shuffled"] == sorted(p.hex() for p in PAYLOADS)
    assert bytes.fromhex(r["again"]) == PAYLOADS[-1]
