"""The TensorFlow-free front ends, in a venv without TensorFlow (`make pytest-without-tf`):
`DataSource`, `Sampler` and their Grain and PyTorch uses, with real Grain and real
PyTorch DataLoaders (worker processes). Expectations come from the tests' own framing
(conftest.py), never from the library under test."""

from __future__ import annotations

import collections
import pickle
import subprocess
import sys

import pytest

from conftest import affine_payload, damaged_copy, framed, read_records, read_table, run_ok

import tfrecord_lirs
from tfrecord_lirs import DataSource, Sampler
from tfrecord_lirs.errors import (DataLossError, InvalidArgumentError, LIRSError,
                                  NotFoundError)


def write_file(path, payloads):
    """A plain TFRecord file and its table; returns the payloads."""
    data, table = framed(payloads)
    path.write_bytes(data)
    (path.parent / (path.name + ".offsets")).write_bytes(table)
    return list(payloads)


@pytest.fixture
def two_files(tmp_path):
    a = write_file(tmp_path / "a.tfrecord", [affine_payload(i, 10 + i % 50) for i in range(300)])
    b = write_file(tmp_path / "b.tfrecord", [b"b%d" % i for i in range(200)])
    return [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"], a + b


@pytest.fixture
def padded(tmp_path):
    """A file padded to 4 KiB pages by the CLI, and its instance payloads."""
    src = tmp_path / "src.tfrecord"
    write_file(src, [affine_payload(i, 100 + (i * 37) % 300) for i in range(2000)])
    dst = tmp_path / "padded.tfrecord"
    run_ok("pad", src, dst)
    payloads = [r.payload for r in read_records(dst) if not r.payload.startswith(b"\x00LIRSPAD")]
    return dst, payloads


def test_import_needs_no_tensorflow():
    with pytest.raises(ImportError):
        import tensorflow  # noqa: F401  (this venv has none: the point of the suite)
    assert "tensorflow" not in sys.modules
    assert tfrecord_lirs.__version__
    # The TensorFlow names say which extra to install when first used.
    with pytest.raises(ImportError, match="needs TensorFlow.*tfrecord-lirs\\[cpu\\]"):
        tfrecord_lirs.LIRSDataset  # noqa: B018
    # tf.data's refurbishing and sharing are listed where users look, loaded lazily.
    for name in ("refurbish", "augment"):
        assert name in dir(tfrecord_lirs) and name in tfrecord_lirs.__all__
        with pytest.raises(ImportError, match="needs TensorFlow"):
            getattr(tfrecord_lirs, name)
    assert "tensorflow" not in sys.modules


def test_random_access_reads_exactly_the_records(two_files):
    paths, payloads = two_files
    src = DataSource(paths)
    assert len(src) == len(payloads) == 500
    assert [src[i] for i in range(len(src))] == payloads
    assert list(src) == payloads
    assert src[-1] == payloads[-1] and src[-500] == payloads[0]
    ids = [499, 0, 300, 299, 7, 7, 350]
    assert src.__getitems__(ids) == [payloads[i] for i in ids]
    assert src._getitems(ids) == [payloads[i] for i in ids]  # Grain's batched read
    assert src.__getitems__([]) == []
    for bad in (500, -501, 10**12):
        with pytest.raises(IndexError, match=f"index {bad} is out of range for 500"):
            src[bad]
        with pytest.raises(IndexError):
            src.__getitems__([1, bad])


def test_pickled_source_reopens_its_files(two_files):
    paths, payloads = two_files
    copy = pickle.loads(pickle.dumps(DataSource([str(p) for p in paths])))
    assert len(copy) == 500 and copy[250] == payloads[250]
    assert copy.paths == [str(p) for p in paths]


def test_errors_name_the_file_instance_and_byte(tmp_path, two_files):
    paths, _ = two_files
    damaged = damaged_copy(paths[0], tmp_path / "damaged.tfrecord", 42)
    offsets = read_table(str(damaged) + ".offsets")
    src = DataSource(damaged)
    assert src[41] and src[43]  # only the damaged instance fails
    for read in (lambda: src[42], lambda: src.__getitems__([1, 42, 2])):
        with pytest.raises(DataLossError) as e:
            read()
        assert isinstance(e.value, (LIRSError, OSError))
        assert e.value.file == str(damaged) and e.value.instance == 42
        assert e.value.offset == offsets[42]
        assert f"instance 42 at byte {offsets[42]}" in str(e.value)

    with pytest.raises(NotFoundError) as e:
        DataSource(tmp_path / "missing.tfrecord")
    assert isinstance(e.value, FileNotFoundError) and "missing.tfrecord" in str(e.value)
    (tmp_path / "untabled.tfrecord").write_bytes(paths[1].read_bytes())
    with pytest.raises(NotFoundError, match="offset table"):
        DataSource(tmp_path / "untabled.tfrecord", index_missing=False)
    with pytest.raises(InvalidArgumentError, match="got 1 offset tables for 2 data files"):
        DataSource(paths, offset_tables=[str(paths[0]) + ".offsets"])
    with pytest.raises(InvalidArgumentError, match="page_size must be a power of two from 512 to 16777216 bytes, got 1000"):
        DataSource(paths, page_size=1000)
    with pytest.raises(ValueError, match="unknown I/O backend"):
        DataSource(paths, backend="bogus")
    with pytest.raises(ValueError, match="mmap"):
        DataSource(paths, backend="mmap")


def test_error_classes_follow_their_cause(tmp_path, two_files):
    """Damaged or changed data is a DataLossError; a mistake in what was passed (a
    compressed file, another file's table) an InvalidArgumentError (docs/FORMAT.md,
    "Errors: one kind per cause")."""
    import gzip

    paths, _ = two_files
    data, table = paths[0].read_bytes(), (tmp_path / "a.tfrecord.offsets").read_bytes()
    # A shard truncated after its table was written: changed data.
    cut = tmp_path / "cut" / "a.tfrecord"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) // 2 + 3])
    (cut.parent / "a.tfrecord.offsets").write_bytes(table)
    with pytest.raises(DataLossError, match="was truncated after its table was written"):
        DataSource(cut)
    # A GZIP file given as if it were uncompressed, with or without a table.
    gz = tmp_path / "c.tfrecord.gz"
    gz.write_bytes(gzip.compress(data))
    for tables in (None, [str(tmp_path / "a.tfrecord.offsets")]):
        with pytest.raises(InvalidArgumentError) as e:
            DataSource(gz, offset_tables=tables)
        message = str(e.value)
        assert "GZIP-compressed" in message and "1f 8b" in message, message
        # Python's own advice: the package's call, no CLI command.
        assert f'tfrecord_lirs.pad("{gz}", OUT)' in message and "tfrecord-lirs " not in message, message
    # b's table given for a: a mistake; the advice is a's own table, never to write
    # a's table over b's.
    b_table = tmp_path / "b.tfrecord.offsets"
    before = b_table.read_bytes()
    with pytest.raises(InvalidArgumentError) as e:
        DataSource(paths[0], offset_tables=[b_table])
    message = str(e.value)
    assert f"is the table of another data file, {paths[1]}" in message, message
    assert f"{paths[0]}.offsets" in message and f"--out {b_table}" not in message, message
    assert b_table.read_bytes() == before


def test_explicit_tables_and_backends(tmp_path, two_files):
    paths, payloads = two_files
    moved = tmp_path / "elsewhere.offsets"
    moved.write_bytes((tmp_path / "b.tfrecord.offsets").read_bytes())
    for backend in ("auto", "pread", "direct"):
        src = DataSource(paths, offset_tables=[None, moved], backend=backend)
        assert src.__getitems__(list(range(500))) == payloads, backend


def test_sampler_epochs_are_permutations_and_shards_partition(two_files):
    paths, _ = two_files
    src = DataSource(paths)
    sampler = Sampler(src, seed=42)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        ids = list(sampler)
        assert sorted(ids) == list(range(500)) and len(sampler) == 500
        epochs.append(ids)
    assert len({tuple(e) for e in epochs}) == 3
    assert list(Sampler(500, seed=42)) == epochs[0]  # a length gives the same order
    sampler.set_epoch(1)
    assert list(sampler) == epochs[1]  # deterministic per (seed, epoch)
    shards = [list(Sampler(src, seed=42, num_shards=3, shard_index=k)) for k in range(3)]
    assert sorted(sum(shards, [])) == list(range(500))
    assert sum(shards, []) == epochs[0]  # shards are slices of the epoch's order
    with pytest.raises(InvalidArgumentError, match="shard_index must be in"):
        Sampler(src, num_shards=2, shard_index=2)
    with pytest.raises(InvalidArgumentError, match="page-aware order needs the files"):
        Sampler(500, page_aware=True)


def test_a_pickled_sampler_keeps_its_epoch_and_resumed_epoch(two_files):
    # Grain and DataLoader workers get copies: the copy walks the same orders.
    paths, _ = two_files
    src = DataSource(paths)
    for sampler in (Sampler(src, seed=4, num_shards=2, shard_index=1), Sampler(500, seed=4)):
        sampler.set_epoch(3)
        copy = pickle.loads(pickle.dumps(sampler))
        assert (copy.epoch, copy.seed, copy.num_shards, copy.shard_index) == (
            3, 4, sampler.num_shards, sampler.shard_index)
        assert list(copy) == list(sampler) and len(copy) == len(sampler)
    old = [Sampler(src, seed=4, num_shards=2, shard_index=k) for k in range(2)]
    for s in old:
        s.set_epoch(2)
    epoch_state = Sampler.combine_shard_states([old[0].shard_state(10), old[1].shard_state(30)])
    resumed = Sampler(src, seed=4)
    resumed.resume(epoch_state)
    copy = pickle.loads(pickle.dumps(resumed))
    assert copy.epoch == 2 and len(copy) == 460 and list(copy) == list(resumed)
    delivered = list(old[0])[:10] + list(old[1])[:30]
    assert sorted(delivered + list(copy.order(2))) == list(range(500))


def test_orders_equal_the_cli_order(padded):
    path, _ = padded
    src = DataSource(path)
    for version in (1, 2):
        for page_aware in (False, True):
            sampler = Sampler(src, seed=7, page_aware=page_aware, order_version=version)
            sampler.set_epoch(2)
            args = (["order", path, "--seed", "7", "--epoch", "2", "--order-version", str(version)]
                    + (["--page-aware"] if page_aware else []))
            out = run_ok(*args).text.split()
            assert list(sampler) == [int(x) for x in out], (version, page_aware)
            assert sorted(sampler) == list(range(len(src)))
        if version == 2:  # no file needed for an instance-based v2 order either
            assert list(Sampler(len(src), seed=7, order_version=2).order(2)) == list(
                Sampler(src, seed=7, order_version=2).order(2))
    with pytest.raises(InvalidArgumentError, match="order version must be 1 or 2"):
        Sampler(src, order_version=3)


def test_page_aware_orders_read_whole_pages(padded):
    path, payloads = padded
    src = DataSource(path)
    offsets = read_table(str(path) + ".offsets")
    ids = list(Sampler(src, seed=3, page_aware=True))
    assert sorted(ids) == list(range(len(payloads)))
    pages = [offsets[i] // 4096 for i in ids]
    # Each page is visited in one run: a page never comes back after another one.
    runs = [p for k, p in enumerate(pages) if k == 0 or pages[k - 1] != p]
    assert len(runs) == len(set(pages))
    assert src.__getitems__(ids[:300]) == [payloads[i] for i in ids[:300]]


def test_pytorch_dataloader_with_workers_reads_each_epoch_once(two_files):
    import torch.utils.data as tud

    paths, payloads = two_files
    src = DataSource(paths)
    sampler = Sampler(src, seed=5)
    loader = tud.DataLoader(src, sampler=sampler, batch_size=32, num_workers=2,
                            collate_fn=list, persistent_workers=False)
    seen = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        got = [p for batch in loader for p in batch]
        assert collections.Counter(got) == collections.Counter(payloads), epoch
        assert got == [payloads[i] for i in sampler.order(epoch)]  # in the sampler's order
        seen.append(got)
    assert seen[0] != seen[1]


def test_pytorch_distributed_style_shards(two_files):
    import torch.utils.data as tud

    paths, payloads = two_files
    src = DataSource(paths)
    got = []
    for rank in range(2):
        sampler = Sampler(src, seed=9, num_shards=2, shard_index=rank)
        loader = tud.DataLoader(src, sampler=sampler, batch_size=50, num_workers=2,
                                collate_fn=list)
        got += [p for batch in loader for p in batch]
    assert collections.Counter(got) == collections.Counter(payloads)


def test_grain_map_dataset_in_lirs_order(padded):
    import grain

    from tfrecord_lirs import grain as lirs_grain

    path, payloads = padded
    src = DataSource(path)
    n = len(src)
    ds = lirs_grain.shuffle(src, seed=11, page_aware=True)
    assert len(ds) == n
    sampler = Sampler(src, seed=11, page_aware=True)
    assert [ds[i] for i in range(50)] == [payloads[i] for i in sampler.order(0)[:50]]
    assert ds[n + 3] == payloads[sampler.order(1)[3]]  # index n.. is epoch 1
    # One seed, one order: Grain's epochs are the Sampler's and the CLI's.
    for epoch in (0, 1):
        cli = run_ok("order", path, "--seed", 11, "--epoch", epoch, "--page-aware")
        assert [int(i) for i in cli.stdout.split()] == list(sampler.order(epoch))
        assert [ds[epoch * n + i] for i in range(n)] == [payloads[i] for i in sampler.order(epoch)]
    batches = list(ds.batch(256, batch_fn=list))
    assert collections.Counter(p for b in batches for p in b) == collections.Counter(payloads)
    # Grain's own shuffle over the source works too (the RandomAccessDataSource protocol).
    plain = list(grain.MapDataset.source(src).shuffle(seed=1))
    assert collections.Counter(plain) == collections.Counter(payloads)
    # The iterator side, with prefetch threads.
    it = ds.to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=64))
    assert collections.Counter(it) == collections.Counter(payloads)


def test_grain_dataloader_with_worker_processes(two_files):
    import grain

    from tfrecord_lirs import grain as lirs_grain

    paths, payloads = two_files
    src = DataSource(paths)
    sampler = lirs_grain.IndexSampler(src, seed=13, num_epochs=2)
    loader = grain.DataLoader(data_source=src, sampler=sampler, worker_count=2,
                              shard_options=grain.sharding.NoSharding(),
                              operations=[grain.transforms.Batch(50, batch_fn=list)])
    batches = list(loader)
    order = Sampler(src, seed=13)
    ids = list(order.order(0)) + list(order.order(1))  # global index -> instance id
    # Grain deals global indices round-robin to its 2 workers, each batches its own:
    # batch b comes from worker b % 2, its (b // 2)-th batch of indices w, w+2, ...
    expected = [[payloads[ids[b % 2 + 2 * j]] for j in range(50 * (b // 2), 50 * (b // 2 + 1))]
                for b in range(20)]
    assert batches == expected
    got = [p for batch in batches for p in batch]
    for epoch in (got[:500], got[500:]):
        assert collections.Counter(epoch) == collections.Counter(payloads)


def test_the_package_imports_in_a_fresh_interpreter_without_tensorflow():
    code = ("import sys, tfrecord_lirs; s = tfrecord_lirs.Sampler(10, seed=1); "
            "assert sorted(s) == list(range(10)); assert 'tensorflow' not in sys.modules; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
