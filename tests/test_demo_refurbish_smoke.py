"""`make demo`'s refurbish part at its smallest scale (3 epochs, one seed, ~1.5 min):
demo/refurbish_demo.py writes the digits as padded PNG Examples, trains the four
pipelines through the public front ends (LIRSDataset, tfrecord_lirs.refurbish), runs its
speed section (standard vs refurbish over JPEG photos, CPU-bound augmentation), writes
refurbish.json in the documented shape and a PNG plot, and exits 0 — which it does only
when every pipeline computed exactly the partial augmentations its schedule says."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PIPELINES = ["standard", "refurbish", "echo", "none"]
N, EPOCHS = 400, 3

# The demo's own requirements (requirements-demo.txt, also in requirements-dev.txt).
pytest.importorskip("matplotlib", reason="the demo needs matplotlib: pip install -r requirements-demo.txt")
pytest.importorskip("sklearn", reason="the demo needs scikit-learn: pip install -r requirements-demo.txt")


def test_refurbish_demo_at_its_smallest_scale(tmp_path):
    import tfrecord_lirs

    out = tmp_path / "demo_out"
    env = dict(os.environ)
    # DEMO_SCALE multiplies the epochs, floored at 3 (one reuse cycle of r = 3).
    env.update(DEMO_SCALE="0.01", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(p for p in [str(REPO / "python"), env.get("PYTHONPATH")] if p))
    proc = subprocess.run([sys.executable, str(REPO / "demo" / "refurbish_demo.py"), "--out", str(out),
                           "--seeds", "1"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    report = json.loads((out / "refurbish.json").read_text())
    assert report["config"]["epochs"] == EPOCHS and report["config"]["n_train"] == N
    assert report["invariant_errors"] == []
    runs = {r["name"]: r for r in report["runs"]}
    assert sorted(runs) == sorted(PIPELINES)
    for r in runs.values():
        assert 0.0 <= r["val_accuracy"] <= 1.0 and r["seconds"] > 0
        assert len(r["history"]["val_accuracy"]) == EPOCHS
    # The partial augmentations counted where they ran: every image every epoch for
    # standard, the schedule's refreshes for refurbish and echo (epoch 0 all of them,
    # then about N / 3 per epoch; a reuse that overtakes its refresh across an epoch
    # boundary in the parallel map recomputes: at most one per epoch), none without
    # augmentation.
    schedule = tfrecord_lirs.RefurbishSchedule(N, seed=1, reuse_factor=3, batch_size=40)
    refreshes = sum(schedule.refreshes(e) for e in range(EPOCHS))
    assert N + (EPOCHS - 1) * (N // 3) <= refreshes <= N + (EPOCHS - 1) * (N // 3 + 1)
    assert runs["standard"]["partial_calls"] == N * EPOCHS
    for name in ("refurbish", "echo"):
        assert runs[name]["expected_partial_calls"] == refreshes
        assert refreshes <= runs[name]["partial_calls"] <= refreshes + EPOCHS, name
    assert runs["none"]["partial_calls"] == 0

    # The speed section: both arms over the photos, the partial augmentations counted
    # in the graph (no Python op) and what the schedule says; the speedup is printed,
    # never asserted (a timing).
    speed = report["speed"]
    cfg = speed["config"]
    photos = tfrecord_lirs.RefurbishSchedule(cfg["n"], seed=cfg["seed"], reuse_factor=3,
                                             batch_size=cfg["batch_size"])
    for name, want in (("standard", cfg["n"] * cfg["epochs"]),
                       ("refurbish", sum(photos.refreshes(e) for e in range(cfg["epochs"])))):
        r = speed["runs"][name]
        assert r["samples"] == cfg["n"] * cfg["epochs"], name
        assert r["expected_partial_calls"] == want, name
        assert want <= r["partial_calls"] <= want + cfg["epochs"], name
    assert speed["speedup"] > 0 and "images/s" in proc.stdout
    assert "Refurbish r=3 delivered" in proc.stdout

    for column in ["val acc (mean)", "min-max", "partial augs / run", "seconds / run"]:
        assert column in proc.stdout, column
    assert "Refurbish r=3 computed" in proc.stdout
    assert (out / "refurbish.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_demo_refuses_counts_its_schedule_does_not_allow():
    """The demo's exit status: counts_agree is what decides it."""
    sys.path.insert(0, str(REPO / "demo"))
    try:
        import refurbish_demo
    finally:
        sys.path.remove(str(REPO / "demo"))
    agree = refurbish_demo.counts_agree

    def run(name, calls, expected):
        return {"name": name, "partial_calls": calls, "expected_partial_calls": expected}

    assert agree(run("standard", 1200, 1200), 3)
    assert not agree(run("standard", 1199, 1200), 3)
    assert agree(run("none", 0, 0), 3) and not agree(run("none", 1, 0), 3)
    for name in ("refurbish", "echo"):
        assert agree(run(name, 667, 667), 3) and agree(run(name, 670, 667), 3)
        assert not agree(run(name, 666, 667), 3)       # fewer than the refreshes
        assert not agree(run(name, 671, 667), 3)       # more than one recompute per epoch
        assert not agree(run(name, 1200, 667), 3)      # every use recomputed
