"""Files from other tools, end to end (CLI, LIRSDataset, read, pad):

* padded files written the way the LIRS reference implementation
  (winiel559/tfrecord-lirs-implementation) writes them, read with the table
  trusted (`--trust-table` / `trust_table=True`);
* GZIP and ZLIB TFRecords written by TensorFlow, converted by `pad` in one step;
* the missing-table error on every path, which says how to make a table.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, assert_error, run_cli, run_ok

if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402


def write_reference_style(path: Path, payloads: list[bytes], page: int) -> tuple[list[int], list[bytes]]:
    """Writes `payloads` with tf.io.TFRecordWriter following the reference
    implementation's OffsetTableBuilder(padding=True) rule, and its table.

    The rule (OffsetTableBuilder.calc_offset, called before each
    writer.write(instance)): with `size` the file size so far, if
    `(size + len(instance) + 16 + 16) // PAGE` is a later page than
    `size // PAGE`, a padding record of `pad_len - 16` ASCII '0' bytes is
    written first, `pad_len = new_page * PAGE - size`, so the pad ends on that
    page's boundary (only if `pad_len - 16 > 0`; the reference prints "error"
    otherwise). The table entry is the file size after those writes (the
    reference reads it with os.path.getsize; we flush first so the size is
    exact). Returns the offsets and the pad payloads written.
    """
    offsets, pads = [], []
    with tf.io.TFRecordWriter(str(path)) as writer:
        for p in payloads:
            writer.flush()
            size = os.path.getsize(path)
            new_page = (size + len(p) + 32) // page
            if new_page > size // page:
                pad_len = new_page * page - size
                assert pad_len - 16 > 0, "the reference's 'error' case: choose other sizes"
                pad = b"0" * (pad_len - 16)
                writer.write(pad)
                pads.append(pad)
            writer.flush()
            offsets.append(os.path.getsize(path))
            writer.write(p)
    Path(str(path) + ".offsets").write_bytes(np.asarray(offsets, dtype="<u8").tobytes())
    return offsets, pads


def ref_payloads(page: int, n: int, seed: int) -> list[bytes]:
    """A large first record (so instance 0 follows a pad: byte >= page), small
    varied ones, and now and then a large one."""
    rng = np.random.default_rng(seed)
    out = [rng.integers(0, 256, page + 300, dtype=np.uint8).tobytes()]
    for i in range(1, n):
        size = 2 * page + 100 if i % 97 == 0 else int(rng.integers(20, page // 3))
        out.append(bytes([i % 251 + 1]) + rng.integers(0, 256, size - 1, dtype=np.uint8).tobytes())
    return out


def stock_records(path: Path) -> list[bytes]:
    return [bytes(r.numpy()) for r in tf.data.TFRecordDataset(str(path))]


@pytest.fixture(scope="module", params=[512, 4096, 65536])
def reference_file(request, tmp_path_factory):
    page = request.param
    path = tmp_path_factory.mktemp(f"ref{page}") / "ref.tfrecords"
    payloads = ref_payloads(page, 300, seed=page)
    offsets, pads = write_reference_style(path, payloads, page)
    assert offsets[0] >= page, offsets[0]
    assert len(pads) > 2
    # What a stock reader sees: the instances with the pads between them; the
    # instances are the records minus the pads.
    stock = stock_records(path)
    assert len(stock) == len(payloads) + len(pads)
    instances = collections.Counter(stock) - collections.Counter(pads)
    assert instances == collections.Counter(payloads)
    return path, page, payloads, pads


def test_reference_padded_files_through_the_cli(reference_file):
    path, page, payloads, pads = reference_file
    # Strict (the default) refuses, and says which mode reads the file.
    for args in (["get", path, 0], ["verify", path], ["order", path, "--seed", "1"]):
        line = assert_error(run_cli(*args), names=path.name)
        # The CLI's own advice: its flag, not the Python argument.
        assert "--trust-table" in line and "trust_table=True" not in line, line
    for i in [0, 1, len(payloads) // 2, len(payloads) - 1] + list(range(95, 100)):
        assert run_ok("get", path, i, "--trust-table").stdout == payloads[i], i
    res = run_ok("verify", path, "--trust-table")
    assert f"{len(payloads)} instances, {len(pads)} padding records" in res.text, res.text
    assert f"padded for page size {page}" in res.text, res.text
    for extra in ([], ["--page-size", page]):
        info = json.loads(run_ok("info", path, "--trust-table", "--json", *extra).text)
        assert info["instances"] == len(payloads), info
        assert info["fillers"] == len(pads), info
        assert info["padded"] and info["padded_page_size"] == page, info
        assert info["table_trusted"] is True
    assert f"padded: yes, for page size {page}" in run_ok("info", path, "--trust-table").text
    # pad --trust-table converts it into our padded format; a scan (index, plain pad)
    # cannot tell the '0' pads from instances.
    out = path.with_name(f"ours{page}.padded")
    assert f"instances: {len(payloads)}" in run_ok("pad", path, out, "--trust-table").text
    assert [bytes(x.numpy()) for x in tfrecord_lirs.stock_dataset(str(out))] == payloads
    out2 = path.with_name(f"ours{page}-py.padded")
    assert tfrecord_lirs.pad(path, out2, trust_table=True).instances == len(payloads)
    assert out2.read_bytes() == out.read_bytes()
    scanned = path.with_name(f"scanned{page}.tfrecords")
    scanned.write_bytes(path.read_bytes())
    assert run_ok("index", scanned).text.split() == [str(len(payloads) + len(pads))]
    order = [int(x) for x in run_ok("order", path, "--seed", "3", "--page-aware", "--page-size", page,
                                    "--trust-table").text.split()]
    assert sorted(order) == list(range(len(payloads)))


def test_reference_padded_files_through_lirs_dataset_and_read(reference_file):
    path, page, payloads, _ = reference_file
    expected = collections.Counter(payloads)
    for page_aware in (False, True):
        ds = tfrecord_lirs.LIRSDataset(str(path), page_aware=page_aware, seed=7, page_size=page,
                                       trust_table=True)
        got = [bytes(x.numpy()) for x in ds]
        assert collections.Counter(got) == expected, page_aware
        batched = tfrecord_lirs.LIRSDataset(str(path), page_aware=page_aware, seed=7, page_size=page,
                                            trust_table=True, batch_size=32, backend="mmap")
        got = [bytes(x) for b in batched for x in b.numpy()]
        assert collections.Counter(got) == expected, page_aware
    ids = list(range(len(payloads)))[::-1]
    got = tfrecord_lirs.read(str(path), ids, page_size=page, trust_table=True).numpy()
    assert [bytes(x) for x in got] == [payloads[i] for i in ids]
    # Strict: refused with a message naming the mode.
    with pytest.raises(tf.errors.InvalidArgumentError, match="trust_table=True to LIRSDataset"):
        list(tfrecord_lirs.LIRSDataset(str(path), page_size=page))
    with pytest.raises(tf.errors.InvalidArgumentError, match="trust_table=True"):
        tfrecord_lirs.read(str(path), [0], page_size=page)


def tf_examples(n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        ex = tf.train.Example(features=tf.train.Features(feature={
            "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
            "x": tf.train.Feature(float_list=tf.train.FloatList(
                value=rng.normal(size=int(rng.integers(1, 200))).tolist())),
        }))
        out.append(ex.SerializeToString())
    return out


@pytest.fixture(scope="module")
def tf_compressed(tmp_path_factory):
    """The same records written by TensorFlow plain, GZIP and ZLIB."""
    d = tmp_path_factory.mktemp("compressed")
    records = tf_examples(3000, seed=5)
    paths = {}
    for kind in ("", "GZIP", "ZLIB"):
        p = d / f"data{kind or '-plain'}.tfrecord"
        with tf.io.TFRecordWriter(str(p), tf.io.TFRecordOptions(compression_type=kind)) as w:
            for r in records:
                w.write(r)
        paths[kind or "plain"] = p
    assert paths["GZIP"].read_bytes()[:2] == b"\x1f\x8b"
    assert paths["ZLIB"].read_bytes()[:1] == b"\x78"
    return d, records, paths


@pytest.mark.parametrize("fit", ["next", "best"])
def test_pad_converts_tensorflow_gzip_and_zlib_files(tf_compressed, fit):
    d, records, paths = tf_compressed
    want = d / f"want-{fit}.padded"
    run_ok("pad", paths["plain"], want, "--fit", fit)
    for kind in ("GZIP", "ZLIB"):
        for how in (["--compression", kind.lower()], []):
            out = d / f"cli-{kind}-{fit}-{len(how)}.padded"
            res = run_ok("pad", paths[kind], out, "--fit", fit, *how)
            assert f"instances: {len(records)}" in res.text
            assert out.read_bytes() == want.read_bytes(), (kind, how)
            assert Path(str(out) + ".offsets").read_bytes() == Path(str(want) + ".offsets").read_bytes()
        for compression in (None, kind, kind.lower()):
            out = d / f"py-{kind}-{fit}-{compression}.padded"
            summary = tfrecord_lirs.pad(paths[kind], out, fit=fit, compression=compression)
            assert summary.instances == len(records)
            assert out.read_bytes() == want.read_bytes(), (kind, compression)
        # The padded copy holds the original's instances, in order for next-fit.
        got = [bytes(x.numpy()) for x in tfrecord_lirs.stock_dataset(str(out))]
        if fit == "next":
            assert got == records
        assert collections.Counter(got) == collections.Counter(records)
        lirs = [bytes(x.numpy()) for x in tfrecord_lirs.LIRSDataset(str(out), seed=1)]
        assert collections.Counter(lirs) == collections.Counter(records)


def test_broken_compressed_input_is_a_clean_error(tf_compressed):
    d, records, paths = tf_compressed
    for kind in ("GZIP", "ZLIB"):
        data = paths[kind].read_bytes()
        cut = d / f"cut-{kind}.tfrecord"
        cut.write_bytes(data[: len(data) // 2])
        out = d / f"cut-{kind}.padded"
        line = assert_error(run_cli("pad", cut, out), names=cut.name)
        assert kind in line and "decompressed byte" in line, line
        assert not out.exists() and not Path(str(out) + ".offsets").exists()
        with pytest.raises(tf.errors.DataLossError, match=f"{kind} stream"):
            tfrecord_lirs.pad(cut, out)
        # Corrupt deflate data (not just short): also one clean error line.
        bad = bytearray(data)
        bad[len(bad) // 2: len(bad) // 2 + 64] = bytes(64)
        corrupt = d / f"corrupt-{kind}.tfrecord"
        corrupt.write_bytes(bytes(bad))
        assert_error(run_cli("pad", corrupt, d / "c.padded"), names=corrupt.name)
    # A wrong --compression: a clean error too.
    assert_error(run_cli("pad", paths["plain"], d / "w.padded", "--compression", "gzip"),
                 names=paths["plain"].name)
    usage = run_cli("pad", paths["plain"], d / "w.padded", "--compression", "bzip2")
    assert usage.returncode == 2 and "possible values: none, gzip, zlib" in usage.stderr, usage.describe()
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown compression"):
        tfrecord_lirs.pad(paths["plain"], d / "w.padded", compression="bzip2")


def test_index_refuses_compressed_files_naming_pad_and_gunzip(tf_compressed):
    _, _, paths = tf_compressed
    for kind in ("GZIP", "ZLIB"):
        line = assert_error(run_cli("index", paths[kind]), names=paths[kind].name)
        assert kind in line and "tfrecord-lirs pad" in line and "gunzip" in line, line
        # A compressed file is a mistake in what was passed, not damage.
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"tfrecord_lirs\.pad\("):
            tfrecord_lirs.build_offset_table(paths[kind])


def test_stock_dataset_mirrors_tfrecord_dataset_arguments(tf_compressed):
    d, records, paths = tf_compressed
    for kind in ("GZIP", "ZLIB"):
        ds = tfrecord_lirs.stock_dataset(str(paths[kind]), compression_type=kind, buffer_size=1 << 16)
        assert [bytes(x.numpy()) for x in ds] == records
    padded = d / "two.padded"
    tfrecord_lirs.pad(paths["GZIP"], padded)
    files = [str(padded), str(paths["plain"])]
    ds = tfrecord_lirs.stock_dataset(files, num_parallel_reads=2)
    assert collections.Counter(bytes(x.numpy()) for x in ds) == collections.Counter(records * 2)


def test_every_missing_table_error_says_how_to_make_one(tmp_path):
    data = tmp_path / "train.tfrecord"
    with tf.io.TFRecordWriter(str(data)) as w:
        w.write(b"one")
    # Each front end in its own words: the CLI its commands, the op LIRSDataset's
    # argument and the package's call; never the other's.
    cli_hints = ([f"tfrecord-lirs index {data}", f"tfrecord-lirs pad {data}"], "tfrecord_lirs.")
    op_hints = ([f'tfrecord_lirs.build_offset_table("{data}")', "index_missing=True"],
                "tfrecord-lirs ")

    def check(message, hints=cli_hints):
        assert "no offset table" in message, message
        wanted, foreign = hints
        for hint in wanted:
            assert hint in message, message
        assert foreign not in message, message

    # With index_missing false (by default the readers build the table on open;
    # verify and info never do).
    refuse = ["--index-missing", "false"]
    for args in (["get", data, 0, *refuse], ["verify", data],
                 ["order", data, "--seed", "1", *refuse], ["info", data, "--trust-table"],
                 ["get", data, 0, "--trust-table", *refuse], ["verify", data, "--trust-table"]):
        check(assert_error(run_cli(*args), names=data.name))
    # A table given elsewhere: the hint builds it there.
    line = assert_error(run_cli("info", data, "--offsets", tmp_path / "t.idx"), names=data.name)
    assert f"tfrecord-lirs index {data} --out {tmp_path / 't.idx'}" in line, line
    for trust in (False, True):
        with pytest.raises(tf.errors.NotFoundError) as e:
            list(tfrecord_lirs.LIRSDataset(str(data), trust_table=trust, index_missing=False))
        check(e.value.message, op_hints)
        with pytest.raises(tf.errors.NotFoundError) as e:
            tfrecord_lirs.read(str(data), [0], trust_table=trust, index_missing=False)
        check(e.value.message, op_hints)
    # In a tf.function / graph dataset too (the op's error, not Python's).
    with pytest.raises(tf.errors.NotFoundError) as e:
        tf.function(lambda: tfrecord_lirs.read(str(data), [0], index_missing=False))()
    check(e.value.message, op_hints)


def test_what_example_parsers_see_in_padding(reference_file, tmp_path):
    """FORMAT.md §3: a LIRS filler is never an Example (it fails loudly); the
    reference's '0' pads parse as an empty Example when of even length."""
    from google.protobuf.message import DecodeError

    _, _, _, pads = reference_file
    for pad in pads:
        if len(pad) % 2 == 0:
            assert not tf.train.Example.FromString(pad).features.feature
        else:
            with pytest.raises(DecodeError):
                tf.train.Example.FromString(pad)
    path = tmp_path / "ours.tfrecord"
    with tfrecord_lirs.PaddedWriter(path, page_size=512) as w:
        for ex in tf_examples(50, seed=1):
            w.write(ex)
    fillers = [r for r in stock_records(path) if r.startswith(b"\x00LIRSPAD")]
    assert len(fillers) > 3
    for f in fillers:
        with pytest.raises(DecodeError):
            tf.train.Example.FromString(f)
