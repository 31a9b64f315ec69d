"""`tfrecord_lirs.serialize_example(s)` against TensorFlow: `tf.train.Example.FromString`
gives back the message TensorFlow builds from the same content, and the bytes are those
of its `SerializeToString(deterministic=True)`; `tf.io.parse_example` reads them, and
a file of them written by `PaddedWriter` is read by `tf.data.TFRecordDataset`.

Protobuf leaves a map's order unspecified unless serializing deterministically; then
C++ protobuf and the pure-Python one sort keys byte-wise, as we do, while the upb
backend that `pip install protobuf` gives Python orders a key after the longer keys it
is a prefix of ("ab" before "a", "" last). So the bytes are compared with upb's where no
name is a prefix of another, and with the pure-Python implementation's (in a
subprocess) for every case; the messages always."""

import os
import pickle
import subprocess
import sys

import numpy as np
import tensorflow as tf

import tfrecord_lirs

FILLER_MAGIC = b"\x00LIRSPAD"


def tf_feature(kind, values):
    if kind is None:
        return tf.train.Feature()
    lists = {"bytes": ("bytes_list", tf.train.BytesList),
             "int64": ("int64_list", tf.train.Int64List),
             "float": ("float_list", tf.train.FloatList)}
    field, cls = lists[kind]
    return tf.train.Feature(**{field: cls(value=values)})


# Per example: our dict, and the same content as (list kind, values) for tf.train.
CASES = [
    ({"image": b"\x89PNG\x00\xff", "label": 3, "bbox": [0.1, 0.2, 0.5, 0.9],
      "tags": ["cat", "dög"], "ids": np.array([1, -2, 2**62], dtype=np.int64)},
     {"image": ("bytes", [b"\x89PNG\x00\xff"]), "label": ("int64", [3]),
      "bbox": ("float", [0.1, 0.2, 0.5, 0.9]), "tags": ("bytes", [b"cat", "dög".encode()]),
      "ids": ("int64", [1, -2, 2**62])}),
    ({"label": -7, "tags": [], "ids": np.array([], np.int64), "bbox": np.zeros(4, np.float32),
      "image": b"", "": [1.5]},
     {"label": ("int64", [-7]), "tags": (None, None), "ids": ("int64", []),
      "bbox": ("float", [0.0] * 4), "image": ("bytes", [b""]), "": ("float", [1.5])}),
    ({"z" * 200: np.arange(300, dtype=np.int32), "a": np.float64(np.pi), "m": (True, False),
      "ab": [b"x"], "é": "é"},
     {"z" * 200: ("int64", list(range(300))), "a": ("float", [np.pi]),
      "m": ("int64", [1, 0]), "ab": ("bytes", [b"x"]), "é": ("bytes", ["é".encode()])}),
]


def tf_example(content):
    feature = {name: tf_feature(*kv) for name, kv in content.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature))


def deterministic_bytes():
    """Each case's `SerializeToString(deterministic=True)` (run as a script: with the
    protobuf implementation the environment chooses)."""
    return [tf_example(content).SerializeToString(deterministic=True) for _, content in CASES]


def test_the_message_is_tensorflows_and_the_bytes_its_deterministic_ones():
    records = tfrecord_lirs.serialize_examples([ours for ours, _ in CASES])
    for record, upb, (ours, content) in zip(records, deterministic_bytes(), CASES):
        assert tf.train.Example.FromString(record) == tf_example(content)
        assert tfrecord_lirs.serialize_example(ours) == record
        if not any(a != b and b.startswith(a) for a in content for b in content):
            assert record == upb


def test_the_bytes_are_pure_python_protobufs_deterministic_ones_for_every_case():
    # Pure-Python protobuf sorts map keys byte-wise, as C++ protobuf does.
    code = ("import pickle, sys; sys.path.insert(0, sys.argv[1]); "
            "from google.protobuf.internal import api_implementation as a; "
            "assert a.Type() == 'python', a.Type(); "
            "import test_serialize_example_tf as t; "
            "sys.stdout.buffer.write(pickle.dumps(t.deterministic_bytes()))")
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python",
               TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env,
                         check=True, stdout=subprocess.PIPE).stdout
    records = tfrecord_lirs.serialize_examples([ours for ours, _ in CASES])
    assert records == pickle.loads(out)


def test_tf_io_parse_example_reads_them():
    examples = [{"image": f"img{i}".encode(), "label": i, "xy": np.full((2, 2), i / 4),
                 "tags": ["t"] * (i % 3), "ids": list(range(i % 4))} for i in range(8)]
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "xy": tf.io.FixedLenFeature([2, 2], tf.float32),
            "tags": tf.io.VarLenFeature(tf.string),
            "ids": tf.io.VarLenFeature(tf.int64)}
    records = tfrecord_lirs.serialize_examples(examples)
    got = tf.io.parse_example(tf.constant(records), spec)
    assert got["image"].numpy().tolist() == [e["image"] for e in examples]
    assert got["label"].numpy().tolist() == list(range(8))
    np.testing.assert_array_equal(got["xy"].numpy(), np.stack([e["xy"] for e in examples]))
    tags = tf.sparse.to_dense(got["tags"], default_value=b"").numpy()
    assert [sum(t == b"t" for t in row) for row in tags] == [i % 3 for i in range(8)]
    ids = tf.RaggedTensor.from_sparse(got["ids"]).to_list()
    assert ids == [list(range(i % 4)) for i in range(8)]
    # tfrecord_lirs.parse_example with the very same spec agrees.
    ours = tfrecord_lirs.parse_example(records, spec)
    assert ours["label"].tolist() == list(range(8))
    assert ours["ids"].row_lengths.tolist() == [i % 4 for i in range(8)]


def test_a_padded_writer_file_of_them_is_read_by_tfrecord_dataset(tmp_path):
    path = tmp_path / "train.tfrecord"
    examples = [{"label": i, "text": f"record {i}" * (i % 5), "w": [i / 2]} for i in range(40)]
    with tfrecord_lirs.PaddedWriter(path, page_size=512) as writer:
        for record in tfrecord_lirs.serialize_examples(examples):
            writer.write(record)
    spec = {"label": tf.io.FixedLenFeature([], tf.int64),
            "text": tf.io.FixedLenFeature([], tf.string),
            "w": tf.io.FixedLenFeature([1], tf.float32)}
    ds = tf.data.TFRecordDataset(str(path))
    # A stock reader also sees the page fillers; they are not Examples.
    ds = ds.filter(lambda r: tf.strings.substr(r, 0, 8) != FILLER_MAGIC)
    got = list(ds.map(lambda r: tf.io.parse_single_example(r, spec)).as_numpy_iterator())
    assert [g["label"] for g in got] == list(range(40))
    assert [g["text"] for g in got] == [e["text"].encode() for e in examples]
    assert [g["w"].tolist() for g in got] == [[i / 2] for i in range(40)]
