"""The storage contract (the core's `conformance` cases: reads, ranges, at and past the
end, short and missing files, concurrent readers, cancelled requests) run by the
extension against object_store's S3 client and a real S3 server (moto, on loopback in
a private network namespace: tests/s3_server.py). The same cases run in Rust against
every local backend, object_store over HTTP and the cache_dir tier
(crates/tfrecord-lirs/tests/storage_conformance.rs), and against TensorFlow's file
systems through gfile in tests/test_storage_conformance.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from s3_server import BUCKET, run_with_s3  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from tfrecord_lirs import _lirs  # noqa: E402

RUN = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
from tfrecord_lirs import _lirs
print(json.dumps({{"failures": _lirs.storage_conformance("s3://{BUCKET}/c", "readers"),
                  "absent": _lirs.storage_conformance("s3://{BUCKET}/absent", "readers"),
                  "tf": "tensorflow" in sys.modules}}))
"""


def test_object_store_over_s3_keeps_the_storage_contract(tmp_path):
    objects = {f"c/{name}": data for name, data in _lirs.storage_conformance_fixtures()}
    res = run_with_s3(tmp_path, objects, RUN, timeout=300)
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert not report["tf"]
    assert report["failures"] == []
    # The cases did read the bucket: where no fixtures are, the reads fail as missing.
    assert any(f.startswith("whole_files:") and "empty.bin" in f for f in report["absent"])
