"""Shared helpers for the pytest conformance suite.

Everything here is an independent Python reference: TFRecord framing and the
CRC masking are re-implemented from the format description (the CRC-32C itself
is Google's `google-crc32c`), so the tests never take their expectations from
the Rust implementation under test.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import google_crc32c  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TESTDATA = REPO / "testdata"
CLI_PATH = Path(os.environ.get("TFRECORD_LIRS_CLI") or REPO / "target" / "release" / "tfrecord-lirs")

FILLER_MAGIC = b"\x00LIRSPAD"
MIN_FILLER = 24  # 12-byte header + 8-byte magic + 4-byte payload CRC
HEADER = 12
FOOTER = 4
CLI_TIMEOUT = 120

TF_FILES = ["empty.tfrecord", "one.tfrecord", "sizes.tfrecord", "mixed.tfrecord", "examples.tfrecord"]


# --------------------------------------------------------------------------
# CRC32C (Castagnoli) from Google's `google-crc32c` package, and TFRecord masking.

def crc32c(data: bytes) -> int:
    return google_crc32c.value(bytes(data))


def masked_crc32c(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# --------------------------------------------------------------------------
# Framing.

@dataclass(frozen=True)
class Record:
    offset: int
    payload: bytes

    @property
    def framed_size(self) -> int:
        return HEADER + len(self.payload) + FOOTER

    @property
    def end(self) -> int:
        return self.offset + self.framed_size

    @property
    def is_filler(self) -> bool:
        return self.payload[:8] == FILLER_MAGIC


def walk_records(data: bytes, check_crc: bool = True) -> list[Record]:
    """Parse every record of an uncompressed TFRecord byte string.

    Raises AssertionError if any byte is not part of a well-formed record.
    """
    records, pos = [], 0
    while pos < len(data):
        assert pos + HEADER <= len(data), f"truncated header at {pos}"
        length_bytes = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack_from("<I", data, pos + 8)
        if check_crc:
            assert length_crc == masked_crc32c(length_bytes), f"bad length CRC at {pos}"
        end = pos + HEADER + length + FOOTER
        assert end <= len(data), f"record at {pos} overruns the file"
        payload = data[pos + HEADER : pos + HEADER + length]
        (payload_crc,) = struct.unpack_from("<I", data, pos + HEADER + length)
        if check_crc:
            assert payload_crc == masked_crc32c(payload), f"bad payload CRC at {pos}"
        records.append(Record(pos, payload))
        pos = end
    return records


def read_records(path: Path, check_crc: bool = True) -> list[Record]:
    return walk_records(Path(path).read_bytes(), check_crc=check_crc)


def read_table(path: Path) -> list[int]:
    raw = Path(path).read_bytes()
    assert len(raw) % 8 == 0, f"{path}: table size {len(raw)} is not a multiple of 8"
    return list(struct.unpack(f"<{len(raw) // 8}Q", raw))


def damaged_copy(src: Path, dst: Path, instance: int) -> Path:
    """`dst`: a copy of `src` and its table (`<file>.offsets`) with the first payload
    byte of `instance` flipped (its CRC no longer matches)."""
    dst.write_bytes(src.read_bytes())
    table = Path(str(dst) + ".offsets")
    table.write_bytes(Path(str(src) + ".offsets").read_bytes())
    raw = bytearray(dst.read_bytes())
    raw[read_table(table)[instance] + 12] ^= 0x40  # 12: length (8) and its CRC (4)
    dst.write_bytes(bytes(raw))
    return dst


def pack_table(offsets: list[int]) -> bytes:
    return struct.pack(f"<{len(offsets)}Q", *offsets)


def frame(payload: bytes) -> bytes:
    """One TFRecord record (header, masked CRCs) around `payload`."""
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc32c(header)) + payload
            + struct.pack("<I", masked_crc32c(payload)))


def framed(payloads) -> tuple[bytes, bytes]:
    """A plain TFRecord file of `payloads` and its offset table, as bytes."""
    data, offsets = bytearray(), []
    for p in payloads:
        offsets.append(len(data))
        data += frame(p)
    return bytes(data), pack_table(offsets)


def write_id_shards(directory, prefix, bounds) -> list[Path]:
    """Shards `<prefix>-0000f-of-0000n` in `directory` (made if missing), as TFDS lays out
    a split: shard f holds ids `bounds[f] ..< bounds[f + 1]` as payloads b"<id>", each
    with its offset table. Their paths, in order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n = len(bounds) - 1
    paths = []
    for f in range(n):
        path = directory / f"{prefix}-{f:05d}-of-{n:05d}"
        data, table = framed([b"%d" % i for i in range(bounds[f], bounds[f + 1])])
        path.write_bytes(data)
        (directory / (path.name + ".offsets")).write_bytes(table)
        paths.append(path)
    return paths


def affine_payload(i: int, size: int, a: int = 131, b: int = 7) -> bytes:
    return bytes((i * a + j * b) % 256 for j in range(size))


# --------------------------------------------------------------------------
# Padded-file reference checker.

def check_padded_layout(data_path: Path, table_path: Path, page_size: int) -> list[bytes]:
    """Check the padded-file invariants independently; return instance payloads in ID order.

    (a) every byte belongs to a valid record (CRCs checked here, TF checks too);
        fillers carry the magic followed by zeros and are never in the table;
        the table lists exactly the non-filler records, in file order.
    (b) an instance whose framed size is <= P - 24 lies, with its whole span,
        inside one page.
    (c) a larger instance starts on a page boundary.
    """
    data = Path(data_path).read_bytes()
    records = walk_records(data)
    table = read_table(table_path)

    for r in records:
        if r.is_filler:
            assert r.framed_size >= MIN_FILLER
            assert r.payload[8:] == bytes(len(r.payload) - 8), f"filler at {r.offset} has non-zero body"
    instances = [r for r in records if not r.is_filler]
    assert table == [r.offset for r in instances], "table != offsets of the non-filler records"

    bounds = table + [len(data)]
    for i, r in enumerate(instances):
        start, end = bounds[i], bounds[i + 1]
        assert end > start
        if r.framed_size <= page_size - MIN_FILLER:
            assert start // page_size == (end - 1) // page_size, (
                f"instance {i} (framed {r.framed_size}) span [{start}, {end}) crosses a {page_size}-byte page"
            )
        else:
            assert start % page_size == 0, (
                f"large instance {i} (framed {r.framed_size}) starts at {start}, not on a {page_size}-byte page"
            )
    return [r.payload for r in instances]


# --------------------------------------------------------------------------
# TensorFlow.

_tf = None


def tf():
    global _tf
    if _tf is None:
        import tensorflow

        _tf = tensorflow
    return _tf


def tf_read(path: Path, compression: str | None = None) -> list[bytes]:
    ds = tf().data.TFRecordDataset(str(path), compression_type=compression or "")
    return [bytes(x.numpy()) for x in ds]


def beam_write_gzip_tfrecords(records, prefix, num_shards=2):
    """`records` written by Apache Beam's WriteToTFRecord (GZIP, `num_shards` shards)
    under `prefix`; the files it wrote, sorted. Beam's job server makes its temporary
    root in the process's temp dir and leaves it there at exit: it goes beside the
    output instead."""
    import tempfile

    import apache_beam as beam
    from apache_beam.io.filesystem import CompressionTypes

    saved, tempfile.tempdir = tempfile.tempdir, os.path.dirname(prefix)
    try:
        with beam.Pipeline() as p:
            _ = (p | beam.Create(records)
                 | beam.io.WriteToTFRecord(prefix, compression_type=CompressionTypes.GZIP,
                                           num_shards=num_shards))
    finally:
        tempfile.tempdir = saved
    return sorted(glob.glob(prefix + "-*-of-*"))


# --------------------------------------------------------------------------
# CLI.

@dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: bytes
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    def describe(self) -> str:
        return f"$ tfrecord-lirs {' '.join(self.args)}\nexit {self.returncode}\nstdout: {self.text[:2000]!r}\nstderr: {self.stderr[:2000]!r}"


def require_cli() -> Path:
    """Fail loudly (never skip) when the CLI binary is missing."""
    if not (CLI_PATH.is_file() and os.access(CLI_PATH, os.X_OK)):
        pytest.fail(
            f"tfrecord-lirs CLI not found or not executable at {CLI_PATH}; "
            "build it (cargo build --release) or set TFRECORD_LIRS_CLI",
            pytrace=False,
        )
    return CLI_PATH


def run_cli(*args) -> Result:
    require_cli()
    argv = [str(a) for a in args]
    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    env.pop("RUST_LOG", None)
    proc = subprocess.run([str(CLI_PATH), *argv], capture_output=True, timeout=CLI_TIMEOUT, env=env)
    return Result(argv, proc.returncode, proc.stdout, proc.stderr.decode("utf-8", errors="replace"))


def run_ok(*args) -> Result:
    res = run_cli(*args)
    assert res.returncode == 0, res.describe()
    assert "panicked" not in res.stderr, res.describe()
    return res


def run_many(arg_lists: list[list]) -> list[Result]:
    """Run many CLI invocations concurrently (order of results = order of inputs)."""
    with ThreadPoolExecutor(max_workers=min(16, (os.cpu_count() or 2) * 2)) as pool:
        return list(pool.map(lambda a: run_cli(*a), arg_lists))


def assert_error(res: Result, exit_code: int = 1, names: str | None = None) -> str:
    """A data error: given exit code, exactly one stderr line `error: ...`, no panic."""
    assert res.returncode == exit_code, res.describe()
    assert "panicked" not in res.stderr, res.describe()
    assert "RUST_BACKTRACE" not in res.stderr, res.describe()
    lines = res.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error:"), res.describe()
    if names is not None:
        assert names in lines[0], f"error line does not name {names!r}\n{res.describe()}"
    return lines[0]


def integers_in(text: str) -> list[int]:
    """All integers in text; thousands separators (1,234 / 1_234) are accepted."""
    return [int(re.sub(r"[,_]", "", m)) for m in re.findall(r"\d+(?:[,_]\d{3})*", text)]


def parse_order(res: Result) -> list[int]:
    return [int(line) for line in res.text.split("\n") if line.strip()]


# --------------------------------------------------------------------------
# Fixtures.

@pytest.fixture(scope="session")
def manifest() -> dict:
    with open(TESTDATA / "manifest.json", encoding="utf-8") as f:
        m = json.load(f)
    return {e["filename"]: e for e in m["files"]}


@pytest.fixture
def copy_testdata(tmp_path):
    def copy(name: str) -> Path:
        dst = tmp_path / name
        shutil.copyfile(TESTDATA / name, dst)
        return dst

    return copy


@pytest.fixture
def indexed(copy_testdata):
    """Copy a testdata file to tmp and index it; returns (data path, true offsets)."""

    def make(name: str) -> tuple[Path, list[int]]:
        path = copy_testdata(name)
        run_ok("index", path)
        return path, [r.offset for r in read_records(path, check_crc=False)]

    return make


@pytest.fixture()
def records_source(tmp_path):
    """Makes a `tfrecord_lirs.DataSource` over one padded file of `n` records, record `i`
    being `bytes([i]) * length(i)` (the refurbish tests' data: the first byte names the
    id; written by the package under test, which those tests are not about)."""
    import tfrecord_lirs

    def make(n, length):
        path = tmp_path / "d.tfrecord"
        with tfrecord_lirs.PaddedWriter(str(path)) as w:
            for i in range(n):
                w.write(bytes([i]) * length(i))
        return tfrecord_lirs.DataSource([str(path)])

    return make
