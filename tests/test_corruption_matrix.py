"""Corruption matrix through TensorFlow (issue #5): every damaged input read with
LIRSDataset ends in a clear tf.errors.DataLossError or InvalidArgumentError naming the
file and, for record damage, the instance and byte offset. Never a crash, a hang, a
silent skip or a wrong payload. Prints `category: tried N, caught cleanly M`."""
import collections
import os
import re
import shutil
import struct
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfrecord_lirs  # noqa: E402
from conftest import masked_crc32c  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

N = 60


def _records():
    rng = np.random.default_rng(12)
    return [b"%04d:" % i + bytes(rng.integers(97, 123, size=int(rng.integers(1, 900)), dtype=np.uint8))
            for i in range(N)]


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    d = tmp_path_factory.mktemp("orig")
    recs = _records()
    plain = str(d / "plain.tfrecord")
    with tf.io.TFRecordWriter(plain) as w:
        for r in recs:
            w.write(r)
    tfrecord_lirs.build_offset_table(plain)
    padded = str(d / "padded.tfrecord")
    tfrecord_lirs.pad(plain, padded, page_size=4096)
    return {"plain": plain, "padded": padded}, recs


def _offsets(table):
    return np.fromfile(table, dtype="<u8").astype(np.int64)


def _copy(src, dst_dir, name):
    dst = str(dst_dir / name)
    shutil.copy(src, dst)
    if os.path.exists(src + ".offsets"):
        shutil.copy(src + ".offsets", dst + ".offsets")
    return dst


def _outcome(path, recs):
    """Reads everything; returns (error or None, payloads read)."""
    got = []
    try:
        for x in LIRSDataset(path, seed=5, num_parallel_reads=2):
            got.append(x.numpy())
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError) as e:
        return e, got
    return None, got


def _cases(kind, path, recs):
    """Yields (category, mutate(path) -> expected detail regex) for one file kind."""
    table = _offsets(path + ".offsets")
    size = os.path.getsize(path)
    ids = [0, 7, N // 2, N - 1]

    def flip(at):
        def m(p):
            raw = bytearray(Path(p).read_bytes())
            raw[at] ^= 0x41
            Path(p).write_bytes(bytes(raw))
        return m

    for i in ids:
        off, plen = int(table[i]), len(recs[i])
        for field, positions in [("length", [off, off + 3, off + 7]),
                                 ("length CRC", [off + 8, off + 11]),
                                 ("payload", [off + 12, off + 12 + plen // 2, off + 12 + plen - 1]),
                                 ("payload CRC", [off + 12 + plen, off + 12 + plen + 3])]:
            for at in positions:
                yield f"{kind}: {field}", flip(at), rf"instance {i}\b.*byte {off}\b|byte {off}\b.*instance {i}\b"
    for cut in [size - 1, size - 5, int(table[-1]) + 3, int(table[-1]) + 13, int(table[N // 2]) + 20, 5]:
        yield f"{kind}: truncated", (lambda c: lambda p: os.truncate(p, c))(cut), r"byte \d+"

    def table_edit(fn):
        def m(p):
            t = _offsets(p + ".offsets")
            Path(p + ".offsets").write_bytes(fn(t))
        return m
    yield f"{kind}: table shortened", table_edit(lambda t: t[:-1].astype("<u8").tobytes()[:-3]), r"multiple of 8"
    yield f"{kind}: table partial entry", table_edit(lambda t: t.astype("<u8").tobytes() + b"\x01\x02"), r"multiple of 8"
    yield f"{kind}: table past the end", table_edit(
        lambda t: np.append(t, size + 100).astype("<u8").tobytes()), r"past the end"
    yield f"{kind}: table entries swapped", table_edit(
        lambda t: t[[0, 2, 1] + list(range(3, len(t)))].astype("<u8").tobytes()), r"strictly increase"
    for i in [0, 9, N - 1]:
        for delta in [1, 3, 7, -2]:
            if i == 0 and delta < 0:
                continue
            def moved(t, i=i, delta=delta):
                t = t.copy()
                t[i] += delta
                return t.astype("<u8").tobytes()
            # Moving entry i back shortens instance i-1's span: either may be named.
            named = rf"instance ({i}|{i - 1})\b" if delta < 0 else rf"instance {i}\b"
            yield f"{kind}: table offset moved", table_edit(moved), named
    yield f"{kind}: empty table", table_edit(lambda t: b""), r"table is empty"


@pytest.mark.parametrize("kind", ["plain", "padded"])
def test_corruption_matrix(originals, tmp_path, kind):
    files, recs = originals
    tally = collections.defaultdict(lambda: [0, 0])
    for n, (category, mutate, detail) in enumerate(_cases(kind, files[kind], recs)):
        path = _copy(files[kind], tmp_path, f"case{n}.tfrecord")
        mutate(path)
        err, got = _outcome(path, recs)
        tally[category][0] += 1
        assert err is not None, f"{category} (case {n}): read without error"
        msg = str(err.message)
        assert f"case{n}.tfrecord" in msg, f"{category}: file not named: {msg}"
        assert re.search(detail, msg), f"{category}: {detail!r} not in: {msg}"
        assert "panicked" not in msg
        # Whatever was delivered before the error is correct.
        assert set(got) <= set(recs), f"{category}: a wrong payload was delivered"
        tally[category][1] += 1
    for category, (tried, caught) in sorted(tally.items()):
        print(f"{category}: tried {tried}, caught cleanly {caught}")


def test_files_that_are_not_tfrecords(tmp_path, originals):
    files, recs = originals
    tally = collections.Counter()
    # Random garbage, with a table built for the real file.
    garbage = str(tmp_path / "garbage.tfrecord")
    Path(garbage).write_bytes(np.random.default_rng(1).integers(0, 256, 20000, dtype=np.uint8).tobytes())
    shutil.copy(files["plain"] + ".offsets", garbage + ".offsets")
    # GZIP-compressed TFRecord (written by TensorFlow).
    gz = str(tmp_path / "c.tfrecord.gz")
    with tf.io.TFRecordWriter(gz, options="GZIP") as w:
        for r in recs:
            w.write(r)
    # Empty data file with a non-empty table.
    empty = str(tmp_path / "empty.tfrecord")
    Path(empty).write_bytes(b"")
    shutil.copy(files["plain"] + ".offsets", empty + ".offsets")
    for path, pattern in [(garbage, "garbage.tfrecord"), (empty, "empty.tfrecord")]:
        err, got = _outcome(path, recs)
        assert err is not None and pattern in err.message, err
        assert not got
        tally["not a TFRecord / mismatched table"] += 1
    with pytest.raises(tf.errors.DataLossError, match="(?i)gzip"):
        tfrecord_lirs.build_offset_table(gz)
    tally["gzip"] += 1
    # A compressed file paired with a table: named as compressed, not as a CRC error.
    shutil.copy(files["plain"] + ".offsets", gz + ".offsets")
    err, _ = _outcome(gz, recs)
    assert err is not None and re.search("(?i)gzip", err.message), err
    tally["gzip with table"] += 1
    # A forged length of 2^62 with a valid length CRC: must not allocate, must be named.
    forged = str(tmp_path / "forged.tfrecord")
    length = struct.pack("<Q", 1 << 62)
    Path(forged).write_bytes(length + struct.pack("<I", masked_crc32c(length)) + b"x" * 100)
    Path(forged + ".offsets").write_bytes(struct.pack("<Q", 0))
    err, got = _outcome(forged, recs)
    assert err is not None and "forged.tfrecord" in err.message and "byte 0" in err.message, err
    with pytest.raises(tf.errors.DataLossError, match="truncated"):
        tfrecord_lirs.build_offset_table(forged)
    tally["length 2^62"] += 1
    for k, v in sorted(tally.items()):
        print(f"{k}: tried {v}, caught cleanly {v}")
