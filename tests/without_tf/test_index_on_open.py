"""No separate indexing step: a TFRecord file without its offset table is opened by
`DataSource`/`Loader`, its table built on open (the bytes `tfrecord-lirs index` writes)
and kept beside it, once per file even when PyTorch DataLoader worker processes open
the files at once; `index_missing=False` keeps the old `NotFoundError`. The expected
tables come from the tests' own framing (conftest.py)."""

from __future__ import annotations

import collections

import pytest

from conftest import FILLER_MAGIC, affine_payload, frame, framed

import tfrecord_lirs
from tfrecord_lirs import DataSource, Loader
from tfrecord_lirs.errors import DataLossError, InvalidArgumentError, NotFoundError


def write_untabled(path, payloads):
    """A plain TFRecord file without a table; returns (payloads, the table `index` writes)."""
    data, table = framed(payloads)
    path.write_bytes(data)
    return list(payloads), table


def test_a_data_source_reads_an_unindexed_file_and_keeps_its_table(tmp_path):
    path = tmp_path / "u.tfrecord"
    payloads, table = write_untabled(path, [affine_payload(i, 5 + i % 90) for i in range(700)])
    src = DataSource(path)
    assert len(src) == 700
    assert [src[i] for i in range(700)] == payloads
    assert src.__getitems__([699, 0, 350]) == [payloads[699], payloads[0], payloads[350]]
    assert (tmp_path / "u.tfrecord.offsets").read_bytes() == table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["u.tfrecord", "u.tfrecord.offsets"]


def test_index_missing_false_keeps_the_missing_table_error(tmp_path):
    path = tmp_path / "u.tfrecord"
    write_untabled(path, [b"x%d" % i for i in range(10)])
    # Python's own advice: the package's call, no CLI command.
    with pytest.raises(NotFoundError, match=r"offset table.*tfrecord_lirs\.build_offset_table\("):
        DataSource(path, index_missing=False)
    with pytest.raises(NotFoundError, match="offset table"):
        Loader([path], index_missing=False)
    assert [p.name for p in tmp_path.iterdir()] == ["u.tfrecord"]
    # A copy pickled before `index_missing` existed (seven arguments) still opens.
    src = DataSource.__new__(DataSource)
    src.__setstate__({"args": ([str(path)], None, None, None, None, None, None)})
    assert len(src) == 10


class LazySource:
    """A map-style dataset that opens its DataSource in the worker that first reads:
    each DataLoader worker process opens the un-indexed files itself, at once."""

    def __init__(self, paths, n):
        self.paths, self.n, self.src = paths, n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.src is None:
            self.src = DataSource(self.paths)
        return self.src[i]


def test_dataloader_workers_open_unindexed_files_at_once(tmp_path):
    import torch.utils.data as tud

    paths, payloads, tables = [], [], []
    for name, n in (("a", 3000), ("b", 2000)):
        p, t = write_untabled(tmp_path / f"{name}.tfrecord",
                              [affine_payload(i, 20 + (i * 7) % 200) + name.encode()
                               for i in range(n)])
        paths.append(tmp_path / f"{name}.tfrecord")
        payloads += p
        tables.append(t)
    loader = tud.DataLoader(LazySource(paths, len(payloads)), batch_size=64, num_workers=2,
                            collate_fn=list, shuffle=True)
    got = [p for batch in loader for p in batch]
    assert collections.Counter(got) == collections.Counter(payloads)
    for p, t in zip(paths, tables):
        assert (tmp_path / (p.name + ".offsets")).read_bytes() == t
    # No temporary file of a builder is left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.tfrecord", "a.tfrecord.offsets", "b.tfrecord", "b.tfrecord.offsets"]


def test_loader_with_dataloader_workers_over_unindexed_files(tmp_path):
    import torch.utils.data as tud
    import tfrecord_lirs.torch

    paths, payloads = [], []
    for name in ("a", "b"):
        p, _ = write_untabled(tmp_path / f"{name}.tfrecord",
                              [name.encode() + b"%d" % i for i in range(500)])
        paths.append(tmp_path / f"{name}.tfrecord")
        payloads += p
    ds = tfrecord_lirs.torch.Loader(paths, seed=3, batch_size=50)
    loader = tud.DataLoader(ds, batch_size=None, num_workers=2)
    got = [p for batch in loader for p in batch]
    assert collections.Counter(got) == collections.Counter(payloads)


def test_a_file_that_starts_with_a_filler_is_told_to_pad_in_python_words(tmp_path):
    # No table can index a file whose first record is a filler: the advice is the
    # package's call, never the CLI's command.
    path = tmp_path / "f.tfrecord"
    path.write_bytes(frame(FILLER_MAGIC + bytes(16)) + frame(b"payload"))
    with pytest.raises(DataLossError, match=r"byte 0.*tfrecord_lirs\.pad\(") as e:
        DataSource(path)
    assert "tfrecord-lirs " not in str(e.value)
    # pad will not replace an existing output unless asked, in Python's words too.
    out = tmp_path / "out.tfrecord"
    out.write_bytes(b"")
    write_untabled(tmp_path / "u.tfrecord", [b"x"])
    with pytest.raises(InvalidArgumentError, match=r"pad would replace it.*overwrite=True") as e:
        tfrecord_lirs.pad(tmp_path / "u.tfrecord", out)
    assert "--force" not in str(e.value)
