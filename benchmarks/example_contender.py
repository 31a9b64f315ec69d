"""One contender of `make bench`'s row 13 (decoding `tf.train.Example`s), in its own
process: `tfrecord_lirs.parse_example` on batches of 256, the `tfrecord` PyPI
package's protobuf path (`example_pb2.Example.ParseFromString` + its
`extract_feature_dict`, what its `example_loader` does per record; run with the
TensorFlow-free venv's python) and `tf.io.parse_example` on the same batches as string
tensors (the TF venv). Prints one JSON line: records decoded, seconds per rep.

    python example_contender.py --write FILE [--records N]   # the payloads (TF venv)
    python example_contender.py --contender NAME --data FILE [--reps R]

The payloads are image Examples as TFDS writes them plus the numbers of a typical
record: "image" (bytes, 2-6 KB), "label" (int64), "emb" (32 floats), "ids" (0-19
int64, variable length). Every contender checks what it decoded (sums of labels and
ids, the image bytes' total length, the count of ids).
"""

import argparse
import json
import struct
import time

import numpy as np

BATCH = 256


def write(path, n):
    import tensorflow as tf

    rng = np.random.default_rng(13)
    want = [0, 0, 0, 0]  # label sum, id sum, id count, image bytes
    with open(path, "wb") as out:
        for i in range(n):
            f = tf.train.Feature
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image": f(bytes_list=tf.train.BytesList(
                    value=[rng.bytes(int(rng.integers(2000, 6000)))])),
                "label": f(int64_list=tf.train.Int64List(value=[i % 1000])),
                "emb": f(float_list=tf.train.FloatList(value=rng.random(32).tolist())),
                "ids": f(int64_list=tf.train.Int64List(
                    value=rng.integers(0, 1 << 40, int(rng.integers(0, 20))).tolist())),
            })).SerializeToString()
            out.write(struct.pack("<I", len(ex)) + ex)
            parsed = tf.train.Example.FromString(ex).features.feature
            ids = parsed["ids"].int64_list.value
            want = [want[0] + i % 1000, want[1] + sum(ids), want[2] + len(ids),
                    want[3] + len(parsed["image"].bytes_list.value[0])]
    with open(path + ".json", "w") as f:
        json.dump(want, f)


def load(path):
    records = []
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        records.append(data[at + 4:at + 4 + n])
        at += 4 + n
    return records


def check_sums(label_sum, id_sum, id_count, image_bytes, records):
    """What every contender must have decoded: the sums the writer saved beside the
    payloads (FILE.json)."""
    got = [int(label_sum), int(id_sum), int(id_count), int(image_bytes)]
    assert got == WANT, (got, WANT)


def lirs(records, reps):
    import tfrecord_lirs as t

    spec = {"image": t.FixedLenFeature([], "bytes"), "label": t.FixedLenFeature([], "int64"),
            "emb": t.FixedLenFeature([32], "float32"), "ids": t.VarLenFeature("int64")}
    batches = [records[i:i + BATCH] for i in range(0, len(records), BATCH)]
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = [t.parse_example(b, spec) for b in batches]
        secs.append(time.perf_counter() - t0)
    check_sums(sum(int(o["label"].sum()) for o in out), sum(int(o["ids"].values.sum()) for o in out),
               sum(len(o["ids"].values) for o in out),
               sum(len(x) for o in out for x in o["image"]), records)
    return secs


def tfrecord_pypi(records, reps):
    from tfrecord import example_pb2
    from tfrecord.reader import extract_feature_dict

    mapping = {"byte": "bytes_list", "float": "float_list", "int": "int64_list"}
    description = {"image": "byte", "label": "int", "emb": "float", "ids": "int"}
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = []
        for r in records:
            ex = example_pb2.Example()
            ex.ParseFromString(r)
            out.append(extract_feature_dict(ex.features, description, mapping))
        secs.append(time.perf_counter() - t0)
    check_sums(sum(int(o["label"][0]) for o in out), sum(int(o["ids"].sum()) for o in out),
               sum(len(o["ids"]) for o in out), sum(len(o["image"]) for o in out), records)
    return secs


def tf_parse(records, reps, to_numpy=True):
    """`tf.io.parse_example`; with `to_numpy`, its tensors as numpy (what a PyTorch or
    Grain pipeline needs), else left as tensors (a tf.data pipeline's case) and
    converted only for the check, outside the timing."""
    import tensorflow as tf

    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "emb": tf.io.FixedLenFeature([32], tf.float32),
            "ids": tf.io.VarLenFeature(tf.int64)}
    batches = [tf.constant(records[i:i + BATCH]) for i in range(0, len(records), BATCH)]

    def numpy_of(out):
        return [{k: (v.values if isinstance(v, tf.SparseTensor) else v).numpy()
                 for k, v in o.items()} for o in out]

    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = [tf.io.parse_example(b, spec) for b in batches]
        if to_numpy:
            out = numpy_of(out)
        secs.append(time.perf_counter() - t0)
    if not to_numpy:
        out = numpy_of(out)
    check_sums(sum(int(o["label"].sum()) for o in out), sum(int(o["ids"].sum()) for o in out),
               sum(len(o["ids"]) for o in out),
               sum(len(x) for o in out for x in o["image"]), records)
    return secs


WANT = []

CONTENDERS = {"lirs_parse_example": lirs, "tfrecord_pypi": tfrecord_pypi,
              "tf_parse_example": tf_parse,
              "tf_parse_example_tensors": lambda r, reps: tf_parse(r, reps, to_numpy=False)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--write")
    ap.add_argument("--contender", choices=sorted(CONTENDERS))
    ap.add_argument("--data")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if args.write:
        write(args.write, args.records)
        return
    records = load(args.data)
    with open(args.data + ".json") as f:
        WANT[:] = json.load(f)
    secs = CONTENDERS[args.contender](records, args.reps)
    print(json.dumps({"contender": args.contender, "records": len(records), "secs": secs}))


if __name__ == "__main__":
    main()
