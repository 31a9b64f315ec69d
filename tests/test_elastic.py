"""Elastic resume (docs/FORMAT.md §6) against real TensorFlow and through the
TensorFlow-free Sampler: an epoch checkpointed by K workers goes on with K' workers,
every instance not yet delivered exactly once; the next epochs are a fresh K' run's.
"""

import collections
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import LIRSDataset, Sampler  # noqa: E402

N = 503
BATCH = 8


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("elastic") / "d.tfrecord"
    with tfrecord_lirs.PaddedWriter(str(path), page_size=512) as w:
        for i in range(N):
            w.write(b"%06d" % i + b"x" * (i * 13 % 200))
    return str(path)


def ids(batch):
    return [int(r[:6]) for r in batch.numpy()]


def dataset(data, num_shards, shard_index, version, **kw):
    return LIRSDataset(data, seed=7, num_shards=num_shards, shard_index=shard_index,
                       batch_size=BATCH, page_size=512, order_version=version, **kw)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("k,k2,deterministic", [(4, 3, None), (2, 5, None), (4, 3, False)])
def test_k_workers_resume_as_k2(data, tmp_path, version, k, k2, deterministic):
    seen = collections.Counter()
    states = []
    for i in range(k):
        it = iter(dataset(data, k, i, version, deterministic=deterministic))
        for _ in range(2 + i):
            seen.update(ids(next(it)))
        states.append(LIRSDataset.shard_state(it))
    epoch_state = LIRSDataset.combine_shard_states(states[::-1])
    assert isinstance(epoch_state, bytes)

    for j in range(k2):
        ds = dataset(data, k2, j, version, epoch_state=epoch_state,
                     deterministic=deterministic)
        it = iter(ds)
        for _ in range(2):
            seen.update(ids(next(it)))
        # A checkpoint of the resumed iteration restores into a plain K'-shard dataset
        # (its state says where the walk started).
        prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / f"c{k}{j}{version}"))
        rest = [i for b in it for i in ids(b)]
        again = iter(dataset(data, k2, j, version, deterministic=deterministic))
        tf.train.Checkpoint(iterator=again).restore(prefix).assert_consumed()
        rest_again = [i for b in again for i in ids(b)]
        if deterministic is None:
            assert rest_again == rest
        assert sorted(rest_again) == sorted(rest)
        seen.update(rest)

        # The next iteration is a fresh K'-shard run's second epoch.
        fresh = dataset(data, k2, j, version)
        for _ in fresh:
            pass
        want = [i for b in fresh for i in ids(b)]
        got = [i for b in ds for i in ids(b)]
        assert got == want
    assert sorted(seen) == list(range(N))
    assert set(seen.values()) == {1}


def test_states_of_different_iterations_do_not_combine(data):
    ds = dataset(data, 2, 0, 2)
    first = LIRSDataset.shard_state(iter(ds))
    second = LIRSDataset.shard_state(iter(ds))  # the next iteration: other seeds
    other = LIRSDataset.shard_state(iter(dataset(data, 2, 1, 2)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="another iteration"):
        LIRSDataset.combine_shard_states([second, other])
    assert LIRSDataset.combine_shard_states([first, other])
    with pytest.raises(tf.errors.InvalidArgumentError, match="got 1 shard states"):
        LIRSDataset.combine_shard_states([first])
    with pytest.raises(tf.errors.DataLossError, match="not a LIRSDataset shard state"):
        LIRSDataset.combine_shard_states([b"garbage" * 10, other])
    # A state of another order version does not resume.
    state = LIRSDataset.combine_shard_states([first, other])
    with pytest.raises(tf.errors.DataLossError, match="order version"):
        next(iter(dataset(data, 3, 0, 1, epoch_state=state)))
    with pytest.raises(TypeError, match="epoch_state must be bytes"):
        dataset(data, 3, 0, 2, epoch_state="text")


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("page_aware", [False, True])
def test_sampler_resumes_on_another_worker_count(data, version, page_aware):
    source = tfrecord_lirs.DataSource([data], page_size=512)
    seen = collections.Counter()
    states = []
    for i in range(4):
        s = Sampler(source, seed=3, page_aware=page_aware, num_shards=4, shard_index=i,
                    order_version=version)
        s.set_epoch(2)
        consumed = 10 * (i + 1)
        seen.update(int(x) for x in s.order()[:consumed])
        states.append(s.shard_state(consumed))
    epoch_state = Sampler.combine_shard_states(states)
    info = tfrecord_lirs._lirs.epoch_state_info(epoch_state)
    assert (info["epoch"], info["delivered"], info["undelivered"]) == (2, 100, N - 100)
    for j in range(3):
        s = Sampler(source, seed=3, page_aware=page_aware, num_shards=3, shard_index=j,
                    order_version=version)
        s.resume(epoch_state)
        assert s.epoch == 2
        order = s.order()
        assert len(s) == len(order)
        seen.update(int(x) for x in order)
        # The next epoch: a fresh 3-shard sampler's.
        s.set_epoch(3)
        fresh = Sampler(source, seed=3, page_aware=page_aware, num_shards=3, shard_index=j,
                        order_version=version)
        fresh.set_epoch(3)
        assert list(s.order()) == list(fresh.order())
    assert sorted(seen) == list(range(N))
    assert set(seen.values()) == {1}

    wrong = Sampler(source, seed=4, page_aware=page_aware, num_shards=3, shard_index=0,
                    order_version=version)
    with pytest.raises(tfrecord_lirs.errors.DataLossError, match="seed 3"):
        wrong.resume(epoch_state)


def test_states_of_another_split_of_the_same_sizes_are_refused_naming_the_file(tmp_path):
    """An iterator checkpoint and an epoch state name their dataset (base names,
    instances, bytes): restored into another split of the same counts and sizes they
    are refused naming the files; into the same files elsewhere they restore."""
    def split(directory, prefix):
        directory.mkdir(exist_ok=True)
        path = directory / f"{prefix}.tfrecord-00000-of-00001"
        with tfrecord_lirs.PaddedWriter(str(path), page_size=512) as w:
            for i in range(100):
                w.write(b"%06d" % i + b"x" * (i % 9))
        return str(path)

    train, valid = split(tmp_path / "a", "train"), split(tmp_path / "a", "valid")
    moved = split(tmp_path / "b", "train")
    named = ("the state's file 0 train.tfrecord-00000-of-00001 \\(100 instances.*"
             "this dataset's file 0 valid.tfrecord-00000-of-00001 \\(100 instances")
    ds = dataset(train, 1, 0, 2)
    it = iter(ds)
    first = ids(next(it))
    ckpt = tf.train.Checkpoint(iterator=it).write(str(tmp_path / "ckpt"))
    rest = [ids(b) for b in it]
    with pytest.raises(tf.errors.DataLossError, match=named):
        restored = iter(dataset(valid, 1, 0, 2))
        tf.train.Checkpoint(iterator=restored).read(ckpt).assert_consumed()
        next(restored)
    restored = iter(dataset(moved, 1, 0, 2))
    tf.train.Checkpoint(iterator=restored).read(ckpt).assert_consumed()
    assert [ids(b) for b in restored] == rest and first

    states = [LIRSDataset.shard_state(iter(dataset(train, 2, k, 2))) for k in range(2)]
    epoch_state = LIRSDataset.combine_shard_states(states)
    with pytest.raises(tf.errors.DataLossError, match=named):
        next(iter(dataset(valid, 1, 0, 2, epoch_state=epoch_state)))
    assert len(list(dataset(moved, 1, 0, 2, epoch_state=epoch_state))) == 100 // BATCH + 1


@pytest.mark.parametrize("rule", ["drop", "pad"])
def test_equal_shards_combine_each_instance_once(data, rule):
    """Three workers of equal shards ("drop"/"pad") checkpoint; two workers resume from
    their combined state: what the old ones delivered (a padded shard's repeats
    included) is delivered by no new one, every other instance by exactly one."""
    old, states = collections.Counter(), []
    for k in range(3):
        it = iter(dataset(data, 3, k, 2, shard_remainder=rule))
        # The last shard walks to its end: a padded one repeats the order's start.
        for batch in (it if k == 2 else [next(it) for _ in range(2 + k)]):
            old.update(ids(batch))
        states.append(LIRSDataset.shard_state(it))
    epoch_state = LIRSDataset.combine_shard_states(states)
    new = collections.Counter()
    for j in range(2):
        new.update(i for b in dataset(data, 2, j, 2, epoch_state=epoch_state) for i in ids(b))
    assert set(new.values()) == {1}
    assert not set(new) & set(old)
    assert sorted(set(old) | set(new)) == list(range(N))
