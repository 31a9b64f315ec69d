"""File lists without TensorFlow: a pattern (tf.io.gfile.glob syntax) given to
`build_offset_table`, `DataSource`, `Loader`, `torch.Loader` and the Grain forms is
expanded by the core to its data files, sorted, never an offset table; indexing twice
is a no-op; a pattern or list of nothing is a NotFoundError naming it; the CLI's
`order` over the same files is the Loader's order."""

from __future__ import annotations

import pytest

from conftest import framed, parse_order, run_ok

import tfrecord_lirs
from tfrecord_lirs import DataSource, Loader, Sampler
from tfrecord_lirs.errors import InvalidArgumentError, NotFoundError


def shards(tmp_path, n=4):
    """`n` TFDS-named shards without tables; payload = its global id as text."""
    files, payloads = [], []
    for i in range(n):
        path = tmp_path / f"train.tfrecord-{i:05d}-of-{n:05d}"
        records = [b"%d" % (len(payloads) + r) for r in range(20 + i)]
        path.write_bytes(framed(records)[0])
        files.append(path)
        payloads.extend(records)
    return files, payloads


def test_indexing_a_pattern_twice_is_a_no_op_and_never_takes_a_table(tmp_path):
    files, _ = shards(tmp_path)
    pattern = str(tmp_path / "train.tfrecord-*-of-*")
    tables = tfrecord_lirs.build_offset_table(pattern)
    assert tables == [f"{f}.offsets" for f in files]
    stamps = [(tmp_path / t).stat().st_mtime_ns for t in tables]
    # The second launch of a script: the pattern now also matches 4 tables.
    assert tfrecord_lirs.build_offset_table(pattern) == tables
    assert [(tmp_path / t).stat().st_mtime_ns for t in tables] == stamps  # not rewritten
    # A list is taken as given: a table in it is named as one (the CLI, whose
    # arguments a shell expanded, leaves a list's own tables out).
    listed = sorted(str(p) for p in tmp_path.iterdir())
    assert len(listed) == 8
    with pytest.raises(InvalidArgumentError, match="is an offset table"):
        tfrecord_lirs.build_offset_table(listed)


def test_every_front_end_takes_a_pattern_as_its_sorted_data_files(tmp_path):
    files, payloads = shards(tmp_path)
    pattern = str(tmp_path / "train.tfrecord-*-of-*")
    tfrecord_lirs.build_offset_table(pattern)
    source = DataSource(pattern)
    assert source.paths == [str(f) for f in files]
    assert [source[i] for i in range(len(source))] == payloads
    assert len(DataSource(tmp_path / "train.tfrecord-0000[01]-of-?????")) == 20 + 21
    loader = Loader(pattern, seed=3, batch_size=1)
    walked = [int(b[0]) for b in loader]
    assert sorted(walked) == list(range(len(payloads)))
    # The CLI's order over the same pattern is the Loader's order.
    assert parse_order(run_ok("order", pattern, "--seed", "3", "--epoch", "0")) == walked
    assert list(Sampler(source, seed=3)) == walked


def test_torch_and_grain_forms_take_a_pattern(tmp_path):
    files, payloads = shards(tmp_path, 2)
    pattern = str(tmp_path / "train.tfrecord-*")
    tfrecord_lirs.build_offset_table(pattern)
    import tfrecord_lirs.torch as lirs_torch
    got = [bytes(b[0]) for b in lirs_torch.Loader(pattern, seed=1, batch_size=1)]
    assert sorted(got) == sorted(payloads)


@pytest.mark.parametrize("make", [
    lambda p: DataSource(p),
    lambda p: Loader(p, seed=0),
    lambda p: tfrecord_lirs.build_offset_table(p),
    lambda p: tfrecord_lirs.pad(p, "out-dir"),
])
def test_a_pattern_or_list_of_nothing_is_not_found_naming_it(tmp_path, make):
    shards(tmp_path, 1)
    missing = str(tmp_path / "valid.tfrecord-*")
    with pytest.raises(NotFoundError, match="valid.tfrecord-.*no data file matches"):
        make(missing)
    with pytest.raises(NotFoundError, match="no files given"):
        make([])
