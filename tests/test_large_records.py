"""Large records through LIRSDataset, real TensorFlow.

Records of 200 KiB are over the size from which an unbatched dataset fetches each
record as a window of its own and hands it out as a view of its fetch buffer (no
copy); batches of 1 MiB records span several fetch windows. Checked here: the payloads
(on every backend, and while later epochs reuse the fetch buffers of elements still
held), a damaged large record (a DataLossError naming file, instance and byte, the
rest of the epoch still delivered), checkpoint and restore in the middle of an epoch,
and a file truncated underneath.
"""
import os
import re
import struct
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from conftest import damaged_copy, read_table  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

ELEMENT_SIZE = 200 << 10  # > the 96 KiB mean span of one-record (view) windows
ELEMENTS = 48


def _write(path, n, size, seed):
    """`n` distinct records of `size` bytes (each starts with its index), indexed."""
    rng = np.random.default_rng(seed)
    recs = [struct.pack("<Q", i) + rng.bytes(size - 8) for i in range(n)]
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in recs:
            w.write(r)
    tfrecord_lirs.build_offset_table(str(path))
    return recs


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    path = tmp_path_factory.mktemp("large") / "large.tfrecord"
    return path, _write(path, ELEMENTS, ELEMENT_SIZE, 1)


def _seq(ds):
    return [x.numpy() for x in ds]


@pytest.mark.parametrize("backend", ["auto", "pread", "mmap"])
def test_large_elements_stay_their_records_while_later_epochs_reuse_buffers(large, backend):
    path, recs = large
    ds = LIRSDataset(str(path), seed=5, backend=backend)
    held = list(ds)  # views of the fetch buffers, kept
    reference = [t.numpy() for t in held]
    assert sorted(reference) == sorted(recs)
    assert reference != recs  # shuffled
    # More epochs of the same dataset (its reader keeps the buffers between epochs),
    # downstream batches (copies of the views), then the held elements again.
    for _ in range(3):
        assert sorted(_seq(ds)) == sorted(recs)
    batched = [b.numpy().tolist() for b in LIRSDataset(str(path), seed=5, backend=backend).batch(7)]
    assert sum(batched, []) == reference
    assert [t.numpy() for t in held] == reference
    # The same sequence as the default backend's.
    assert _seq(LIRSDataset(str(path), seed=5)) == reference


@pytest.mark.parametrize("backend", ["auto", "mmap"])
@pytest.mark.parametrize("batch_size", [None, 8])
def test_a_damaged_large_record_names_file_instance_and_byte(large, tmp_path, backend, batch_size):
    path, recs = large
    damaged = damaged_copy(path, tmp_path / "damaged.tfrecord", 17)
    at = read_table(Path(str(damaged) + ".offsets"))[17]
    ds = LIRSDataset(str(damaged), seed=3, backend=backend, batch_size=batch_size)
    with pytest.raises(tf.errors.DataLossError) as e:
        _seq(ds)
    message = e.value.message
    assert str(damaged) in message, message
    assert f"instance 17 at byte {at}" in message, message
    assert re.search(r"(?i)crc", message), message
    # Skipping it delivers every other record once, intact.
    if batch_size is None:
        rest = _seq(ds.ignore_errors())
    else:
        rest = []
        it = iter(ds)
        while True:
            try:
                rest += next(it).numpy().tolist()
            except tf.errors.DataLossError:
                continue  # the walk goes on after the damaged record
            except StopIteration:
                break
    assert sorted(rest) == sorted(recs[:17] + recs[18:])


@pytest.mark.parametrize("consumed", [0, 1, 20, ELEMENTS - 1, ELEMENTS + 3])
def test_large_elements_checkpoint_and_restore_mid_epoch(large, tmp_path, consumed):
    path, _ = large

    def build():
        return LIRSDataset(str(path), seed=9).repeat(2)

    it = iter(build())
    for _ in range(consumed):
        next(it)
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / f"c{consumed}"))
    expected = [x.numpy() for x in it]
    assert len(expected) == 2 * ELEMENTS - consumed
    it2 = iter(build())
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [x.numpy() for x in it2] == expected


def test_batches_of_1mib_records_span_several_windows(tmp_path):
    # 40 x 1 MiB in batches of 36: a batch (36 MiB) spans more than one fetch window.
    path = tmp_path / "mib.tfrecord"
    recs = _write(path, 40, 1 << 20, 2)
    flat = _seq(LIRSDataset(str(path), seed=4))
    ds = LIRSDataset(str(path), seed=4, batch_size=36)
    held = [b for b in ds]
    assert [len(b) for b in held] == [36, 4]
    assert sum((b.numpy().tolist() for b in held), []) == flat
    assert sorted(flat) == sorted(recs)
    for _ in range(2):  # later epochs reuse the buffers the held batches do not view
        assert sorted(sum((b.numpy().tolist() for b in ds), [])) == sorted(recs)
    assert sum((b.numpy().tolist() for b in held), []) == flat
    # Checkpoint after the first batch, restore into a new iterator.
    it = iter(ds)
    first = next(it).numpy().tolist()
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
    expected = [b.numpy().tolist() for b in it]
    assert [len(b) for b in expected] == [4]
    assert sorted(first + expected[0]) == sorted(recs)
    it2 = iter(ds)
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [b.numpy().tolist() for b in it2] == expected


def test_large_file_truncated_underneath_is_data_loss(tmp_path):
    path = tmp_path / "t.tfrecord"
    recs = _write(path, 120, ELEMENT_SIZE, 3)  # more than the 8 records read ahead
    it = iter(LIRSDataset(str(path), seed=2))
    got = [next(it).numpy() for _ in range(3)]
    os.truncate(path, os.path.getsize(path) // 2)
    with pytest.raises(tf.errors.DataLossError, match="t.tfrecord: instance") as e:
        for x in it:
            got.append(x.numpy())
    assert re.search(r"byte \d+", e.value.message), e.value.message
    assert len(got) < len(recs)
    assert set(got) <= set(recs)  # whatever was delivered before is intact
