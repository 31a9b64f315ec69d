"""Packaging rules that need no fresh venv: the TensorFlow version check at
import, the build's refusal without TensorFlow, one version everywhere, and no test
hook in the op library users install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import run_ok
from fault_injection import FAULT_EXTENSION, require_fault_library

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "python" / "tfrecord_lirs"


def _workspace_version() -> str:
    with open(REPO / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]


def _import_copy(tmp_path, tf_version: str, library: bytes | None):
    """Imports a copy of the package whose _build_info.py says the op library was built
    for `tf_version` (and whose library is replaced by `library`, if given)."""
    copy = tmp_path / "site" / "tfrecord_lirs"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    info = (copy / "_build_info.py").read_text()
    (copy / "_build_info.py").write_text(
        re.sub(r'TF_VERSION = "[^"]*"', f'TF_VERSION = "{tf_version}"', info))
    if library is not None:
        (copy / "_lirs_ops.so").write_bytes(library)
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        # The TensorFlow check runs when a TensorFlow name is first used: `import
        # tfrecord_lirs` alone works without TensorFlow (DataSource, Sampler).
        [sys.executable, "-c", "import tensorflow as tf, tfrecord_lirs; tfrecord_lirs.LIRSDataset; "
                               "print(tf.__version__, tfrecord_lirs.__file__)"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )


def test_another_tensorflow_is_refused_before_loading(tmp_path):
    import tensorflow as tf

    # Not a library at all: if it were loaded, the error would be the loader's.
    res = _import_copy(tmp_path, "2.20.0", b"not an ELF file")
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), res.stderr
    assert "built for TensorFlow 2.20.0" in last, last
    assert f"TensorFlow {tf.__version__} is installed" in last, last
    assert "pip install --no-build-isolation ./python" in last, last
    assert "not an ELF" not in res.stderr and "invalid ELF" not in res.stderr, res.stderr


def test_another_patch_release_is_accepted(tmp_path):
    import tensorflow as tf

    major, minor, _ = tf.__version__.split(".", 2)
    res = _import_copy(tmp_path, f"{major}.{minor}.99", None)
    assert res.returncode == 0, res.stderr
    assert str(tmp_path) in res.stdout


def test_build_without_tensorflow_says_so(tmp_path):
    """pip's isolated build environment has no TensorFlow: the build stops with a
    message saying why and what to run instead, before compiling anything."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target")}
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "wheels"),
         str(REPO / "python")],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "tfrecord-lirs: cannot import tensorflow" in out, out[-4000:]
    assert "pip install --no-build-isolation ./python" in out, out[-4000:]
    assert not (tmp_path / "target").exists()  # nothing was compiled
    assert not list((tmp_path).glob("wheels/*.whl"))


def test_one_version():
    """Cargo.toml's workspace version is the only one: every crate inherits it, the
    CLI prints it, the package reports it, pyproject.toml has none of its own."""
    version = _workspace_version()
    for manifest in sorted((REPO / "crates").glob("*/Cargo.toml")):
        with open(manifest, "rb") as f:
            package = tomllib.load(f)["package"]
        assert package["version"] == {"workspace": True}, manifest
    # The path dependencies on the workspace's own crates (the core crate, the pure
    # format crate) need a version for `cargo package`: it must be the workspace's.
    with open(REPO / "Cargo.toml", "rb") as f:
        deps = tomllib.load(f)["workspace"]["dependencies"]
    own = {name: dep for name, dep in deps.items() if isinstance(dep, dict) and "path" in dep}
    assert {"tfrecord-lirs", "tfrecord-lirs-format"} <= own.keys(), own
    for name, dep in own.items():
        assert dep["version"] == f"={version}", (name, dep)
    with open(REPO / "python" / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    assert "version" not in project and "version" in project["dynamic"], project
    assert run_ok("--version").text.strip() == f"tfrecord-lirs {version}"
    import tfrecord_lirs

    assert tfrecord_lirs.__version__ == version


# Traces of fault injection (tests/fault_injection.py) in a library's bytes: the test
# ops' registrations, the test C function, the Rust panic points (their messages, the
# bridge module's and the Fetcher's symbol names), the storage contract's cases (a
# case's name: the core's feature `conformance`).
FAULT_MARKERS = (b"LIRSTestOnlyPanic", b"LIRSTestOnlyStorageConformance", b"lirs_test_",
                 b"test panic injected", b"fault_injection", b"set_test_panic",
                 b"at_and_past_the_end")


def _fault_injection_traces(library: Path) -> dict:
    """What of the fault-injection build `library` has: exported test symbols, marker
    strings, and (loaded by the package in a child process) the test op and C function."""
    exported = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True,
                              text=True, check=True).stdout
    raw = library.read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "TFRECORD_LIRS_OP_LIBRARY"}
    env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(REPO / "python"))
    if library != (PACKAGE / "_lirs_ops.so").resolve():  # else: the package's own
        env["TFRECORD_LIRS_OP_LIBRARY"] = str(library)
    probe = subprocess.run(
        [sys.executable, "-c",
         "import ctypes, tfrecord_lirs\n"
         "from tfrecord_lirs import _op_library\n"
         "print(_op_library.LIB_PATH)\n"
         "print(hasattr(_op_library.ops, 'lirs_test_only_panic'),\n"
         "      hasattr(_op_library.ops, 'lirs_test_only_storage_conformance'))\n"
         "print(hasattr(ctypes.CDLL(_op_library.LIB_PATH), 'lirs_test_set_panic_point'))"],
        capture_output=True, text=True, env=env, timeout=300, cwd=REPO,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    loaded, panic_op, conformance_op, c_function = probe.stdout.split()[-4:]
    assert loaded == str(library), probe.stdout
    return {
        "exported": [line.split()[-1] for line in exported.splitlines() if "lirs_test_" in line],
        "markers": [m.decode() for m in FAULT_MARKERS if m in raw],
        "ops": [panic_op == "True", conformance_op == "True"],
        "c_function": c_function == "True",
    }


def test_no_test_hook_in_the_production_library():
    """The op library users get (the one `make wheel` packages, built by `make -C
    tf_op` without the cargo feature `fault-injection`) has no test symbol, no test op,
    no panic point and no storage contract case; the test build has them all (so this
    check can fail)."""
    production = _fault_injection_traces((PACKAGE / "_lirs_ops.so").resolve())
    assert production == {"exported": [], "markers": [], "ops": [False, False],
                          "c_function": False}
    test_build = _fault_injection_traces(require_fault_library().resolve())
    assert test_build == {"exported": ["lirs_test_set_panic_point"],
                          "markers": [m.decode() for m in FAULT_MARKERS],
                          "ops": [True, True], "c_function": True}


def test_no_test_hook_in_the_production_extension():
    """The extension users get has no panic point (`set_test_panic_point`); its test
    build, which `make tf-op` puts beside the op library's, has (so this can fail)."""
    require_fault_library()
    probe = ("import tfrecord_lirs\n"
             "from tfrecord_lirs import _lirs\n"
             "print(_lirs.__file__, hasattr(_lirs, 'set_test_panic_point'))")
    env = {k: v for k, v in os.environ.items() if k != "TFRECORD_LIRS_EXTENSION"}
    env["PYTHONPATH"] = str(REPO / "python")
    seen = []
    for extension in (None, FAULT_EXTENSION.resolve()):
        if extension is not None:
            env["TFRECORD_LIRS_EXTENSION"] = str(extension)
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             env=env, timeout=120, cwd=REPO)
        assert out.returncode == 0, out.stderr[-3000:]
        seen.append(out.stdout.split()[-2:])
    assert seen[0][1] == "False" and Path(seen[0][0]).parent == PACKAGE, seen
    assert seen[1] == [str(FAULT_EXTENSION.resolve()), "True"], seen
