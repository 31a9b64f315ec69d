"""One seed, one order (docs/FORMAT.md §5.9), with real TensorFlow: for the same files
in the same order, seed, page_aware and order version, iteration e of
`LIRSDataset(seed=s)` (no global seed) walks the order of `Sampler(seed=s).order(e)`,
of `Loader(seed=s)`'s epoch e and of `tfrecord-lirs order --seed s --epoch e`
(`tests/without_tf/test_sources.py` checks the Grain forms against the Sampler);
`start_epoch=k` starts at epoch k; a global seed or none keeps tf.data's seeding; a
graph saved before the seed rule existed orders as it did then. Ids are recovered
from the payloads (each record is unique), through `DataSource`.
"""

import os
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
import tfrecord_lirs  # noqa: E402
from conftest import run_ok  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "testdata" / "mixed.tfrecord"


@pytest.fixture(autouse=True)
def no_global_seed():
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)


def _records(n, seed, tag):
    rng = np.random.default_rng(seed)
    return [b"%s%05d:" % (tag, i) + bytes(rng.integers(97, 123, size=int(rng.integers(0, 200)),
                                                       dtype=np.uint8))
            for i in range(n)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A padded file (pages of several records) and a plain one with its table: sorted
    as a pattern's matches are."""
    d = tmp_path_factory.mktemp("seed_rule")
    src = d / "src.tfrecord"
    with tf.io.TFRecordWriter(str(src)) as w:
        for r in _records(700, 1, b"a"):
            w.write(r)
    tfrecord_lirs.pad(str(src), str(d / "a.tfrecord"))
    with tf.io.TFRecordWriter(str(d / "b.tfrecord")) as w:
        for r in _records(300, 2, b"b"):
            w.write(r)
    tfrecord_lirs.build_offset_table(str(d / "b.tfrecord"))
    return [str(d / "a.tfrecord"), str(d / "b.tfrecord")]


@pytest.fixture(scope="module")
def index_of(files):
    src = tfrecord_lirs.DataSource(files)
    return {src[i]: i for i in range(len(src))}


def _ids(ds, index_of):
    out = []
    for element in ds:
        values = element.numpy()
        out += [index_of[v] for v in (values if element.shape.rank else [values])]
    return out


def _cli_order(files, seed, epoch, page_aware, order_version):
    flags = ["--page-aware"] if page_aware else []
    res = run_ok("order", *files, "--seed", seed, "--epoch", epoch,
                 "--order-version", order_version, *flags)
    return [int(line) for line in res.stdout.split()]


@pytest.mark.parametrize("page_aware,order_version,seed", [
    (False, 1, 42), (True, 1, 42), (True, 2, 7), (False, 1, 2**63 + 5)])
def test_one_seed_one_order_in_every_front_end(files, index_of, page_aware, order_version,
                                               seed):
    sampler = tfrecord_lirs.Sampler(tfrecord_lirs.DataSource(files), seed=seed,
                                    page_aware=page_aware, order_version=order_version)
    want = [list(sampler.order(e)) for e in (0, 1)]
    assert want[0] != want[1] and sorted(want[0]) == list(range(len(index_of)))
    for e in (0, 1):
        assert _cli_order(files, seed, e, page_aware, order_version) == want[e]
    loader = tfrecord_lirs.Loader(files, seed=seed, batch_size=64, page_aware=page_aware,
                                  order_version=order_version)
    for e in (0, 1):  # iterating walks an epoch, the next iteration the next one
        assert [index_of[p] for batch in loader for p in batch] == want[e]
    # Iterations of one dataset are its epochs, through repeat() as through iter().
    kwargs = dict(seed=seed, page_aware=page_aware, order_version=order_version)
    ds = LIRSDataset(files, **kwargs)
    assert [_ids(ds, index_of) for _ in (0, 1)] == want
    assert _ids(LIRSDataset(files, batch_size=50, **kwargs).repeat(2), index_of) \
        == want[0] + want[1]
    # A pattern is its matches sorted: the same order.
    pattern = os.path.join(os.path.dirname(files[0]), "[ab].tfrecord")
    assert _ids(LIRSDataset(pattern, **kwargs), index_of) == want[0]


def test_start_epoch_starts_there(files, index_of):
    sampler = tfrecord_lirs.Sampler(tfrecord_lirs.DataSource(files), seed=9)
    ds = LIRSDataset(files, seed=9, start_epoch=2)
    assert _ids(ds, index_of) == list(sampler.order(2))
    assert _ids(ds, index_of) == list(sampler.order(3))
    fixed = LIRSDataset(files, seed=9, start_epoch=2, reshuffle_each_iteration=False)
    assert _ids(fixed.repeat(2), index_of) == list(sampler.order(2)) * 2
    # A checkpoint of such a run restores it, the next iterations included.
    it = iter(LIRSDataset(files, seed=9, start_epoch=2, batch_size=100).repeat(2))
    first = [next(it) for _ in range(3)]
    ckpt = tf.train.Checkpoint(iterator=it)
    prefix = ckpt.write(os.path.join(os.path.dirname(files[0]), "start_epoch_ckpt"))
    rest = [b for b in it]
    again = iter(LIRSDataset(files, seed=9, start_epoch=2, batch_size=100).repeat(2))
    tf.train.Checkpoint(iterator=again).read(prefix).assert_consumed()
    got = [b for b in again]
    assert [index_of[p] for b in first + got for p in b.numpy()] \
        == list(sampler.order(2)) + list(sampler.order(3))
    assert [list(b.numpy()) for b in got] == [list(b.numpy()) for b in rest]
    for bad in (-1, 2**62):
        with pytest.raises(tf.errors.InvalidArgumentError, match="start_epoch must be >= 0"):
            LIRSDataset(files, seed=9, start_epoch=bad)
    with pytest.raises(ValueError, match="start_epoch must be an int"):
        LIRSDataset(files, seed=9, start_epoch=1.0)


def test_seeds_the_sampler_refuses_are_refused(files):
    for bad, words in ((-1, "seed must be >= 0, got -1"), (2**64, "below 2\\*\\*64"),
                       (1.5, "seed must be an integer")):
        with pytest.raises(ValueError, match=words):
            LIRSDataset(files, seed=bad)


def test_a_global_seed_folds_the_pairs_as_tf_data_does(files, index_of):
    """With `tf.random.set_seed(g)`, the pair (g, seed) seeds the generator of
    Dataset.shuffle and each iteration folds the pair it draws: repeatable for the same
    (g, seed), changed by either, not the Sampler's order."""
    sampler = tfrecord_lirs.Sampler(tfrecord_lirs.DataSource(files), seed=42)

    def two_iterations(g, seed):
        tf.random.set_seed(g)
        ds = LIRSDataset(files, seed=seed)
        return [_ids(ds, index_of) for _ in (0, 1)]

    a = two_iterations(3, 42)
    assert a == two_iterations(3, 42)
    assert a[0] != a[1] and sorted(a[0]) == sorted(a[1])
    assert a[0] not in (list(sampler.order(0)), list(sampler.order(1)))
    assert two_iterations(4, 42)[0] != a[0] and two_iterations(3, 43)[0] != a[0]
    # A global seed alone: repeatable too; no seed at all: a random order each run.
    assert two_iterations(5, None) == two_iterations(5, None)
    tf.random.set_seed(None)
    assert _ids(LIRSDataset(files), index_of) != _ids(LIRSDataset(files), index_of)


def test_a_graph_saved_before_the_seed_rule_orders_as_it_did(tmp_path):
    """A LIRSDataset node without `seed_rule` and `start_epoch` (a graph saved before
    they existed) orders as the op library of then did: testdata/old_checkpoints'
    `elements` case holds what that library's `LIRSDataset(mixed, seed=21).repeat(2)`
    delivered after its 131st element, the rest of iteration 0 and all of iteration
    1 (each iteration's drawn pair folded: seed rule 0)."""
    import json

    from tensorflow.python.data.ops import dataset_ops
    from tensorflow.python.ops import gen_experimental_dataset_ops

    case = json.loads((DATA.parent / "old_checkpoints" / "cases.json").read_text())["elements"]
    assert case["kwargs"] == {"seed": 21} and case["epochs"] == 2
    old_rest = [i for [i] in case["rest"]]
    table = tfrecord_lirs.build_offset_table(str(DATA), str(tmp_path / "mixed.offsets"))
    index = {r.numpy(): i for i, r in enumerate(tf.data.TFRecordDataset(str(DATA)))}
    n = len(index)
    ds = LIRSDataset(str(DATA), offset_tables=table, seed=21)
    graph = tf.compat.v1.GraphDef.FromString(
        ds._as_serialized_graph().numpy())  # pylint: disable=protected-access
    [node] = [n for n in graph.node if n.op == "LIRSDataset"]
    assert node.attr["seed_rule"].i == 1
    del node.attr["seed_rule"]
    del node.attr["start_epoch"]
    old = dataset_ops._VariantDataset(  # pylint: disable=protected-access
        gen_experimental_dataset_ops.dataset_from_graph(graph.SerializeToString()),
        ds.element_spec)
    got = [index[r] for r in old.repeat(2).as_numpy_iterator()]
    assert got[case["consumed"]:] == old_rest and len(got) == 2 * n
    # Today's graph: the Sampler's epochs of seed 21. (A new dataset: `old` shares
    # the seed generator of `ds`, whose graph names it, and took its first two draws.)
    sampler = tfrecord_lirs.Sampler(
        tfrecord_lirs.DataSource(str(DATA), offset_tables=[table]), seed=21)
    new = LIRSDataset(str(DATA), offset_tables=table, seed=21).repeat(2)
    new = [index[r] for r in new.as_numpy_iterator()]
    assert new == list(sampler.order(0)) + list(sampler.order(1)) != got
