"""LIRSDataset over s3:// in stock TensorFlow 2.21 (which does not implement the scheme):
the op library reads it through the core's object_store client, against a real S3
server (moto's server mode) on loopback in a private network namespace
(tests/s3_server.py)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from conftest import affine_payload, framed
from s3_server import BUCKET, run_with_s3

REPO = Path(__file__).resolve().parents[1]


PAYLOADS = [affine_payload(i, 30 + (i * 17) % 500) for i in range(2000)]
DATA, TABLE = framed(PAYLOADS)


def test_lirs_dataset_reads_s3_without_tensorflow_io(tmp_path):
    code = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tensorflow as tf
import tfrecord_lirs
url = "s3://{BUCKET}/train.tfrecord"
try:
    tf.io.gfile.exists(url)
    stock = "implemented"
except tf.errors.UnimplementedError as e:
    stock = str(e)
epoch = [x.numpy() for x in tfrecord_lirs.LIRSDataset([url], seed=3, num_parallel_reads=8)]
batched = [bytes(x) for b in tfrecord_lirs.LIRSDataset([url], seed=3, batch_size=64,
                                                       deterministic=False) for x in b.numpy()]
print(json.dumps({{"stock": stock, "epoch": [e.hex() for e in epoch],
                  "batched": [e.hex() for e in batched]}}))
"""
    res = run_with_s3(tmp_path, {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE},
                      code, timeout=600)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    # Stock TensorFlow 2.21 has no s3:// file system: the reads are the op's own.
    assert "not implemented" in r["stock"], r["stock"]
    epoch = [bytes.fromhex(e) for e in r["epoch"]]
    assert collections.Counter(epoch) == collections.Counter(PAYLOADS)
    assert epoch != PAYLOADS
    batched = [bytes.fromhex(e) for e in r["batched"]]
    assert collections.Counter(batched) == collections.Counter(PAYLOADS)
