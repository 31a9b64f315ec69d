"""Data refurbishing as a tf.data.Dataset (`tfrecord_lirs.refurbish`): stateless seeds
from the core's schedule, a parallel map in the schedule's order, a store that is only a
memo (docs/FORMAT.md §7)."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import tfrecord_lirs
from tfrecord_lirs import errors
from tfrecord_lirs.refurbish_tf import refurbish

N, EPOCHS = 24, 4


@pytest.fixture()
def files(tmp_path):
    path = tmp_path / "d.tfrecord"
    with tfrecord_lirs.PaddedWriter(str(path)) as w:
        for i in range(N):
            w.write(np.full(16, i, np.uint8).tobytes())
    return [str(path)]


def make_partial(log):
    """A partial function (TensorFlow ops) that appends the record's id to `log` (one
    line per call; appends of one short line from several processes do not
    interleave)."""
    def note(record):
        # bytes in a graph, a 0-d array eagerly (a plain-Python job's).
        data = record.item() if isinstance(record, np.ndarray) else record
        with open(log, "a") as f:
            f.write(f"{data[0]}\n")
        return np.int64(0)

    def partial(record, seed):
        x = tf.reshape(tf.io.decode_raw(record, tf.uint8), [4, 4, 1])
        n = tf.numpy_function(note, [record], tf.int64)
        with tf.control_dependencies([n]):
            x = tf.image.stateless_random_flip_left_right(x, seed)
            noise = tf.random.stateless_uniform([4, 4, 1], seed, maxval=900, dtype=tf.int32)
        return tf.cast(x, tf.int32) * 1000 + noise

    return partial


def final(sample, seed):
    return sample + tf.random.stateless_uniform(tf.shape(sample), seed, maxval=7,
                                                dtype=tf.int32)


def calls(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


def test_partial_runs_once_per_refresh_and_the_store_is_a_memo(files, tmp_path):
    log = str(tmp_path / "a.log")
    # One call in flight: a parallel map may recompute a refresh still in flight at an
    # epoch boundary (the refurbish docstring), which the exact count below excludes.
    ds = refurbish(files, make_partial(log), final, seed=3, reuse_factor=3, batch_size=6,
                   store=str(tmp_path / "store"), epochs=EPOCHS, num_parallel_calls=1)
    got = [x.numpy() for x in ds]
    assert len(got) == EPOCHS * N
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=3, reuse_factor=3, batch_size=6)
    refreshes = [schedule.refreshes(e) for e in range(EPOCHS)]
    assert calls(log) == sum(refreshes)
    # Each element is its id's: the partial output's high part is the record's value.
    ids = [i for e in range(EPOCHS) for i in schedule.epoch(e)[0].tolist()]
    assert [int(x[0, 0, 0]) // 1000 for x in got] == ids
    # Without the store (deleted), the same elements; every use then recomputes.
    shutil.rmtree(tmp_path / "store")
    log2 = str(tmp_path / "b.log")
    again = refurbish(files, make_partial(log2), final, seed=3, reuse_factor=3, batch_size=6,
                      store=str(tmp_path / "store"), epochs=EPOCHS)
    assert all((a == b).all() for a, b in zip(got, [x.numpy() for x in again]))
    # A second job on the same store computes none of the partial outputs the first
    # one stored (the last generation of every id), and gives the same elements.
    log3 = str(tmp_path / "c.log")
    third = refurbish(files, make_partial(log3), final, seed=3, reuse_factor=3,
                      batch_size=6, store=str(tmp_path / "store"), epochs=1,
                      start_epoch=EPOCHS - 1)
    assert all((a == b.numpy()).all() for a, b in zip(got[-N:], third))
    assert calls(log3) == 0


def test_a_store_in_memory_is_one_store_for_the_pipeline(files, tmp_path):
    """store=None: the lookup and keep kernels (and every parallel call's) share this
    pipeline's store, so partial runs once per refresh, and two pipelines do not share."""
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=3, reuse_factor=3, batch_size=6)
    for job in ("a", "b"):
        log = str(tmp_path / f"{job}.log")
        ds = refurbish(files, make_partial(log), final, seed=3, reuse_factor=3,
                       batch_size=6, epochs=EPOCHS, num_parallel_calls=1)
        assert len(list(ds)) == EPOCHS * N
        assert calls(log) == sum(schedule.refreshes(e) for e in range(EPOCHS))


def test_a_kernel_error_is_a_typed_error_naming_the_file(files, tmp_path):
    """The kernels' errors cross the bridge as statuses: the data file gone after the
    dataset was made is NotFound naming it when the kernels open it."""
    ds = refurbish(files, pure_partial, final, seed=3, reuse_factor=2, batch_size=6,
                   epochs=1)
    os.remove(files[0])
    with pytest.raises(tf.errors.NotFoundError, match="d.tfrecord"):
        list(ds)


def test_a_wrong_reuse_factor_or_store_is_refused(files):
    with pytest.raises(errors.InvalidArgumentError, match="reuse_factor"):
        refurbish(files, make_partial("/dev/null"), final, reuse_factor=0)
    # Not a store in memory, nor one in the working directory: a mistake.
    with pytest.raises(errors.InvalidArgumentError, match="empty path"):
        refurbish(files, make_partial("/dev/null"), final, store="")


def test_an_iterator_checkpoint_resumes_exactly(files, tmp_path):
    def make():
        return refurbish(files, make_partial(str(tmp_path / "l.log")), final, seed=5,
                         reuse_factor=2, batch_size=4, store=str(tmp_path / "store"),
                         epochs=3).batch(4)

    whole = [b.numpy() for b in make()]
    it = iter(make())
    head = [next(it).numpy() for _ in range(7)]
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "ckpt"))
    resumed = iter(make())
    tf.train.Checkpoint(iterator=resumed).restore(path)
    rest = [b.numpy() for b in resumed]
    assert len(head) + len(rest) == len(whole)
    assert all((a == b).all() for a, b in zip(head + rest, whole))


def test_shards_take_their_own_ids(files, tmp_path):
    seen = []
    for k in range(2):
        ds = refurbish(files, make_partial(str(tmp_path / "l.log")), final, seed=5,
                       reuse_factor=2, batch_size=4, num_shards=2, shard_index=k, epochs=2)
        seen.append([int(x[0, 0, 0]) // 1000 for x in ds])
    assert sorted(seen[0][:N // 2] + seen[1][:N // 2]) == list(range(N))
    assert sorted(seen[0][:N // 2]) == sorted(seen[0][N // 2:])  # fixed ids per shard


def test_the_guides_refurbish_snippet_and_its_stock_pipeline_run_as_written(tmp_path):
    # The refurbishing guide's tf.data block, with its file in tmp_path; its stock
    # pipeline reads the padded file with tf.data.TFRecordDataset, fillers and all.
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "refurbishing.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S)
              if "tfrecord_lirs.refurbish(" in b and "stock = " in b]
    assert len(blocks) == 1
    text = blocks[0].replace("/tmp/refurbish-tf.tfrecord", str(tmp_path / "r.tfrecord"))
    names = {}
    exec(compile(text, "refurbishing.md", "exec"), names)
    stock = [x.numpy() for x in names["stock"]]
    assert len(stock) == 100 and all(x.shape == (8, 8, 1) for x in stock)
    assert sum(len(b) for b in names["ds"]) == 4 * 100


PYTHON_OPS = {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def graph_ops(ds):
    """Every op of the dataset's graph, its functions' (map, flat_map, cond
    branches) included."""
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(ds._as_serialized_graph().numpy())
    ops = {n.op for n in graph.node}
    for f in graph.library.function:
        ops |= {n.op for n in f.node_def}
    return ops


def pure_partial(record, seed):
    x = tf.reshape(tf.io.decode_raw(record, tf.uint8), [4, 4, 1])
    x = tf.image.stateless_random_flip_left_right(x, seed)
    noise = tf.random.stateless_uniform([4, 4, 1], seed, maxval=900, dtype=tf.int32)
    return tf.cast(x, tf.int32) * 1000 + noise


def test_the_graph_holds_no_python_op(files, tmp_path):
    ds = refurbish(files, pure_partial, final, seed=3, reuse_factor=3, batch_size=6,
                   store=str(tmp_path / "store"), epochs=2)
    ops = graph_ops(ds)
    assert {"LIRSRefurbishUses", "LIRSRefurbishLookup", "LIRSRefurbishKeep"} <= ops
    assert not ops & PYTHON_OPS, ops & PYTHON_OPS
    # The walk finds a Python op where there is one: the user's (make_partial's).
    with_py = refurbish(files, make_partial("/dev/null"), final, seed=3, reuse_factor=3,
                        batch_size=6, epochs=2)
    assert graph_ops(with_py) & PYTHON_OPS



def map_calls(ds):
    """The `num_parallel_calls` of the dataset's parallel map."""
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(ds._as_serialized_graph().numpy())
    nodes = {n.name: n for n in graph.node}
    (map_node,) = [n for n in graph.node if n.op.startswith("ParallelMapDataset")]
    calls = nodes[[i for i in map_node.input if not i.startswith("^")][-1].split(":")[0]]
    return tf.make_ndarray(calls.attr["value"].tensor).item()


def test_the_maps_default_depth_is_more_than_the_cores(files, tmp_path):
    """The core's default, over a store in memory or a directory: more calls than
    AUTOTUNE's (a refresh holds back the cheaper reuses after it; a use another job is
    computing holds its call); a given value as given."""
    defaults = tfrecord_lirs._lirs.defaults()
    in_memory = refurbish(files, pure_partial, final, seed=3, epochs=1)
    shared = refurbish(files, pure_partial, final, seed=3, epochs=1,
                       store=str(tmp_path / "store"))
    given = refurbish(files, pure_partial, final, seed=3, epochs=1,
                      store=str(tmp_path / "store"), num_parallel_calls=3)
    assert map_calls(in_memory) == map_calls(shared) == \
        defaults["refurbish_num_parallel_calls"] > 2
    assert map_calls(given) == 3


def rotating_partial(record, seed):
    """Float ops whose results Grappler's arithmetic rewrites change in the last bits
    (the angle's `* pi / 180` folded into one constant): a graph optimized unlike
    eager mode gives a pixel or two per image one level off."""
    x = tf.cast(tf.reshape(tf.io.decode_raw(record, tf.uint8), [4, 4, 1]), tf.float32)
    noise = tf.random.stateless_uniform([32, 32, 3], seed, maxval=255.0)
    f = tf.image.resize(x, [32, 32]) + noise
    u = tf.random.stateless_uniform([], tf.random.experimental.stateless_fold_in(seed, 1))
    a = (u * 60.0 - 30.0) * np.pi / 180.0
    c, s, h = tf.cos(a), tf.sin(a), 16.0
    transform = tf.stack([c, -s, h - c * h + s * h, s, c, h - s * h - c * h, 0.0, 0.0])
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=f[None], transforms=transform[None], output_shape=[32, 32],
        fill_value=0.0, interpolation="BILINEAR")[0]
    return tf.cast(tf.clip_by_value(out, 0.0, 255.0), tf.int32)


@pytest.mark.parametrize("partial", [pure_partial, rotating_partial])
@pytest.mark.parametrize("store", [None, "dir"])
def test_elements_are_the_python_refurbishers(files, tmp_path, store, partial):
    """The same seeds, schedule and step as the plain-Python `Refurbisher` (what the
    PyTorch and Grain front ends run, here with TensorFlow's eager ops): element for
    element equal, also where an optimized graph's float results would differ."""
    from tfrecord_lirs.refurbishing import (PartialStore, Refurbisher,
                                            stateless_seed_pair)

    seed, r, epochs = 11, 3, 5
    ds = refurbish(files, partial, final, seed=seed, reuse_factor=r, batch_size=5,
                   store=None if store is None else str(tmp_path / "tf"), epochs=epochs)
    got = [x.numpy() for x in ds]

    def pair(s):
        return tf.constant(stateless_seed_pair(s), tf.int64)

    source = tfrecord_lirs.DataSource(files)
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=seed, reuse_factor=r,
                                               batch_size=5)
    step = Refurbisher(lambda i: source[i],
                       lambda rec, s: partial(tf.constant(rec), pair(s)).numpy(),
                       lambda x, s: final(tf.constant(x), pair(s)).numpy(),
                       schedule, PartialStore(None, "d", "p", seed))
    want = [step.use(i, f, g, e) for e in range(epochs)
            for i, f, g in zip(*schedule.epoch(e))]
    assert len(got) == len(want) == epochs * N
    assert all((a == b).all() for a, b in zip(got, want))
