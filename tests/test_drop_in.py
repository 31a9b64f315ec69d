"""LIRSDataset as a drop-in for TFRecordDataset, on shards written by TensorFlow
Datasets (PNG image Examples, `NAME-train.tfrecord-0000i-of-0000n`) and by Apache
Beam's WriteToTFRecord with GZIP (as TFX writes): what a user passes, many files at
once (CLI and Python), the advice for each mistake, padding that says what it chose.

Both writer packages are in requirements-dev.txt (they install next to
tensorflow-cpu 2.21; TFDS and Beam take protobuf 6.x, which TensorFlow 2.21 accepts).
"""

import hashlib
import os
import subprocess
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfrecord_lirs
from tfrecord_lirs import LIRSDataset

from conftest import beam_write_gzip_tfrecords

tfds = pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets is not installed")
pytest.importorskip("apache_beam", reason="apache-beam is not installed")

CLI = os.environ.get("TFRECORD_LIRS_CLI")
SHARDS = 3
EXAMPLES = 120


class LirsImages(tfds.core.GeneratorBasedBuilder):
    """A small image-classification dataset, written by TFDS as any other."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(24, 24, 3), encoding_format="png"),
                "label": tfds.features.ClassLabel(num_classes=10),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rng = np.random.default_rng(5)
        for i in range(EXAMPLES):
            yield i, {"image": rng.integers(0, 256, (24, 24, 3), dtype=np.uint8),
                      "label": i % 10}


@pytest.fixture(scope="module")
def tfds_shards(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("tfds")
    builder = LirsImages(data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    pattern = os.path.join(builder.data_dir, "lirs_images-train.tfrecord-?????-of-?????")
    files = sorted(tf.io.gfile.glob(pattern))
    assert len(files) == SHARDS, files
    return builder, pattern, files


def _digest(image, label):
    return hashlib.sha1(np.asarray(image).tobytes()).hexdigest(), int(label)


def _tfds_examples(builder):
    ds = builder.as_dataset(split="train", shuffle_files=False)
    return sorted(_digest(e["image"], e["label"]) for e in ds)


def test_tfds_shards_through_every_kind_of_filenames(tfds_shards):
    builder, pattern, files = tfds_shards
    tables = tfrecord_lirs.build_offset_table(pattern)
    assert tables == [f + ".offsets" for f in files]
    want = _tfds_examples(builder)
    decode = builder.info.features.deserialize_example

    def examples(ds):
        return sorted(_digest(e["image"], e["label"]) for e in ds.map(decode))

    # A list, a tensor, a Dataset of names (list_files), one name.
    assert examples(LIRSDataset(files, seed=1)) == want
    assert examples(LIRSDataset(tf.constant(files), seed=1)) == want
    listed = tf.data.Dataset.list_files(pattern, shuffle=False)
    assert examples(LIRSDataset(listed, seed=1)) == want
    one = examples(LIRSDataset(files[0], seed=1))
    assert 0 < len(one) < len(want)

    # Inside tf.function the names are gathered by graph ops.
    @tf.function
    def count(names):
        return LIRSDataset(names, seed=1).reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)

    assert int(count(tf.data.Dataset.list_files(pattern, shuffle=False))) == EXAMPLES
    # The order is a full shuffle: not the file order.
    ids = [e["label"].numpy() for e in LIRSDataset(files, seed=3).map(decode).take(30)]
    stock = [e["label"].numpy() for e in tf.data.TFRecordDataset(files).map(decode).take(30)]
    assert ids != stock


def test_tfrecorddataset_arguments(tfds_shards):
    _, _, files = tfds_shards
    tfrecord_lirs.build_offset_table(files)
    n = len(list(tf.data.TFRecordDataset(files)))
    ds = LIRSDataset(files, compression_type="", buffer_size=1 << 20, num_parallel_reads=4,
                     name="lirs_train", seed=2)
    assert len(list(ds)) == n
    assert len(list(LIRSDataset(files, compression_type=None, buffer_size=0))) == n
    # As TFRecordDataset: an empty list is an empty dataset.
    assert list(LIRSDataset([])) == []
    assert list(tf.data.TFRecordDataset([])) == []
    assert list(LIRSDataset(tf.constant([], tf.string))) == []
    # Keyword-only after filenames: TFRecordDataset's positional call is a clear TypeError.
    with pytest.raises(TypeError, match="positional"):
        LIRSDataset(files, "", 1 << 20)
    with pytest.raises(ValueError, match=r"compression_type=\"GZIP\".*tfrecord_lirs\.pad\(\"FILE\", OUT\)"):
        LIRSDataset(files, compression_type="GZIP")
    with pytest.raises(ValueError, match="compression_type must be None"):
        LIRSDataset(files, compression_type="bz2")
    with pytest.raises(ValueError, match="buffer_size must be >= 0"):
        LIRSDataset(files, buffer_size=-1)
    with pytest.raises(TypeError, match="scalar tf.string"):
        LIRSDataset(tf.data.Dataset.range(3))
    # help() shows this class's text and example, not tf.data.Dataset's __init__.
    import pydoc
    text = pydoc.render_doc(LIRSDataset)
    assert "drop-in for `tf.data.TFRecordDataset`" in text
    assert "def parse(record):" in text
    assert "shuffle=False" in text
    assert "LIRSDataset(filenames, *, compression_type=None" in text.replace("\x08", "")


def test_keras_fit_with_shuffle_false(tfds_shards):
    builder, _, files = tfds_shards
    tfrecord_lirs.build_offset_table(files)
    decode = builder.info.features.deserialize_example

    def to_xy(e):
        return tf.cast(e["image"], tf.float32) / 255.0, e["label"]

    ds = LIRSDataset(files, seed=1).map(decode).map(to_xy).batch(16)
    model = tf.keras.Sequential([tf.keras.Input((24, 24, 3)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(10)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(ds, epochs=2, shuffle=False, verbose=0)
    assert len(history.history["loss"]) == 2
    assert not [w for w in caught if "shuffle" in str(w.message)], caught


def test_mistakes_get_their_own_advice(tfds_shards, tmp_path):
    _, pattern, files = tfds_shards
    tfrecord_lirs.build_offset_table(files)
    # A glob that matched the tables too: named as a table, not "X.offsets.offsets".
    everything = sorted(tf.io.gfile.glob(pattern.replace("?????-of-?????", "*")))
    assert any(f.endswith(".offsets") for f in everything)
    with pytest.raises(tf.errors.InvalidArgumentError, match="is an offset table") as e:
        list(LIRSDataset(everything))
    assert ".offsets.offsets" not in str(e.value)
    # A directory is a directory.
    directory = os.path.dirname(files[0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="is a directory"):
        tfrecord_lirs.build_offset_table(directory)
    with pytest.raises(tf.errors.InvalidArgumentError, match="is a directory"):
        list(LIRSDataset(directory))
    # A table older than its rewritten data: "rewritten", with the command.
    data = tmp_path / "d.tfrecord"
    with tf.io.TFRecordWriter(str(data)) as w:
        for i in range(40):
            w.write(b"x" * (100 + i))
    tfrecord_lirs.build_offset_table(str(data))
    os.utime(str(data) + ".offsets", (1_000_000, 1_000_000))
    with tf.io.TFRecordWriter(str(data)) as w:
        for i in range(40):
            w.write(b"y" * (200 + i))
    with pytest.raises(tf.errors.OpError, match="was rewritten after its table") as e:
        list(LIRSDataset(str(data)))
    # The op's own advice: the package's call, then a new LIRSDataset; no CLI command.
    assert "tfrecord_lirs.build_offset_table(" in str(e.value) and "LIRSDataset" in str(e.value)
    assert "tfrecord-lirs index" not in str(e.value)
    # pad refuses an existing output unless overwrite=True.
    out = tmp_path / "p.tfrecord"
    tfrecord_lirs.build_offset_table(str(data))
    tfrecord_lirs.pad(str(data), str(out))
    with pytest.raises(tf.errors.InvalidArgumentError, match="exists.*overwrite=True"):
        tfrecord_lirs.pad(str(data), str(out))
    assert tfrecord_lirs.pad(str(data), str(out), overwrite=True).instances == 40


@pytest.fixture(scope="module")
def beam_gzip_shards(tmp_path_factory):
    """Serialized Examples written by Beam's WriteToTFRecord with GZIP, two shards."""
    out = tmp_path_factory.mktemp("beam")
    records = [tf.train.Example(features=tf.train.Features(feature={
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "blob": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"z" * (50 + i % 700)])),
    })).SerializeToString() for i in range(400)]
    files = beam_write_gzip_tfrecords(records, str(out / "examples"))
    assert len(files) == 2, files
    return files, records


def test_beam_gzip_is_called_compressed_and_padded_in_one_step(beam_gzip_shards, tmp_path):
    files, records = beam_gzip_shards
    # Without tables: compressed (with the pad command), before any missing-table advice.
    # A compressed file is a mistake in what was passed, not damage: InvalidArgumentError.
    with pytest.raises(tf.errors.InvalidArgumentError, match="GZIP-compressed") as e:
        list(LIRSDataset(files))
    assert "tfrecord_lirs.pad(" in str(e.value) and "no offset table" not in str(e.value)
    with pytest.raises(tf.errors.InvalidArgumentError, match="GZIP-compressed"):
        tfrecord_lirs.build_offset_table(files[0])
    with pytest.raises(ValueError, match=r"tfrecord_lirs\.pad\("):
        LIRSDataset(files, compression_type="GZIP")

    # pad of the shards into a directory, fit auto: one call, every file.
    out = tmp_path / "padded"
    out.mkdir()
    summaries = tfrecord_lirs.pad(files, str(out), fit="auto", jobs=2)
    assert sum(s.instances for s in summaries) == len(records)
    padded = sorted(tf.io.gfile.glob(str(out / "examples-?????-of-?????")))
    assert len(padded) == 2 and not any(p.endswith(".offsets") for p in padded)
    got = sorted(r.numpy() for r in LIRSDataset(padded, seed=4))
    assert got == sorted(records)
    stock = sorted(r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    assert got == stock
    # A second run refuses to replace, naming each file; the summary says how many.
    with pytest.raises(tf.errors.InvalidArgumentError, match="padded 0 of 2 files; 2 failed"):
        tfrecord_lirs.pad(files, str(out))


def test_pad_auto_says_what_it_chose(tmp_path):
    small, large = tmp_path / "small.tfrecord", tmp_path / "large.tfrecord"
    rng = np.random.default_rng(1)
    with tf.io.TFRecordWriter(str(small)) as w:
        for _ in range(3000):
            w.write(rng.bytes(int(rng.integers(200, 500))))
    with tf.io.TFRecordWriter(str(large)) as w:
        for _ in range(300):
            w.write(rng.bytes(int(rng.integers(6000, 12000))))
    s = tfrecord_lirs.pad(str(small), str(tmp_path / "s.out"), fit="auto")
    assert s.fit_note.startswith("fit auto: chose best"), s
    assert s.page_reads == s.instances < s.unpadded_page_reads
    l = tfrecord_lirs.pad(str(large), str(tmp_path / "l.out"), fit="auto")
    assert l.fit_note.startswith("fit auto: chose no padding"), l
    assert l.filler_bytes == 0 and l.page_reads == l.unpadded_page_reads
    with pytest.raises(tf.errors.InvalidArgumentError, match="pad\\(\\) takes it"):
        tfrecord_lirs.PaddedWriter(str(tmp_path / "w"), fit="auto")


@pytest.mark.skipif(not CLI, reason="TFRECORD_LIRS_CLI (the built CLI) is not set")
def test_cli_many_files_on_tfds_shards(tfds_shards, tmp_path):
    _, _, files = tfds_shards
    for f in files:
        if os.path.exists(f + ".offsets"):
            os.remove(f + ".offsets")
    missing = str(tmp_path / "missing.tfrecord")
    res = subprocess.run([CLI, "index", "--jobs", "2", files[0], missing, *files[1:]],
                         capture_output=True, text=True)
    assert res.returncode == 1, res
    assert all(os.path.exists(f + ".offsets") for f in files)
    assert res.stderr.startswith(f"error: index: indexed {SHARDS} of {SHARDS + 1} files; 1 failed:")
    assert missing in res.stderr
    res = subprocess.run([CLI, "verify", *files], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.endswith(f"verified {SHARDS} of {SHARDS} files\n")


def test_many_files_on_urls(tmp_path):
    """A list of URLs (TensorFlow's ram:// file system) indexed, read and padded into a
    "directory" of the same storage, as local files are."""
    files = [f"ram://drop_in/part-{i}.tfrecord" for i in range(3)]
    payloads = []
    for i, f in enumerate(files):
        with tf.io.TFRecordWriter(f) as w:
            for k in range(50):
                record = b"%d-%d" % (i, k) * (k + 1)
                payloads.append(record)
                w.write(record)
    assert tfrecord_lirs.build_offset_table(files) == [f + ".offsets" for f in files]
    assert sorted(r.numpy() for r in LIRSDataset(files, seed=1)) == sorted(payloads)
    summaries = tfrecord_lirs.pad(files, "ram://drop_in_out", fit="best")
    assert [s.instances for s in summaries] == [50, 50, 50]
    padded = [f"ram://drop_in_out/part-{i}.tfrecord" for i in range(3)]
    assert sorted(r.numpy() for r in LIRSDataset(padded, seed=1)) == sorted(payloads)
    # An existing object is not replaced without overwrite=True.
    with pytest.raises(tf.errors.InvalidArgumentError, match="exists \\(an object\\)"):
        tfrecord_lirs.pad(files[0], padded[0])
    assert tfrecord_lirs.pad(files[0], padded[0], overwrite=True).instances == 50


def test_dataset_of_filenames_through_tf_data_service(tfds_shards):
    """The file names of a list_files Dataset are gathered by graph ops, so the whole
    pipeline is a graph a tf.data service worker runs (a dispatcher and a worker in this
    process)."""
    _, pattern, files = tfds_shards
    tfrecord_lirs.build_offset_table(files)
    service = tf.data.experimental.service
    dispatcher = service.DispatchServer()
    worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=dispatcher.target.split("://")[1]))
    try:
        names = tf.data.Dataset.list_files(pattern, shuffle=False)
        ds = LIRSDataset(names, seed=6).apply(
            service.distribute("parallel_epochs", dispatcher.target))
        got = sorted(r for r in ds.as_numpy_iterator())
        want = sorted(r.numpy() for r in tf.data.TFRecordDataset(files))
        assert got == want
    finally:
        worker.stop()
        dispatcher.stop()
