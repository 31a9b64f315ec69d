"""What tests/test_service_hint.py and tests/test_service_splits.py share: each case is
a script run in a process of its own (tfrecord_lirs.process_io_totals() counts what the
readers of the process read, so a reader another test left behind cannot count into
it), which sets up tf.data service, reads `ds` and prints one JSON line."""

import json
import subprocess
import sys

# The end of a case's script, after it has made `ds` (read through tf.data service),
# `workers` (its WorkerServers) and `batch` (0: elements are single records), each
# record "<id>:...": the ids read (or the OpError that stopped the read), the bytes
# and reads of the process's readers, and the tasks each worker ran.
READ_AND_REPORT = r"""
before = tfrecord_lirs.process_io_totals()
try:
    ids = []
    for x in ds.as_numpy_iterator():
        for r in ([x] if batch == 0 else x):
            ids.append(int(r.split(b":", 1)[0]))
    error = None
except tf.errors.OpError as e:
    ids, error = [], "%s: %s" % (type(e).__name__, e.message)
after = tfrecord_lirs.process_io_totals()
print(json.dumps({"ids": ids, "error": error,
                  "bytes_read": after["bytes_read"] - before["bytes_read"],
                  "reads": after["reads"] - before["reads"],
                  "tasks": [w._num_tasks() for w in workers]}))
"""


def run_case(script, *args):
    """Runs `script` (ending in READ_AND_REPORT) with `args` as sys.argv[1:]; its report."""
    out = subprocess.run([sys.executable, "-c", script, *(str(a) for a in args)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("{")]
    return json.loads(line)
