"""tf.data jobs that share one refurbish store directory while they run
(docs/FORMAT.md §7.1, claims): each partial output is computed once in all, by
whichever job claims it first, also with a PyTorch/Grain job (the plain-Python
`Refurbisher`) under the same store identity; every job yields what it yields alone.

The jobs are real processes, started together (each builds its pipeline, says so, and
waits for the word to go on its stdin: no sleep, no timing)."""

import os
import subprocess
import sys

import numpy as np
import pytest

# The partial and final augmentations of the refurbish tests (TensorFlow ops).
from test_refurbish_tf import final, make_partial

N, EPOCHS, R, SEED, BATCH = 24, 4, 2, 3, 6
NAMES = dict(dataset_id="share-test", partial_name="noisy-flip v1")


def make_files(tmp_path):
    import tfrecord_lirs

    path = tmp_path / "d.tfrecord"
    with tfrecord_lirs.PaddedWriter(str(path)) as w:
        for i in range(N):
            w.write(np.full(16, i, np.uint8).tobytes())
    return [str(path)]


def tf_job(files, store, log, parallel):
    from tfrecord_lirs.refurbish_tf import refurbish

    ds = refurbish(files, make_partial(log), final, seed=SEED, reuse_factor=R,
                   batch_size=BATCH, store=store, epochs=EPOCHS,
                   num_parallel_calls=parallel, **NAMES)
    it = iter(ds)
    yield
    return [x.numpy() for x in it]


def python_job(files, store, log, _parallel):
    """The plain-Python `Refurbisher` (what the PyTorch and Grain front ends run), its
    stored bytes tf.data's (`serializer`)."""
    import tensorflow as tf

    import tfrecord_lirs
    from tfrecord_lirs.refurbish_tf import serializer
    from tfrecord_lirs.refurbishing import (Refurbisher, open_store,
                                            stateless_seed_pair)

    def pair(s):
        return tf.constant(stateless_seed_pair(s), tf.int64)

    partial = make_partial(log)
    spec = tf.TensorSpec([4, 4, 1], tf.int32)
    source = tfrecord_lirs.DataSource(files)
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=SEED, reuse_factor=R,
                                               batch_size=BATCH)
    step = Refurbisher(lambda i: source[i],
                       lambda rec, s: partial(tf.constant(rec), pair(s)).numpy(),
                       lambda x, s: final(tf.constant(x), pair(s)).numpy(),
                       schedule, open_store(store, source, partial, SEED, **NAMES),
                       serializer=serializer(spec))
    yield
    return [step.use(i, f, g, e) for e in range(EPOCHS)
            for i, f, g in zip(*schedule.epoch(e))]


def tf_augment_job(files, share, log, parallel):
    from tfrecord_lirs.refurbish_tf import augment

    ds = augment(files, make_partial(log), seed=SEED, share=share, batch_size=BATCH,
                 epochs=EPOCHS, num_parallel_calls=parallel, augment_name=NAMES["partial_name"],
                 dataset_id=NAMES["dataset_id"])
    it = iter(ds)
    yield
    return [x.numpy() for x in it]


def python_augment_job(files, share, log, _parallel):
    """What `tfrecord_lirs.torch.AugmentDataset(share=)` and `grain.augment(share=)`
    run: the plain-Python `Refurbisher` with `reuse_factor=1` and no final
    augmentation, its stored bytes tf.data's."""
    import tensorflow as tf

    import tfrecord_lirs
    from tfrecord_lirs.refurbish_tf import serializer
    from tfrecord_lirs.refurbishing import (Refurbisher, open_store,
                                            stateless_seed_pair)

    fn = make_partial(log)
    source = tfrecord_lirs.DataSource(files)
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=SEED, reuse_factor=1,
                                               batch_size=BATCH)
    step = Refurbisher(
        lambda i: source[i],
        lambda rec, s: fn(tf.constant(rec),
                          tf.constant(stateless_seed_pair(s), tf.int64)).numpy(),
        None, schedule, open_store(share, source, fn, SEED, **NAMES),
        serializer=serializer(tf.TensorSpec([4, 4, 1], tf.int32)))
    yield
    return [step.use(i, f, g, e) for e in range(EPOCHS)
            for i, f, g in zip(*schedule.epoch(e))]


JOBS = {"tf": tf_job, "python": python_job, "tf-augment": tf_augment_job,
        "python-augment": python_augment_job}


def main(kind, files, store, log, parallel, out):
    job = JOBS[kind]([files], store, log, None if parallel == "auto" else int(parallel))
    next(job)
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\n"
    try:
        next(job)
    except StopIteration as done:
        np.save(out, np.stack(done.value))


def run_together(tmp_path, files, kinds, store, log, parallel=1):
    """Runs one job per kind at once on `store`; their outputs."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    procs, outs = [], []
    for k, kind in enumerate(kinds):
        out = str(tmp_path / f"out-{len(os.listdir(tmp_path))}-{k}.npy")
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, kind, files[0], store, log, str(parallel), out],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.close()
    for p in procs:
        assert p.wait() == 0
    return [np.load(o) for o in outs]


def calls(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


def refreshes(reuse_factor=R):
    import tfrecord_lirs

    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=SEED, reuse_factor=reuse_factor,
                                               batch_size=BATCH)
    return sum(schedule.refreshes(e) for e in range(EPOCHS))


@pytest.fixture()
def files(tmp_path):
    return make_files(tmp_path)


def test_three_tf_jobs_on_one_store_compute_each_output_once(files, tmp_path):
    solo_log = str(tmp_path / "solo.log")
    (solo,) = run_together(tmp_path, files, ["tf"], str(tmp_path / "solo"), solo_log)
    assert calls(solo_log) == refreshes()
    log = str(tmp_path / "shared.log")
    outs = run_together(tmp_path, files, ["tf"] * 3, str(tmp_path / "store"), log)
    for out in outs:
        np.testing.assert_array_equal(out, solo)
    # Once in all: a job that comes to an output another is computing waits for it.
    assert calls(log) == refreshes()
    assert not [f for d, _, fs in os.walk(tmp_path / "store") for f in fs
                if f.startswith(".claim-")]


def test_parallel_calls_share_too(files, tmp_path):
    """With calls in flight at once (a reuse may overtake its own refresh in a job:
    then that job computes it again, never waiting for its own claim)."""
    (solo,) = run_together(tmp_path, files, ["tf"], str(tmp_path / "solo"),
                           str(tmp_path / "solo.log"), parallel=4)
    log = str(tmp_path / "shared.log")
    outs = run_together(tmp_path, files, ["tf"] * 3, str(tmp_path / "store"), log,
                        parallel=4)
    for out in outs:
        np.testing.assert_array_equal(out, solo)
    # Alone, each would compute every refresh (3x in all).
    assert calls(log) < 2 * refreshes()


def test_a_tf_job_and_a_python_job_share_one_store(files, tmp_path):
    (solo,) = run_together(tmp_path, files, ["tf"], str(tmp_path / "solo"),
                           str(tmp_path / "solo.log"))
    log = str(tmp_path / "shared.log")
    outs = run_together(tmp_path, files, ["tf", "python"], str(tmp_path / "store"), log)
    for out in outs:
        np.testing.assert_array_equal(out, solo)
    assert calls(log) == refreshes()



def test_augment_share_with_a_plain_augment_job(files, tmp_path):
    """`augment(share=)` (tf.data) and the step of `AugmentDataset(share=)` (PyTorch)
    on one store: every sample of every epoch computed once in all, the same samples
    in both."""
    (solo,) = run_together(tmp_path, files, ["tf-augment"], str(tmp_path / "solo"),
                           str(tmp_path / "solo.log"))
    assert len(solo) == EPOCHS * N
    log = str(tmp_path / "shared.log")
    outs = run_together(tmp_path, files, ["tf-augment", "python-augment"],
                        str(tmp_path / "store"), log)
    for out in outs:
        np.testing.assert_array_equal(out, solo)
    assert calls(log) == refreshes(1) == EPOCHS * N


def claim_files(store):
    return [f for _, _, fs in os.walk(store) for f in fs if f.startswith(".claim-")]


def test_a_failed_partial_releases_its_claim_at_once(files, tmp_path):
    """A tf.data job whose partial fails on one record gives that entry's claim up with
    the failure, not when its iterator is torn down: a second job on the store then
    claims the entry and computes it without waiting."""
    import tensorflow as tf

    import tfrecord_lirs
    from tfrecord_lirs.refurbish_tf import refurbish, serializer
    from tfrecord_lirs.refurbishing import Refurbisher, open_store, stateless_seed_pair

    bad_id = 5
    store = str(tmp_path / "store")
    good = make_partial(str(tmp_path / "calls.log"))
    bad = np.full(16, bad_id, np.uint8).tobytes()

    def failing(record, seed):
        check = tf.debugging.Assert(tf.not_equal(record, bad), ["a bad record"])
        with tf.control_dependencies([check]):
            return good(tf.identity(record), seed)

    ds = refurbish(files, failing, final, seed=SEED, reuse_factor=R, batch_size=BATCH,
                   store=store, epochs=1, num_parallel_calls=1, **NAMES)
    it = iter(ds)
    with pytest.raises(tf.errors.InvalidArgumentError, match="a bad record"):
        for _ in range(N):
            next(it)
    # The iterator (and its step) lives on; the failed entry's claim is gone (the
    # claims of uses still in flight when the failure stopped it are theirs to hold).
    assert f".claim-{bad_id}.0" not in claim_files(store)

    source = tfrecord_lirs.DataSource(files)
    schedule = tfrecord_lirs.RefurbishSchedule(source, seed=SEED, reuse_factor=R,
                                               batch_size=BATCH)
    second = open_store(store, source, failing, SEED, **NAMES)

    def pair(s):
        return tf.constant(stateless_seed_pair(s), tf.int64)

    step = Refurbisher(lambda i: source[i],
                       lambda rec, s: good(tf.constant(rec), pair(s)).numpy(),
                       lambda x, s: x, schedule, second,
                       serializer=serializer(tf.TensorSpec([4, 4, 1], tf.int32)))
    ids, refresh, generation = schedule.epoch(0)
    k = list(ids).index(bad_id)
    step.use(bad_id, refresh[k], generation[k], 0)
    stats = second.stats()
    assert stats["waits"] == 0 and stats["refreshes"] == 1, stats
    del it


def test_augment_is_a_top_level_name():
    import tfrecord_lirs
    from tfrecord_lirs import refurbish_tf

    assert tfrecord_lirs.augment is refurbish_tf.augment
    assert tfrecord_lirs.refurbish is refurbish_tf.refurbish


if __name__ == "__main__":
    main(*sys.argv[1:])
