"""Conformance tests: the `tfrecord-lirs` CLI against real TensorFlow.

Expectations are computed independently in Python (framing walker and CRC32C
in conftest.py, tf.data.TFRecordDataset for what stock TF sees); nothing is
taken from the implementation under test.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from conftest import (
    FILLER_MAGIC,
    Result,
    TESTDATA,
    TF_FILES,
    affine_payload,
    assert_error,
    check_padded_layout,
    integers_in,
    pack_table,
    parse_order,
    read_records,
    read_table,
    run_cli,
    run_many,
    run_ok,
    tf,
    tf_read,
)

PAGE_SIZES = [512, 4096, 65536]
FITS = ["next", "best"]


def get_all(data: Path, n: int, *extra) -> list[bytes]:
    results = run_many([["get", data, i, *extra] for i in range(n)])
    for res in results:
        assert res.returncode == 0, res.describe()
        assert "panicked" not in res.stderr, res.describe()
    return [res.stdout for res in results]


def pad(src: Path, dst: Path, page_size: int | None = None, fit: str | None = None, *extra) -> Result:
    args = ["pad", src, dst]
    if page_size is not None:
        args += ["--page-size", page_size]
    if fit is not None:
        args += ["--fit", fit]
    return run_ok(*args, *extra)


def non_fillers(payloads: list[bytes]) -> list[bytes]:
    return [p for p in payloads if p[:8] != FILLER_MAGIC]


# ---------------------------------------------------------------------------
# Fixtures and the Python reference (no CLI involved).


@pytest.mark.parametrize("name", TF_FILES)
def test_fixture_matches_manifest_and_tf(name, manifest):
    entry = manifest[name]
    path = TESTDATA / name
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(data) == entry["file_size"]
    records = read_records(path)  # also proves the Python CRC32C matches TF's writer
    assert [r.offset for r in records] == entry["offsets"]
    assert [len(r.payload) for r in records] == entry["payload_sizes"]
    assert len(records) == entry["record_count"]
    assert tf_read(path) == [r.payload for r in records]
    rule = entry["payload_rule"]
    if rule["name"] == "affine_mod256":
        for i, r in enumerate(records):
            assert r.payload == affine_payload(i, len(r.payload), rule["a"], rule["b"])
    else:
        assert [r.payload.hex() for r in records] == entry["payloads_hex"]
        ex = tf().train.Example
        for r, want in zip(records, entry["examples"]):
            feat = ex.FromString(r.payload).features.feature
            assert list(feat["label"].int64_list.value) == [want["label"]]
            assert list(feat["weights"].float_list.value) == want["weights"]
            assert list(feat["name"].bytes_list.value) == [want["name"].encode()]


# ---------------------------------------------------------------------------
# index + get


@pytest.mark.parametrize("name", TF_FILES)
def test_index_and_get_match_tf(name, copy_testdata):
    data = copy_testdata(name)
    truth = [r.offset for r in read_records(data)]
    n = len(truth)

    res = run_ok("index", data)
    table_path = Path(str(data) + ".offsets")
    assert table_path.is_file()
    assert table_path.read_bytes() == pack_table(truth)
    assert n in integers_in(res.text), f"instance count {n} not reported\n{res.describe()}"

    tf_records = tf_read(data)
    assert len(tf_records) == n
    assert get_all(data, n) == tf_records

    assert_error(run_cli("get", data, n), names=data.name)


def test_index_out_and_offsets_option(tmp_path, copy_testdata):
    data = copy_testdata("examples.tfrecord")
    table = tmp_path / "elsewhere" / "my.table"
    table.parent.mkdir()
    run_ok("index", data, "--out", table)
    truth = [r.offset for r in read_records(data)]
    assert table.read_bytes() == pack_table(truth)
    assert not Path(str(data) + ".offsets").exists(), "--out must replace the default table path"

    expected = tf_read(data)
    assert get_all(data, len(truth), "--offsets", table) == expected
    run_ok("verify", data, "--offsets", table)
    # Without --offsets the default DATA.offsets is used, and it does not exist: an
    # error with --index-missing false; by default it is built there on open.
    res = run_cli("get", data, 0, "--index-missing", "false")
    assert_error(res)
    assert run_ok("get", data, 0).stdout == expected[0]
    assert Path(str(data) + ".offsets").read_bytes() == pack_table(truth)


# ---------------------------------------------------------------------------
# pad


@pytest.mark.parametrize("fit", FITS)
@pytest.mark.parametrize("page_size", PAGE_SIZES)
@pytest.mark.parametrize("name", ["sizes.tfrecord", "mixed.tfrecord"])
def test_pad(name, page_size, fit, tmp_path, copy_testdata):
    src = copy_testdata(name)
    original = tf_read(src)
    out = tmp_path / f"padded-{page_size}-{fit}.tfrecord"
    res = pad(src, out, page_size, fit)
    table_path = Path(str(out) + ".offsets")
    assert out.is_file() and table_path.is_file()
    n = len(original)
    assert n in integers_in(res.text), f"instance count not reported\n{res.describe()}"

    # Stock TF reads every byte; the non-filler records are the input's payloads.
    seen_by_tf = tf_read(out)
    instances = non_fillers(seen_by_tf)
    if fit == "next":
        assert instances == original
    else:
        assert Counter(instances) == Counter(original)

    # Independent layout check; instance order in the table == TF's order.
    by_table = check_padded_layout(out, table_path, page_size)
    assert by_table == instances

    instance_bytes = sum(len(p) + 16 for p in original)
    filler_bytes = out.stat().st_size - instance_bytes
    assert filler_bytes == sum(len(p) + 16 for p in seen_by_tf if p[:8] == FILLER_MAGIC)
    assert filler_bytes in integers_in(res.text), f"filler bytes {filler_bytes} not reported\n{res.describe()}"

    assert get_all(out, n) == by_table
    assert_error(run_cli("get", out, n), names=out.name)
    run_ok("verify", out)

    # Re-indexing the padded file skips fillers and reproduces the table.
    retable = tmp_path / "reindexed.offsets"
    res = run_ok("index", out, "--out", retable)
    assert retable.read_bytes() == table_path.read_bytes()
    assert n in integers_in(res.text)


def test_pad_default_page_size_is_4096(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "default.tfrecord"
    pad(src, out)
    table = Path(str(out) + ".offsets")
    # The default fit is not part of the contract: compare as a multiset.
    instances = check_padded_layout(out, table, 4096)
    assert Counter(instances) == Counter(tf_read(src))
    assert non_fillers(tf_read(out)) == instances


def test_pad_best_fit_window(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "window.tfrecord"
    pad(src, out, 4096, "best", "--window", 4)
    instances = check_padded_layout(out, Path(str(out) + ".offsets"), 4096)
    assert Counter(instances) == Counter(tf_read(src))
    assert non_fillers(tf_read(out)) == instances
    run_ok("verify", out)


@pytest.mark.parametrize(
    "first,second",
    [((4096, "next"), (512, "next")), ((4096, "best"), (65536, "best")), ((512, "next"), (4096, "best"))],
)
def test_pad_already_padded(first, second, tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    original = tf_read(src)
    once = tmp_path / "once.tfrecord"
    twice = tmp_path / "twice.tfrecord"
    pad(src, once, *first)
    pad(once, twice, *second)
    first_pass = check_padded_layout(once, Path(str(once) + ".offsets"), first[0])
    second_pass = check_padded_layout(twice, Path(str(twice) + ".offsets"), second[0])
    assert len(second_pass) == len(original), "fillers of the input must be dropped, not kept as instances"
    if second[1] == "next":
        assert second_pass == first_pass
    assert Counter(second_pass) == Counter(original)
    assert non_fillers(tf_read(twice)) == second_pass
    run_ok("verify", twice)


def test_pad_small_files(tmp_path, copy_testdata):
    for name in ["one.tfrecord", "examples.tfrecord"]:
        src = copy_testdata(name)
        out = tmp_path / f"padded-{name}"
        pad(src, out, 512, "next")
        assert check_padded_layout(out, Path(str(out) + ".offsets"), 512) == tf_read(src)
        run_ok("verify", out)


# ---------------------------------------------------------------------------
# verify


@pytest.mark.parametrize("name", TF_FILES)
def test_verify_ok_after_index(name, indexed):
    data, _ = indexed(name)
    res = run_ok("verify", data)
    assert "error" not in res.stderr.lower(), res.describe()


def _flip(path: Path, pos: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[pos] ^= 0x5A
    path.write_bytes(bytes(raw))


def _numbers_in_error(line: str, data: Path) -> list[int]:
    """Integers in an error line, ignoring the digits of the tmp directory path."""
    return integers_in(line.replace(str(data.parent), "<dir>"))


def _flip_payload(indexed, k: int) -> tuple[Path, str, int, int]:
    data, offsets = indexed("mixed.tfrecord")
    records = read_records(data, check_crc=False)
    pos = offsets[k] + 12 + len(records[k].payload) // 2
    _flip(data, pos)
    return data, assert_error(run_cli("verify", data), names=data.name), offsets[k], pos


def test_verify_payload_flip(indexed):
    data, line, record_start, flipped = _flip_payload(indexed, 137)
    nums = _numbers_in_error(line, data)
    assert record_start in nums or flipped in nums, f"byte offset {record_start} (or {flipped}) not named: {line}"


def test_verify_payload_flip_names_instance_id(indexed):
    """Contract: errors name 'where relevant the instance id'; a corrupt instance payload is such a case."""
    data, line, _, _ = _flip_payload(indexed, 137)
    assert 137 in _numbers_in_error(line, data), f"instance id 137 not named: {line}"


def test_verify_length_crc_flip(indexed):
    data, offsets = indexed("mixed.tfrecord")
    _flip(data, offsets[50] + 9)
    assert_error(run_cli("verify", data), names=data.name)


def test_verify_truncated_mid_record(indexed):
    data, _ = indexed("mixed.tfrecord")
    raw = data.read_bytes()
    data.write_bytes(raw[:-10])
    assert_error(run_cli("verify", data), names=data.name)


def test_verify_truncated_at_record_boundary(indexed):
    data, offsets = indexed("mixed.tfrecord")
    raw = data.read_bytes()
    data.write_bytes(raw[: offsets[-1]])  # last instance gone, table still lists it
    assert_error(run_cli("verify", data), names=data.name)


def test_verify_table_shortened(indexed):
    data, _ = indexed("mixed.tfrecord")
    table = Path(str(data) + ".offsets")
    table.write_bytes(table.read_bytes()[:-4])
    assert_error(run_cli("verify", data), names=data.name)


def test_verify_table_dropped_entry(indexed):
    data, offsets = indexed("mixed.tfrecord")
    table = Path(str(data) + ".offsets")
    table.write_bytes(pack_table(offsets[:100] + offsets[101:]))
    assert_error(run_cli("verify", data), names=data.name)


@pytest.mark.parametrize("k", [0, 200, 303])
def test_verify_offset_moved(k, indexed):
    data, offsets = indexed("mixed.tfrecord")
    table = Path(str(data) + ".offsets")
    moved = list(offsets)
    moved[k] += 3
    table.write_bytes(pack_table(moved))
    line = assert_error(run_cli("verify", data), names=data.name)
    nums = _numbers_in_error(line, data)
    assert offsets[k] in nums or moved[k] in nums, f"byte offset {offsets[k]} (or {moved[k]}) not named: {line}"


def test_verify_padded_filler_flip(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    pad(src, out, 4096, "next")
    fillers = [r for r in read_records(out) if r.is_filler]
    assert fillers, "a 4096-byte layout of mixed.tfrecord must need fillers"
    big = max(fillers, key=lambda r: len(r.payload))
    _flip(out, big.offset + 12 + len(big.payload) - 1)
    assert_error(run_cli("verify", out), names=out.name)
    with pytest.raises(Exception):
        tf_read(out)  # stock TF agrees the file is now corrupt


def test_verify_padded_entry_pointing_at_filler(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    pad(src, out, 4096, "best")
    table = Path(str(out) + ".offsets")
    offsets = read_table(table)
    records = read_records(out)
    # Point an entry at the filler following an instance: still a valid record, but not an instance.
    by_offset = {r.offset: r for r in records}
    for i, off in enumerate(offsets[:-1]):
        nxt = by_offset[off].end
        if nxt != offsets[i + 1]:
            break
    else:
        pytest.fail("no instance followed by a filler")
    bad = list(offsets)
    bad[i + 1] = nxt  # entry i+1 now names the filler right after instance i
    table_bytes = table.read_bytes()
    table.write_bytes(pack_table(bad))
    assert_error(run_cli("verify", out), names=out.name)
    table.write_bytes(table_bytes)
    run_ok("verify", out)


# ---------------------------------------------------------------------------
# get / usage


def test_get_out_of_range(indexed):
    data, offsets = indexed("mixed.tfrecord")
    for bad in [len(offsets), len(offsets) + 1, 2**63]:
        assert_error(run_cli("get", data, bad), names=data.name)
    empty, _ = indexed("empty.tfrecord")
    assert_error(run_cli("get", empty, 0), names=empty.name)


def test_missing_data_file(tmp_path):
    missing = tmp_path / "nope.tfrecord"
    assert_error(run_cli("index", missing), names="nope.tfrecord")
    assert_error(run_cli("verify", missing), names="nope.tfrecord")


@pytest.mark.parametrize(
    "args",
    [
        ["index", "{data}", "--no-such-flag"],
        ["verify", "{data}", "--bogus"],
        ["get", "{data}", "0", "--frobnicate"],
        ["order", "{data}", "--seed", "1", "--unknown"],
        ["pad", "{data}", "{tmp}/x.tfrecord", "--fit", "sideways"],
        ["get", "{data}", "not-a-number"],
        ["no-such-subcommand"],
        # Out-of-range values are usage errors too, like a non-number.
        ["pad", "{data}", "{tmp}/x.tfrecord", "--page-size", "1000"],
        ["pad", "{data}", "{tmp}/x.tfrecord", "--page-size", "256"],
        ["order", "{data}", "--seed", "1", "--page-size", "1000"],
        ["verify", "{data}", "--page-size", "1000"],
        ["info", "{data}", "--page-size", "1000"],
        ["pad", "{data}", "{tmp}/x.tfrecord", "--fit", "best", "--window", "0"],
        ["pad", "{data}", "{tmp}/x.tfrecord", "--fit", "next", "--window", "8"],
        ["order", "{data}", "--seed", "1", "--num-shards", "2", "--shard-index", "2"],
        ["order", "{data}", "--seed", "1", "--shard-index", "0"],
        ["order", "{data}", "--seed", "1", "--num-shards", "2"],
        ["order", "{data}", "--seed", "1", "--num-shards", "0", "--shard-index", "0"],
    ],
)
def test_usage_errors_exit_2(args, indexed, tmp_path):
    data, _ = indexed("one.tfrecord")
    argv = [a.format(data=data, tmp=tmp_path) for a in args]
    res = run_cli(*argv)
    assert res.returncode == 2, res.describe()
    assert "panicked" not in res.stderr, res.describe()
    assert not (tmp_path / "x.tfrecord").exists()


# ---------------------------------------------------------------------------
# order


def _order(data: Path, *args) -> list[int]:
    return parse_order(run_ok("order", data, *args))


def test_order_is_deterministic_permutation(indexed):
    data, offsets = indexed("mixed.tfrecord")
    n = len(offsets)
    a = _order(data, "--seed", 42)
    b = _order(data, "--seed", 42)
    assert sorted(a) == list(range(n))
    assert a == b
    assert a != list(range(n)), "order must actually shuffle"
    assert _order(data, "--seed", 42, "--epoch", 0) == _order(data, "--seed", 42, "--epoch", 0)


def test_order_epochs_and_seeds_differ(indexed):
    data, offsets = indexed("mixed.tfrecord")
    n = len(offsets)
    orders = [tuple(_order(data, "--seed", 42, "--epoch", e)) for e in range(4)]
    orders.append(tuple(_order(data, "--seed", 43, "--epoch", 0)))
    for o in orders:
        assert sorted(o) == list(range(n))
    assert len(set(orders)) == len(orders), "epochs/seeds must give different orders"


@pytest.mark.parametrize("page_aware", [False, True])
@pytest.mark.parametrize("shards", [2, 3, 7])
def test_order_shards_partition(shards, page_aware, indexed):
    data, offsets = indexed("mixed.tfrecord")
    extra = ["--page-aware"] if page_aware else []
    parts = []
    for s in range(shards):
        part = _order(data, "--seed", 9, "--epoch", 1, "--num-shards", shards, "--shard-index", s, *extra)
        assert len(part) == len(set(part))
        assert part, f"shard {s}/{shards} is empty"
        parts.append(part)
    union = [i for p in parts for i in p]
    assert len(union) == len(set(union)), "shards overlap"
    assert sorted(union) == list(range(len(offsets)))
    # Same arguments, same shard.
    assert _order(data, "--seed", 9, "--epoch", 1, "--num-shards", shards, "--shard-index", 0, *extra) == parts[0]


def test_order_tiny_files(indexed):
    empty, _ = indexed("empty.tfrecord")
    assert _order(empty, "--seed", 1) == []
    one, _ = indexed("one.tfrecord")
    assert _order(one, "--seed", 1) == [0]
    assert _order(one, "--seed", 1, "--page-aware") == [0]


def _assert_pages_contiguous(order: list[int], offsets: list[int], page_size: int) -> list[int]:
    """Each page's IDs form one contiguous run; returns the page sequence."""
    pages = [offsets[i] // page_size for i in order]
    runs = [p for j, p in enumerate(pages) if j == 0 or pages[j - 1] != p]
    assert len(runs) == len(set(runs)), f"some {page_size}-byte page's IDs are split: {runs}"
    return runs


@pytest.mark.parametrize("page_size", [None, 4096, 65536, 512])
def test_order_page_aware_on_padded(page_size, tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    p = page_size or 4096
    pad(src, out, p, "best")
    offsets = read_table(Path(str(out) + ".offsets"))
    n = len(offsets)
    extra = ["--page-size", page_size] if page_size else []
    orders, page_orders = [], []
    for epoch in range(3):
        order = _order(out, "--seed", 5, "--epoch", epoch, "--page-aware", *extra)
        assert sorted(order) == list(range(n))
        page_orders.append(_assert_pages_contiguous(order, offsets, p))
        orders.append(tuple(order))
    assert len(set(orders)) == 3, "epochs must give different page-aware orders"
    assert any(runs != sorted(runs) for runs in page_orders), "page order must be shuffled"
    # Shards of a page-aware order are still page-contiguous within each shard.
    for s in range(3):
        part = _order(out, "--seed", 5, "--page-aware", "--num-shards", 3, "--shard-index", s, *extra)
        _assert_pages_contiguous(part, offsets, p)


# ---------------------------------------------------------------------------
# info


@pytest.mark.parametrize("padded", [False, True])
def test_info_json(padded, tmp_path, indexed):
    data, offsets = indexed("mixed.tfrecord")
    if padded:
        out = tmp_path / "padded.tfrecord"
        pad(data, out, 4096, "next")
        data, offsets = out, read_table(Path(str(out) + ".offsets"))
    info = json.loads(run_ok("info", data, "--json").text)
    assert isinstance(info, dict), info
    assert info["instances"] == len(offsets), info
    assert info["file_size"] == data.stat().st_size, info
    # Human form also works and reports the count.
    assert len(offsets) in integers_in(run_ok("info", data).text)


# ---------------------------------------------------------------------------
# compression


def test_gzip_input_rejected(tmp_path):
    path = tmp_path / "compressed.tfrecord"
    with tf().io.TFRecordWriter(str(path), options="GZIP") as w:
        for i in range(5):
            w.write(affine_payload(i, 300))
    assert tf_read(path, "GZIP") == [affine_payload(i, 300) for i in range(5)]
    line = assert_error(run_cli("index", path), names=path.name)
    assert "gzip" in line.lower(), line
    assert not Path(str(path) + ".offsets").exists() or Path(str(path) + ".offsets").stat().st_size == 0


# ---------------------------------------------------------------------------
# Layout checks that need a page size: verify infers it from the fillers.


def _without_filler(path: Path, k: int) -> int:
    """Delete the k-th filler record from path (later bytes move up); return its offset."""
    records = read_records(path)
    fillers = [r for r in records if r.is_filler]
    gone = fillers[k]
    raw = path.read_bytes()
    path.write_bytes(raw[: gone.offset] + raw[gone.end :])
    return gone.offset


@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_verify_and_info_report_the_padded_page_size(page_size, tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    pad(src, out, page_size)
    assert any(r.is_filler for r in read_records(out))
    res = run_ok("verify", out)
    assert f"page size {page_size}" in res.text, res.describe()
    info = json.loads(run_ok("info", out, "--json").text)
    assert info["padded"] is True and info["padded_page_size"] == page_size, info


def test_verify_catches_a_padded_file_missing_a_filler(tmp_path, copy_testdata):
    """A 4096-padded file with its first filler deleted used to verify as padded for 262144."""
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    pad(src, out, 4096, "next")
    gone = _without_filler(out, 0)
    run_ok("index", out)
    offsets = read_table(Path(str(out) + ".offsets"))
    # Independently: the instance that moved into the filler's place now crosses a page boundary.
    instance = offsets.index(gone)
    records = {r.offset: r for r in read_records(out)}
    assert gone // 4096 != (records[gone].end - 1) // 4096
    line = assert_error(run_cli("verify", out), names=out.name)
    assert "invariant (b)" in line, line
    nums = _numbers_in_error(line, out)
    assert instance in nums and gone in nums and 4096 in nums, line
    # With the page size given, the same.
    line = assert_error(run_cli("verify", out, "--page-size", 4096), names=out.name)
    assert "invariant (b)" in line and gone in _numbers_in_error(line, out), line


def test_index_refuses_a_leading_filler(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    pad(src, out, 4096, "next")
    first_filler = next(r for r in read_records(out) if r.is_filler)
    raw = out.read_bytes()
    lead = tmp_path / "lead.tfrecord"
    # The filler first, then the file: still every byte a valid record for stock TF.
    lead.write_bytes(raw[first_filler.offset : first_filler.end] + raw)
    assert len(tf_read(lead)) == len(tf_read(out)) + 1
    line = assert_error(run_cli("index", lead), names=lead.name)
    assert 0 in _numbers_in_error(line, lead) and "filler" in line and "pad" in line, line
    assert not Path(str(lead) + ".offsets").exists()
    fixed = tmp_path / "fixed.tfrecord"
    pad(lead, fixed)
    run_ok("verify", fixed)


def test_outputs_that_would_replace_an_input_are_refused(tmp_path, copy_testdata):
    data = copy_testdata("mixed.tfrecord")
    before = data.read_bytes()
    for args in (
        ["index", data, "--out", data],
        ["index", data, "--out", data.parent / "." / data.name],
        ["pad", data, data.parent / "." / data.name],
        ["pad", data, Path(str(data) + ".offsets")],
    ):
        assert_error(run_cli(*args), names=data.name)
    assert data.read_bytes() == before
    assert not Path(str(data) + ".offsets.offsets").exists()


def test_written_files_get_the_umask_mode(tmp_path, copy_testdata):
    src = copy_testdata("mixed.tfrecord")
    out = tmp_path / "padded.tfrecord"
    old = os.umask(0o022)
    try:
        pad(src, out, 4096, "next", "--sync")
        run_ok("index", src, "--sync")
    finally:
        os.umask(old)
    for p in (out, Path(str(out) + ".offsets"), Path(str(src) + ".offsets")):
        assert p.stat().st_mode & 0o777 == 0o644, (p, oct(p.stat().st_mode))


def test_gzip_without_table_is_named_compressed(tmp_path):
    path = tmp_path / "compressed.tfrecord"
    with tf().io.TFRecordWriter(str(path), options="GZIP") as w:
        w.write(b"payload")
    for args in (["get", path, 0], ["verify", path]):
        line = assert_error(run_cli(*args), names=path.name)
        assert "gzip" in line.lower(), line
