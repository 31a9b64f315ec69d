"""Corruption matrix through TensorFlow: every damaged input read with
LIRSDataset ends in a clear tf.errors.DataLossError or InvalidArgumentError naming the
file, the byte offset and, where one is involved, the instance. The same damage fed
to the CLI (`verify`, `get`) exits 1 with one `error: ...` line. Never a crash, a
hang, a silent skip or a wrong payload. With -s prints `category: tried N, caught
cleanly M` per category."""
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
from conftest import masked_crc32c, run_cli  # noqa: E402
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
    """Reads everything; returns (error or None, payloads read). Only DataLoss and
    InvalidArgument count as clear errors: anything else propagates and fails."""
    got = []
    try:
        for x in LIRSDataset(path, seed=5, num_parallel_reads=2):
            got.append(x.numpy())
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
        return e, got
    return None, got


Case = collections.namedtuple("Case", "category mutate detail get_id table_only")

# Every category, for the CLI parametrization (each must yield at least one case).
CATEGORIES = ["length", "length CRC", "payload", "payload CRC", "truncated",
              "table shortened by whole entries", "table middle entries dropped",
              "table partial entry", "table past the end", "table entries swapped",
              "table offset moved", "table of another file", "table empty"]


def _names_file(msg, path, table_only):
    """The data file is named itself (`case3.tfrecord`, not only as the prefix of
    `case3.tfrecord.offsets`); an error about the table's own bytes may name the table."""
    name = re.escape(os.path.basename(path))
    if re.search(name + r"(?![.\w-])", msg):
        return True
    return table_only and re.search(name + r"\.offsets(?![.\w-])", msg) is not None


def _cases(kind, path, recs, other):
    """Yields Case(category, mutate(path), detail regex, id for `get`, table_only) for
    one file kind; `other` is a file of the other kind (for its table)."""
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
                yield Case(f"{kind}: {field}", flip(at),
                           rf"instance {i}\b.*byte {off}\b|byte {off}\b.*instance {i}\b", i, False)
    for cut in [size - 1, size - 5, int(table[-1]) + 3, int(table[-1]) + 13, int(table[N // 2]) + 20, 5]:
        # The first entry at or past the cut is named; when none is, the last record
        # (now cut short) is.
        named = next((i for i in range(N) if table[i] >= cut), N - 1)
        yield Case(f"{kind}: truncated", (lambda c: lambda p: os.truncate(p, c))(cut),
                   rf"instance {named}\b", named, False)

    def table_edit(fn):
        def m(p):
            t = _offsets(p + ".offsets")
            Path(p + ".offsets").write_bytes(fn(t))
        return m

    def entries(t):
        return np.asarray(t).astype("<u8").tobytes()

    # Whole entries missing at the end: the records they indexed are still in the file,
    # now after the last indexed instance, where only filler may be.
    for k in [1, 2, 5, N // 2, N - 1]:
        yield Case(f"{kind}: table shortened by whole entries",
                   table_edit(lambda t, k=k: entries(t)[:-8 * k]),
                   rf"instance {N - k - 1}\b.*byte {int(table[N - k])}\b", N - k - 1, False)
    # Entries missing in the middle: instance j-1's span then holds record j too.
    for dropped in [[1], [N // 2], [N - 2], [10, 11]]:
        j = dropped[0]
        yield Case(f"{kind}: table middle entries dropped",
                   table_edit(lambda t, d=dropped: entries(np.delete(t, d))),
                   rf"instance {j - 1}\b.*byte {int(table[j])}\b", j - 1, False)
    yield Case(f"{kind}: table partial entry", table_edit(lambda t: entries(t[:-1])[:-3]),
               r"multiple of 8", 0, True)
    yield Case(f"{kind}: table partial entry", table_edit(lambda t: entries(t) + b"\x01\x02"),
               r"multiple of 8", 0, True)
    yield Case(f"{kind}: table past the end", table_edit(lambda t: entries(np.append(t, size + 100))),
               r"past the end", 0, True)
    yield Case(f"{kind}: table entries swapped", table_edit(lambda t: entries(t[[0, 2, 1] + list(range(3, len(t)))])),
               r"strictly increase", 1, True)
    for i in [0, 9, N - 1]:
        for delta in [1, 3, 7, -2]:
            if i == 0 and delta < 0:
                continue

            def moved(t, i=i, delta=delta):
                t = t.copy()
                t[i] += delta
                return entries(t)
            # Moving entry i changes instance i-1's span too (shorter, or ending with
            # bytes of record i that are not filler): either may be named.
            named = rf"instance ({i}|{i - 1})\b" if i > 0 else rf"instance {i}\b"
            yield Case(f"{kind}: table offset moved", table_edit(moved), named, i, True)
    other_table = Path(other + ".offsets").read_bytes()
    yield Case(f"{kind}: table of another file", table_edit(lambda t: other_table),
               r"instance \d+", N - 1, True)
    yield Case(f"{kind}: table empty", table_edit(lambda t: b""), r"table is empty", 0, True)


@pytest.fixture(scope="module")
def tally():
    """category -> [tried, caught cleanly], printed at the end of the module (-s)."""
    counts = collections.defaultdict(lambda: [0, 0])
    yield counts
    print("\ncorruption matrix through TensorFlow and the CLI (category: tried N, caught cleanly M)")
    for category, (tried, caught) in sorted(counts.items()):
        print(f"  {category}: tried {tried}, caught cleanly {caught}")


def _kind_cases(files, recs, kind):
    other = files["padded" if kind == "plain" else "plain"]
    return list(_cases(kind, files[kind], recs, other))


@pytest.mark.parametrize("kind", ["plain", "padded"])
def test_corruption_matrix(originals, tmp_path, kind, tally):
    files, recs = originals
    seen = set()
    for n, case in enumerate(_kind_cases(files, recs, kind)):
        seen.add(case.category.split(": ", 1)[1])
        path = _copy(files[kind], tmp_path, f"case{n}.tfrecord")
        case.mutate(path)
        tally[f"LIRSDataset {case.category}"][0] += 1
        err, got = _outcome(path, recs)
        assert err is not None, f"{case.category} (case {n}): read without error"
        msg = str(err.message)
        assert _names_file(msg, path, case.table_only), f"{case.category}: file not named: {msg}"
        assert re.search(r"byte \d+", msg), f"{case.category}: no byte offset: {msg}"
        assert re.search(case.detail, msg), f"{case.category}: {case.detail!r} not in: {msg}"
        assert "panicked" not in msg
        # Whatever was delivered before the error is correct.
        assert set(got) <= set(recs), f"{case.category}: a wrong payload was delivered"
        tally[f"LIRSDataset {case.category}"][1] += 1
    assert seen == set(CATEGORIES)


@pytest.mark.parametrize("command", ["verify", "get"])
@pytest.mark.parametrize("category", CATEGORIES)
@pytest.mark.parametrize("kind", ["plain", "padded"])
def test_cli_over_the_matrix(originals, tmp_path, kind, category, command, tally):
    """Each damage category through `tfrecord-lirs verify` and `get`: exit 1, one
    stderr line `error: ...` naming the file and `byte N`, no panic text."""
    files, recs = originals
    cases = [c for c in _kind_cases(files, recs, kind) if c.category == f"{kind}: {category}"]
    assert cases
    for n, case in enumerate(cases):
        path = _copy(files[kind], tmp_path, f"cli{n}.tfrecord")
        case.mutate(path)
        args = [path] if command == "verify" else [path, str(case.get_id)]
        key = f"CLI {command} {case.category}"
        tally[key][0] += 1
        res = run_cli(command, *args)
        lines = res.stderr.splitlines()
        assert res.returncode == 1, res.describe()
        assert len(lines) == 1 and lines[0].startswith("error: "), res.describe()
        assert _names_file(lines[0], path, case.table_only), res.describe()
        assert re.search(r"byte \d+", lines[0]), res.describe()
        for text in ("panicked", "backtrace", "RUST_BACKTRACE"):
            assert text not in res.stderr, res.describe()
        if command == "get":
            assert res.stdout == b"", res.describe()
        tally[key][1] += 1


def test_files_that_are_not_tfrecords(tmp_path, originals, tally):
    files, recs = originals

    def caught(category, path, err, got, detail=r"byte \d+"):
        key = f"LIRSDataset {category}"
        tally[key][0] += 1
        assert err is not None, f"{category}: read without error"
        msg = str(err.message)
        assert _names_file(msg, path, False), f"{category}: file not named: {msg}"
        assert re.search(r"byte \d+", msg) and re.search(detail, msg), f"{category}: {msg}"
        assert not got, f"{category}: delivered {len(got)} elements"
        tally[key][1] += 1

    # Random garbage, with a table built for the real file.
    garbage = str(tmp_path / "garbage.tfrecord")
    Path(garbage).write_bytes(np.random.default_rng(1).integers(0, 256, 20000, dtype=np.uint8).tobytes())
    shutil.copy(files["plain"] + ".offsets", garbage + ".offsets")
    caught("random garbage data", garbage, *_outcome(garbage, recs))
    # Empty data file with a non-empty table.
    empty = str(tmp_path / "empty.tfrecord")
    Path(empty).write_bytes(b"")
    shutil.copy(files["plain"] + ".offsets", empty + ".offsets")
    caught("empty data file", empty, *_outcome(empty, recs))
    # GZIP-compressed TFRecord (written by TensorFlow): no table can be built...
    gz = str(tmp_path / "c.tfrecord.gz")
    with tf.io.TFRecordWriter(gz, options="GZIP") as w:
        for r in recs:
            w.write(r)
    # A compressed file is a mistake in what was passed, not damage (docs/FORMAT.md,
    # "Errors: one kind per cause"): InvalidArgumentError, as it was DataLossError.
    tally["build_offset_table gzip"][0] += 1
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?i)gzip.*|byte \d+") as e:
        tfrecord_lirs.build_offset_table(gz)
    assert re.search(r"(?i)gzip", e.value.message) and re.search(r"byte \d+", e.value.message), e.value
    tally["build_offset_table gzip"][1] += 1
    # ...and paired with a table it is named as compressed, not as a CRC error.
    shutil.copy(files["plain"] + ".offsets", gz + ".offsets")
    caught("gzip with a table", gz, *_outcome(gz, recs), detail="(?i)gzip")
    # A forged length of 2^62 with a valid length CRC: must not allocate, must be named.
    forged = str(tmp_path / "forged.tfrecord")
    length = struct.pack("<Q", 1 << 62)
    Path(forged).write_bytes(length + struct.pack("<I", masked_crc32c(length)) + b"x" * 100)
    Path(forged + ".offsets").write_bytes(struct.pack("<Q", 0))
    caught("length 2^62", forged, *_outcome(forged, recs), detail=r"instance 0\b.*byte 0\b")
    tally["build_offset_table length 2^62"][0] += 1
    with pytest.raises(tf.errors.DataLossError, match="truncated"):
        tfrecord_lirs.build_offset_table(forged)
    tally["build_offset_table length 2^62"][1] += 1


def test_error_classes_follow_their_cause(tmp_path, originals):
    """Through LIRSDataset: a shard truncated after its table was written is changed
    data (DataLossError); a GZIP file given without compression_type and another file's
    table are mistakes in what was passed (InvalidArgumentError), and the advice for
    the latter never writes over the other file's table."""
    files, recs = originals
    cut = _copy(files["plain"], tmp_path, "cut.tfrecord")
    os.truncate(cut, _offsets(cut + ".offsets")[N // 2] + 7)
    with pytest.raises(tf.errors.DataLossError, match="was truncated after its table was written"):
        list(LIRSDataset(cut, seed=1))

    gz = str(tmp_path / "c.tfrecord.gz")
    with tf.io.TFRecordWriter(gz, options="GZIP") as w:
        for r in recs:
            w.write(r)
    for tables in (None, [files["plain"] + ".offsets"]):
        with pytest.raises(tf.errors.InvalidArgumentError) as e:
            list(LIRSDataset(gz, offset_tables=tables))
        message = e.value.message
        assert "GZIP-compressed" in message and "1f 8b" in message, message
        # The op's own advice: a call of the package and LIRSDataset, no CLI command.
        assert f'tfrecord_lirs.pad("{gz}", OUT)' in message and "LIRSDataset" in message, message
        assert "tfrecord-lirs " not in message, message

    f0 = _copy(files["plain"], tmp_path, "f0.tfrecord")
    f1 = _copy(files["padded"], tmp_path, "f1.tfrecord")
    before = Path(f1 + ".offsets").read_bytes()
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        list(LIRSDataset(f0, offset_tables=[f1 + ".offsets"]))
    message = e.value.message
    assert f"is the table of another data file, {f1}" in message, message
    assert f"{f0}.offsets" in message and f"--out {f1}.offsets" not in message, message
    assert Path(f1 + ".offsets").read_bytes() == before
