#!/usr/bin/env python3
"""Regenerate the TFRecord fixtures in testdata/ with real TensorFlow.

Run from the repository root:

    .venv/bin/python testdata/make_testdata.py

Every file is written by ``tf.io.TFRecordWriter`` (uncompressed), so the
fixtures are genuine stock-TensorFlow output.  Payloads follow simple rules
recorded in ``manifest.json`` so that tests in any language can regenerate
the expected bytes without TensorFlow:

* ``affine_mod256``: byte ``j`` of record ``i`` (both 0-based, ``i`` counted
  within its file) is ``(i * 131 + j * 7) % 256``.
* ``tf_train_example``: record ``i`` is a serialized ``tf.train.Example`` whose
  decoded field values are listed in the manifest (the serialized bytes are
  also listed as hex).

The script is deterministic: running it twice yields byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent

RULE_A = 131
RULE_B = 7
AFFINE_RULE = {
    "name": "affine_mod256",
    "expr": "byte[j] of record i = (i * a + j * b) % 256",
    "a": RULE_A,
    "b": RULE_B,
}

PAGE_SIZE_REFERENCE = 4096
# 0 / 1 / 15 / 16 / 17 / P-24 / P-16 / P / P+1 / 1 MiB for P = 4096.
SIZES_FILE_SIZES = [0, 1, 15, 16, 17, 4072, 4080, 4096, 4097, 1048576]

MIXED_SEED = 7
MIXED_BASE_COUNT = 300
MIXED_MEAN = 362.0
MIXED_SD_FRACTION = 0.30
# (index in the final file, payload size): large records interleaved with the
# small ones; 120/121 are two large records back to back.
MIXED_LARGE = [(40, 5000), (120, 9000), (121, 70000), (250, 5000)]

EXAMPLES_COUNT = 20


def affine_payload(i: int, size: int) -> bytes:
    j = np.arange(size, dtype=np.int64)
    return ((i * RULE_A + j * RULE_B) % 256).astype(np.uint8).tobytes()


def mixed_sizes() -> list[int]:
    rs = np.random.RandomState(MIXED_SEED)
    base = rs.normal(MIXED_MEAN, MIXED_SD_FRACTION * MIXED_MEAN, MIXED_BASE_COUNT)
    sizes = [int(s) for s in np.clip(np.round(base), 1, None)]
    for index, size in MIXED_LARGE:  # ascending indices: insert in order
        sizes.insert(index, size)
    return sizes


def example_fields(k: int) -> dict:
    # Lengths cycle through 0..6 (record 0 has an empty float list); all
    # values are multiples of 0.25 so they are exact in float32 and JSON.
    n = k % 7
    weights = [((k * 3 + m) % 17) * 0.25 - 2.0 for m in range(n)]
    name = f"example-{k:02d}" if k % 5 != 4 else ""
    return {"label": k * 1000 - 7000, "weights": weights, "name": name}


def make_example(fields: dict) -> bytes:
    feature = {
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[fields["label"]])),
        "weights": tf.train.Feature(float_list=tf.train.FloatList(value=fields["weights"])),
        "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[fields["name"].encode("ascii")])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True
    )


def write_tfrecord(path: Path, payloads: list[bytes]) -> None:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for p in payloads:
            writer.write(p)


def walk_offsets(data: bytes) -> list[int]:
    """Record start offsets from the framing (lengths only; TF checks CRCs)."""
    offsets, pos = [], 0
    while pos < len(data):
        if pos + 12 > len(data):
            raise ValueError(f"truncated header at {pos}")
        (length,) = struct.unpack_from("<Q", data, pos)
        offsets.append(pos)
        pos += 12 + length + 4
    if pos != len(data):
        raise ValueError("framing overruns the file")
    return offsets


def self_check(path: Path, payloads: list[bytes]) -> list[int]:
    data = path.read_bytes()
    offsets = walk_offsets(data)
    expected, pos = [], 0
    for p in payloads:
        expected.append(pos)
        pos += len(p) + 16
    assert offsets == expected, f"{path.name}: offsets differ from sizes"
    assert pos == len(data), f"{path.name}: size mismatch"
    read_back = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    assert read_back == payloads, f"{path.name}: TF read-back differs"
    return offsets


def file_entry(path: Path, payloads: list[bytes], rule: dict) -> dict:
    offsets = self_check(path, payloads)
    data = path.read_bytes()
    return {
        "filename": path.name,
        "record_count": len(payloads),
        "payload_sizes": [len(p) for p in payloads],
        "offsets": offsets,
        "file_size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "payload_rule": rule,
    }


def to_json(value, indent: int = 0) -> str:
    """JSON with one key per line but lists of scalars kept on one line."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {to_json(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}" if items else "{}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [inner + to_json(v, indent + 2) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value)


def main() -> int:
    files = []

    empty: list[bytes] = []
    write_tfrecord(HERE / "empty.tfrecord", empty)
    files.append(file_entry(HERE / "empty.tfrecord", empty, AFFINE_RULE))

    one = [affine_payload(0, 100)]
    write_tfrecord(HERE / "one.tfrecord", one)
    files.append(file_entry(HERE / "one.tfrecord", one, AFFINE_RULE))

    sizes = [affine_payload(i, n) for i, n in enumerate(SIZES_FILE_SIZES)]
    write_tfrecord(HERE / "sizes.tfrecord", sizes)
    files.append(file_entry(HERE / "sizes.tfrecord", sizes, AFFINE_RULE))

    mixed = [affine_payload(i, n) for i, n in enumerate(mixed_sizes())]
    write_tfrecord(HERE / "mixed.tfrecord", mixed)
    entry = file_entry(HERE / "mixed.tfrecord", mixed, AFFINE_RULE)
    entry["size_distribution"] = {
        "generator": "numpy.random.RandomState(seed).normal(mean, sd_fraction*mean, base_count), rounded, clipped to >= 1",
        "seed": MIXED_SEED,
        "base_count": MIXED_BASE_COUNT,
        "mean": MIXED_MEAN,
        "sd_fraction": MIXED_SD_FRACTION,
        "large_inserted_at": [{"index": i, "size": s} for i, s in MIXED_LARGE],
    }
    files.append(entry)

    fields = [example_fields(k) for k in range(EXAMPLES_COUNT)]
    examples = [make_example(f) for f in fields]
    write_tfrecord(HERE / "examples.tfrecord", examples)
    entry = file_entry(
        HERE / "examples.tfrecord",
        examples,
        {
            "name": "tf_train_example",
            "expr": "serialized tf.train.Example with features label (int64_list, 1 value), "
            "weights (float_list), name (bytes_list, 1 ASCII value)",
        },
    )
    # Cross-check the decoded values with TF's own parser.
    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "weights": tf.io.VarLenFeature(tf.float32),
        "name": tf.io.FixedLenFeature([], tf.string),
    }
    for raw, want in zip(examples, fields):
        got = tf.io.parse_single_example(raw, spec)
        assert int(got["label"].numpy()) == want["label"]
        assert got["weights"].values.numpy().tolist() == want["weights"]
        assert got["name"].numpy().decode("ascii") == want["name"]
    entry["examples"] = fields
    entry["payloads_hex"] = [p.hex() for p in examples]
    files.append(entry)

    manifest = {
        "description": "TFRecord fixtures written by stock TensorFlow; see README.md.",
        "generator": "testdata/make_testdata.py",
        "tensorflow_version": tf.__version__,
        "numpy_version": np.__version__,
        "framing": "u64le length, u32le masked crc32c(length bytes), payload, u32le masked crc32c(payload)",
        "reference_page_size": PAGE_SIZE_REFERENCE,
        "files": files,
    }
    (HERE / "manifest.json").write_text(to_json(manifest) + "\n", encoding="utf-8")

    for e in files:
        print(f"{e['filename']:20s} {e['record_count']:5d} records {e['file_size']:9d} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
