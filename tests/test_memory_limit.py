"""The memory the process may use, read from a real memory cgroup made by the test (v1,
the controller this machine mounts; v2 is covered by the Rust tests on a fake
hierarchy), and the default backend's choice from it: large records of files beyond the
limit are read cold, the same files under a larger limit with `pread`; small records of
files beyond the limit cold, unless the reader walks a page-aware order (mapped). Each child process is moved into a child cgroup of this process's own before it
execs the CLI; the cgroup is removed afterwards. Skipped where the v1 memory controller
is not mounted or not writable (another CI machine), never on this one's as root."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cgroups import v1_memory_dir
from conftest import CLI_TIMEOUT, frame, pack_table, require_cli

MIB = 1 << 20


@pytest.fixture
def child_cgroup(request):
    """Makes child cgroups of this process's v1 memory cgroup with a given limit;
    removes them at the end."""
    parent = v1_memory_dir()
    if parent is None or not parent.is_dir():
        pytest.skip("no v1 memory cgroup controller mounted here")
    made = []

    def make(limit: int) -> Path:
        d = parent / f"lirs-test-{os.getpid()}-{len(made)}"
        try:
            d.mkdir()
        except OSError as e:
            pytest.skip(f"cannot make a memory cgroup under {parent}: {e}")
        made.append(d)
        (d / "memory.limit_in_bytes").write_text(str(limit))
        return d

    yield make
    for d in made:
        d.rmdir()


def run_in(cgroup: Path, *args, env=None):
    """Runs the CLI inside `cgroup` (the child joins it before exec)."""
    cli = require_cli()
    procs = str(cgroup / "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    full_env = dict(os.environ, **(env or {}))
    res = subprocess.run([str(cli), *map(str, args)], capture_output=True,
                         preexec_fn=join, env=full_env, timeout=CLI_TIMEOUT)
    res.stderr = res.stderr.decode("utf-8", errors="replace")
    return res


def write_file(path: Path, records: int, size: int) -> list[bytes]:
    payloads = [os.urandom(size) for _ in range(records)]
    offsets, at = [], 0
    with open(path, "wb") as f:
        for p in payloads:
            offsets.append(at)
            framed = frame(p)
            f.write(framed)
            at += len(framed)
    Path(str(path) + ".offsets").write_bytes(pack_table(offsets))
    return payloads


def test_info_reports_the_limit_of_the_cgroup_it_runs_in(tmp_path, child_cgroup):
    data = tmp_path / "d.tfrecord"
    write_file(data, 4, 1000)
    cgroup = child_cgroup(256 * MIB)
    res = run_in(cgroup, "info", "--json", data)
    assert res.returncode == 0, res.stderr
    memory = json.loads(res.stdout.decode())["memory"]
    assert memory["cgroup_limit"] == 256 * MIB, memory
    assert memory["cgroup_file"] == str(cgroup / "memory.limit_in_bytes"), memory
    assert memory["bytes"] == 256 * MIB, memory
    assert memory["machine"] > 256 * MIB, memory
    text = run_in(cgroup, "info", data)
    assert f"memory: {256 * MIB} bytes" in text.stdout.decode(), text.stdout
    # A nested cgroup with no limit of its own is bound by its parent's.
    nested = cgroup / "inner"
    nested.mkdir()
    try:
        res = run_in(nested, "info", "--json", data)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout.decode())["memory"]["cgroup_limit"] == 256 * MIB
    finally:
        nested.rmdir()


def _auto_line(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if "backend auto for" in l]
    assert len(lines) == 1, stderr
    return lines[0]


def test_auto_reads_large_records_cold_when_the_files_exceed_the_limit(tmp_path, child_cgroup):
    data = tmp_path / "large.tfrecord"
    payloads = write_file(data, 400, 100_000)  # 40 MB
    debug = {"TFRECORD_LIRS_DEBUG": "1"}
    small_limit = child_cgroup(24 * MIB)
    res = run_in(small_limit, "get", data, "7", env=debug)
    assert res.returncode == 0, res.stderr
    assert res.stdout == payloads[7]
    line = _auto_line(res.stderr)
    assert ": cold" in line and "beyond" in line and "memory.limit_in_bytes" in line, line

    large_limit = child_cgroup(1024 * MIB)
    res = run_in(large_limit, "get", data, "7", env=debug)
    assert res.returncode == 0, res.stderr
    assert res.stdout == payloads[7]
    line = _auto_line(res.stderr)
    assert ": pread: " in line and "within" in line, line

    # Small records beyond the limit, read by id (no page-aware order): cold as well.
    small = tmp_path / "small.tfrecord"
    small_payloads = write_file(small, 40_000, 1000)  # 40 MB
    res = run_in(small_limit, "get", small, "9", env=debug)
    assert res.returncode == 0, res.stderr
    assert res.stdout == small_payloads[9]
    line = _auto_line(res.stderr)
    assert ": cold" in line and "not a page-aware order" in line, line
    # Within the limit they stay mapped.
    res = run_in(large_limit, "get", small, "9", env=debug)
    assert res.returncode == 0, res.stderr
    line = _auto_line(res.stderr)
    assert ": mapped: " in line or "no lease" in line, line
    # Without the variable, nothing is said.
    res = run_in(small_limit, "get", data, "7")
    assert "backend auto" not in res.stderr, res.stderr


# Runs in the cgroup: one epoch of each Loader, each reader's records digested in order
# (the payloads themselves would not fit in the limit).
_LOADERS = """
import hashlib, sys
import tfrecord_lirs
f = sys.argv[1]
def digest(loader):
    h = hashlib.sha256()
    for batch in loader:
        for record in batch:
            h.update(hashlib.sha256(bytes(record)).digest())
    return h.hexdigest()
print(digest(tfrecord_lirs.Loader([f], seed=1)))
print(digest(tfrecord_lirs.Loader(tfrecord_lirs.DataSource([f], page_aware=True), seed=1)))
print(digest(tfrecord_lirs.Loader([f], seed=1, page_aware=True)))
"""


def test_auto_maps_small_records_beyond_the_limit_only_for_a_page_aware_walk(
        tmp_path, child_cgroup):
    import sys

    small = tmp_path / "small.tfrecord"
    write_file(small, 60_000, 1000)  # 60 MB, unpadded
    limit = child_cgroup(48 * MIB)
    procs = str(limit / "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    res = subprocess.run([sys.executable, "-c", _LOADERS, str(small)], capture_output=True,
                         preexec_fn=join, env=dict(os.environ, TFRECORD_LIRS_DEBUG="1"),
                         timeout=CLI_TIMEOUT)
    stderr = res.stderr.decode("utf-8", errors="replace")
    assert res.returncode == 0, stderr
    lines = [l for l in stderr.splitlines() if "backend auto for" in l]
    assert len(lines) == 3, stderr
    default, source_page_aware, loader_page_aware = lines
    # A random order of instances: cold, direct reads of each record.
    assert ": cold" in default and "not a page-aware order" in default, default
    for line in (source_page_aware, loader_page_aware):
        assert ": mapped: " in line or "no lease" in line, line
        assert "beyond" in line and "; a page-aware order" in line, line
    # The same order read cold and mapped: the same records in the same sequence.
    cold, mapped, _ = res.stdout.decode().split()
    assert cold == mapped
