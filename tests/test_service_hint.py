"""LIRSDataset(num_shards=SHARD_HINT, shard_index=SHARD_HINT): each worker reads its
own LIRS shard under tf.data's HINT sharding. A real DispatchServer with a fixed list
of two WorkerServers (HINT needs it) runs in a process of its own per case, as in
tests/test_service_splits.py: tfrecord_lirs.process_io_totals() counts what the
readers of the process (the workers') read. In process: tf.distribute's auto-shard
rewrite with AutoShardPolicy.HINT (the same rewrite, no servers), where iterators
can be checkpointed (with the default external state policy)."""

import collections

import pytest
import tensorflow as tf
from tensorflow.python.data.experimental.ops import distribute

import service_case
import tfrecord_lirs
from tfrecord_lirs import LIRSDataset

N = 3000
PAGE = 1024
HINT = tf.data.experimental.SHARD_HINT

CASE = r"""
import json, socket, sys
import tensorflow as tf
import tfrecord_lirs
from tfrecord_lirs import LIRSDataset

path, mode, page_aware, batch = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
repeat = int(sys.argv[5])
service = tf.data.experimental.service
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("localhost", 0))
d_port, *w_ports = [s.getsockname()[1] for s in socks]
for s in socks:
    s.close()
addresses = ["localhost:%%d" %% p for p in w_ports]
dispatcher = service.DispatchServer(service.DispatcherConfig(
    port=d_port, worker_addresses=addresses))
workers = [service.WorkerServer(service.WorkerConfig(
    dispatcher_address="localhost:%%d" %% d_port, worker_address=a, port=p))
    for a, p in zip(addresses, w_ports)]
hint = tf.data.experimental.SHARD_HINT
ds = LIRSDataset(path, seed=7, page_aware=page_aware, page_size=%(page)d,
                 batch_size=batch or None, backend="pread",
                 num_shards=hint, shard_index=hint).repeat(repeat)
policy = {"hint": service.ShardingPolicy.HINT, "data": service.ShardingPolicy.DATA,
          "file_or_data": service.ShardingPolicy.FILE_OR_DATA}[mode]
ds = ds.apply(service.distribute(policy, dispatcher.target))
""" % {"page": PAGE} + service_case.READ_AND_REPORT


def run_case(path, mode, page_aware=False, batch=0, repeat=1):
    return service_case.run_case(CASE, path, mode, int(page_aware), batch, repeat)


def ids_of(ds, batched=False):
    out = []
    for x in ds.as_numpy_iterator():
        out.extend(int(r.split(b":", 1)[0]) for r in (x if batched else [x]))
    return out


@pytest.fixture(autouse=True)
def no_global_seed():
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(None)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """N instances "<id>:xxx..." of 100 to 160 bytes, padded to 1 KiB pages."""
    path = str(tmp_path_factory.mktemp("hint") / "data.tfrecord")
    with tfrecord_lirs.PaddedWriter(path, page_size=PAGE) as w:
        for i in range(N):
            w.write(b"%d:" % i + b"x" * (100 + i % 61))
    return path


def one_reader_bytes(path, page_aware):
    """What one reader of the whole epoch reads (this process's readers)."""
    before = tfrecord_lirs.process_io_totals()["bytes_read"]
    ids = ids_of(LIRSDataset(path, seed=7, page_aware=page_aware, page_size=PAGE,
                             backend="pread"))
    assert sorted(ids) == list(range(N))
    return tfrecord_lirs.process_io_totals()["bytes_read"] - before


@pytest.mark.parametrize("page_aware,batch", [(False, 0), (True, 0), (False, 32)])
def test_hint_gives_each_worker_its_shard_and_reads_each_byte_once(data_file, page_aware,
                                                                     batch):
    got = run_case(data_file, "hint", page_aware, batch)
    assert got["error"] is None, got["error"]
    assert got["tasks"] == [1, 1], "the job must run on both workers"
    # Every instance exactly once across the two workers.
    counts = collections.Counter(got["ids"])
    assert counts == collections.Counter(range(N)), (
        [i for i, c in counts.items() if c != 1][:10], len(got["ids"]))
    # Each worker streamed exactly its LIRS shard of 2, in the shard's order: the
    # elements of shard k, picked out of the interleaved stream, are shard k.
    for k in range(2):
        shard = ids_of(LIRSDataset(data_file, seed=7, page_aware=page_aware, page_size=PAGE,
                                   batch_size=batch or None, num_shards=2, shard_index=k),
                       batched=bool(batch))
        mine = set(shard)
        assert [i for i in got["ids"] if i in mine] == shard
    # Each worker read its share, not the whole: together what one reader reads
    # (page-aware, a page split between the two shards is read by both).
    one = one_reader_bytes(data_file, page_aware)
    if page_aware:
        assert one <= got["bytes_read"] <= one + 2 * PAGE, (got["bytes_read"], one)
    else:
        assert got["bytes_read"] == one, (got["bytes_read"], one)


def is_interleaving(stream, a, b):
    """Whether `stream` is `a` and `b` merged, each in its order."""
    if len(stream) != len(a) + len(b):
        return False
    frontier = {0}  # how many of `a` the prefix so far can have taken
    for pos, x in enumerate(stream):
        frontier = ({i + 1 for i in frontier if i < len(a) and a[i] == x}
                    | {i for i in frontier if pos - i < len(b) and b[pos - i] == x})
        if not frontier:
            return False
    return True


def test_hint_repeat_reshuffles_each_workers_shard(data_file):
    """Under HINT, repeat() walks each worker's shard of a new epoch every time:
    worker k streams epochs 0 and 1 of LIRSDataset(num_shards=2, shard_index=k)
    with the same seed (the seed generator lives across the iterations, as for a
    plain LIRSDataset); the job's stream is the two workers' streams merged."""
    got = run_case(data_file, "hint", repeat=2)
    assert got["error"] is None, got["error"]
    assert got["tasks"] == [1, 1], "the job must run on both workers"
    assert collections.Counter(got["ids"]) == collections.Counter(
        {i: 2 for i in range(N)})
    workers = []
    for k in range(2):
        plain = LIRSDataset(data_file, seed=7, page_size=PAGE, num_shards=2, shard_index=k)
        epochs = [ids_of(plain), ids_of(plain)]
        assert epochs[0] != epochs[1]
        workers.append(epochs[0] + epochs[1])
    assert is_interleaving(got["ids"], *workers)
    # Before, each worker repeated its first epoch.
    assert not is_interleaving(got["ids"], workers[0][:len(workers[0]) // 2] * 2,
                               workers[1][:len(workers[1]) // 2] * 2)


@pytest.mark.parametrize("mode", ["data", "file_or_data"])
def test_policies_that_do_not_fill_the_hint_say_so(data_file, mode):
    """DATA (and FILE_OR_DATA, which falls back to DATA at LIRSDataset) shard after
    the pipeline and leave SHARD_HINT as it is, as for any Dataset.shard(SHARD_HINT):
    TensorFlow's error names SHARD_HINT and the HINT policy."""
    got = run_case(data_file, mode)
    assert got["error"] is not None
    assert "SHARD_HINT" in got["error"] and "ShardingPolicy.HINT" in got["error"], got["error"]


def test_without_sharding_the_hint_is_a_clear_error(data_file):
    """Outside tf.data service (or tf.distribute) with HINT sharding nothing fills the
    hint in: iterating raises, naming SHARD_HINT and where it works."""
    ds = LIRSDataset(data_file, seed=1, num_shards=HINT, shard_index=HINT)
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match=r"SHARD_HINT.*ShardingPolicy\.HINT"):
        ids_of(ds)


@pytest.mark.parametrize("num_shards,shard_index,want", [
    (HINT, 1, "shard_index must be SHARD_HINT (-1) too"),
    (2, HINT, "num_shards is not"),
])
def test_a_half_hint_is_refused_naming_why(data_file, num_shards, shard_index, want):
    with pytest.raises(ValueError, match=want.replace("(", r"\(").replace(")", r"\)")):
        LIRSDataset(data_file, seed=1, num_shards=num_shards, shard_index=shard_index)


def hint_sharded(ds, k, workers=2):
    """`ds` as worker k of `workers` sees it under AutoShardPolicy.HINT (the rewrite
    tf.distribute and tf.data service apply), with the default external state
    policy (FAIL): its iterators checkpoint as a plain LIRSDataset's."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.HINT)
    return distribute._AutoShardDataset(  # pylint: disable=protected-access
        ds.with_options(options), workers, k)


@pytest.mark.parametrize("batch", [None, 8])
def test_hint_element_spec_cardinality_and_checkpoints(data_file, batch, tmp_path):
    ds = LIRSDataset(data_file, seed=3, num_shards=HINT, shard_index=HINT, batch_size=batch)
    plain = LIRSDataset(data_file, seed=3, batch_size=batch)
    assert ds.element_spec == plain.element_spec
    # The worker's shard is known only where the hint is filled in.
    assert int(ds.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    for k in range(2):
        plain_k = LIRSDataset(data_file, seed=3, num_shards=2, shard_index=k,
                              batch_size=batch)
        want = ids_of(plain_k, batched=bool(batch))
        second = ids_of(plain_k, batched=bool(batch))
        sharded = hint_sharded(LIRSDataset(data_file, seed=3, num_shards=HINT,
                                           shard_index=HINT, batch_size=batch), k)
        assert ids_of(sharded, batched=bool(batch)) == want
        # The next iteration walks the next epoch; a checkpoint in its middle
        # restores the rest exactly, into a new iterator of a new dataset.
        it = iter(sharded)
        head = []
        for _ in range(7):
            x = next(it).numpy()
            head.extend(int(r.split(b":", 1)[0]) for r in (x if batch else [x]))
        path = tf.train.Checkpoint(iterator=it).write(str(tmp_path / f"ckpt{k}{batch}"))
        fresh = iter(hint_sharded(LIRSDataset(data_file, seed=3, num_shards=HINT,
                                              shard_index=HINT, batch_size=batch), k))
        tf.train.Checkpoint(iterator=fresh).read(path).assert_consumed()
        rest = []
        for x in fresh:
            x = x.numpy()
            rest.extend(int(r.split(b":", 1)[0]) for r in (x if batch else [x]))
        assert head + rest == second


def test_hint_iterations_reshuffle_and_checkpoint(data_file, tmp_path):
    """Each iteration of a SHARD_HINT dataset walks the next epoch of the worker's
    shard, as a plain LIRSDataset does (reshuffle_each_iteration); a checkpoint in
    the second epoch restores the rest of it; start_epoch sets the first epoch."""
    plain = LIRSDataset(data_file, seed=3, num_shards=2, shard_index=1)
    epochs = [ids_of(plain), ids_of(plain), ids_of(plain)]
    assert epochs[0] != epochs[1]

    def repeated(**kwargs):
        return hint_sharded(LIRSDataset(data_file, seed=3, num_shards=HINT,
                                        shard_index=HINT, **kwargs).repeat(2), 1)

    assert ids_of(repeated()) == epochs[0] + epochs[1]
    assert ids_of(repeated(start_epoch=1)) == epochs[1] + epochs[2]
    it = iter(repeated())
    cut = len(epochs[0]) + 11
    head = [int(next(it).numpy().split(b":", 1)[0]) for _ in range(cut)]
    path = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "epoch1"))
    fresh = iter(repeated())
    tf.train.Checkpoint(iterator=fresh).read(path).assert_consumed()
    rest = [int(x.numpy().split(b":", 1)[0]) for x in fresh]
    assert head + rest == epochs[0] + epochs[1]
