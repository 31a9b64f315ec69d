"""Writing and indexing without TensorFlow (`make pytest-without-tf`): `PaddedWriter`,
`pad` and `build_offset_table` through the extension, checked against the tests' own
framing (conftest.py), and read back by `DataSource`."""

from __future__ import annotations

import sys

import pytest

from conftest import affine_payload, framed, read_records, read_table

import tfrecord_lirs
from tfrecord_lirs import DataSource
from tfrecord_lirs.errors import InvalidArgumentError, NotFoundError


def instance_payloads(path):
    """The payloads of `path`'s instances, as the tests' own reader frames them."""
    return [r.payload for r in read_records(path) if not r.is_filler]


def test_padded_writer_writes_page_aligned_records_without_tensorflow(tmp_path):
    payloads = [affine_payload(i, 50 + (i * 53) % 900) for i in range(500)]
    path = tmp_path / "w.tfrecord"
    with tfrecord_lirs.PaddedWriter(path, page_size=4096) as w:
        ids = [w.write(p) for p in payloads]
    summary = w.close()
    assert ids == list(range(500)) and summary.instances == 500
    assert instance_payloads(path) == payloads
    table = read_table(tmp_path / "w.tfrecord.offsets")
    assert len(table) == 500
    # No record straddles a page: each starts where it fits its page or at a page start.
    records = [r for r in read_records(path) if not r.is_filler]
    for r in records:
        assert r.offset // 4096 == (r.end - 1) // 4096 or r.offset % 4096 == 0
    assert [r.offset for r in records] == table
    assert [DataSource([path])[i] for i in range(500)] == payloads
    assert "tensorflow" not in sys.modules


def test_pad_and_build_offset_table_over_a_pattern_without_tensorflow(tmp_path):
    want = {}
    for k in range(3):
        payloads = [affine_payload(1000 * k + i, 20 + (i * 31) % 700) for i in range(200)]
        data, _ = framed(payloads)
        (tmp_path / f"part-{k}.tfrecord").write_bytes(data)
        want[k] = payloads
    tables = tfrecord_lirs.build_offset_table(str(tmp_path / "part-*.tfrecord"))
    assert tables == [str(tmp_path / f"part-{k}.tfrecord.offsets") for k in range(3)]
    for k in range(3):
        assert (tmp_path / f"part-{k}.tfrecord.offsets").read_bytes() == framed(want[k])[1]
    out = tmp_path / "padded"
    out.mkdir()
    summaries = tfrecord_lirs.pad(str(tmp_path / "part-*.tfrecord"), out, page_size=4096)
    assert [s.instances for s in summaries] == [200, 200, 200]
    for k in range(3):
        assert instance_payloads(out / f"part-{k}.tfrecord") == want[k]
    src = DataSource([out / f"part-{k}.tfrecord" for k in range(3)])
    assert list(src) == want[0] + want[1] + want[2]
    # A list into a directory not made yet ("padded/", as a user writes it): made.
    files = [str(tmp_path / f"part-{k}.tfrecord") for k in range(3)]
    made = str(tmp_path / "made") + "/"
    assert [s.instances for s in tfrecord_lirs.pad(files, made)] == [200, 200, 200]
    assert instance_payloads(tmp_path / "made" / "part-1.tfrecord") == want[1]
    # One file into "dir/": into the directory, under its name.
    tfrecord_lirs.pad(files[2], str(tmp_path / "one") + "/")
    assert instance_payloads(tmp_path / "one" / "part-2.tfrecord") == want[2]
    assert "tensorflow" not in sys.modules


def test_writing_errors_are_the_librarys_typed_errors_without_tensorflow(tmp_path):
    missing = tmp_path / "missing.tfrecord"
    with pytest.raises(NotFoundError, match="missing.tfrecord") as e:
        tfrecord_lirs.build_offset_table(missing)
    assert type(e.value) is NotFoundError  # no tf.errors class: TensorFlow is not loaded
    with pytest.raises(ValueError, match="page_size"):
        tfrecord_lirs.PaddedWriter(tmp_path / "x.tfrecord", page_size=1000)
    data, _ = framed([b"a", b"b"])
    (tmp_path / "s.tfrecord").write_bytes(data)
    tfrecord_lirs.pad(tmp_path / "s.tfrecord", tmp_path / "d.tfrecord")
    with pytest.raises(InvalidArgumentError, match="d.tfrecord"):
        tfrecord_lirs.pad(tmp_path / "s.tfrecord", tmp_path / "d.tfrecord")  # exists
    assert "tensorflow" not in sys.modules


def test_pad_of_a_file_list_says_what_fit_auto_chose_for_each(tmp_path):
    # Small records: best fit pays; large ones: no padding (each file its own note).
    small = [affine_payload(i, 200 + (i * 37) % 300) for i in range(3000)]
    large = [affine_payload(i, 6000 + (i * 997) % 6000) for i in range(300)]
    files = []
    for name, payloads in [("small.tfrecord", small), ("large.tfrecord", large)]:
        (tmp_path / name).write_bytes(framed(payloads)[0])
        files.append(str(tmp_path / name))
    summaries = tfrecord_lirs.pad(files, str(tmp_path / "padded"), fit="auto")
    notes = [s.fit_note for s in summaries]
    assert notes[0].startswith("fit auto: chose best"), notes
    assert notes[1].startswith("fit auto: chose no padding"), notes
    # The same notes as each file padded alone.
    alone = [tfrecord_lirs.pad(f, str(tmp_path / f"alone{i}"), fit="auto").fit_note
             for i, f in enumerate(files)]
    assert notes == alone
    # Without fit="auto" there is nothing to say.
    assert [s.fit_note for s in tfrecord_lirs.pad(files, str(tmp_path / "next"))] == ["", ""]
