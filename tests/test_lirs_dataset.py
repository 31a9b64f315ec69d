"""LIRSDataset and the tfrecord_lirs Python package against real TensorFlow.

Needs python/tfrecord_lirs/_lirs_ops.so (`make -C tf_op`). No mocks: files are
written with tf.io.TFRecordWriter or the package's own writers, and read back
through the op library.
"""

import collections
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402
from fault_injection import run_faulty  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

PAGE = 512


def payloads(n, seed=0, max_len=120):
    rng = np.random.default_rng(seed)
    return [b"%06d:" % i + bytes(rng.integers(97, 123, size=int(rng.integers(0, max_len)),
                                              dtype=np.uint8))
            for i in range(n)]


def write_tf(path, records):
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


def items(ds):
    """The elements of `ds`: payloads, and in-kernel batches as tuples of them
    (hashable, comparable)."""
    return [x.numpy() if x.shape.rank == 0 else tuple(x.numpy()) for x in ds]


def multiset(values):
    return collections.Counter(values)


@pytest.fixture(autouse=True)
def no_global_seed():
    """Tests that set the global seed must not leak it into others."""
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)


@pytest.fixture
def tf_file(tmp_path):
    recs = payloads(150)
    path = write_tf(tmp_path / "plain.tfrecord", recs)
    tfrecord_lirs.build_offset_table(path)
    return path, recs


@pytest.fixture
def padded_file(tmp_path):
    recs = payloads(300, seed=1)
    src = write_tf(tmp_path / "src.tfrecord", recs)
    dst = str(tmp_path / "padded.tfrecord")
    tfrecord_lirs.pad(src, dst, page_size=PAGE)
    return dst, recs


# ---------------------------------------------------------------- contents

def test_same_multiset_as_tfrecorddataset_tf_written(tf_file):
    path, recs = tf_file
    got = items(LIRSDataset(path, seed=3))
    assert multiset(got) == multiset(items(tf.data.TFRecordDataset(path)))
    assert multiset(got) == multiset(recs)
    assert got != recs  # shuffled


def test_same_multiset_on_padded_file_and_no_fillers(padded_file):
    path, recs = padded_file
    raw = items(tf.data.TFRecordDataset(path))
    fillers = [r for r in raw if tfrecord_lirs.is_filler(r).numpy()]
    assert fillers, "padding at 512-byte pages should have inserted filler records"
    assert multiset(items(LIRSDataset(path, seed=4))) == multiset(recs)
    assert multiset(items(LIRSDataset(path, seed=4, page_aware=True, page_size=PAGE))) \
        == multiset(recs)
    # stock_dataset: plain TFRecordDataset minus fillers, file order (next fit).
    assert items(tfrecord_lirs.stock_dataset(path)) == recs
    assert not any(tfrecord_lirs.is_filler(recs[:20]).numpy())


def test_multiple_files_one_id_space(tmp_path):
    a = payloads(40, seed=2)
    b = payloads(25, seed=3)
    fa = write_tf(tmp_path / "a.tfrecord", a)
    fb = str(tmp_path / "b.tfrecord")
    with tfrecord_lirs.PaddedWriter(fb, page_size=PAGE) as w:
        ids = [w.write(r) for r in b]
    assert ids == list(range(len(b)))
    table_a = tfrecord_lirs.build_offset_table(fa, str(tmp_path / "a.idx"))
    ds = LIRSDataset([fa, fb], offset_tables=[table_a, fb + ".offsets"], seed=1)
    assert len(ds) == 65
    assert multiset(items(ds)) == multiset(a + b)
    got = tfrecord_lirs.read([fa, fb], [0, 39, 40, 64, 3, 3], offset_tables=[table_a, fb + ".offsets"])
    assert got.dtype == tf.string and got.shape == [6]
    assert list(got.numpy()) == [a[0], a[39], b[0], b[24], a[3], a[3]]


def test_read_returns_requested_payloads(tf_file):
    path, recs = tf_file
    ids = [5, 0, 149, 77, 5]
    assert list(tfrecord_lirs.read(path, ids).numpy()) == [recs[i] for i in ids]
    assert tfrecord_lirs.read([path], tf.constant([], tf.int64)).shape == [0]
    with pytest.raises(tf.errors.InvalidArgumentError):
        tfrecord_lirs.read(path, [150])
    # Inside a graph too.
    f = tf.function(lambda i: tfrecord_lirs.read([path], i))
    assert list(f(tf.constant([1, 2], tf.int64)).numpy()) == recs[1:3]


def test_best_fit_writer_ids(tmp_path):
    path = str(tmp_path / "best.tfrecord")
    recs = payloads(60, seed=9, max_len=300)
    w = tfrecord_lirs.PaddedWriter(path, page_size=PAGE, fit="best")
    for r in recs:
        w.write(r)
    summary = w.close()
    assert summary.instances == 60
    mapping = w.instance_ids
    assert sorted(mapping) == list(range(60))
    got = tfrecord_lirs.read(path, mapping).numpy()
    assert list(got) == recs


# ---------------------------------------------------------------- order

def test_reshuffle_each_iteration(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path, seed=11)
    e1, e2 = items(ds), items(ds)
    assert e1 != e2 and multiset(e1) == multiset(e2)
    ds = LIRSDataset(path, seed=11, reshuffle_each_iteration=False)
    assert items(ds) == items(ds)
    # Through repeat(): each pass is a new iteration.
    both = items(LIRSDataset(path, seed=11).repeat(2))
    assert both[:150] != both[150:]
    assert items(LIRSDataset(path, seed=11, reshuffle_each_iteration=False).repeat(2))[150:] \
        == items(LIRSDataset(path, seed=11, reshuffle_each_iteration=False))


def test_global_seed_is_honoured(tf_file):
    path, _ = tf_file
    tf.random.set_seed(123)
    a = items(LIRSDataset(path))
    tf.random.set_seed(123)
    b = items(LIRSDataset(path))
    assert a == b
    c = items(LIRSDataset(path, seed=5))
    d = items(LIRSDataset(path, seed=6))
    assert c != d


def _order_in_subprocess(path, script):
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        sys.path.insert(0, {str(REPO / 'python')!r})
        import tensorflow as tf
        import tfrecord_lirs
        path = {path!r}
    """) + textwrap.dedent(script)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                         timeout=300)
    return out.stdout.decode().split()


def test_fixed_seed_same_order_in_another_process(tf_file):
    path, recs = tf_file
    here = [r[:6].decode() for r in items(LIRSDataset(path, seed=2024))]
    script = """
        ds = tfrecord_lirs.LIRSDataset(path, seed=2024)
        print(" ".join(x.numpy()[:6].decode() for x in ds))
    """
    assert _order_in_subprocess(path, script) == here
    # Global seed only: two fresh processes agree (epoch 1 and epoch 2).
    script = """
        tf.random.set_seed(77)
        ds = tfrecord_lirs.LIRSDataset(path)
        for _ in range(2):
            print(" ".join(x.numpy()[:6].decode() for x in ds))
    """
    p1 = _order_in_subprocess(path, script)
    p2 = _order_in_subprocess(path, script)
    assert p1 == p2 and p1[:150] != p1[150:]


def test_page_aware_keeps_pages_contiguous(tmp_path):
    recs = payloads(400, seed=5, max_len=60)
    path = str(tmp_path / "small.tfrecord")
    with tfrecord_lirs.PaddedWriter(path, page_size=PAGE) as w:
        for r in recs:
            w.write(r)
    offsets = np.fromfile(path + ".offsets", dtype="<u8")
    page_of = {recs[i]: int(offsets[i]) // PAGE for i in range(len(recs))}
    assert len(set(page_of.values())) > 20
    for seed in (1, 2):
        order = items(LIRSDataset(path, page_aware=True, seed=seed, page_size=PAGE))
        assert multiset(order) == multiset(recs)
        pages = [page_of[r] for r in order]
        runs = [p for i, p in enumerate(pages) if i == 0 or pages[i - 1] != p]
        assert len(runs) == len(set(runs)), "a page's instances were split"
        # Pages themselves are shuffled.
        assert runs != sorted(runs)


def test_shards_disjoint_and_complete(padded_file):
    path, recs = padded_file
    for page_aware in (False, True):
        shards = []
        for i in range(3):
            ds = LIRSDataset(path, seed=8, page_aware=page_aware, num_shards=3, shard_index=i,
                             page_size=PAGE)
            got = items(ds)
            assert len(ds) == len(got) == int(ds.cardinality())
            shards.append(got)
        flat = [r for s in shards for r in s]
        assert len(flat) == len(set(flat)) == len(recs)
        assert set(flat) == set(recs)


def test_cardinality(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path)
    assert len(ds) == 150 and int(ds.cardinality()) == 150
    assert int(ds.repeat(3).cardinality()) == 450
    assert int(ds.batch(7).cardinality()) == 22


# ---------------------------------------------------------------- tf.data integration

def test_works_in_tf_function_and_pipelines(tf_file):
    path, recs = tf_file

    @tf.function
    def count_bytes():
        ds = LIRSDataset(path, seed=1)
        total = tf.constant(0, tf.int64)
        for x in ds:
            total += tf.cast(tf.strings.length(x), tf.int64)
        return total

    assert int(count_bytes()) == sum(len(r) for r in recs)

    ds = (LIRSDataset(path, seed=2)
          .map(tf.strings.length, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(16)
          .prefetch(2))
    assert sorted(np.concatenate(items(ds)).tolist()) == sorted(len(r) for r in recs)

    files = tf.data.Dataset.from_tensor_slices([path, path])
    ds = files.interleave(lambda f: LIRSDataset(f, seed=3), cycle_length=2,
                          num_parallel_calls=2)
    assert multiset(items(ds)) == multiset(recs + recs)


def test_distribute_datasets_from_function(padded_file):
    path, recs = padded_file

    def dataset_fn(ctx):
        return LIRSDataset(path, seed=9, num_shards=ctx.num_input_pipelines,
                           shard_index=ctx.input_pipeline_id).batch(10)

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    dist = strategy.distribute_datasets_from_function(dataset_fn)
    got = [r for batch in dist for r in batch.numpy()]
    assert multiset(got) == multiset(recs)

    shards = [items(dataset_fn(tf.distribute.InputContext(2, i, 1)).unbatch()) for i in range(2)]
    assert not set(shards[0]) & set(shards[1])
    assert set(shards[0]) | set(shards[1]) == set(recs)


def test_graph_def_roundtrip(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path, seed=5)
    graph = ds._as_serialized_graph().numpy()  # pylint: disable=protected-access
    assert b"LIRSDataset" in graph
    # Options force a rewrite (serialize + rebuild) of the pipeline.
    opts = tf.data.Options()
    opts.experimental_optimization.map_parallelization = True
    opts.experimental_deterministic = False
    rebuilt = ds.map(lambda x: x).with_options(opts)
    e1, e2 = items(rebuilt), items(rebuilt)
    assert multiset(e1) == multiset(e2) and e1 != e2


def test_a_graph_saved_before_the_cache_attrs_still_loads(tf_file):
    # A LIRSDataset node as graphs and SavedModels written before `cache_dir` and
    # `cache_bytes` existed hold it: the registration's defaults fill them in.
    from tensorflow.python.data.ops import dataset_ops
    from tensorflow.python.ops import gen_experimental_dataset_ops

    path, recs = tf_file
    ds = LIRSDataset(path, seed=5)
    graph = tf.compat.v1.GraphDef.FromString(
        ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
    [node] = [n for n in graph.node if n.op == "LIRSDataset"]
    del node.attr["cache_dir"]
    del node.attr["cache_bytes"]
    old = dataset_ops._VariantDataset(  # pylint: disable=protected-access
        gen_experimental_dataset_ops.dataset_from_graph(graph.SerializeToString()),
        ds.element_spec)
    assert multiset(items(old)) == multiset(recs)


# ---------------------------------------------------------------- checkpoints

def _symbolic(ds, symbolic):
    """`ds` with symbolic checkpointing on, if `symbolic`."""
    if not symbolic:
        return ds
    opts = tf.data.Options()
    opts.experimental_symbolic_checkpoint = True
    return ds.with_options(opts)


def _check_restore(make_ds, consumed, tmp_path, symbolic=False):
    def build():
        return _symbolic(make_ds(), symbolic)

    ds = build()
    it = iter(ds)
    for _ in range(consumed):
        next(it)
    ckpt = tf.train.Checkpoint(iterator=it)
    prefix = ckpt.save(str(tmp_path / f"ckpt_{consumed}_{symbolic}"))
    expected = [x.numpy() for x in it]

    # A fresh iterator of the same dataset object...
    it2 = iter(ds)
    next(it2)  # advance it first: restore must override everything
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [x.numpy() for x in it2] == expected
    # ...and of a freshly built dataset.
    it3 = iter(build())
    tf.train.Checkpoint(iterator=it3).restore(prefix).assert_consumed()
    assert [x.numpy() for x in it3] == expected
    return expected


@pytest.mark.parametrize("consumed", [0, 1, 75, 149, 150, 151, 220, 299])
def test_checkpoint_restores_exact_sequence(tf_file, tmp_path, consumed):
    path, _ = tf_file
    n = 150
    rest = _check_restore(lambda: LIRSDataset(path, seed=21).repeat(2), consumed, tmp_path)
    assert len(rest) == 2 * n - consumed


@pytest.mark.parametrize("consumed", [0, 1, 40, 149, 150])
def test_checkpoint_single_epoch_and_options(tf_file, tmp_path, consumed):
    path, _ = tf_file
    rest = _check_restore(lambda: LIRSDataset(path, seed=3, page_aware=True), consumed, tmp_path)
    assert len(rest) == 150 - consumed
    rest = _check_restore(
        lambda: LIRSDataset(path, seed=3, num_shards=2, shard_index=1,
                            reshuffle_each_iteration=False).repeat(3),
        consumed, tmp_path, symbolic=True)
    assert len(rest) == 225 - consumed


# ---------------------------------------------------------------- errors

def _corrupt(path, recs, index):
    """Flips one payload byte of record `index` in a TF-written file."""
    offset = sum(12 + len(r) + 4 for r in recs[:index]) + 12 + 3
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def _assert_names_damage(message, path, instance):
    assert re.search(rf"\binstance {instance}\b", message), message
    assert os.path.basename(path) in message, message
    assert re.search(r"\bbyte \d+", message), message


def test_damaged_payload_is_data_loss_naming_instance(tf_file):
    path, recs = tf_file
    _corrupt(path, recs, 42)
    for batch_size in (None, 16):
        with pytest.raises(tf.errors.DataLossError) as e:
            items(LIRSDataset(path, seed=1, batch_size=batch_size))
        _assert_names_damage(e.value.message, path, 42)
    with pytest.raises(tf.errors.DataLossError) as e:
        tfrecord_lirs.read(path, [42])
    _assert_names_damage(e.value.message, path, 42)
    # Other instances still read, and the process is fine.
    assert list(tfrecord_lirs.read(path, [41, 43]).numpy()) == [recs[41], recs[43]]
    good = items(LIRSDataset(path, seed=1).ignore_errors())
    assert multiset(good) == multiset(recs[:42] + recs[43:])


@pytest.mark.parametrize("batch_size,drop", [(None, False), (1, False), (16, False),
                                             (64, False), (7, True)])
def test_ignore_errors_loses_only_the_damaged_instance(tf_file, batch_size, drop):
    # A read error in the middle of an in-kernel batch must not drop the good
    # payloads collected before it: exactly N-1 instances come out, in the
    # order's sequence minus the damaged one.
    path, recs = tf_file
    reference = items(LIRSDataset(path, seed=13))
    _corrupt(path, recs, 42)
    ds = LIRSDataset(path, seed=13, batch_size=batch_size, drop_remainder=drop)
    got = items(ds.ignore_errors())
    if batch_size is not None:
        assert all(len(b) == batch_size for b in got[:-1])
        if drop:
            assert len(got[-1]) == batch_size
        got = [r for b in got for r in b]
    expected = [r for r in reference if r != recs[42]]
    if drop:
        expected = expected[:len(expected) // batch_size * batch_size]
    assert got == expected
    assert len(got) == (149 if not drop else 147)


def test_missing_files_and_bad_tables(tmp_path, tf_file):
    path, _ = tf_file
    with pytest.raises(tf.errors.NotFoundError):
        LIRSDataset(str(tmp_path / "nope.tfrecord"))
    with pytest.raises(tf.errors.NotFoundError):
        LIRSDataset(path, offset_tables=[str(tmp_path / "nope.offsets")], index_missing=False)
    with pytest.raises(tf.errors.NotFoundError):
        tfrecord_lirs.read(str(tmp_path / "nope.tfrecord"), [0])
    with pytest.raises(tf.errors.NotFoundError):
        tfrecord_lirs.build_offset_table(str(tmp_path / "nope.tfrecord"))
    with pytest.raises(tf.errors.NotFoundError):
        tfrecord_lirs.pad(str(tmp_path / "nope.tfrecord"), str(tmp_path / "out"))
    # A table built for a different file does not fit this one.
    other = write_tf(tmp_path / "other.tfrecord", payloads(500, seed=7))
    wrong = tfrecord_lirs.build_offset_table(other, str(tmp_path / "other.offsets"))
    with pytest.raises(tf.errors.InvalidArgumentError):
        LIRSDataset(path, offset_tables=[wrong])
    # Garbage table.
    junk = tmp_path / "junk.offsets"
    junk.write_bytes(b"\x01\x02\x03")
    with pytest.raises(tf.errors.InvalidArgumentError):
        LIRSDataset(path, offset_tables=[str(junk)])
    assert len(LIRSDataset(path)) == 150  # still alive and well


def test_bad_arguments(tmp_path, tf_file):
    path, _ = tf_file
    with pytest.raises(ValueError, match="shard_index"):
        LIRSDataset(path, num_shards=2, shard_index=2)
    with pytest.raises(ValueError, match="num_shards"):
        LIRSDataset(path, num_shards=0)

    @tf.function
    def make(n, i):
        return LIRSDataset(path, num_shards=n, shard_index=i).cardinality()

    with pytest.raises(tf.errors.InvalidArgumentError, match="shard_index"):
        make(tf.constant(2, tf.int64), tf.constant(5, tf.int64))
    assert int(make(tf.constant(2, tf.int64), tf.constant(1, tf.int64))) == 75

    for bad in (0, 1000, 100, -4096, 1 << 30, "4096"):
        with pytest.raises(ValueError, match="page_size"):
            tfrecord_lirs.PaddedWriter(str(tmp_path / "x"), page_size=bad)
        with pytest.raises(ValueError, match="page_size"):
            tfrecord_lirs.pad(path, str(tmp_path / "y"), page_size=bad)
    with pytest.raises(ValueError, match="fit"):
        tfrecord_lirs.PaddedWriter(str(tmp_path / "x"), fit="worst")
    with pytest.raises(ValueError):
        LIRSDataset(path, offset_tables=["a", "b"])


# ---------------------------------------------------------------- the Python contract

def test_is_a_dataset_with_the_right_spec(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path)
    assert isinstance(ds, tf.data.Dataset)
    assert ds.element_spec == tf.TensorSpec([], tf.string)
    assert LIRSDataset(path, batch_size=8).element_spec == tf.TensorSpec([None], tf.string)
    spec = LIRSDataset(path, batch_size=8, drop_remainder=True).element_spec
    assert spec == tf.TensorSpec([8], tf.string)
    # The spec matches what comes out.
    b = next(iter(LIRSDataset(path, batch_size=8, drop_remainder=True)))
    assert b.dtype == tf.string and b.shape == [8]


def test_name_is_used_in_the_graph(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path, seed=1, name="my_lirs_source")
    assert len(items(ds)) == 150
    graph = ds._as_serialized_graph().numpy()  # pylint: disable=protected-access
    assert b"my_lirs_source" in graph
    assert b"my_lirs_source" not in LIRSDataset(path, seed=1)._as_serialized_graph().numpy()


def test_reshuffle_each_iteration_none_means_true(tf_file):
    path, _ = tf_file
    ds = LIRSDataset(path, seed=11, reshuffle_each_iteration=None)
    e1, e2 = items(ds), items(ds)
    assert e1 != e2 and multiset(e1) == multiset(e2)
    assert e1 == items(LIRSDataset(path, seed=11, reshuffle_each_iteration=True))


def test_is_filler_returns_bool(padded_file):
    path, recs = padded_file
    out = tfrecord_lirs.is_filler(recs[0])
    assert out.dtype == tf.bool and out.shape == []
    out = tfrecord_lirs.is_filler([recs[0], b"\x00LIRSPAD" + b"\x00" * 4])
    assert out.dtype == tf.bool and list(out.numpy()) == [False, True]


def test_no_seed_no_global_seed_gives_different_orders(tf_file):
    path, _ = tf_file
    a = items(LIRSDataset(path))
    b = items(LIRSDataset(path))
    assert multiset(a) == multiset(b) and a != b


@pytest.mark.parametrize("bad", [0, 1000, 100, -4096, 1 << 30, "4096", True])
def test_bad_page_size_is_value_error(tf_file, bad):
    path, _ = tf_file
    with pytest.raises(ValueError, match="page_size"):
        LIRSDataset(path, page_size=bad)
    with pytest.raises(ValueError, match="page_size"):
        tfrecord_lirs.read(path, [0], page_size=bad)


def test_build_offset_table_default_path(tmp_path):
    recs = payloads(20)
    path = write_tf(tmp_path / "t.tfrecord", recs)
    assert tfrecord_lirs.build_offset_table(path) == path + ".offsets"
    assert tfrecord_lirs.build_offset_table(Path(path)) == path + ".offsets"
    assert tfrecord_lirs.build_offset_table(os.fsencode(path)) == path + ".offsets"
    assert os.path.getsize(path + ".offsets") == 8 * 20
    table = tfrecord_lirs.build_offset_table(os.fsencode(path), os.fsencode(path + ".idx"))
    assert table == path + ".idx" and os.path.getsize(table) == 8 * 20
    assert list(tfrecord_lirs.read(path, [19]).numpy()) == [recs[19]]


def test_save_and_load_round_trip(tf_file, tmp_path):
    path, recs = tf_file
    ds = LIRSDataset(path, seed=4, reshuffle_each_iteration=False)
    order = items(ds)
    target = str(tmp_path / "saved")
    ds.save(target)
    loaded = tf.data.Dataset.load(target)
    assert loaded.element_spec == tf.TensorSpec([], tf.string)
    assert multiset(items(loaded)) == multiset(recs)
    assert sorted(items(loaded)) == sorted(order)


@pytest.mark.parametrize("kwargs", [
    dict(page_aware=True, page_size=PAGE),
    dict(num_shards=3, shard_index=1),
    dict(batch_size=16),
    dict(page_aware=True, page_size=PAGE, num_shards=2, shard_index=0, batch_size=5),
])
def test_rewritten_graph_gives_the_identical_sequence(padded_file, kwargs):
    # A graph rewrite serializes the pipeline and rebuilds the dataset from
    # the graph: with a fixed seed, the same sequence, element for element.
    path, _ = padded_file

    def seq(ds):
        return [x.numpy().tolist() if x.shape.rank else x.numpy() for x in ds]

    plain = tf.data.Options()
    plain.experimental_optimization.apply_default_optimizations = False
    reference = seq(LIRSDataset(path, seed=17, **kwargs).map(lambda x: x).with_options(plain))
    rewrite = tf.data.Options()
    rewrite.experimental_optimization.map_parallelization = True
    rewrite.experimental_optimization.noop_elimination = True
    rewritten = LIRSDataset(path, seed=17, **kwargs).map(lambda x: x).with_options(rewrite)
    assert seq(rewritten) == reference
    # Two epochs of the rewritten pipeline still reshuffle.
    assert seq(rewritten) != reference


@pytest.mark.parametrize("consumed", [0, 1, 75, 150, 151, 299])
def test_symbolic_checkpoint_with_reshuffling(tf_file, tmp_path, consumed):
    path, _ = tf_file
    rest = _check_restore(lambda: LIRSDataset(path, seed=31).repeat(2), consumed, tmp_path,
                          symbolic=True)
    assert len(rest) == 300 - consumed
    # Both epochs of the restored sequence are full, distinct orders.
    first_epoch_left = max(0, 150 - consumed)
    if consumed < 150:
        assert len(set(rest[first_epoch_left:])) == 150


@pytest.mark.parametrize("symbolic", [False, True])
def test_restore_finish_epoch_then_new_epoch(tf_file, tmp_path, symbolic):
    path, _ = tf_file

    def build():
        return _symbolic(LIRSDataset(path, seed=41), symbolic)

    ds = build()
    it = iter(ds)
    head = [next(it).numpy() for _ in range(60)]
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "ckpt"))
    rest = [x.numpy() for x in it]
    next_epoch = items(ds)
    assert multiset(head + rest) == multiset(next_epoch) and head + rest != next_epoch

    ds2 = build()
    it2 = iter(ds2)
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [x.numpy() for x in it2] == rest
    assert items(ds2) == next_epoch


def test_read_in_a_checkpointed_map_pipeline(tf_file, tmp_path):
    # LIRSRead is stateful (never constant-folded) but allowlisted for dataset
    # functions: a pipeline mapping it can be saved and restored.
    path, recs = tf_file
    ids = tf.data.Dataset.range(150).shuffle(150, seed=3, reshuffle_each_iteration=False)
    ds = ids.batch(10).map(lambda i: tfrecord_lirs.read([path], i))
    it = iter(ds)
    for _ in range(4):
        next(it)
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "map_ckpt"))
    expected = [b.numpy().tolist() for b in it]
    assert len(expected) == 11
    it2 = iter(ds)
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    assert [b.numpy().tolist() for b in it2] == expected
    order = list(ids.as_numpy_iterator())
    assert [r for b in expected for r in b] == [recs[i] for i in order[40:]]


def test_read_picks_up_a_rewritten_file_and_table(tmp_path):
    # The kernel caches opened readers; a file rewritten with a new table must
    # not be read through the stale one.
    path = str(tmp_path / "r.tfrecord")
    old = payloads(30, seed=1)
    write_tf(path, old)
    tfrecord_lirs.build_offset_table(path)
    read = tf.function(lambda i: tfrecord_lirs.read([path], i))
    ids = tf.constant([0, 29, 7], tf.int64)
    for _ in range(3):
        assert list(read(ids).numpy()) == [old[0], old[29], old[7]]
    new = payloads(40, seed=2, max_len=300)
    write_tf(path, new)
    tfrecord_lirs.build_offset_table(path)
    assert list(read(ids).numpy()) == [new[0], new[29], new[7]]
    assert list(tfrecord_lirs.read(path, [39]).numpy()) == [new[39]]


def test_rust_panic_becomes_internal_error(tf_file):
    # The op LIRSTestOnlyPanic is only in the test build of the op library, loaded
    # in a child process (tests/fault_injection.py).
    path, recs = tf_file
    lines = run_faulty("""
        for _ in range(3):
            message = expect(tf.errors.InternalError, lambda: only_panic("on purpose"))
            assert re.search("panic.*on purpose", message), message
        # The process and the library keep working.
        assert list(tfrecord_lirs.read(path, [0]).numpy()) == [first]
        print("READ", len([x.numpy() for x in LIRSDataset(path)]))
    """, path=path, first=recs[0])
    assert "READ 150" in lines


# ---------------------------------------------------------------- order versions

@pytest.mark.parametrize("consumed", [0, 37, 150, 151])
def test_order_version_2_epochs_and_checkpoints(tf_file, tmp_path, consumed):
    path, payloads = tf_file
    for page_aware in (False, True):
        ds = LIRSDataset(path, seed=5, page_aware=page_aware, order_version=2)
        e1, e2 = items(ds), items(ds)
        assert multiset(e1) == multiset(e2) == multiset(payloads)
        assert e1 != e2  # reshuffled every iteration, as version 1
    rest = _check_restore(lambda: LIRSDataset(path, seed=21, order_version=2).repeat(2),
                          consumed, tmp_path)
    assert len(rest) == 300 - consumed
    # Version 1 and 2 walk different orders from the same seeds.
    fixed = dict(seed=9, reshuffle_each_iteration=False)
    assert items(LIRSDataset(path, **fixed)) != items(LIRSDataset(path, order_version=2, **fixed))


def test_a_checkpoint_restores_only_into_its_order_version(tf_file, tmp_path):
    path, _ = tf_file
    it = iter(LIRSDataset(path, seed=4, order_version=2))
    next(it)
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "v2"))
    other = iter(LIRSDataset(path, seed=4))  # version 1
    with pytest.raises(tf.errors.DataLossError, match="order version 2"):
        tf.train.Checkpoint(iterator=other).restore(prefix).assert_consumed()
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="order version must be 1 or 2"):
        LIRSDataset(path, order_version=3)
