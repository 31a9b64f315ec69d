"""Scale-out on existing engines: the tf.data service and tf.distribute.

Real servers and strategies, all on localhost: a DispatchServer and two
WorkerServers in this process (free ports), and MultiWorkerMirroredStrategy in
two worker processes. Uses examples/tf_data_service.py and
examples/multi_worker.py, so the examples are what is tested.
"""

import collections
import gc
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
for sub in ("python", "examples"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

import multi_worker  # noqa: E402  (examples/)
import tf_data_service  # noqa: E402  (examples/)

PAGE = 512
N = 600


def ids_of(ds):
    return [int(r.split(b":", 1)[0]) for r in ds.as_numpy_iterator()]


@pytest.fixture(autouse=True)
def no_global_seed():
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)


@pytest.fixture(scope="module")
def lirs_file(tmp_path_factory):
    """N instances "<id>:xxx..." of varying size, padded to 512-byte pages."""
    path = str(tmp_path_factory.mktemp("scale_out") / "data.tfrecord")
    rng = np.random.default_rng(3)
    with tfrecord_lirs.PaddedWriter(path, page_size=PAGE) as w:
        for i in range(N):
            assert w.write(b"%d:" % i + b"x" * int(rng.integers(0, 80))) == i
    offsets = np.fromfile(path + ".offsets", dtype="<u8")
    assert len(offsets) == N
    pages = offsets // PAGE
    # Page-aware units of a padded file: one page's instances, numbered in file order.
    unit = np.unique(pages, return_inverse=True)[1]
    return path, unit


@pytest.fixture(scope="class")
def cluster():
    dispatcher, workers = tf_data_service.start_local_cluster(2)
    assert dispatcher.target.startswith("grpc://localhost:")
    yield SimpleNamespace(target=dispatcher.target, workers=workers)
    gc.collect()   # release finished jobs' iterators before stopping the servers
    for w in workers:
        w._stop()  # pylint: disable=protected-access
    dispatcher._stop()  # pylint: disable=protected-access


def global_orders(path, seed, epochs, page_aware=False):
    """The unsharded order of each epoch (iterations of one dataset)."""
    ds = LIRSDataset(path, seed=seed, page_aware=page_aware, page_size=PAGE)
    return [ids_of(ds) for _ in range(epochs)]


# ---------------------------------------------------------------- tf.data service

class TestDataService:
    """One dispatcher + two workers for the class (stopped before the tf.distribute tests)."""

    def test_service_parallel_epochs_each_worker_reads_everything(self, lirs_file, cluster):
        path, _ = lirs_file
        got = ids_of(tf_data_service.parallel_epochs([path], cluster.target, seed=5,
                                                     page_size=PAGE))
        # Exact multiset: every instance exactly twice (once per worker).
        assert collections.Counter(got) == collections.Counter({i: 2 for i in range(N)})
        # Same seed on both workers -> the same permutation twice, interleaved: the
        # first copies and the second copies each come in the unsharded epoch-0 order.
        first, second, seen = [], [], set()
        for i in got:
            (second if i in seen else first).append(i)
            seen.add(i)
        (epoch0,) = global_orders(path, seed=5, epochs=1)
        assert first == epoch0 and second == epoch0

    def test_service_distributed_epoch_reads_a_lirs_dataset_in_splits(self, lirs_file, cluster):
        # (Before LIRSDataset had split providers: UnimplementedError, "Cannot create
        # split providers for dataset of type LIRSDataset".)
        path, _ = lirs_file
        ds = LIRSDataset(path, seed=5, page_size=PAGE).apply(
            tf.data.experimental.service.distribute("distributed_epoch", cluster.target))
        assert collections.Counter(ids_of(ds)) == collections.Counter(range(N))


    def test_service_iterators_are_not_checkpointable(self, lirs_file, cluster, tmp_path):
        # docs/CLUSTER.md says so: checkpoint at epoch boundaries instead.
        path, _ = lirs_file
        it = iter(tf_data_service.parallel_epochs([path], cluster.target, seed=5, page_size=PAGE))
        next(it)
        with pytest.raises(tf.errors.UnimplementedError, match="SaveInternal"):
            tf.train.Checkpoint(iterator=it).write(str(tmp_path / "ckpt"))

    @pytest.mark.parametrize("page_aware", [False, True])
    def test_service_distributed_epoch_by_shard_is_one_exact_epoch(self, lirs_file, cluster, page_aware):
        path, _ = lirs_file
        epochs = []
        for epoch in range(2):
            before = [w._num_tasks() for w in cluster.workers]  # pylint: disable=protected-access
            it = tf_data_service.distributed_epoch_by_shard(
                [path], cluster.target, seed=5, epoch=epoch, num_shards=4,
                page_aware=page_aware, page_size=PAGE).as_numpy_iterator()
            got = [int(next(it).split(b":", 1)[0])]
            # The job runs on both workers: each gets a new task for it. (TF exposes no
            # per-element worker in distributed_epoch mode; which worker served which
            # element is checked in the static-sharding test below.)
            after = [w._num_tasks() for w in cluster.workers]  # pylint: disable=protected-access
            assert [a - b for a, b in zip(after, before)] == [1, 1], (before, after)
            got += [int(r.split(b":", 1)[0]) for r in it]
            # Exact multiset: every instance once.
            assert collections.Counter(got) == collections.Counter(range(N))
            epochs.append(got)
            # Each shard's elements arrive in the order of that shard of the
            # epoch's permutation (a worker streams a whole shard).
            shard_ds = lambda k: LIRSDataset(  # noqa: E731
                path, seed=tf_data_service.epoch_seed(5, epoch), page_aware=page_aware,
                num_shards=4, shard_index=k, page_size=PAGE)
            (whole,) = global_orders(path, tf_data_service.epoch_seed(5, epoch), 1, page_aware)
            for k in range(4):
                mine = ids_of(shard_ds(k))
                assert mine and [i for i in got if i in set(mine)] == mine
                # Shard k = positions [kN/4, (k+1)N/4) of the epoch's order (page-aware too).
                assert mine == whole[k * N // 4:(k + 1) * N // 4]
        assert epochs[0] != epochs[1], "a new epoch must be a new permutation"


def _free_ports(n):
    import socket
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.mark.parametrize("page_aware", [False, True])
def test_service_static_sharding_both_workers_serve_their_shard(lirs_file, page_aware):
    """Which worker served which element: with a fixed worker list, tf.data service
    rewrites `shard(SHARD_HINT, SHARD_HINT)` to each worker's index, so
    `range(2).shard(SHARD_HINT, SHARD_HINT)` is the worker's own index inside its
    pipeline. Worker k reads LIRS shard k and tags its elements with k: both tags must
    appear, each with exactly that shard, and together one exact epoch."""
    path, unit = lirs_file
    service = tf.data.experimental.service
    d_port, *w_ports = _free_ports(3)
    addresses = [f"localhost:{p}" for p in w_ports]
    dispatcher = service.DispatchServer(service.DispatcherConfig(
        port=d_port, worker_addresses=addresses))
    workers = [service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{d_port}", worker_address=a, port=p))
        for a, p in zip(addresses, w_ports)]
    ds = None
    try:
        def shard(k):
            return LIRSDataset(path, seed=5, page_aware=page_aware, page_size=PAGE,
                               num_shards=2, shard_index=k).map(lambda x: (k, x))
        ds = tf.data.Dataset.range(2).shard(tf.data.experimental.SHARD_HINT, tf.data.experimental.SHARD_HINT).flat_map(shard)
        ds = ds.apply(service.distribute(service.ShardingPolicy.HINT, dispatcher.target))
        by_worker = collections.defaultdict(list)
        for k, x in ds.as_numpy_iterator():
            by_worker[int(k)].append(int(x.split(b":", 1)[0]))
        assert sorted(by_worker) == [0, 1], "both workers must serve elements"
        for k in (0, 1):
            mine = ids_of(LIRSDataset(path, seed=5, page_aware=page_aware, page_size=PAGE,
                                      num_shards=2, shard_index=k))
            assert by_worker[k] == mine, f"worker {k} did not stream exactly LIRS shard {k}"
        assert collections.Counter(by_worker[0] + by_worker[1]) == collections.Counter(range(N))
    finally:
        del ds
        gc.collect()
        for w in workers:
            w._stop()  # pylint: disable=protected-access
        dispatcher._stop()  # pylint: disable=protected-access


# ---------------------------------------------------------------- tf.distribute

def check_shards_against_global(shards, global_order, unit, page_aware):
    """shards[k]: the ids worker k read in one epoch, in order."""
    flat = [i for s in shards for i in s]
    assert collections.Counter(flat) == collections.Counter(range(N))
    k_total = len(shards)
    for k, mine in enumerate(shards):
        # Shard k = positions [kN/K, (k+1)N/K) of the global order; page-aware, only a
        # page that straddles a shard boundary is split between the two neighbours.
        assert mine == global_order[k * N // k_total:(k + 1) * N // k_total]
        if page_aware:
            runs = [unit[i] for j, i in enumerate(mine) if j == 0 or unit[mine[j - 1]] != unit[i]]
            assert len(runs) == len(set(runs)), "a page is split inside a shard"


@pytest.mark.parametrize("page_aware", [False, True])
def test_input_context_shards_are_slices_of_one_global_permutation(lirs_file, page_aware):
    """The input_context path of distribute_datasets_from_function, for two
    input pipelines, over two epochs with reshuffling."""
    path, unit = lirs_file

    def dataset_fn(ctx):
        return LIRSDataset(path, seed=11, page_aware=page_aware, page_size=PAGE,
                           num_shards=ctx.num_input_pipelines,
                           shard_index=ctx.input_pipeline_id).batch(
            ctx.get_per_replica_batch_size(32))

    datasets = [dataset_fn(tf.distribute.InputContext(num_input_pipelines=2,
                                                      input_pipeline_id=i,
                                                      num_replicas_in_sync=2))
                for i in range(2)]
    orders = global_orders(path, seed=11, epochs=2, page_aware=page_aware)
    per_epoch = []
    for epoch in range(2):
        shards = [ids_of(ds.unbatch()) for ds in datasets]   # a new iteration = next epoch
        check_shards_against_global(shards, orders[epoch], unit, page_aware)
        per_epoch.append(shards)
    assert per_epoch[0] != per_epoch[1]
    assert orders[0] != orders[1]


def test_multi_worker_mirrored_strategy_two_processes(lirs_file, tmp_path):
    """examples/multi_worker.py: two real MultiWorkerMirroredStrategy workers
    (TF_CONFIG on localhost ports), distribute_datasets_from_function."""
    path, unit = lirs_file
    args = SimpleNamespace(data=path, epochs=2, workers=2, global_batch=32,
                           page_size=PAGE, page_aware=False, report_dir=str(tmp_path),
                           timeout=150)
    reports = multi_worker.launch(args)
    assert [r["task"] for r in reports] == [0, 1]
    multi_worker.check_cover(reports, N)   # also: the all-reduced count is N on both
    orders = global_orders(path, seed=multi_worker.SEED, epochs=2)
    for epoch in range(2):
        shards = [r["epochs"][epoch]["ids"] for r in reports]
        check_shards_against_global(shards, orders[epoch], unit, page_aware=False)
    assert reports[0]["epochs"][0]["ids"] != reports[0]["epochs"][1]["ids"]
