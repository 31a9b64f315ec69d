"""Index interop: `tfrecord-lirs index FILE INDEX --from dali|tfrecord-py`
and `tfrecord-lirs export FILE --format dali|tfrecord-py`, against index files written
by the real `tfrecord` package's tfrecord2idx (vahidk/tfrecord, PyPI `tfrecord`) and by
DALI's tfrecord2idx rule (one `offset size` line per record, size = the whole framed
record), and read back the way those tools read them."""

from __future__ import annotations

import collections
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    assert_error,
    read_records,
    read_table,
    run_cli,
    run_ok,
    tf,
    tf_read,
)

FORMATS = ["dali", "tfrecord-py"]


# The real `tfrecord` package (requirements-dev.txt) runs in its own process: it
# registers its own copy of TensorFlow's Example protos (tensorflow.BytesList, ...),
# which clashes with TensorFlow's in one process.
def _tfrecord_py(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def tfrecord_py_create_index(data, index) -> None:
    """The package's tfrecord2idx (tfrecord/tools/tfrecord2idx.py, create_index)."""
    _tfrecord_py("import sys; from tfrecord.tools.tfrecord2idx import create_index; "
                 f"create_index({str(data)!r}, {str(index)!r})")


def tfrecord_iterator(data, index, shard) -> list[bytes]:
    """The package's reader (tfrecord/reader.py, tfrecord_iterator) through an index."""
    out = _tfrecord_py(
        "import json; from tfrecord.reader import tfrecord_iterator; "
        f"print(json.dumps([bytes(r).hex() for r in tfrecord_iterator({str(data)!r}, "
        f"{str(index)!r}, shard={tuple(shard)!r})]))")
    return [bytes.fromhex(h) for h in json.loads(out)]


def dali_tfrecord2idx(data: Path, index: Path) -> None:
    """DALI's tools/tfrecord2idx, by its rule: walk the length fields, write
    `offset size` per record (fillers included), size = 8 + 4 + length + 4."""
    raw = data.read_bytes()
    lines, pos = [], 0
    while pos < len(raw):
        (length,) = struct.unpack_from("<q", raw, pos)
        lines.append(f"{pos} {length + 16}\n")
        pos += length + 16
    index.write_text("".join(lines))


def read_like_dali(data: Path, index: Path) -> list[bytes]:
    """DALI's IndexedFileLoader: `size` bytes at each `offset`, one sample each; its
    TFRecord parser then takes the payload out of the framing."""
    raw = data.read_bytes()
    out = []
    for line in index.read_text().split("\n"):
        if not line.strip():
            continue
        offset, size = map(int, line.split())
        blob = raw[offset : offset + size]
        (length,) = struct.unpack_from("<Q", blob, 0)
        assert length + 16 == size
        out.append(blob[12 : 12 + length])
    return out


@pytest.fixture
def tf_file(tmp_path):
    """A file written by TensorFlow, and its padded copy (with fillers)."""
    data = tmp_path / "tf.tfrecord"
    payloads = [(b"example %d;" % i) * (1 + (i * 7) % 90) for i in range(400)]
    with tf().io.TFRecordWriter(str(data)) as w:
        for p in payloads:
            w.write(p)
    padded = tmp_path / "padded.tfrecord"
    run_ok("pad", data, padded, "--page-size", "4096")
    assert any(r.is_filler for r in read_records(padded))
    return data, padded, payloads


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_from_real_tool_indexes_equal_index(tf_file, tmp_path, fmt):
    data, padded, payloads = tf_file
    for path in (data, padded):
        run_ok("index", path)
        expected = Path(f"{path}.offsets").read_bytes()
        # Indexes of the whole file, fillers listed: the tfrecord package's own writer,
        # and DALI's rule.
        real = tmp_path / f"{path.name}.tfindex"
        tfrecord_py_create_index(str(path), str(real))
        by_rule = tmp_path / f"{path.name}.dali-idx"
        dali_tfrecord2idx(path, by_rule)
        assert real.read_text() == by_rule.read_text()  # the same format
        table = tmp_path / "from.offsets"
        res = run_ok("index", path, real, "--from", fmt, "--out", table)
        assert res.text.strip() == str(len(payloads))
        assert table.read_bytes() == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_is_read_back_by_the_tools(tf_file, tmp_path, fmt):
    data, padded, payloads = tf_file
    # Unpadded: byte for byte the tfrecord package's own index.
    out = tmp_path / "plain.idx"
    assert run_ok("export", data, "--format", fmt, "--out", out).text.strip() == "400"
    real = tmp_path / "real.tfindex"
    tfrecord_py_create_index(str(data), str(real))
    assert out.read_bytes() == real.read_bytes()
    # The tfrecord package's reader, sharded through our index, reads every record once.
    shards = [tfrecord_iterator(data, out, shard=(i, 3)) for i in range(3)]
    assert sorted(sum(shards, [])) == sorted(payloads)
    # Padded: instances only, so DALI's loader sees every instance and no filler.
    out = tmp_path / "padded.idx"
    assert run_ok("export", padded, "--format", fmt, "--out", out).text.strip() == "400"
    lines = out.read_text().splitlines()
    assert len(lines) == 400
    run_ok("index", padded)
    assert [int(line.split()[0]) for line in lines] == read_table(f"{padded}.offsets")
    samples = read_like_dali(padded, out)
    assert collections.Counter(samples) == collections.Counter(payloads)
    # The export reads back into the same table.
    table = tmp_path / "back.offsets"
    run_ok("index", padded, out, "--from", fmt, "--out", table)
    assert table.read_bytes() == Path(f"{padded}.offsets").read_bytes()


def test_export_default_paths_and_stdout(tf_file):
    data, _, _ = tf_file
    run_ok("export", data, "--format", "dali")
    run_ok("export", data, "--format", "tfrecord-py")
    dali = Path(f"{data}.idx")
    tfpy = data.with_suffix(".tfindex")  # tf.tfrecord -> tf.tfindex, as tfrecord2idx DIR names it
    assert dali.read_text() == tfpy.read_text()
    res = run_ok("export", data, "--format", "dali", "--out", "-")
    assert res.text == dali.read_text()
    assert sorted(tf_read(data)) == sorted(read_like_dali(data, dali))


def test_wrong_indexes_are_errors_naming_the_line(tf_file, tmp_path):
    data, _, _ = tf_file
    good = tmp_path / "good.tfindex"
    tfrecord_py_create_index(str(data), str(good))
    lines = good.read_text().splitlines()
    off, size = map(int, lines[9].split())
    table = Path(f"{data}.offsets")
    cases = {
        "size": lines[:9] + [f"{off} {size + 4}"] + lines[10:],
        "dropped": lines[:9] + lines[10:],
        "garbage": lines[:9] + ["ten 20"] + lines[10:],
        "past the end": lines + [f"{off * 1000} {size}"],
    }
    for what, content in cases.items():
        bad = tmp_path / f"bad-{what.replace(' ', '-')}.idx"
        bad.write_text("\n".join(content) + "\n")
        line = 10 if what != "past the end" else len(lines) + 1
        res = run_cli("index", data, bad, "--from", "dali")
        msg = assert_error(res, 1, names=f"{bad}: line {line}: ")
        assert not table.exists(), what
        if what != "garbage":
            assert str(data) in msg, msg
    # Usage errors: a format without an index, an index without a format, an unknown one.
    for args in (["--from", "dali"], [good], [good, "--from", "lmdb"]):
        res = run_cli("index", data, *args)
        assert res.returncode == 2, res.describe()
    res = run_cli("export", data, "--format", "recordio")
    assert res.returncode == 2, res.describe()
    # Never over the data file.
    res = run_cli("export", data, "--format", "dali", "--out", data)
    assert_error(res, 1, names=str(data))
    assert tf_read(data)


def test_tfrecord_package_example_loader_fails_loudly_on_fillers(tmp_path):
    """What README/FORMAT.md promise of Example parsers: the real `tfrecord`
    package's example_loader reads the unpadded file's Examples, and on the padded copy
    fails on the first filler with a protobuf DecodeError instead of yielding empty
    Examples; with `stock_dataset`-style filtering nothing is lost (the instances are
    exactly the Examples)."""
    tfm = tf()
    data = tmp_path / "examples.tfrecord"
    examples = []
    with tfm.io.TFRecordWriter(str(data)) as w:
        for i in range(300):
            ex = tfm.train.Example(features=tfm.train.Features(feature={
                "label": tfm.train.Feature(int64_list=tfm.train.Int64List(value=[i])),
                "blob": tfm.train.Feature(bytes_list=tfm.train.BytesList(
                    value=[b"x" * (50 + (i * 37) % 700)])),
            })).SerializeToString()
            examples.append(ex)
            w.write(ex)
    padded = tmp_path / "padded.tfrecord"
    run_ok("pad", data, padded, "--page-size", "4096")
    assert any(r.is_filler for r in read_records(padded))

    def load_labels(path):
        return json.loads(_tfrecord_py(
            "import json\n"
            "from tfrecord.reader import example_loader\n"
            "try:\n"
            f"    labels = [int(e['label'][0]) for e in example_loader({str(path)!r}, None, "
            "{'label': 'int', 'blob': 'byte'})]\n"
            "    print(json.dumps({'labels': labels}))\n"
            "except Exception as e:\n"
            "    print(json.dumps({'error': type(e).__name__, 'message': str(e)}))\n"))

    assert load_labels(data) == {"labels": list(range(300))}
    failed = load_labels(padded)
    assert failed.get("error") == "DecodeError", failed
    # The padded file holds exactly the Examples, fillers aside.
    instances = [r.payload for r in read_records(padded) if not r.is_filler]
    assert instances == examples
