"""The storage contract (the core's `conformance` cases: reads, ranges, at and past the
end, short and missing files, concurrent readers) run against TensorFlow's own file
systems, `ram://` (in memory) and `file://` (local), two ways: by the extension through
`tf.io.gfile` (the writers' storage: crates/tfrecord-lirs-py/src/gfile.rs), and by the
op library through its bridge to `tensorflow::Env` (crates/tfrecord-lirs-ffi/src/tf_fs.rs
and tf_op/lirs_tf_file.cc, what LIRSDataset reads URLs with), with the test op
LIRSTestOnlyStorageConformance of the op library's test build (tests/fault_injection.py).
The same cases run in Rust against every local backend, object_store and the cache_dir
tier (crates/tfrecord-lirs/tests/storage_conformance.rs), and against object_store over
a real S3 server in tests/without_tf/test_storage_conformance.py."""

import json
import os
import sys
import uuid
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

from fault_injection import run_faulty  # noqa: E402
from tfrecord_lirs import _lirs  # noqa: E402


def put_fixtures(base):
    tf.io.gfile.makedirs(base)
    for name, data in _lirs.storage_conformance_fixtures():
        with tf.io.gfile.GFile(f"{base}/{name}", "wb") as f:
            f.write(data)


@pytest.mark.parametrize("scheme", ["ram", "file"])
def test_tensorflow_file_systems_keep_the_storage_contract(tmp_path, scheme):
    base = f"ram://conformance_{uuid.uuid4().hex}" if scheme == "ram" else f"file://{tmp_path}"
    put_fixtures(base)
    assert _lirs.storage_conformance(base, "gfile") == []


@pytest.mark.parametrize("scheme", ["ram", "file"])
def test_the_op_librarys_bridge_keeps_the_storage_contract(tmp_path, scheme):
    """The cases hold through the bridge; a fixture cut short (long.bin to half its
    bytes) is reported, so the op does run them over the bytes written."""
    # The fixtures' bytes go to the child as local files, which it writes under the
    # base with tf.io.gfile (a ram:// file system lives in one process).
    given = tmp_path / "given"
    given.mkdir()
    for name, data in _lirs.storage_conformance_fixtures():
        (given / name).write_bytes(data)
    base = (f"ram://conformance_{uuid.uuid4().hex}" if scheme == "ram"
            else f"file://{tmp_path}/under_test")
    lines = run_faulty("""
        import json

        def conformance():
            failures = _op_library.ops.lirs_test_only_storage_conformance(base)
            return [f.decode() for f in failures.numpy()]

        tf.io.gfile.makedirs(base)
        for name in os.listdir(given):
            with open(os.path.join(given, name), "rb") as src:
                with tf.io.gfile.GFile(f"{base}/{name}", "wb") as f:
                    f.write(src.read())
        print("SOUND", json.dumps(conformance()))
        with tf.io.gfile.GFile(f"{base}/long.bin", "rb") as f:
            data = f.read()
        # Removed first: writing over a ram:// file appends to it (TensorFlow's RamFileSystem).
        tf.io.gfile.remove(f"{base}/long.bin")
        with tf.io.gfile.GFile(f"{base}/long.bin", "wb") as f:
            f.write(data[: len(data) // 2])
        print("CUT", json.dumps(conformance()))
    """, base=base, given=str(given))
    found = {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
             for line in lines if line.startswith(("SOUND ", "CUT "))}
    assert found["SOUND"] == []
    cut = found["CUT"]
    assert "whole_files: long.bin: size 2103324 for 4206649 bytes" in cut, cut
    assert any(f.startswith("ranges: range") for f in cut), cut


def test_an_unknown_storage_is_refused():
    with pytest.raises(ValueError, match="readers"):
        _lirs.storage_conformance("ram://x", "elsewhere")
