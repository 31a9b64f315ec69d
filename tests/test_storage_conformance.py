"""The storage contract (the core's `conformance` cases: reads, ranges, at and past the
end, short and missing files, concurrent readers) run by the extension against
TensorFlow's own file systems through `tf.io.gfile` (the writers' storage:
crates/tfrecord-lirs-py/src/gfile.rs): `ram://` (TensorFlow's in-memory file system)
and `file://` (its local one). The same cases run in Rust against every local
backend, object_store and the cache_dir tier
(crates/tfrecord-lirs/tests/storage_conformance.rs), and against object_store over a
real S3 server in tests/without_tf/test_storage_conformance.py."""

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


def test_an_unknown_storage_is_refused():
    with pytest.raises(ValueError, match="readers"):
        _lirs.storage_conformance("ram://x", "elsewhere")
