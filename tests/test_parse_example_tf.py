"""`tfrecord_lirs.parse_example` against TensorFlow's own parser on the same records:
TFDS-written image shards and Beam-written (GZIP) Examples with every list type,
fixed and variable length. Every feature: the same values, dtype and shape as
`tf.io.parse_single_example` (one record) and `tf.io.parse_example` (a batch; a
VarLenFeature's SparseTensor against our values and row lengths), with the very same
spec dict (tf.io's feature objects) given to both; and the same refusals."""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfrecord_lirs
from tfrecord_lirs.errors import InvalidArgumentError

from conftest import beam_write_gzip_tfrecords

tfds = pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets is not installed")
pytest.importorskip("apache_beam", reason="apache-beam is not installed")


class LirsParseImages(tfds.core.GeneratorBasedBuilder):
    """A small image-classification dataset, written by TFDS as any other."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(8, 8, 3), encoding_format="png"),
                "label": tfds.features.ClassLabel(num_classes=10),
            }),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rng = np.random.default_rng(7)
        for i in range(60):
            yield i, {"image": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8), "label": i % 10}


@pytest.fixture(scope="module")
def tfds_records(tmp_path_factory):
    builder = LirsParseImages(data_dir=str(tmp_path_factory.mktemp("tfds")))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=2))
    files = sorted(tf.io.gfile.glob(
        os.path.join(builder.data_dir, "lirs_parse_images-train.tfrecord-*-of-*")))
    assert len(files) == 2, files
    return [r.numpy() for r in tf.data.TFRecordDataset(files)]


@pytest.fixture(scope="module")
def beam_records(tmp_path_factory):
    """Examples with each list type, fixed and ragged, written by Beam's
    WriteToTFRecord with GZIP, read back with TensorFlow."""
    def example(i):
        f = tf.train.Feature
        return tf.train.Example(features=tf.train.Features(feature={
            "id": f(int64_list=tf.train.Int64List(value=[i - 150])),
            "pair": f(float_list=tf.train.FloatList(value=[i / 3, -i * 1e30])),
            "blob": f(bytes_list=tf.train.BytesList(value=[b"z" * (i % 70)])),
            "tokens": f(int64_list=tf.train.Int64List(value=list(range(i % 5)))),
            "scores": f(float_list=tf.train.FloatList(value=[0.5] * (i % 3))),
            "words": f(bytes_list=tf.train.BytesList(value=[b"w%d" % j for j in range(i % 4)])),
            **({"maybe": f(int64_list=tf.train.Int64List(value=[i]))} if i % 2 else {}),
        })).SerializeToString()

    records = [example(i) for i in range(300)]
    files = beam_write_gzip_tfrecords(records, str(tmp_path_factory.mktemp("beam") / "examples"))
    got = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    assert sorted(got) == sorted(records)
    return got


TFDS_SPEC = {"image": tf.io.FixedLenFeature([], tf.string),
             "label": tf.io.FixedLenFeature([], tf.int64)}
BEAM_SPEC = {
    "id": tf.io.FixedLenFeature([], tf.int64),
    "pair": tf.io.FixedLenFeature([2], tf.float32),
    "blob": tf.io.FixedLenFeature([1], tf.string),
    "maybe": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    "tokens": tf.io.VarLenFeature(tf.int64),
    "scores": tf.io.VarLenFeature(tf.float32),
    "words": tf.io.VarLenFeature(tf.string),
}


def _same_array(ours, theirs, where):
    theirs = np.asarray(theirs)
    ours_arr = np.asarray(ours)
    assert ours_arr.shape == theirs.shape, where
    assert ours_arr.dtype == theirs.dtype, where
    assert ours_arr.tolist() == theirs.tolist(), where


def _check_single(record, spec):
    theirs = tf.io.parse_single_example(record, spec)
    ours = tfrecord_lirs.parse_example(record, spec)
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        if isinstance(value, tf.SparseTensor):
            _same_array(ours[name], value.values.numpy(), name)
        else:
            # A 0-d result is the scalar Tensor.numpy() gives (bytes, numpy scalars).
            assert type(ours[name]) is type(value.numpy()), name
            _same_array(ours[name], value.numpy(), name)


def _check_batch(records, spec):
    theirs = tf.io.parse_example(tf.constant(records), spec)
    ours = tfrecord_lirs.parse_example(records, spec)
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        if isinstance(value, tf.SparseTensor):
            values, rows = ours[name]
            _same_array(values, value.values.numpy(), name)
            index = value.indices.numpy()
            expected_rows = np.bincount(index[:, 0], minlength=len(records))
            _same_array(rows, expected_rows.astype(np.int64), name)
            assert value.dense_shape.numpy().tolist() == [len(records), int(rows.max(initial=0))]
        else:
            _same_array(ours[name], value.numpy(), name)


def test_tfds_image_examples_equal_tensorflows(tfds_records):
    for record in tfds_records[:20]:
        _check_single(record, TFDS_SPEC)
    _check_batch(tfds_records, TFDS_SPEC)
    # Without a spec: every feature TFDS wrote, as TensorFlow's VarLenFeature of its type.
    ours = tfrecord_lirs.parse_example(tfds_records)
    assert sorted(ours) == ["image", "label"]
    _check_batch(tfds_records, {"image": tf.io.VarLenFeature(tf.string),
                                "label": tf.io.VarLenFeature(tf.int64)})
    for name, spec in {"image": tf.string, "label": tf.int64}.items():
        theirs = tf.io.parse_example(tf.constant(tfds_records), {name: tf.io.VarLenFeature(spec)})
        _same_array(ours[name].values, theirs[name].values.numpy(), name)


def test_beam_examples_of_every_list_type_equal_tensorflows(beam_records):
    for record in beam_records[:40]:
        _check_single(record, BEAM_SPEC)
    _check_batch(beam_records, BEAM_SPEC)
    _check_batch(beam_records[:1], BEAM_SPEC)
    # Our own spec classes and dtype names give the same.
    ours = tfrecord_lirs.parse_example(beam_records, {
        "pair": tfrecord_lirs.FixedLenFeature([2], "float32"),
        "words": tfrecord_lirs.VarLenFeature("bytes")})
    theirs = tf.io.parse_example(tf.constant(beam_records), BEAM_SPEC)
    _same_array(ours["pair"], theirs["pair"].numpy(), "pair")
    _same_array(ours["words"].values, theirs["words"].values.numpy(), "words")


@pytest.mark.parametrize("spec", [
    {"maybe": tf.io.FixedLenFeature([], tf.int64)},       # missing, no default
    {"id": tf.io.FixedLenFeature([], tf.float32)},        # another type
    {"pair": tf.io.FixedLenFeature([3], tf.float32)},     # another size
    {"tokens": tf.io.VarLenFeature(tf.float32)},          # another type, variable length
])
def test_both_refuse_the_same_records(beam_records, spec):
    # Beam shards the records in no fixed order: take two with "maybe" and two without,
    # so every spec above meets a record it refuses whatever the order was.
    def has_maybe(record):
        return "maybe" in tf.train.Example.FromString(record).features.feature

    records = ([r for r in beam_records if has_maybe(r)][:2]
               + [r for r in beam_records if not has_maybe(r)][:2])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.io.parse_example(tf.constant(records), spec)
    with pytest.raises(InvalidArgumentError, match="record [0-3]: feature"):
        tfrecord_lirs.parse_example(records, spec)
