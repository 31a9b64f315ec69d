"""Builds the `tfrecord-lirs` wheel: the Python package plus three native pieces made
from the Cargo workspace that holds this directory (its parent):

* `tfrecord_lirs/_lirs.abi3.so`, the TensorFlow-free extension (PyO3, the stable ABI of
  CPython 3.10+: `cargo build --release -p tfrecord-lirs-py`);
* `tfrecord_lirs/_lirs_ops.so`, the TensorFlow op library (`make -C tf_op`), compiled
  against the TensorFlow of the environment running this build;
* the `tfrecord-lirs` command (`cargo build --release -p tfrecord-lirs-cli`), installed
  as a script, so it lands in the environment's `bin/`.

The op library must be compiled against the TensorFlow it will be loaded into, so
build with the target environment's own TensorFlow: `pip install --no-build-isolation
./python` (pip's default isolated build environment has no TensorFlow, and giving it
one would compile against a copy that may differ from the installed one).

The version is the workspace's (`Cargo.toml`, via `cargo metadata`): one number for
the crates, the CLI's `--version`, the wheel and `tfrecord_lirs.__version__`.

Editable installs (`pip install -e python`, the development flow of the Makefile)
build nothing native: `make py-ext tf-op` builds the extension and the op library in
place and the CLI stays at `target/release/tfrecord-lirs`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py as _build_py
from distutils.command.build_scripts import build_scripts as _build_scripts  # setuptools provides distutils

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError as e:  # setuptools < 70.1 (and 70.1 to 76 fail on the license string)
    raise SystemExit(
        "tfrecord-lirs: building needs setuptools >= 77 (bdist_wheel built in, SPDX license); with "
        "--no-build-isolation install it first: pip install 'setuptools>=77'"
    ) from e

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent  # the Cargo workspace
CLI_NAME = "tfrecord-lirs"
# The PyO3 extension's file name: the stable ABI (abi3) tag, so every CPython >= 3.10
# loads the same file.
EXTENSION = "_lirs.abi3.so"
# `make wheel` sets TFRECORD_LIRS_GLIBC (2.28): the extension and the CLI are built by
# cargo-zigbuild against that glibc's symbol versions, and the op library linked by
# zig for it (tf_op/Makefile's ZIG_GLIBC), so the wheel installs wherever TensorFlow
# 2.21 and PyTorch do (manylinux_2_28). Unset (a build from source for this machine):
# the system toolchain.
GLIBC = os.environ.get("TFRECORD_LIRS_GLIBC", "")
RUST_TARGET = "x86_64-unknown-linux-gnu"
# The wheel's cargo profile (Cargo.toml: release with LTO, for its size).
PROFILE = "wheel" if GLIBC else "release"
# TFRECORD_LIRS_DEBUG_DIR: where the native files' debug info goes (FILE.debug, named
# by a .gnu_debuglink in FILE) before they are stripped; unset, it is dropped.
DEBUG_DIR = os.environ.get("TFRECORD_LIRS_DEBUG_DIR", "")


def _fail(message):
    raise SystemExit(f"tfrecord-lirs: {message}")


def _target_dir():
    return Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target").resolve()


def _rust_out():
    """Where cargo puts the extension and the CLI."""
    return _target_dir() / RUST_TARGET / PROFILE if GLIBC else _target_dir() / PROFILE


def _run(cmd, **kwargs):
    print("running:", " ".join(str(c) for c in cmd), flush=True)
    try:
        subprocess.run([str(c) for c in cmd], check=True, **kwargs)
    except FileNotFoundError as e:
        _fail(f"{cmd[0]} not found: building tfrecord-lirs from source needs cargo (Rust), "
              f"g++ and make on PATH ({e})")
    except subprocess.CalledProcessError as e:
        _fail(f"{' '.join(str(c) for c in cmd)} failed with exit status {e.returncode}")


def crate_version():
    """The workspace version from Cargo.toml (what `tfrecord-lirs --version` prints)."""
    if not (ROOT / "Cargo.toml").is_file():
        _fail(f"no Cargo workspace at {ROOT}: build from a clone of the whole repository "
              f"(pip install --no-build-isolation ./python), not from a copy of python/ alone")
    try:
        out = subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1",
             "--manifest-path", str(ROOT / "Cargo.toml")],
            check=True, capture_output=True, text=True,
        ).stdout
    except FileNotFoundError as e:
        _fail(f"cargo not found ({e}): building tfrecord-lirs needs Rust's cargo on PATH")
    except subprocess.CalledProcessError as e:
        _fail(f"cargo metadata failed: {e.stderr.strip()}")
    packages = {p["name"]: p["version"] for p in json.loads(out)["packages"]}
    return packages["tfrecord-lirs-cli"]


def _check_tensorflow():
    """The op library is compiled against this interpreter's TensorFlow: say so
    plainly when there is none (the usual cause: pip's isolated build environment)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"],
        capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if probe.returncode != 0:
        _fail(
            f"cannot import tensorflow with {sys.executable}: the op library is compiled "
            f"against the TensorFlow of the environment it is installed into. Install "
            f"TensorFlow 2.21 there first (pip install tensorflow~=2.21.0, or tensorflow-cpu), "
            f"then build without build isolation: pip install --no-build-isolation ./python "
            f"(last line of the import error: "
            f"{(probe.stderr.strip().splitlines() or ['?'])[-1]})"
        )
    return probe.stdout.strip()


def _build_native(package_dir):
    """cargo (the CLI and the static library) and make -C tf_op (the op library and
    _build_info.py, into `package_dir`)."""
    tf_version = _check_tensorflow()
    print(f"tfrecord-lirs: building the op library for TensorFlow {tf_version}", flush=True)
    env = {**os.environ, "CARGO_TARGET_DIR": str(_target_dir())}
    # No cargo features: the test-only ones (`conformance`, `fault-injection`) stay out.
    if GLIBC:
        _run(["cargo", "zigbuild", "--profile", PROFILE, "--target", f"{RUST_TARGET}.{GLIBC}",
              "-p", "tfrecord-lirs-cli", "-p", "tfrecord-lirs-py"], cwd=ROOT, env=env)
    else:
        _run(["cargo", "build", "--release", "-p", "tfrecord-lirs-cli", "-p", "tfrecord-lirs-py"],
             cwd=ROOT, env=env)
    extension = Path(package_dir).resolve() / EXTENSION
    shutil.copy2(_rust_out() / "lib_lirs.so", extension)
    _strip(extension)
    library = Path(package_dir).resolve() / "_lirs_ops.so"
    _run(["make", "-C", ROOT / "tf_op", f"PYTHON={sys.executable}",
          f"CARGO_TARGET_DIR={_target_dir()}", f"OUT={library}", f"ZIG_GLIBC={GLIBC}",
          f"CARGO_PROFILE={PROFILE}"], env=env)
    _strip(library)


def _strip(path):
    """Drops debug info and local symbols (the release profile keeps debug info for the
    development tree's backtraces) from a file going into the wheel: ~45 MB less per
    file; the dynamic symbols stay. With DEBUG_DIR, the debug info is kept there."""
    if not shutil.which("strip"):
        return
    if DEBUG_DIR:
        os.makedirs(DEBUG_DIR, exist_ok=True)
        debug = Path(DEBUG_DIR) / (Path(path).name + ".debug")
        _run(["objcopy", "--only-keep-debug", path, debug])
        _run(["strip", "--strip-unneeded", path])
        _run(["objcopy", f"--add-gnu-debuglink={debug}", path])
    else:
        _run(["strip", "--strip-unneeded", path])


DOC_REFERENCE = re.compile(r"docs/([A-Za-z_-]+\.md)")


def _ship_docs(package_dir):
    """The repository's docs/*.md that the package's docstrings name ("docs/FORMAT.md
    §5") go into the package as tfrecord_lirs/docs/, so an installed wheel holds what
    its help points to."""
    named = set()
    for source in package_dir.glob("*.py*"):
        named |= set(DOC_REFERENCE.findall(source.read_text(errors="replace")))
    for name in sorted(named):
        doc = ROOT / "docs" / name
        if not doc.is_file():
            _fail(f"the package names docs/{name}, which the repository does not have")
        (package_dir / "docs").mkdir(exist_ok=True)
        shutil.copy2(doc, package_dir / "docs" / name)


class build_py(_build_py):
    """The pure-Python files, then the native build into the build tree."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        package_dir = Path(self.build_lib) / "tfrecord_lirs"
        # A development tree's own _lirs_ops.so/_build_info.py (git-ignored) must not
        # stand in for a library built here for this environment's TensorFlow.
        for name in ("_lirs_ops.so", "_build_info.py", EXTENSION):
            (package_dir / name).unlink(missing_ok=True)
        _ship_docs(package_dir)
        _build_native(package_dir)

    def find_package_modules(self, package, package_dir):
        # _build_info.py is written by the native build, never copied from the tree.
        return [m for m in super().find_package_modules(package, package_dir)
                if m[1] != "_build_info"]


class build_scripts(_build_scripts):
    """Installs the CLI binary as a script (into the environment's bin/). It is an ELF
    file: copied as is (distutils would try to read it as a Python script)."""

    editable_mode = False  # set by setuptools for editable installs

    def run(self):
        self.mkpath(self.build_dir)
        if self.editable_mode:
            return
        binary = _rust_out() / CLI_NAME
        if not binary.is_file():
            _fail(f"{binary} is missing: cargo build --release -p tfrecord-lirs-cli")
        shutil.copy2(binary, Path(self.build_dir) / CLI_NAME)
        _strip(Path(self.build_dir) / CLI_NAME)

    def get_outputs(self):
        return [] if self.editable_mode else [str(Path(self.build_dir) / CLI_NAME)]


class bdist_wheel(_bdist_wheel):
    """Platform wheel tagged cp310-abi3-<platform>: the extension uses only CPython's
    stable ABI (3.10 and later), and the op library and the CLI use no Python C API at
    all, so one wheel serves every Python that TensorFlow 2.21 supports. The
    TensorFlow the op library needs (its C++ ABI, 2.21.x) is checked when a
    TensorFlow name is first used, against _build_info.TF_VERSION."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "cp310", "abi3", platform


class NativeDistribution(Distribution):
    """Has native code: installs into platlib, never a pure wheel."""

    def has_ext_modules(self):
        return True


setup(
    version=crate_version(),
    distclass=NativeDistribution,
    scripts=[CLI_NAME],  # the binary, placed by build_scripts above
    cmdclass={"build_py": build_py, "build_scripts": build_scripts, "bdist_wheel": bdist_wheel},
)
