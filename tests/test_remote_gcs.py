"""gs:// through TensorFlow's real GCS client (libcurl, TLS) against a GCS emulator
on loopback, in a private network+mount namespace (tests/gcs_emulator.py).

LIRSDataset over gs:// equals the local file byte for byte (same seed: same
order), build_offset_table reads gs://, a damaged object is DataLoss naming the
URL and the byte, a missing object is NotFound.

Not here: writing to gs://. TensorFlow uploads with the resumable protocol, and
the emulator answers its first request and then leaves the upload hanging (the
emulator's limit, not TensorFlow's or ours), so writes to URLs are tested on
ram:// (tests/test_remote_ram.py).
"""

import os
import pickle
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402
from gcs_emulator import BUCKET, require_namespace, run_with_gcs  # noqa: E402
from test_lirs_dataset import payloads, write_tf  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

PAGE = 512
# (name, LIRSDataset keyword arguments) read over gs:// and locally.
CONFIGS = [
    ("instance", dict(seed=1)),
    ("page_aware", dict(seed=2, page_aware=True, page_size=PAGE)),
    ("batches", dict(seed=3, batch_size=16, num_shards=2, shard_index=1)),
    ("serial", dict(seed=4, num_parallel_reads=1)),
    ("wide", dict(seed=5, num_parallel_reads=64, page_aware=True, page_size=PAGE)),
]
DAMAGED = 42


def _items(ds):
    return [x.numpy() if x.shape.rank == 0 else list(x.numpy()) for x in ds]


SNIPPET = textwrap.dedent("""
    import pickle, sys
    import tensorflow as tf
    sys.path.insert(0, {python!r})
    import tfrecord_lirs
    from tfrecord_lirs import LIRSDataset

    def items(ds):
        return [x.numpy() if x.shape.rank == 0 else list(x.numpy()) for x in ds]

    def error(f):
        try:
            f()
        except tf.errors.OpError as e:
            return type(e).__name__, e.message
        return None

    files = ["gs://{bucket}/d/plain.tfrecord", "gs://{bucket}/d/padded.tfrecord"]
    out = {{"epochs": {{}}}}
    for name, kwargs in {configs!r}:
        out["epochs"][name] = items(LIRSDataset(files, **kwargs).repeat(2))
    out["read"] = list(tfrecord_lirs.read(files, [0, 149, 150, 449, 7]).numpy())
    tfrecord_lirs.build_offset_table(files[0], {table!r})
    out["damaged"] = error(lambda: items(LIRSDataset("gs://{bucket}/d/damaged.tfrecord",
                                                     seed=1)))
    out["damaged_scan"] = error(lambda: tfrecord_lirs.build_offset_table(
        "gs://{bucket}/d/damaged.tfrecord", {table!r} + ".2"))
    out["missing"] = error(lambda: items(LIRSDataset("gs://{bucket}/d/none.tfrecord")))
    out["missing_table"] = error(lambda: items(LIRSDataset("gs://{bucket}/d/untabled.tfrecord",
                                                           index_missing=False)))
    with open({results!r}, "wb") as f:
        pickle.dump(out, f)
""")


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    require_namespace()
    tmp = tmp_path_factory.mktemp("gcs")
    plain_recs = payloads(150)
    plain = write_tf(tmp / "plain.tfrecord", plain_recs)
    tfrecord_lirs.build_offset_table(plain)
    src = write_tf(tmp / "src.tfrecord", payloads(300, seed=1))
    padded = str(tmp / "padded.tfrecord")
    tfrecord_lirs.pad(src, padded, page_size=PAGE)
    damaged = bytearray(Path(plain).read_bytes())
    at = sum(12 + len(r) + 4 for r in plain_recs[:DAMAGED]) + 12 + 3
    damaged[at] ^= 0xFF
    objects = {
        "d/plain.tfrecord": Path(plain), "d/plain.tfrecord.offsets": Path(plain + ".offsets"),
        "d/padded.tfrecord": Path(padded),
        "d/padded.tfrecord.offsets": Path(padded + ".offsets"),
        "d/damaged.tfrecord": bytes(damaged),
        "d/damaged.tfrecord.offsets": Path(plain + ".offsets"),
        "d/untabled.tfrecord": Path(plain),
    }
    results = tmp / "results.pkl"
    table = tmp / "built.offsets"
    code = SNIPPET.format(python=str(REPO / "python"), bucket=BUCKET, configs=CONFIGS,
                          table=str(table), results=str(results))
    run_with_gcs(tmp / "run", objects, code, timeout=600)
    with open(results, "rb") as f:
        out = pickle.load(f)
    return {"out": out, "local": [plain, padded], "table": table, "damaged_at": at}


@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_gs_epochs_equal_local_byte_for_byte(gcs, name, kwargs):
    want = _items(LIRSDataset(gcs["local"], **kwargs).repeat(2))
    assert gcs["out"]["epochs"][name] == want
    assert len(want) > 0


def test_gs_read_by_id(gcs):
    want = list(tfrecord_lirs.read(gcs["local"], [0, 149, 150, 449, 7]).numpy())
    assert gcs["out"]["read"] == want


def test_gs_build_offset_table(gcs):
    assert gcs["table"].read_bytes() == Path(gcs["local"][0] + ".offsets").read_bytes()


def test_gs_damaged_object_is_data_loss_naming_url_and_byte(gcs):
    url = f"gs://{BUCKET}/d/damaged.tfrecord"
    for key in ("damaged", "damaged_scan"):
        kind, message = gcs["out"][key]
        assert kind == "DataLossError", (key, message)
        assert url in message and "byte" in message, (key, message)
    kind, message = gcs["out"]["damaged"]
    assert f"instance {DAMAGED}" in message, message


def test_gs_missing_object_and_table_are_not_found(gcs):
    kind, message = gcs["out"]["missing"]
    assert kind == "NotFoundError" and f"gs://{BUCKET}/d/none.tfrecord" in message, message
    kind, message = gcs["out"]["missing_table"]
    assert kind == "NotFoundError", message
    assert f"gs://{BUCKET}/d/untabled.tfrecord.offsets" in message, message


def test_stock_tfrecorddataset_reads_the_same_bytes(tmp_path):
    """The harness itself: stock tf.data over gs:// reads back the local bytes."""
    require_namespace()
    recs = payloads(500, seed=3)
    local = write_tf(tmp_path / "stock.tfrecord", recs)
    out = tmp_path / "stock.pkl"
    code = textwrap.dedent(f"""
        import pickle, tensorflow as tf
        got = [r.numpy() for r in tf.data.TFRecordDataset("gs://{BUCKET}/stock.tfrecord")]
        with open({str(out)!r}, "wb") as f:
            pickle.dump(got, f)
    """)
    run_with_gcs(tmp_path / "run", {"stock.tfrecord": Path(local)}, code, timeout=300)
    with open(out, "rb") as f:
        assert pickle.load(f) == recs
