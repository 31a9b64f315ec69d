"""Fault injection for the tests: runs code in a child process that loads the test
build of the op library (`make -C tf_op test-lib`: the production library plus the
ops LIRSTestOnlyPanic and LIRSTestOnlyStorageConformance and the C function
lirs_test_set_panic_point, over a Rust staticlib built with the cargo feature
`fault-injection`).

The library users install has none of that (tests/test_packaging.py checks), and two
libraries registering the same ops cannot share a process, so every fault scenario
runs in a child with TFRECORD_LIRS_OP_LIBRARY pointing at the test build, and
TFRECORD_LIRS_EXTENSION at the test build of the TensorFlow-free extension beside it
(`make tf-op`: the package's writers, with the cargo feature `fault-injection`). A child
also turns a hang into a failed test (timeout) and proves the process goes on.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYTHON_DIR = str(REPO / "python")
TESTS_DIR = str(Path(__file__).resolve().parent)
# `make tf-op` builds it there; `make pytest` passes the path.
FAULT_LIBRARY = Path(os.environ.get("TFRECORD_LIRS_FAULT_LIBRARY")
                     or REPO / "target" / "tf_op" / "test" / "_lirs_ops_fault_injection.so")
# The extension's test build, beside the op library's.
FAULT_EXTENSION = FAULT_LIBRARY.parent / "_lirs.abi3.so"
TIMEOUT = 240

# Bound in every child before its script runs.
PRELUDE = """
import os, re, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
sys.path[:0] = [{python_dir!r}, {tests_dir!r}]
import tensorflow as tf
import tfrecord_lirs
from tfrecord_lirs import LIRSDataset, _op_library
from fault_injection import expect, only_panic, set_panic_point
assert _op_library.LIB_PATH == {library!r}, _op_library.LIB_PATH
"""


def require_fault_library() -> Path:
    """Fail loudly (never skip) when the test build is missing."""
    for path in (FAULT_LIBRARY, FAULT_EXTENSION):
        if not path.is_file():
            pytest.fail(f"fault-injection build {path} is missing: build it with "
                        f"`make tf-op`, or set TFRECORD_LIRS_FAULT_LIBRARY", pytrace=False)
    return FAULT_LIBRARY


def run_faulty(script: str, **values) -> list[str]:
    """Runs `script` in a fresh Python that loaded the fault-injection library, with
    PRELUDE's names and `values` bound; returns its stdout lines. Fails on a hang,
    a crash or a failed assertion in the child."""
    library = str(require_fault_library().resolve())
    code = PRELUDE.format(python_dir=PYTHON_DIR, tests_dir=TESTS_DIR, library=library)
    for k, v in values.items():
        code += f"{k} = {v!r}\n"
    code += textwrap.dedent(script)
    env = {**os.environ, "TFRECORD_LIRS_OP_LIBRARY": library,
           "TFRECORD_LIRS_EXTENSION": str(FAULT_EXTENSION.resolve())}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env,
                             timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {TIMEOUT} s")
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-4000:]
    return out.stdout.decode().split("\n")


# ---------------------------------------------------------------- in the child

def expect(error, fn, match=None):
    """Calls `fn`, which must raise `error` (whose message contains `match`);
    returns the message."""
    try:
        fn()
    except error as e:
        assert match is None or match in e.message, e.message
        return e.message
    raise AssertionError(f"no {error.__name__}")


def set_panic_point(point: str) -> None:
    """Every call of the bridged Rust entry point `point` (its Rust name, e.g. "read";
    "fetch_worker": every job of the fetch threads) panics inside its guard, so it
    must surface as tf.errors.InternalError, until called again with ""."""
    from tfrecord_lirs import _op_library

    fn = ctypes.CDLL(_op_library.LIB_PATH).lirs_test_set_panic_point
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    err = ctypes.create_string_buffer(4096)
    code = fn(point.encode(), err, len(err))
    assert code == 0, f"lirs_test_set_panic_point({point!r}): {err.value.decode()}"
    # The package's writers live in the extension, which has its own copy of the core.
    from tfrecord_lirs import _lirs

    _lirs.set_test_panic_point(point)


def only_panic(message: str = "deliberate panic") -> None:
    """Panics inside Rust (op LIRSTestOnlyPanic); raises tf.errors.InternalError."""
    from tfrecord_lirs import _op_library

    _op_library.ops.lirs_test_only_panic(message)
