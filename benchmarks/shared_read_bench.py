"""Row: several trainers on one LIRS read (tf.data service, cross-trainer cache).

Runs examples/shared_read.py once per case, each in a fresh process (its own
dispatcher, worker and process I/O totals), on one padded file: 1 trainer; 3
trainers sharing one job through CrossTrainerCache; 3 trainers with a job each (3
separate shuffles). The figure is what left storage (tfrecord_lirs.process_io_totals),
the ratio against one trainer's."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "shared_read.py")
PY = os.path.join(ROOT, ".venv", "bin", "python")
RECORDS = 20000
PAYLOAD = 200
BATCH = 64
STEPS = 2000  # batches per trainer: 6.4 epochs, so the worker's read-ahead is noise
TRAINERS = 3


def _case(path, mode):
    out = subprocess.run([PY, EXAMPLE, "--file", path, "--mode", mode, "--steps", str(STEPS),
                          "--batch-size", str(BATCH), "--trainers", str(TRAINERS)],
                         capture_output=True, text=True, timeout=900, check=True)
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("{")]
    return json.loads(line)


def run(out_dir):
    path = os.path.join(out_dir, "shared_read.tfrecord")
    code = ("import sys, tfrecord_lirs\n"
            "with tfrecord_lirs.PaddedWriter(sys.argv[1]) as w:\n"
            f"    for i in range({RECORDS}): w.write(b'%d:' % i + b'x' * {PAYLOAD})\n")
    subprocess.run([PY, "-c", code, path], check=True)
    try:
        return {mode: _case(path, mode) for mode in ("one", "shared", "separate")}
    finally:
        for p in (path, path + ".offsets"):
            if os.path.exists(p):
                os.remove(p)


def add_rows(t, res, check, row="12"):
    sec = f"{row} sweep: {TRAINERS} trainers, one file of {RECORDS:,} records"
    one, shared, separate = (res[k]["bytes_read"] for k in ("one", "shared", "separate"))
    v = shared / one
    m = check(t, f"{row}: {TRAINERS} trainers on one cached LIRS job, bytes vs one trainer",
              v, 1.1, higher_is_better=False)
    t.add(sec, f"**{TRAINERS} trainers, one job, `CrossTrainerCache`** ({STEPS:,} batches "
          f"of {BATCH} each)", f"{shared / 1e6:,.1f} MB read", f"{v:.2f}x one trainer",
          "<= 1.1x", m)
    t.add(sec, f"{TRAINERS} trainers, a job each (separate shuffles)",
          f"{separate / 1e6:,.1f} MB read", f"{separate / one:.2f}x one trainer")
    t.add(sec, "1 trainer", f"{one / 1e6:,.1f} MB read")


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "/tmp"), indent=1))
