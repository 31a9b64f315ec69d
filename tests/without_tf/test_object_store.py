"""s3:// without TensorFlow: DataSource and Sampler through the object_store client
against a real S3 server (moto's server mode) on loopback, in a private network
namespace (tests/s3_server.py). Expectations come from the tests' own framing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import affine_payload, framed  # noqa: E402
from gcs_emulator import BUCKET as GCS_BUCKET  # noqa: E402
from gcs_emulator import EMULATOR_PORT, require_namespace, run_with_gcs  # noqa: E402
from s3_server import BUCKET, S3RunError, run_with_s3  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


PAYLOADS = [affine_payload(i, 20 + (i * 13) % 700) for i in range(3000)]
DATA, TABLE = framed(PAYLOADS)
OBJECTS = {"train.tfrecord": DATA, "train.tfrecord.offsets": TABLE,
           "untabled.tfrecord": DATA}

READ_ALL = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
src = tfrecord_lirs.DataSource("s3://{BUCKET}/train.tfrecord")
order = list(tfrecord_lirs.Sampler(src, seed=4))
got = src.__getitems__(order)
print(json.dumps({{"n": len(src), "order": order, "got": [g.hex() for g in got],
                  "one": src[7].hex(), "tf": "tensorflow" in sys.modules}}))
"""


def report(res):
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_s3_reads_every_instance(tmp_path):
    r = report(run_with_s3(tmp_path, OBJECTS, READ_ALL, timeout=300))
    assert r["n"] == len(PAYLOADS) and not r["tf"]
    assert sorted(r["order"]) == list(range(len(PAYLOADS)))
    assert [bytes.fromhex(g) for g in r["got"]] == [PAYLOADS[i] for i in r["order"]]
    assert bytes.fromhex(r["one"]) == PAYLOADS[7]


def test_s3_retries_server_errors(tmp_path):
    # The first 3 object GETs answer 503: object_store's retries absorb them.
    r = report(run_with_s3(tmp_path, OBJECTS, READ_ALL, faults={"fail_gets": 3}, timeout=300))
    assert [bytes.fromhex(g) for g in r["got"]] == [PAYLOADS[i] for i in r["order"]]


ERRORS = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
from tfrecord_lirs import errors
out = {{}}
for name, url in [("missing", "s3://{BUCKET}/nope.tfrecord"),
                  ("untabled", "s3://{BUCKET}/untabled.tfrecord"),
                  ("no_bucket", "s3://other-bucket/train.tfrecord")]:
    try:
        tfrecord_lirs.DataSource(url, index_missing=False)
        out[name] = None
    except errors.LIRSError as e:
        out[name] = [type(e).__name__, str(e), e.file]
print(json.dumps(out))
"""


def test_s3_errors_name_the_object(tmp_path):
    r = report(run_with_s3(tmp_path, OBJECTS, ERRORS, timeout=300))
    kind, message, file = r["missing"]
    assert kind == "NotFoundError" and file == f"s3://{BUCKET}/nope.tfrecord", r
    kind, message, file = r["untabled"]
    assert kind == "NotFoundError" and "offset table" in message, r
    assert f"s3://{BUCKET}/untabled.tfrecord.offsets" in message, r
    assert r["no_bucket"] is not None and r["no_bucket"][0] == "NotFoundError", r


UNTABLED = f"""
import json, os, sys, tempfile
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
url = "s3://{BUCKET}/untabled.tfrecord"
# No cache_dir: the table is built in memory (nothing is written to the bucket).
src = tfrecord_lirs.DataSource(url)
out = {{"n": len(src), "got": [g.hex() for g in src.__getitems__(list(range(len(src))))]}}
cache = tempfile.mkdtemp()
tables = os.path.join(cache, "tfrecord-lirs-tables-1")
src = tfrecord_lirs.DataSource(url, cache_dir=cache)
kept = sorted(n for n in os.listdir(tables) if n.endswith(".offsets"))
out["kept"] = [open(os.path.join(tables, n), "rb").read().hex() for n in kept]
stamp = [os.stat(os.path.join(tables, n)).st_ino for n in kept]
# Another reader of the same cache_dir opens the kept table (not built again).
again = tfrecord_lirs.DataSource(url, cache_dir=cache)
out["same"] = [os.stat(os.path.join(tables, n)).st_ino for n in kept] == stamp
out["again"] = again[2999].hex()
try:
    tfrecord_lirs.DataSource(url, index_missing=False)
    out["refused"] = None
except tfrecord_lirs.LIRSError as e:
    out["refused"] = type(e).__name__
print(json.dumps(out))
"""


def test_s3_an_untabled_object_gets_its_table_on_open(tmp_path):
    r = report(run_with_s3(tmp_path, OBJECTS, UNTABLED, timeout=300))
    assert r["n"] == len(PAYLOADS), r
    assert [bytes.fromhex(g) for g in r["got"]] == PAYLOADS
    assert [bytes.fromhex(t) for t in r["kept"]] == [TABLE]
    assert r["same"] and bytes.fromhex(r["again"]) == PAYLOADS[2999]
    # Still untabled in the bucket: the table was never written there.
    assert r["refused"] == "NotFoundError"


# Opens s3://BUCKET/train.tfrecord and prints "opened" or "<error class> | <message>".
OPEN_AND_REPORT = f"""
import sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
try:
    tfrecord_lirs.DataSource("s3://{BUCKET}/train.tfrecord")
    print("opened")
except tfrecord_lirs.LIRSError as e:
    print(type(e).__name__, "|", e)
"""


def test_s3_wrong_credentials_are_refused(tmp_path):
    res = run_with_s3(tmp_path, OBJECTS, OPEN_AND_REPORT, timeout=300,
                      faults={"auth_after": 1 + len(OBJECTS)},
                      env={"AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG0",
                           "AWS_SECRET_ACCESS_KEY": "wrong"})
    line = res.stdout.strip().splitlines()[-1]
    kind, _, message = line.partition(" | ")
    # Refused credentials have their kind (PermissionDeniedError, a PermissionError):
    # the message carries the store's 403, names the object and says which credentials
    # are read from where.
    assert kind == "PermissionDeniedError", res.stdout
    assert f"s3://{BUCKET}/train.tfrecord" in message and "403" in message, res.stdout
    assert "AWS_ACCESS_KEY_ID" in message, res.stdout


def test_s3_without_credentials_names_them(tmp_path):
    """No AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: the client falls back to the
    instance metadata service, which this namespace (like any machine off EC2) does not
    have. A PermissionDeniedError naming the variables to set, not the endpoint."""
    res = run_with_s3(tmp_path, OBJECTS, OPEN_AND_REPORT, timeout=400,
                      env={"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None})
    kind, _, message = res.stdout.strip().splitlines()[-1].partition(" | ")
    assert kind == "PermissionDeniedError", res.stdout
    assert f"s3://{BUCKET}/train.tfrecord" in message, res.stdout
    assert "AWS_ACCESS_KEY_ID" in message and "AWS_SECRET_ACCESS_KEY" in message, res.stdout
    assert "check the endpoint" not in message, res.stdout


def test_s3_server_errors_past_the_retries_are_unavailable(tmp_path):
    """Every object GET answers 503: after the client's retries with backoff, an
    UnavailableError (a ConnectionError) naming the object, never a hang."""
    code = f"""
import sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
try:
    tfrecord_lirs.DataSource("s3://{BUCKET}/train.tfrecord")
    print("opened")
except tfrecord_lirs.LIRSError as e:
    print(type(e).__name__, "|", isinstance(e, ConnectionError), "|", e)
"""
    res = run_with_s3(tmp_path, OBJECTS, code, faults={"fail_gets": 10 ** 6}, timeout=400)
    kind, is_connection_error, message = res.stdout.strip().splitlines()[-1].split(" | ", 2)
    assert (kind, is_connection_error) == ("UnavailableError", "True"), res.stdout
    assert f"s3://{BUCKET}/train.tfrecord" in message and "503" in message, res.stdout
    assert "retried" in message and "try again later" in message, res.stdout


def test_s3_truncated_object_is_refused_as_a_local_file_is(tmp_path):
    """An object cut short beside its full table: the same error class and words as
    the same file on local disk (the path aside)."""
    cut = DATA[: len(DATA) // 2]
    local = tmp_path / "cut.tfrecord"
    local.write_bytes(cut)
    (tmp_path / "cut.tfrecord.offsets").write_bytes(TABLE)
    sys.path.insert(0, str(REPO / "python"))
    import tfrecord_lirs

    with pytest.raises(tfrecord_lirs.LIRSError) as local_error:
        tfrecord_lirs.DataSource(local)
    code = f"""
import sys
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
try:
    tfrecord_lirs.DataSource("s3://{BUCKET}/cut.tfrecord")
    print("opened")
except tfrecord_lirs.LIRSError as e:
    print(type(e).__name__, "|", e)
"""
    res = run_with_s3(tmp_path / "s3", {"cut.tfrecord": cut, "cut.tfrecord.offsets": TABLE},
                      code, timeout=300)
    kind, _, message = res.stdout.strip().splitlines()[-1].partition(" | ")
    assert kind == type(local_error.value).__name__, res.stdout
    assert message == str(local_error.value).replace(str(local), f"s3://{BUCKET}/cut.tfrecord")


def test_s3_batches_read_concurrently_under_latency(tmp_path):
    """With 30 ms (median) per GET, a batch of 256 ids is read with many requests in
    flight (one at a time it would take ~8 s); every payload lands in its slot."""
    code = f"""
import json, sys, time
sys.path.insert(0, {str(REPO / 'python')!r})
import tfrecord_lirs
src = tfrecord_lirs.DataSource("s3://{BUCKET}/train.tfrecord")
ids = list(tfrecord_lirs.Sampler(src, seed=8).order(0))[:256]
t = time.perf_counter()
got = src.__getitems__(ids)
print(json.dumps({{"ids": ids, "got": [g.hex() for g in got],
                  "secs": time.perf_counter() - t}}))
"""
    r = report(run_with_s3(tmp_path, OBJECTS, code, faults={"latency_ms": 30, "seed": 2},
                           timeout=300))
    assert [bytes.fromhex(g) for g in r["got"]] == [PAYLOADS[i] for i in r["ids"]]
    print(f"256 ids over s3 with 30 ms per GET: {r['secs']:.2f} s")


# ----------------------------------------------------------------------------------
# gs:// through object_store's GCS client against the GCS emulator (tests/gcs_emulator.py),
# pointed at it by the service account's `gcs_base_url` with `disable_oauth`.

GCS_ACCOUNT = json.dumps({"gcs_base_url": f"http://127.0.0.1:{EMULATOR_PORT}",
                          "disable_oauth": True, "client_email": "", "private_key": "",
                          "private_key_id": ""})


def test_gcs_reads_every_instance_through_object_store(tmp_path):
    require_namespace()
    read_all = READ_ALL.replace(f"s3://{BUCKET}/", f"gs://{GCS_BUCKET}/")
    res = run_with_gcs(tmp_path, OBJECTS, read_all, timeout=300,
                       env={"GOOGLE_SERVICE_ACCOUNT_KEY": GCS_ACCOUNT})
    r = report(res)
    assert r["n"] == len(PAYLOADS) and not r["tf"]
    assert sorted(r["order"]) == list(range(len(PAYLOADS)))
    assert [bytes.fromhex(g) for g in r["got"]] == [PAYLOADS[i] for i in r["order"]]
    assert bytes.fromhex(r["one"]) == PAYLOADS[7]


def test_gcs_errors_name_the_object(tmp_path):
    require_namespace()
    cut = DATA[: len(DATA) // 2]
    objects = {**OBJECTS, "cut.tfrecord": cut, "cut.tfrecord.offsets": TABLE}
    code = ERRORS.replace(f"s3://{BUCKET}/", f"gs://{GCS_BUCKET}/").replace(
        '("no_bucket", "s3://other-bucket/train.tfrecord")',
        f'("cut", "gs://{GCS_BUCKET}/cut.tfrecord")')
    r = report(run_with_gcs(tmp_path, objects, code, timeout=300,
                            env={"GOOGLE_SERVICE_ACCOUNT_KEY": GCS_ACCOUNT}))
    kind, message, file = r["missing"]
    assert kind == "NotFoundError" and file == f"gs://{GCS_BUCKET}/nope.tfrecord", r
    kind, message, file = r["untabled"]
    assert kind == "NotFoundError" and f"gs://{GCS_BUCKET}/untabled.tfrecord.offsets" in message, r
    # Cut short beside its full table: the error class and words of the same file on
    # local disk (the path aside).
    local = tmp_path / "cut.tfrecord"
    local.write_bytes(cut)
    (tmp_path / "cut.tfrecord.offsets").write_bytes(TABLE)
    sys.path.insert(0, str(REPO / "python"))
    import tfrecord_lirs

    with pytest.raises(tfrecord_lirs.LIRSError) as local_error:
        tfrecord_lirs.DataSource(local)
    kind, message, file = r["cut"]
    assert kind == type(local_error.value).__name__, r
    assert message == str(local_error.value).replace(str(local), f"gs://{GCS_BUCKET}/cut.tfrecord")
