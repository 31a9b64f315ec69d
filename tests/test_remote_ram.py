"""URLs through TensorFlow's own file systems, on `ram://` (TensorFlow's in-memory
file system, registered in every TensorFlow process): LIRSDataset, read and
build_offset_table over ram:// give exactly what they give over the local file
with the same bytes (orders, shards, page-aware units, in-kernel batches,
parallel reads, checkpoints), and the same errors, naming the URL.

gs:// through TensorFlow's real GCS client: tests/test_remote_gcs.py.
"""

import os
import re
import sys
import uuid
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402
from test_lirs_dataset import _check_restore, items, payloads, write_tf  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

PAGE = 512


def to_ram(local, directory):
    """Copies local file `local` (and its table, if any) to ram://`directory`/."""
    url = f"ram://{directory}/{os.path.basename(local)}"
    tf.io.gfile.copy(local, url, overwrite=True)
    if os.path.exists(local + ".offsets"):
        tf.io.gfile.copy(local + ".offsets", url + ".offsets", overwrite=True)
    return url


@pytest.fixture
def files(tmp_path):
    """A TF-written file with its table and a padded file, locally and on ram://."""
    directory = uuid.uuid4().hex
    plain_recs = payloads(150)
    plain = write_tf(tmp_path / "plain.tfrecord", plain_recs)
    tfrecord_lirs.build_offset_table(plain)
    padded_recs = payloads(300, seed=1)
    src = write_tf(tmp_path / "src.tfrecord", padded_recs)
    padded = str(tmp_path / "padded.tfrecord")
    tfrecord_lirs.pad(src, padded, page_size=PAGE)
    local = [plain, padded]
    remote = [to_ram(p, directory) for p in local]
    yield local, remote, plain_recs + padded_recs
    for url in remote:
        for name in (url, url + ".offsets"):
            if tf.io.gfile.exists(name):
                tf.io.gfile.remove(name)


@pytest.mark.parametrize("kwargs", [
    dict(seed=1),
    dict(seed=2, page_aware=True, page_size=PAGE),
    dict(seed=3, num_shards=3, shard_index=2),
    dict(seed=4, page_aware=True, page_size=PAGE, num_shards=2, shard_index=0),
    dict(seed=5, batch_size=16),
    dict(seed=6, batch_size=7, drop_remainder=True, page_aware=True, page_size=PAGE),
    dict(seed=7, num_parallel_reads=1),
    dict(seed=8, num_parallel_reads=64),
    dict(seed=9, reshuffle_each_iteration=False),
])
def test_every_order_equals_the_local_one(files, kwargs):
    local, remote, recs = files
    want = items(LIRSDataset(local, **kwargs).repeat(2))
    got = items(LIRSDataset(remote, **kwargs).repeat(2))
    assert got == want
    assert len(want) > 0


def test_the_whole_data_once_per_epoch(files):
    _, remote, recs = files
    got = items(LIRSDataset(remote, seed=11))
    assert sorted(got) == sorted(recs)


def test_tables_given_explicitly_remote_or_local(files):
    local, remote, _ = files
    want = items(LIRSDataset(local, seed=5))
    tables = [remote[0] + ".offsets", local[1] + ".offsets"]
    assert items(LIRSDataset(remote, offset_tables=tables, seed=5)) == want
    # A local data file with its table on ram://.
    assert items(LIRSDataset(local, offset_tables=[remote[0] + ".offsets",
                                                   remote[1] + ".offsets"], seed=5)) == want


def test_read_by_id(files):
    local, remote, _ = files
    ids = [0, 149, 150, 449, 7, 7, 300]
    assert list(tfrecord_lirs.read(remote, ids).numpy()) == \
        list(tfrecord_lirs.read(local, ids).numpy())


@pytest.mark.parametrize("consumed", [0, 1, 200, 449, 450, 451, 899])
def test_checkpoints_restore_exactly(files, tmp_path, consumed):
    local, remote, _ = files
    make = lambda urls: lambda: LIRSDataset(urls, seed=21, page_aware=True,  # noqa: E731
                                            page_size=PAGE).repeat(2)
    rest = _check_restore(make(remote), consumed, tmp_path)
    assert rest == _check_restore(make(local), consumed, tmp_path / "local")
    assert len(rest) == 900 - consumed


def test_build_offset_table_over_ram(files, tmp_path):
    local, remote, _ = files
    url = remote[0]
    tf.io.gfile.remove(url + ".offsets")
    assert tfrecord_lirs.build_offset_table(url) == url + ".offsets"
    with open(local[0] + ".offsets", "rb") as f:
        want = f.read()
    assert tf.io.gfile.GFile(url + ".offsets", "rb").read() == want
    # No temporary object left beside it.
    directory = url.rsplit("/", 1)[0]
    leftovers = [n for n in tf.io.gfile.listdir(directory) if ".lirs-tmp-" in n]
    assert leftovers == []
    # A table of a ram:// file written locally, and one of a local file on ram://.
    out = str(tmp_path / "t.offsets")
    tfrecord_lirs.build_offset_table(url, out)
    assert Path(out).read_bytes() == want
    tfrecord_lirs.build_offset_table(local[0], url + ".copy.offsets")
    assert tf.io.gfile.GFile(url + ".copy.offsets", "rb").read() == want
    tf.io.gfile.remove(url + ".copy.offsets")


def _flip(url, offset):
    data = bytearray(tf.io.gfile.GFile(url, "rb").read())
    data[offset] ^= 0xFF
    # Removed first: TensorFlow's ram:// appends to an existing file opened for writing.
    tf.io.gfile.remove(url)
    with tf.io.gfile.GFile(url, "wb") as f:
        f.write(bytes(data))


def test_damaged_object_is_data_loss_naming_url_instance_byte(files):
    local, remote, recs = files
    offset = sum(12 + len(r) + 4 for r in recs[:42]) + 12 + 3
    _flip(remote[0], offset)
    for batch_size in (None, 16):
        with pytest.raises(tf.errors.DataLossError) as e:
            items(LIRSDataset(remote[0], seed=1, batch_size=batch_size))
        message = e.value.message
        assert remote[0] in message, message
        assert re.search(r"\binstance 42\b", message), message
        assert re.search(r"\bbyte \d+", message), message
    with pytest.raises(tf.errors.DataLossError) as e:
        tfrecord_lirs.read(remote[0], [42])
    assert remote[0] in e.value.message
    with pytest.raises(tf.errors.DataLossError) as e:
        tfrecord_lirs.build_offset_table(remote[0], remote[0] + ".new.offsets")
    assert remote[0] in e.value.message and "byte" in e.value.message
    # Everything else still reads; ignore_errors loses only the damaged instance.
    good = items(LIRSDataset(remote[0], seed=1).ignore_errors())
    assert sorted(good) == sorted(recs[:42] + recs[43:150])


def test_missing_objects_unknown_schemes_and_local_backends(files):
    _, remote, _ = files
    missing = remote[0] + ".nope"
    with pytest.raises(tf.errors.NotFoundError) as e:
        items(LIRSDataset(missing))
    assert missing in e.value.message
    tf.io.gfile.remove(remote[1] + ".offsets")
    with pytest.raises(tf.errors.NotFoundError) as e:
        items(LIRSDataset(remote[1], index_missing=False))
    assert remote[1] + ".offsets" in e.value.message
    assert "build_offset_table" in e.value.message
    # By default the table is built on open, in memory: nothing is written to ram://.
    assert len(items(LIRSDataset(remote[1]))) > 0
    assert not tf.io.gfile.exists(remote[1] + ".offsets")
    with pytest.raises(tf.errors.NotFoundError):
        tfrecord_lirs.build_offset_table(missing)
    # A scheme TensorFlow does not know says so (not "No such file or directory").
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        items(LIRSDataset("nosuchscheme://bucket/x.tfrecord"))
    assert "nosuchscheme" in e.value.message and "not implemented" in e.value.message
    assert "No such file" not in e.value.message
    # Local backends make no sense for a URL.
    for backend in ("pread", "mmap", "direct"):
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            items(LIRSDataset(remote[0], backend=backend))
        assert remote[0] in e.value.message and backend in e.value.message


@pytest.mark.parametrize("fit", ["next", "best"])
def test_padded_writer_and_pad_write_to_ram(tmp_path, fit):
    directory = uuid.uuid4().hex
    recs = payloads(400, seed=4)
    local = str(tmp_path / "w.tfrecord")
    url = f"ram://{directory}/w.tfrecord"
    for path in (local, url):
        # A stale table at the URL is replaced.
        if path == url:
            with tf.io.gfile.GFile(url + ".offsets", "wb") as f:
                f.write(b"stale")
        with tfrecord_lirs.PaddedWriter(path, page_size=PAGE, fit=fit) as w:
            for r in recs:
                w.write(r)
    read = lambda p: tf.io.gfile.GFile(p, "rb").read()  # noqa: E731
    assert read(url) == read(local)
    assert read(url + ".offsets") == read(local + ".offsets")
    assert items(LIRSDataset(url, seed=2, page_size=PAGE)) == \
        items(LIRSDataset(local, seed=2, page_size=PAGE))
    # pad: local -> ram://, ram:// -> ram://.
    src = write_tf(tmp_path / "src.tfrecord", recs)
    src_url = to_ram(src, directory)
    want = str(tmp_path / "padded.tfrecord")
    tfrecord_lirs.pad(src, want, page_size=PAGE, fit=fit)
    for source in (src, src_url):
        dst = f"ram://{directory}/padded-{os.path.basename(source)}"
        # Both sources have one base name: the second pad replaces the first's output.
        tfrecord_lirs.pad(source, dst, page_size=PAGE, fit=fit, overwrite=True)
        assert read(dst) == read(want)
        assert read(dst + ".offsets") == read(want + ".offsets")
    assert [n for n in tf.io.gfile.listdir(f"ram://{directory}") if ".lirs-tmp-" in n] == []
