"""`tfrecord_lirs.Loader` (the Rust dataset cursor's batches, no TensorFlow), in the venv
without TensorFlow: per-epoch multisets against an independent reader (the `tfrecord`
PyPI package), orders against the core's order (the CLI's `order`, the same order the
TensorFlow op's cursor walks for that order seed), real PyTorch DataLoader workers,
checkpoints restored in a new process, and typed errors."""

from __future__ import annotations

import collections
import pickle
import subprocess
import sys

import pytest

from conftest import affine_payload, damaged_copy, framed, read_records, read_table, run_ok

import tfrecord_lirs
from tfrecord_lirs import DataSource, Loader, Sampler
from tfrecord_lirs.errors import DataLossError, InvalidArgumentError, NotFoundError


def write_file(path, payloads):
    """A plain TFRecord file and its table (conftest's framing); returns the payloads."""
    data, table = framed(payloads)
    path.write_bytes(data)
    (path.parent / (path.name + ".offsets")).write_bytes(table)
    return list(payloads)


def stock(paths):
    """Every payload of `paths` as the `tfrecord` package's reader gives it."""
    from tfrecord.reader import tfrecord_iterator

    return [bytes(r) for p in paths for r in tfrecord_iterator(str(p))]


@pytest.fixture
def two_files(tmp_path):
    write_file(tmp_path / "a.tfrecord", [affine_payload(i, 10 + i % 50) for i in range(700)])
    write_file(tmp_path / "b.tfrecord", [b"b%d" % i for i in range(333)])
    paths = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
    return paths, stock(paths)


@pytest.fixture
def padded(tmp_path):
    """A file padded to 4 KiB pages by the CLI, and its instance payloads."""
    src = tmp_path / "src.tfrecord"
    write_file(src, [affine_payload(i, 100 + (i * 37) % 300) for i in range(2000)])
    dst = tmp_path / "padded.tfrecord"
    run_ok("pad", src, dst)
    payloads = [r.payload for r in read_records(dst) if not r.payload.startswith(b"\x00LIRSPAD")]
    return dst, payloads


def test_each_epoch_is_the_stock_readers_multiset_in_batches(two_files):
    paths, payloads = two_files
    assert len(payloads) == 1033
    loader = Loader(paths, seed=5, batch_size=64)
    epochs = []
    for epoch in range(3):
        assert loader.epoch == epoch  # each finished epoch moves the counter on
        batches = list(loader)
        assert [len(b) for b in batches] == [64] * 16 + [9]
        assert all(type(p) is bytes for b in batches for p in b)
        got = [p for b in batches for p in b]
        assert collections.Counter(got) == collections.Counter(payloads), epoch
        epochs.append(got)
    assert epochs[0] != epochs[1] != epochs[2]
    loader.set_epoch(1)
    assert [p for b in loader for p in b] == epochs[1]
    dropping = Loader(paths, seed=5, batch_size=64, drop_remainder=True)
    assert [len(b) for b in dropping] == [64] * 16
    # The defaults are the core's: batches of 256, seed 0.
    assert [len(b) for b in Loader(paths)] == [256] * 4 + [9]
    assert [p for b in Loader(paths) for p in b] == [p for b in Loader(paths, seed=0) for p in b]


def test_orders_are_the_cores_orders(padded, two_files):
    path, payloads = padded
    for version in (1, 2):
        for page_aware in (False, True):
            loader = Loader(path, seed=7, batch_size=100, page_aware=page_aware,
                            order_version=version)
            loader.set_epoch(2)
            got = [p for b in loader for p in b]
            args = (["order", path, "--seed", "7", "--epoch", "2", "--order-version", str(version)]
                    + (["--page-aware"] if page_aware else []))
            ids = [int(x) for x in run_ok(*args).text.split()]
            assert got == [payloads[i] for i in ids], (version, page_aware)
    # Several files: the extension's file-free order of as many instances, and shards.
    paths, _ = two_files
    src = DataSource(paths)
    for shards, index in ((1, 0), (3, 2)):
        got = [p for b in Loader(src, seed=11, batch_size=50, num_shards=shards,
                                 shard_index=index) for p in b]
        ids = Sampler(len(src), seed=11, num_shards=shards, shard_index=index).order(0)
        assert got == src.__getitems__(list(ids))


def test_unordered_delivery_gives_each_epochs_multiset(two_files):
    paths, payloads = two_files
    loader = Loader(paths, seed=2, batch_size=32, deterministic=False, num_parallel_reads=3)
    ordered = Loader(paths, seed=2, batch_size=32)
    for epoch in range(2):
        batches = list(loader)
        got = [p for b in batches for p in b]
        assert collections.Counter(got) == collections.Counter(payloads), epoch
        # The same batches as in order, delivered as they complete.
        key = collections.Counter(tuple(b) for b in batches)
        assert key == collections.Counter(tuple(b) for b in ordered)


def test_pytorch_dataloader_workers_split_each_epoch(two_files):
    import torch.utils.data as tud

    from tfrecord_lirs import torch as lirs_torch

    paths, payloads = two_files
    for num_shards, shard_index in ((1, 0), (2, 1)):
        loader = lirs_torch.Loader(paths, seed=3, batch_size=40, num_shards=num_shards,
                                   shard_index=shard_index)
        assert isinstance(loader, tud.IterableDataset)
        data = tud.DataLoader(loader, batch_size=None, num_workers=2)
        for epoch in range(2):
            loader.set_epoch(epoch)
            batches = [list(b) for b in data]
            # Worker w of 2 reads the batches i % 2 == w of the shard: together, the
            # shard's batches (as a Loader without workers walks them).
            own = Loader(paths, seed=3, batch_size=40, num_shards=num_shards,
                         shard_index=shard_index)
            own.set_epoch(epoch)
            want = [tuple(b) for b in own]
            assert collections.Counter(tuple(b) for b in batches) == collections.Counter(want)
            if num_shards == 1:
                got = [p for b in batches for p in b]
                assert collections.Counter(got) == collections.Counter(payloads), epoch


def test_process_shard_without_jax():
    # jax is not in this venv: one process, one shard.
    with pytest.raises(ImportError):
        import jax  # noqa: F401
    assert tfrecord_lirs.process_shard() == {"num_shards": 1, "shard_index": 0}


RESUME = """
import pickle, sys
from tfrecord_lirs import Loader
paths, options, state_path, out_path = pickle.loads(bytes.fromhex(sys.argv[1]))
loader = Loader(paths, **options)
with open(state_path, "rb") as f:
    loader.load_state_dict(pickle.load(f))
rest = list(loader)
after = list(loader)  # the next epoch
with open(out_path, "wb") as f:
    pickle.dump((rest, after, loader.state_dict()), f)
"""


def resume_in_new_process(tmp_path, paths, options, state):
    state_path, out_path = tmp_path / "state.pkl", tmp_path / "out.pkl"
    with open(state_path, "wb") as f:
        pickle.dump(state, f)
    arg = pickle.dumps(([str(p) for p in paths], options, str(state_path), str(out_path))).hex()
    subprocess.run([sys.executable, "-c", RESUME, arg], check=True, timeout=120)
    with open(out_path, "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("deterministic", [True, False])
def test_state_dict_restores_the_rest_in_a_new_process(tmp_path, two_files, deterministic):
    paths, payloads = two_files
    options = dict(seed=21, batch_size=50, deterministic=deterministic, num_parallel_reads=2)
    loader = Loader(paths, **options)
    loader.set_epoch(3)
    it = iter(loader)
    first = [next(it) for _ in range(7)]
    state = loader.state_dict()
    assert state["epoch"] == 3 and isinstance(state["cursor"], bytes)
    rest = list(it)
    after = list(loader)
    got_rest, got_after, end_state = resume_in_new_process(tmp_path, paths, options, state)
    if deterministic:
        assert got_rest == rest
        assert got_after == after  # epoch 4, the same in both processes
    got = [p for b in first + got_rest for p in b]
    assert collections.Counter(got) == collections.Counter(payloads)
    assert collections.Counter(p for b in got_after for p in b) == collections.Counter(payloads)
    assert end_state["epoch"] == 5 and end_state == loader.state_dict()
    # A state between epochs starts the next one.
    between = Loader(paths, **options)
    between.load_state_dict(loader.state_dict())
    assert between.epoch == 5


def test_a_state_of_another_walk_is_refused(two_files, tmp_path):
    paths, _ = two_files
    loader = Loader(paths, seed=1, batch_size=10)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    for options, want in [(dict(seed=2), "seed 1 \\(this Loader has seed 2\\)"),
                          (dict(seed=1, num_shards=2), "shard 0 of 1"),
                          (dict(seed=1, page_aware=True), "page_aware=false"),
                          (dict(seed=1, order_version=2), "order_version=1")]:
        with pytest.raises(InvalidArgumentError, match=want):
            Loader(paths, batch_size=10, **options).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="another dataset"):
        Loader(paths[:1], seed=1).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="no \"cursor\" entry"):
        Loader(paths, seed=1).load_state_dict({"epoch": 0})
    forged = dict(state, cursor=b"LIRSCUR\0garbage")
    with pytest.raises(DataLossError, match="cursor state"):
        Loader(paths, seed=1).load_state_dict(forged)
    # A copy (pickle) keeps its options and epoch; the state restores into it.
    loader.set_epoch(6)
    copy = pickle.loads(pickle.dumps(loader))
    assert copy.epoch == 6
    assert [b for b in copy] == [b for b in loader]


def test_bad_input_gives_typed_errors_naming_file_instance_and_byte(tmp_path, two_files):
    paths, payloads = two_files
    damaged = damaged_copy(paths[0], tmp_path / "damaged.tfrecord", 42)
    offsets = read_table(str(damaged) + ".offsets")
    good = stock([paths[0]])
    for deterministic in (True, False):
        it = iter(Loader(damaged, seed=4, batch_size=32, deterministic=deterministic))
        got, errors = [], []
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            except DataLossError as e:
                errors.append(e)
                continue  # the walk goes on after the damaged instance
            got += batch
        assert len(errors) == 1, errors
        e = errors[0]
        assert e.file == str(damaged) and e.instance == 42 and e.offset == offsets[42]
        assert f"instance 42 at byte {offsets[42]}" in str(e)
        # Everything else, exactly once.
        assert collections.Counter(got) == collections.Counter(good[:42] + good[43:])

    (tmp_path / "untabled.tfrecord").write_bytes(paths[1].read_bytes())
    with pytest.raises(NotFoundError, match="offset table") as e:
        Loader(tmp_path / "untabled.tfrecord", index_missing=False)
    assert "untabled.tfrecord" in str(e.value)
    for options, want in [(dict(batch_size=0), "batch_size must be >= 1, got 0"),
                          (dict(num_shards=2, shard_index=2), "shard_index must be in"),
                          (dict(num_parallel_reads=0), "num_parallel_reads must be >= 1"),
                          (dict(order_version=3), "order version must be 1 or 2")]:
        with pytest.raises(InvalidArgumentError, match=want):
            Loader(paths, **options)


@pytest.mark.parametrize("old, new", [(4, 3), (2, 5)])
@pytest.mark.parametrize("order_version", [1, 2])
def test_elastic_resume_of_an_epoch_with_another_number_of_loaders(two_files, tmp_path,
                                                                   old, new, order_version):
    """K processes each take two batches of epoch 0; K' new processes go on from the
    combined state (one of them in a new process through a state_dict): every
    instance of the epoch exactly once, then epoch 1 as a fresh K'-shard run."""
    paths, expected = two_files
    options = dict(seed=21, batch_size=32, order_version=order_version)
    delivered, states = [], []
    for k in range(old):
        loader = Loader(paths, num_shards=old, shard_index=k, **options)
        it = iter(loader)
        for _ in range(2):
            delivered.extend(next(it))
        states.append(loader.shard_state())
    epoch_state = Loader.combine_shard_states(states)
    for j in range(new):
        loader = Loader(paths, num_shards=new, shard_index=j, **options)
        loader.resume_epoch(epoch_state)
        it = iter(loader)
        delivered.extend(next(it, []))
        fresh = Loader(paths, num_shards=new, shard_index=j, **options)
        fresh.set_epoch(1)
        next_epoch = list(fresh)
        if j == 0:  # the rest of this shard's resumed walk in another process
            rest, after, _ = resume_in_new_process(
                tmp_path, paths, dict(options, num_shards=new, shard_index=j),
                loader.state_dict())
            delivered.extend(x for batch in rest for x in batch)
        else:
            delivered.extend(x for batch in it for x in batch)
            after = list(loader)
        assert after == next_epoch
    assert collections.Counter(delivered) == collections.Counter(expected)


def test_elastic_resume_refuses_a_state_of_another_seed(two_files):
    paths, _ = two_files
    loader = Loader(paths, seed=1, batch_size=8)
    state = Loader.combine_shard_states([loader.shard_state()])
    other = Loader(paths, seed=2, batch_size=8)
    with pytest.raises(DataLossError, match="seed"):
        other.resume_epoch(state)
    with pytest.raises(DataLossError):
        other.resume_epoch(b"LIRSEPO\x00 damaged")


def split(directory, prefix):
    """Two files `<prefix>-0000i-of-00002` of the same sizes whatever the prefix."""
    directory.mkdir(exist_ok=True)
    paths = [directory / f"{prefix}-0000{f}-of-00002" for f in range(2)]
    for f, path in enumerate(paths):
        write_file(path, [affine_payload(f * 100 + i, 10 + i % 7) for i in range(100)])
    return paths


def test_states_of_another_split_of_the_same_sizes_are_refused_naming_the_file(tmp_path):
    """Every saved state names its dataset by base names, instances and bytes: a
    Sampler's and a Loader's epoch state of split t is refused by split v (the same
    counts and sizes), naming the files; the same files moved elsewhere resume."""
    train, valid = split(tmp_path / "a", "t"), split(tmp_path / "a", "v")
    moved = split(tmp_path / "b", "t")
    named = "the state's file 0 t-00000-of-00002 \\(100 instances.*file 0 v-00000-of-00002"
    states = []
    for k in range(2):
        s = Sampler(DataSource(train), seed=3, num_shards=2, shard_index=k)
        states.append(s.shard_state(5 + k))
    epoch_state = Sampler.combine_shard_states(states)
    info = tfrecord_lirs._lirs.epoch_state_info(epoch_state)
    assert [f[0] for f in info["files"]] == ["t-00000-of-00002", "t-00001-of-00002"]
    other = Sampler(DataSource(valid), seed=3, num_shards=3, shard_index=0)
    with pytest.raises(DataLossError, match=named):
        other.resume(epoch_state)
    Sampler(DataSource(moved), seed=3, num_shards=3, shard_index=0).resume(epoch_state)
    # A Sampler's worker state of another split does not combine with this one's.
    mixed = [states[0], Sampler(DataSource(valid), seed=3, num_shards=2,
                                shard_index=1).shard_state(3)]
    with pytest.raises(InvalidArgumentError, match="states of two datasets"):
        Sampler.combine_shard_states(mixed)

    loaders = [Loader(train, seed=3, batch_size=4, num_shards=2, shard_index=k)
               for k in range(2)]
    for loader in loaders:
        next(iter(loader))
    epoch_state = Loader.combine_shard_states([loader.shard_state() for loader in loaders])
    with pytest.raises(DataLossError, match=named):
        Loader(valid, seed=3, batch_size=4).resume_epoch(epoch_state)
    resumed = Loader(moved, seed=3, batch_size=4)
    resumed.resume_epoch(epoch_state)
    next(iter(resumed))
    state = resumed.state_dict()
    assert state["names"] == ["t-00000-of-00002", "t-00001-of-00002"]
    with pytest.raises(InvalidArgumentError, match="another dataset.*v-00000-of-00002"):
        Loader(valid, seed=3, batch_size=4).load_state_dict(state)
