"""Fast paths of LIRSDataset: parallel reads and in-kernel batches must
yield exactly the sequence of the plain per-element dataset, real TensorFlow."""
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402


def _records(n, seed):
    rng = np.random.default_rng(seed)
    return [b"%06d:" % i + bytes(rng.integers(97, 123, size=int(rng.integers(0, 700)), dtype=np.uint8))
            for i in range(n)]


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    d = tmp_path_factory.mktemp("fast")
    src = str(d / "src.tfrecord")
    recs = _records(1000, 5)
    with tf.io.TFRecordWriter(src) as w:
        for r in recs:
            w.write(r)
    dst = str(d / "padded.tfrecord")
    tfrecord_lirs.pad(src, dst, page_size=4096)
    return dst, recs


def _seq(ds):
    return [x.numpy() for x in ds]


@pytest.mark.parametrize("page_aware", [False, True])
def test_parallel_reads_do_not_change_the_sequence(padded, page_aware):
    path, recs = padded
    reference = _seq(LIRSDataset(path, seed=7, page_aware=page_aware, num_parallel_reads=1))
    assert sorted(reference) == sorted(recs)
    for n in [2, 8, 32, tf.data.AUTOTUNE, None]:
        got = _seq(LIRSDataset(path, seed=7, page_aware=page_aware, num_parallel_reads=n))
        assert got == reference, f"num_parallel_reads={n}"


@pytest.mark.parametrize("batch_size,drop", [(1, False), (64, False), (64, True), (333, False), (5000, False)])
def test_in_kernel_batches_chunk_the_same_sequence(padded, batch_size, drop):
    path, recs = padded
    flat = _seq(LIRSDataset(path, seed=11, page_aware=True))
    ds = LIRSDataset(path, seed=11, page_aware=True, batch_size=batch_size, drop_remainder=drop)
    expected_spec = tf.TensorSpec([batch_size if drop else None], tf.string)
    assert ds.element_spec == expected_spec
    batches = [b.numpy().tolist() for b in ds]
    n = len(recs)
    expected_batches = n // batch_size if drop else -(-n // batch_size)
    assert len(batches) == expected_batches == int(ds.cardinality()) == len(ds)
    assert all(len(b) == batch_size for b in batches[:-1])
    joined = [x for b in batches for x in b]
    assert joined == flat[: len(joined)]
    if not drop:
        assert len(joined) == n


def test_batched_dataset_matches_stock_batch_and_works_in_pipelines(padded):
    path, _ = padded
    stock = [b.numpy().tolist() for b in LIRSDataset(path, seed=3).batch(100)]
    ours = [b.numpy().tolist() for b in LIRSDataset(path, seed=3, batch_size=100)]
    assert ours == stock

    @tf.function
    def total_bytes(ds):
        return ds.reduce(tf.constant(0, tf.int64),
                         lambda acc, b: acc + tf.reduce_sum(tf.cast(tf.strings.length(b), tf.int64)))

    ds = LIRSDataset(path, seed=3, batch_size=100, num_parallel_reads=4).prefetch(2)
    want = sum(len(x) for b in stock for x in b)
    assert int(total_bytes(ds)) == want


@pytest.mark.parametrize("consumed", [0, 1, 4, 9, 10, 13])
def test_batched_checkpoint_restores_the_exact_sequence(padded, tmp_path, consumed):
    path, _ = padded

    def build():
        return LIRSDataset(path, seed=5, page_aware=True, batch_size=100, num_parallel_reads=3).repeat(2)

    it = iter(build())
    for _ in range(consumed):
        next(it)
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / f"c{consumed}"))
    expected = [b.numpy().tolist() for b in it]
    it2 = iter(build())
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [b.numpy().tolist() for b in it2] == expected
    assert len(expected) == 20 - consumed


@pytest.mark.parametrize("page_aware,batch_size", [(False, None), (True, None), (True, 64)])
def test_every_backend_yields_the_same_sequence(padded, page_aware, batch_size):
    path, recs = padded
    seqs = {}
    for backend in ["pread", "mmap", "direct"]:
        ds = LIRSDataset(path, seed=3, page_aware=page_aware, batch_size=batch_size,
                         backend=backend)
        seqs[backend] = _seq(ds) if batch_size is None else [b.numpy().tolist() for b in ds]
    assert seqs["mmap"] == seqs["pread"]
    assert seqs["direct"] == seqs["pread"]
    flat = seqs["pread"] if batch_size is None else sum(seqs["pread"], [])
    assert sorted(flat) == sorted(recs)


def test_bad_fast_path_arguments(padded):
    path, _ = padded
    for bad in ["", "MMAP", "io_uring", None]:
        with pytest.raises(ValueError, match="backend"):
            LIRSDataset(path, backend=bad)
    for bad in [0, -3, 2.5, True]:
        with pytest.raises(ValueError):
            LIRSDataset(path, batch_size=bad)
    for bad in [0, -2, 1.5]:
        with pytest.raises(ValueError):
            LIRSDataset(path, num_parallel_reads=bad)


@pytest.mark.parametrize("backend", ["pread", "mmap"])
def test_damaged_instance_in_a_parallel_window_names_it(tmp_path, backend):
    recs = _records(400, 9)
    src = str(tmp_path / "d.tfrecord")
    with tf.io.TFRecordWriter(src) as w:
        for r in recs:
            w.write(r)
    tfrecord_lirs.build_offset_table(src)
    table = np.fromfile(src + ".offsets", dtype="<u8")
    data = bytearray(Path(src).read_bytes())
    data[int(table[123]) + 12 + 3] ^= 0x40
    Path(src).write_bytes(bytes(data))
    ds = LIRSDataset(src, seed=1, num_parallel_reads=8, backend=backend)
    with pytest.raises(tf.errors.DataLossError, match="instance 123"):
        _seq(ds)
    # Skipping the bad one delivers every other instance exactly once.
    rest = _seq(ds.ignore_errors())
    assert sorted(rest) == sorted(recs[:123] + recs[124:])


@pytest.mark.parametrize("backend,threads", [("auto", None), ("pread", 2), ("mmap", 1)])
def test_batches_stay_intact_while_later_windows_reuse_buffers(padded, backend, threads):
    """In-kernel batches view their payloads in the fetch's buffers (no copy per
    record); a buffer is reused only once no string views it any more. Batches kept
    across the epoch, copies made of their strings downstream (unbatch, slicing,
    string ops), and elements kept after the dataset and its iterator are gone all
    still hold the right bytes, while later windows keep reusing buffers."""
    path, recs = padded
    reference = _seq(LIRSDataset(path, seed=3, num_parallel_reads=1))
    ds = LIRSDataset(path, seed=3, batch_size=32, backend=backend, num_parallel_reads=threads)
    kept = []
    it = iter(ds)
    for k, batch in enumerate(it):
        if k % 3 == 0:
            kept.append((k, batch))  # held while 2 more windows are read after it
    sliced = [(k, batch[5:9]) for k, batch in kept]  # a view of the same buffer in TF
    # Downstream copies of viewed strings (a fresh dataset: the same first epoch).
    elements = list(LIRSDataset(path, seed=3, batch_size=32, backend=backend).unbatch().take(40))
    joined = [tf.strings.join([b, b"!"]) for _, b in kept[:3]]
    del it, ds
    for _ in range(3):  # more epochs of another dataset over the same file
        _seq(LIRSDataset(path, seed=9, batch_size=32, backend=backend))
    for k, batch in kept:
        assert batch.numpy().tolist() == reference[32 * k:32 * (k + 1)], k
    for k, part in sliced:
        assert part.numpy().tolist() == reference[32 * k + 5:32 * k + 9], k
    assert [e.numpy() for e in elements] == reference[:40]
    for (k, _), j in zip(kept[:3], joined):
        assert j.numpy().tolist() == [r + b"!" for r in reference[32 * k:32 * (k + 1)]]
