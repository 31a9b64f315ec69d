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


def test_python_writers_reach_s3_past_tensorflows_file_systems(tmp_path):
    """With TensorFlow loaded, `build_offset_table`, `pad` and `PaddedWriter` ask
    TensorFlow's file systems first (tf.io.gfile, from the extension) and, for s3://,
    which stock TensorFlow does not implement, go on to the core's object_store client:
    the tables and padded files written to the S3 server are the local ones' bytes
    (read back with boto3, a client independent of the one under test), and LIRSDataset
    reads the padded copy."""
    local = tmp_path / "local"
    local.mkdir()
    code = f"""
import json, os, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import boto3
import tensorflow as tf
import tfrecord_lirs
url = "s3://{BUCKET}/train.tfrecord"
out = {{}}
out["table"] = tfrecord_lirs.build_offset_table(url)
summary = tfrecord_lirs.pad(url, "s3://{BUCKET}/out/padded.tfrecord", page_size=4096)
out["instances"] = summary.instances
with tfrecord_lirs.PaddedWriter("s3://{BUCKET}/out/written.tfrecord", page_size=4096) as w:
    for i in range(50):
        w.write(b"written %d" % i)
try:
    tfrecord_lirs.build_offset_table("s3://{BUCKET}/none.tfrecord")
    out["missing"] = None
except tf.errors.NotFoundError as e:
    out["missing"] = [type(e).__name__, isinstance(e, tfrecord_lirs.NotFoundError), str(e)]
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT"])
for key in ["train.tfrecord.offsets", "out/padded.tfrecord", "out/padded.tfrecord.offsets",
            "out/written.tfrecord", "out/written.tfrecord.offsets"]:
    out[key] = s3.get_object(Bucket="{BUCKET}", Key=key)["Body"].read().hex()
padded = [x.numpy() for x in tfrecord_lirs.LIRSDataset(["s3://{BUCKET}/out/padded.tfrecord"],
                                                       seed=5, page_size=4096)]
out["padded_epoch"] = [p.hex() for p in padded]
print(json.dumps(out))
"""
    res = run_with_s3(tmp_path / "run", {"train.tfrecord": DATA}, code, timeout=600)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["table"] == f"s3://{BUCKET}/train.tfrecord.offsets"
    assert bytes.fromhex(r["train.tfrecord.offsets"]) == TABLE
    assert r["instances"] == len(PAYLOADS)
    import tfrecord_lirs

    src = local / "train.tfrecord"
    src.write_bytes(DATA)
    tfrecord_lirs.pad(str(src), str(local / "padded.tfrecord"), page_size=4096)
    assert bytes.fromhex(r["out/padded.tfrecord"]) == (local / "padded.tfrecord").read_bytes()
    assert (bytes.fromhex(r["out/padded.tfrecord.offsets"])
            == (local / "padded.tfrecord.offsets").read_bytes())
    with tfrecord_lirs.PaddedWriter(str(local / "written.tfrecord"), page_size=4096) as w:
        for i in range(50):
            w.write(b"written %d" % i)
    assert bytes.fromhex(r["out/written.tfrecord"]) == (local / "written.tfrecord").read_bytes()
    assert (bytes.fromhex(r["out/written.tfrecord.offsets"])
            == (local / "written.tfrecord.offsets").read_bytes())
    assert collections.Counter(bytes.fromhex(p) for p in r["padded_epoch"]) == \
        collections.Counter(PAYLOADS)
    kind, is_lirs_class, message = r["missing"]
    assert is_lirs_class and f"s3://{BUCKET}/none.tfrecord" in message, r["missing"]
