"""Loads the op library (`_lirs_ops.so`) as TensorFlow ops, and hands the
TensorFlow-facing modules the argument checks of the Rust core with it.

The core decides every rule and error. The checks, and the translation of the
extension's exceptions (`tfrecord_lirs.errors`) into exceptions that are also of
the matching tf.errors class, are in the TensorFlow-free `tfrecord_lirs._checks`;
this module re-exports them.

The environment variable TFRECORD_LIRS_OP_LIBRARY names a custom build of the op
library to load instead (the project's tests use it for their fault-injection
build); the `_build_info.py` beside that library says which TensorFlow it was
built for, and is checked like the package's own.
"""

import importlib.util
import os

from tfrecord_lirs import _lirs
# The checks and the error translation are TensorFlow-free (tfrecord_lirs._checks);
# the TensorFlow-facing modules take them from here with the op library.
from tfrecord_lirs._checks import (  # noqa: F401
    DEFAULTS,
    check,
    check_argument,
    check_backend,
    check_compression_type,
    check_dataset_arguments,
    check_fit,
    check_page_size,
    check_shard,
    default_table_path,
    call_core,
    or_default,
    path_str,
)

# Which extra brings a TensorFlow, for the message below (python/pyproject.toml).
_INSTALL_TF = (
    "install TensorFlow 2.21 next to it: pip install 'tfrecord-lirs[cpu]' (tensorflow-cpu), "
    "'tfrecord-lirs[and-cuda]' (tensorflow with CUDA) or 'tfrecord-lirs[tensorflow]', "
    "or pip install tensorflow~=2.21.0 yourself"
)
# How to build the op library for the TensorFlow that is installed.
_BUILD_FROM_SOURCE = (
    "build tfrecord-lirs for it from source: pip install 'setuptools>=77', then "
    "pip install --no-build-isolation ./python in a clone of tfrecord-lirs "
    "(needs cargo and g++), or `make tf-op` in a development tree"
)

try:
    import tensorflow as tf
except ImportError as e:
    raise ImportError(f"tfrecord_lirs needs TensorFlow, which cannot be imported ({e}): {_INSTALL_TF}") from e

LIB_PATH = os.path.abspath(
    os.environ.get("TFRECORD_LIRS_OP_LIBRARY")
    or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lirs_ops.so"))

if not os.path.exists(LIB_PATH):
    raise ImportError(
        f"tfrecord_lirs: op library {LIB_PATH} is missing; build it with `make -C tf_op`"
    )


def _load_build_info():
    """The `_build_info.py` written by tf_op/Makefile beside the op library."""
    path = os.path.join(os.path.dirname(LIB_PATH), "_build_info.py")
    spec = importlib.util.spec_from_file_location("tfrecord_lirs._build_info", path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except FileNotFoundError as e:
        raise ImportError(
            f"tfrecord_lirs: {path} (written with the op library by tf_op/Makefile) is missing, "
            f"so the TensorFlow the library was built for is unknown; rebuild it with "
            f"`make -C tf_op`"
        ) from e
    return module


_build_info = _load_build_info()


def _major_minor(version):
    return tuple(version.split(".")[:2])


# The library is compiled against one TensorFlow's C++ ABI: loaded into another, it
# fails with whatever the dynamic loader says (or worse), so the versions are compared
# first. Patch releases of one minor version keep that ABI.
if _major_minor(tf.__version__) != _major_minor(_build_info.TF_VERSION):
    raise ImportError(
        f"tfrecord_lirs {_build_info.VERSION}: the op library {LIB_PATH} was built for "
        f"TensorFlow {_build_info.TF_VERSION}, but TensorFlow {tf.__version__} is installed; "
        f"install TensorFlow {'.'.join(_major_minor(_build_info.TF_VERSION))}.x, or "
        f"{_BUILD_FROM_SOURCE}"
    )

ops = tf.load_op_library(LIB_PATH)

def check_buffer_size(buffer_size):
    """ValueError (with the core's text) unless `buffer_size` is None or an int the
    core accepts (a tensor is checked by value when it is a constant)."""
    if buffer_size is None:
        return
    if isinstance(buffer_size, (tf.Tensor, tf.Variable)):
        value = tf.get_static_value(buffer_size)
        if value is None:
            return  # not known yet: TFRecordDataset checks it at run time; LIRS reads no stream
        buffer_size = int(value)
    check(_lirs.check_buffer_size, buffer_size)


def cache_attrs(cache_dir, cache_bytes):
    """The ops' `cache_dir` and `cache_bytes` attrs: '' and -1 when not given (then
    the core's rule: TFRECORD_LIRS_CACHE_DIR, 32 GiB). The type is checked here, the
    values by the op: both the core's rules."""
    check_argument("cache_bytes", cache_bytes)
    return (b"" if cache_dir is None else os.fsencode(cache_dir),
            or_default(cache_bytes, "op_cache_bytes"))
