"""Runs a storage server's test snippet in a private network namespace (shared by
tests/gcs_emulator.py and tests/s3_server.py).

`run_in_namespace(harness, unshare_flags, workdir, objects, code, config, timeout,
error)` stages `objects` (name -> bytes or a local file) under `workdir/objects`,
writes the snippet and `config.json` (the staged objects added as "objects"), then
runs `unshare FLAGS python HARNESS inner WORKDIR` in its own process group. Bounded:
after `timeout` + 60 s the group is killed; either way nothing outlives the call.
Raises `error` (with the output) if the run failed or timed out.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path


def run_in_namespace(harness, unshare_flags, workdir, objects, code, config, timeout, error):
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    staged = workdir / "objects"
    staged.mkdir(exist_ok=True)
    names = {}
    for i, (name, value) in enumerate(objects.items()):
        local = staged / f"{i}"
        if isinstance(value, bytes):
            local.write_bytes(value)
        else:
            shutil.copyfile(value, local)
        names[name] = str(local)
    (workdir / "snippet.py").write_text(code)
    (workdir / "config.json").write_text(json.dumps({**config, "objects": names,
                                                     "timeout": timeout}))
    proc = subprocess.Popen(
        ["unshare", unshare_flags, sys.executable, str(Path(harness).resolve()), "inner",
         str(workdir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    what = Path(harness).stem
    try:
        out, err = proc.communicate(timeout=timeout + 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise error(f"{what} run timed out after {timeout + 60} s\n--- stdout\n{out}"
                    f"\n--- stderr\n{err[-20000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise error(f"{what} run failed (exit {proc.returncode})\n--- stdout\n{out}"
                    f"\n--- stderr\n{err[-20000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
