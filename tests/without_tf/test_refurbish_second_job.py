"""A second job on the first one's disk store (same data, seed and partial function),
started after the first finished its epoch 0 and running beside it one epoch behind:
two real processes (tests/without_tf/refurbish_job.py), each a PyTorch DataLoader. The
store keeps the generations the second job still needs, so it computes (almost) none
of the partial augmentations the first one did (the target: under 5 %)."""

import json
import os
import subprocess
import sys

import tfrecord_lirs

N, SEED, R, BATCH, EPOCHS = 60, 11, 3, 8, 7
JOB = os.path.join(os.path.dirname(__file__), "refurbish_job.py")


def start(data, store):
    return subprocess.Popen(
        [sys.executable, JOB, str(data), str(store), str(SEED), str(R), str(BATCH)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy())


def ask(job, epoch):
    job.stdin.write(f"{epoch}\n")
    job.stdin.flush()


def answer(job, epoch):
    line = job.stdout.readline()
    assert line, f"the job stopped (exit {job.wait()})"
    got = json.loads(line)
    assert got["epoch"] == epoch
    return got


def test_a_second_job_one_epoch_behind_computes_under_five_percent(records_source,
                                                                   tmp_path):
    data = records_source(N, lambda i: 1 + i % 7).paths[0]
    store = tmp_path / "store"
    first, second = start(data, store), start(data, store)
    try:
        ask(first, 0)
        done = [answer(first, 0)]
        behind = []
        for epoch in range(1, EPOCHS + 1):
            # Both at once: the first at `epoch`, the second at `epoch - 1`.
            if epoch < EPOCHS:
                ask(first, epoch)
            ask(second, epoch - 1)
            if epoch < EPOCHS:
                done.append(answer(first, epoch))
            behind.append(answer(second, epoch - 1))
    finally:
        for job in (first, second):
            job.stdin.close()
            job.wait(timeout=60)
    first_computed = sum(d["computed"] for d in done)
    second_computed = sum(d["computed"] for d in behind)
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=SEED, reuse_factor=R,
                                               batch_size=BATCH)
    assert first_computed == sum(schedule.refreshes(e) for e in range(EPOCHS))
    assert [d["outputs"] for d in behind] == [d["outputs"] for d in done]
    assert second_computed * 20 < first_computed
    assert second_computed == 0
