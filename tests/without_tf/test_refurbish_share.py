"""Jobs that share one store while they run (docs/FORMAT.md §7.1, claims): real
processes (tests/without_tf/share_job.py), each a PyTorch DataLoader, started at once.
Together they compute each (id, generation) once; each yields what it yields alone; a
job killed with SIGKILL while it holds claims leaves the others to finish every
sample; corrupt entries and a store too small for any entry mean recomputing, never an
error."""

import json
import os
import signal
import subprocess
import sys

import pytest

import tfrecord_lirs

N, EPOCHS = 48, 4
JOB = os.path.join(os.path.dirname(__file__), "share_job.py")


@pytest.fixture()
def data(records_source):
    return records_source(N, lambda i: 1 + i % 7).paths[0]


def start(data, store, log, r, workers, hold="-", store_bytes=None, **kwargs):
    args = [sys.executable, JOB, str(data), str(store), str(log), str(r), str(EPOCHS),
            str(workers), str(hold)] + ([str(store_bytes)] if store_bytes else [])
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=os.environ.copy(), **kwargs)


def go(*jobs):
    """Starts the jobs' epochs at once, when every one is ready."""
    for job in jobs:
        assert job.stdout.readline() == "ready\n"
    for job in jobs:
        job.stdin.write("go\n")
        job.stdin.flush()
    return jobs


def result(job):
    out, _ = job.communicate(timeout=600)
    assert job.returncode == 0, f"the job failed (exit {job.returncode})"
    return json.loads(out.splitlines()[-1])


def calls(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


def unique_entries(r):
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=5, reuse_factor=r, batch_size=8)
    return sum(schedule.refreshes(e) for e in range(EPOCHS))


@pytest.mark.parametrize("r", [1, 2])
def test_three_concurrent_jobs_compute_each_entry_once_and_yield_a_solo_jobs_samples(
        data, tmp_path, r):
    solo = result(*go(start(data, tmp_path / "solo", tmp_path / "solo.log", r, 2)))
    assert calls(tmp_path / "solo.log") == unique_entries(r)
    jobs = go(*[start(data, tmp_path / "shared", tmp_path / f"{j}.log", r, 2)
                for j in range(3)])
    results = [result(job) for job in jobs]
    for got in results:
        assert got["outputs"] == solo["outputs"]
    # Once in all (a job that finds another's claim waits for its entry), not 3x.
    assert sum(calls(tmp_path / f"{j}.log") for j in range(3)) == unique_entries(r)


def test_a_job_killed_while_holding_claims_leaves_the_others_every_sample(data, tmp_path):
    r = 2
    solo = result(*go(start(data, tmp_path / "solo", tmp_path / "solo.log", r, 0)))
    fifo = tmp_path / "never"
    os.mkfifo(fifo)
    store = tmp_path / "shared"
    # Two worker processes, each blocked in its first partial call, holding its claim.
    held = start(data, store, tmp_path / "held.log", r, 2, hold=fifo,
                 start_new_session=True)
    go(held)
    holding = {held.stdout.readline(), held.stdout.readline()}
    assert all(line.startswith("holding ") for line in holding), holding
    others = go(*[start(data, store, tmp_path / f"{j}.log", r, 0) for j in range(2)])
    os.killpg(held.pid, signal.SIGKILL)  # the job and its workers
    held.wait()
    results = [result(job) for job in others]
    for got in results:
        assert got["outputs"] == solo["outputs"]
    # The two claims were taken over (by whichever came to them first), and the
    # survivors computed every entry once.
    assert sum(got["stats"]["taken_over"] for got in results) == 2
    assert calls(tmp_path / "held.log") == 0
    assert sum(calls(tmp_path / f"{j}.log") for j in range(2)) == unique_entries(r)
    assert not [p for p in os.listdir(next(store.iterdir())) if p.startswith(".claim-")]


def test_concurrent_jobs_on_a_store_too_small_for_any_entry_recompute(data, tmp_path):
    r = 2
    solo = result(*go(start(data, tmp_path / "solo", tmp_path / "solo.log", r, 0)))
    jobs = go(*[start(data, tmp_path / "tiny", tmp_path / f"{j}.log", r, 2, store_bytes=1)
                for j in range(3)])
    results = [result(job) for job in jobs]
    for got in results:
        assert got["outputs"] == solo["outputs"]
    # Nothing is stored, so every use is computed, by each job.
    assert [calls(tmp_path / f"{j}.log") for j in range(3)] == [N * EPOCHS] * 3


def test_corrupt_entries_in_a_shared_store_are_recomputed(data, tmp_path):
    r = 2
    solo = result(*go(start(data, tmp_path / "solo", tmp_path / "solo.log", r, 0)))
    source = tfrecord_lirs.DataSource([str(data)])
    store = tfrecord_lirs.refurbishing.open_store(str(tmp_path / "shared"), source, None, 5,
                                                  partial_name="share_job.partial v1")
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=5, reuse_factor=r, batch_size=8)
    entries = {(i, schedule.generation(i, e)) for i in range(N) for e in range(EPOCHS)}
    for i, g in entries:
        with open(store.entry_path(i, g), "wb") as f:
            f.write(b"LIRSPAR1 torn")
    # In the main processes (workers=0): their counters are the jobs'.
    jobs = go(*[start(data, tmp_path / "shared", tmp_path / f"{j}.log", r, 0)
                for j in range(3)])
    results = [result(job) for job in jobs]
    for got in results:
        assert got["outputs"] == solo["outputs"]
    # Each corrupt entry found so by one job at least (before it was replaced), and
    # computed about once: a job that read a corrupt entry just before another
    # replaced it may compute it too.
    assert sum(got["stats"]["corrupt"] for got in results) >= len(entries)
    total = sum(calls(tmp_path / f"{j}.log") for j in range(3))
    assert len(entries) <= total <= len(entries) * 1.1
