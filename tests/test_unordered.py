"""Unordered delivery (RINAS): `LIRSDataset(deterministic=False)` and
`tf.data.Options().deterministic = False` hand out the windows of the order as
their reads complete. Every epoch is still the same multiset, batches formed in
the kernel hold the same instances as in deterministic mode, and a checkpoint
restores exactly the instances not yet delivered.

Local files and ram:// here; gs:// through the GCS emulator (tests/gcs_emulator.py)
with injected latency that repeats (keyed on each read), where one read of the
order's first window is held until another window has been delivered: the order
then changes by construction, not by chance.
"""

import collections
import os
import pickle
import sys
import textwrap
import uuid
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import tfrecord_lirs  # noqa: E402
from gcs_emulator import BUCKET, STRAGGLER_URL, require_namespace, run_with_gcs  # noqa: E402
from test_lirs_dataset import items, payloads, write_tf  # noqa: E402
from tfrecord_lirs import LIRSDataset  # noqa: E402

PAGE = 512


def unordered_options(ds):
    options = tf.data.Options()
    options.deterministic = False
    return ds.with_options(options)


@pytest.fixture(params=["local", "ram"])
def files(request, tmp_path):
    plain_recs = payloads(300, seed=5)
    plain = write_tf(tmp_path / "plain.tfrecord", plain_recs)
    tfrecord_lirs.build_offset_table(plain)
    src = write_tf(tmp_path / "src.tfrecord", payloads(500, seed=6))
    padded = str(tmp_path / "padded.tfrecord")
    tfrecord_lirs.pad(src, padded, page_size=PAGE)
    paths = [plain, padded]
    if request.param == "ram":
        directory = uuid.uuid4().hex
        urls = []
        for p in paths:
            url = f"ram://{directory}/{os.path.basename(p)}"
            tf.io.gfile.copy(p, url)
            tf.io.gfile.copy(p + ".offsets", url + ".offsets")
            urls.append(url)
        paths = urls
    return paths


@pytest.mark.parametrize("kwargs", [
    dict(seed=1),
    dict(seed=2, page_aware=True, page_size=PAGE, num_parallel_reads=16),
    dict(seed=3, num_shards=3, shard_index=1, num_parallel_reads=64),
])
def test_each_epoch_is_the_same_multiset(files, kwargs):
    want = items(LIRSDataset(files, **kwargs).repeat(2))
    for ds in (LIRSDataset(files, deterministic=False, **kwargs),
               unordered_options(LIRSDataset(files, **kwargs))):
        got = items(ds.repeat(2))
        half = len(want) // 2
        assert collections.Counter(got[:half]) == collections.Counter(want[:half])
        assert collections.Counter(got[half:]) == collections.Counter(want[half:])


@pytest.mark.parametrize("batch_size,drop", [(16, False), (7, True), (64, False)])
def test_batches_hold_the_same_instances(files, batch_size, drop):
    kw = dict(seed=4, batch_size=batch_size, drop_remainder=drop, page_aware=True,
              page_size=PAGE)
    want = items(LIRSDataset(files, **kw))
    got = items(LIRSDataset(files, deterministic=False, **kw))
    assert sorted(map(sorted, got)) == sorted(map(sorted, want))
    assert all(len(b) == batch_size for b in got[:-1] if not drop)


@pytest.mark.parametrize("consumed", [0, 1, 100, 377, 799, 800])
def test_checkpoint_restores_exactly_the_undelivered_instances(files, tmp_path, consumed):
    def make():
        return LIRSDataset(files, seed=6, deterministic=False, num_parallel_reads=8)

    everything = collections.Counter(items(make()))
    it = iter(make())
    seen = [next(it).numpy() for _ in range(consumed)]
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / f"ckpt{consumed}"))
    rest = [x.numpy() for x in it]
    assert collections.Counter(seen + rest) == everything
    it2 = iter(make())
    next(it2)
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    restored = [x.numpy() for x in it2]
    assert collections.Counter(seen + restored) == everything


def test_batched_checkpoint_restores_whole_batches(files, tmp_path):
    kw = dict(seed=8, batch_size=32, deterministic=False, num_parallel_reads=8)
    want = sorted(map(sorted, items(LIRSDataset(files, **kw))))
    it = iter(LIRSDataset(files, **kw))
    seen = [tuple(next(it).numpy()) for _ in range(5)]
    prefix = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "bckpt"))
    it2 = iter(LIRSDataset(files, **kw))
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    rest = [tuple(x.numpy()) for x in it2]
    assert sorted(map(sorted, seen + rest)) == want


def test_bad_deterministic_argument(files):
    with pytest.raises((TypeError, ValueError)):
        LIRSDataset(files, deterministic="no")


SNIPPET = textwrap.dedent("""
    import json, pickle, sys, urllib.request
    sys.path.insert(0, {python!r})
    import tensorflow as tf
    from tfrecord_lirs import LIRSDataset

    def items(ds):
        return [x.numpy() if x.shape.rank == 0 else tuple(x.numpy()) for x in ds]

    url = "gs://{bucket}/u/data.tfrecord"
    kw = dict(seed=9, num_parallel_reads=32)
    offsets = {offsets!r}
    control = urllib.request.build_opener(urllib.request.ProxyHandler({{}}))

    def held_first(ds, det):
        # An iterator over the unordered `ds` whose first element is taken while the
        # read of the order's first record (in the first window, whatever its size) is
        # held at the emulator: that window cannot be complete, so the first element
        # comes from another one. Returns the iterator and that element. (Payloads
        # start with their index; not record 0, whose first bytes opening the file
        # reads, for the compression check.)
        held = int(det[0][:6])
        assert held != 0, "seed 9 starts the order at record 0: choose another"
        control.open("{straggler}/hold?object=u/data.tfrecord&offset=%d" % offsets[held],
                     timeout=60).read()
        it = iter(ds)
        first = next(it).numpy()
        released = json.loads(control.open("{straggler}/release", timeout=60).read())
        assert not released["timed_out"], released
        return it, first

    out = {{"det": items(LIRSDataset(url, **kw))}}
    options = tf.data.Options()
    options.deterministic = False
    for key, ds in (("unordered", LIRSDataset(url, deterministic=False, **kw)),
                    ("options", LIRSDataset(url, **kw).with_options(options))):
        it, first = held_first(ds, out["det"])
        out[key] = [first] + [x.numpy() for x in it]
    out["explicit_true"] = items(LIRSDataset(url, deterministic=True, **kw)
                                 .with_options(options))
    # A checkpoint of an unordered iterator whose windows came out of order, restored
    # into a fresh one.
    it, first = held_first(LIRSDataset(url, deterministic=False, **kw), out["det"])
    seen = [first] + [next(it).numpy() for _ in range(249)]
    prefix = tf.train.Checkpoint(iterator=it).save({ckpt!r})
    it2 = iter(LIRSDataset(url, deterministic=False, **kw))
    tf.train.Checkpoint(iterator=it2).restore(prefix).assert_consumed()
    out["ckpt_seen"], out["ckpt_rest"] = seen, [x.numpy() for x in it2]
    bk = dict(kw, batch_size=16)
    out["det_batches"] = items(LIRSDataset(url, **bk))
    out["unordered_batches"] = items(LIRSDataset(url, deterministic=False, **bk))
    with open({results!r}, "wb") as f:
        pickle.dump(out, f)
""")


def test_gs_with_varying_latency(tmp_path):
    require_namespace()
    recs = payloads(600, seed=7)
    assert [int(r[:6]) for r in recs] == list(range(len(recs)))
    data = write_tf(tmp_path / "data.tfrecord", recs)
    tfrecord_lirs.build_offset_table(data)
    # Where each record starts in the plain file: 12 bytes of header, the payload, 4
    # of footer.
    offsets = [0]
    for r in recs[:-1]:
        offsets.append(offsets[-1] + 16 + len(r))
    results = tmp_path / "u.pkl"
    code = SNIPPET.format(python=str(REPO / "python"), bucket=BUCKET, results=str(results),
                          ckpt=str(tmp_path / "ckpt"), offsets=offsets,
                          straggler=STRAGGLER_URL)
    run_with_gcs(tmp_path / "run", {"u/data.tfrecord": Path(data),
                                    "u/data.tfrecord.offsets": Path(data + ".offsets")},
                 code, latency={"median_ms": 5, "sigma": 1.0, "seed": 3}, timeout=600,
                 env={"GCS_READ_CACHE_BLOCK_SIZE_MB": "0"})
    with open(results, "rb") as f:
        out = pickle.load(f)
    det = out["det"]
    assert sorted(det) == sorted(recs)
    assert out["explicit_true"] == det
    for key in ("unordered", "options"):
        assert collections.Counter(out[key]) == collections.Counter(det), key
        # The first window could not be complete when the first element was taken (a
        # read of it was held), so that element is another window's.
        assert out[key][0] != det[0], key
    assert out["ckpt_seen"][0] != det[0]
    assert collections.Counter(out["ckpt_seen"] + out["ckpt_rest"]) == collections.Counter(det)
    assert sorted(map(sorted, out["unordered_batches"])) == \
        sorted(map(sorted, out["det_batches"]))
