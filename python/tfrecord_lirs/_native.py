"""Loads the op library (`_lirs_ops.so`) twice over: as TensorFlow ops and,
for the file-writing helpers, as plain C functions through ctypes.

Both views share one copy of the Rust core (format implemented once).

The environment variable TFRECORD_LIRS_OP_LIBRARY names a custom build of the op
library to load instead (the project's tests use it for their fault-injection
build); the `_build_info.py` beside that library says which TensorFlow it was
built for, and is checked like the package's own.
"""

import ctypes
import importlib.util
import os

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
lib = ctypes.CDLL(LIB_PATH)

_u64 = ctypes.c_uint64
_u64p = ctypes.POINTER(ctypes.c_uint64)
_err_args = [ctypes.c_char_p, ctypes.c_size_t]

lib.lirs_build_offset_table.argtypes = [ctypes.c_char_p, ctypes.c_char_p, _u64p] + _err_args
lib.lirs_build_offset_table.restype = ctypes.c_int
lib.lirs_pad_file.argtypes = [
    ctypes.c_char_p, ctypes.c_char_p, _u64, _u64, ctypes.c_char_p, ctypes.c_int,
    _u64p] + _err_args
lib.lirs_pad_file.restype = ctypes.c_int
lib.lirs_writer_create.argtypes = [
    ctypes.c_char_p, _u64, _u64, ctypes.POINTER(ctypes.c_void_p)] + _err_args
lib.lirs_writer_create.restype = ctypes.c_int
lib.lirs_writer_write.argtypes = [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, _u64p] + _err_args
lib.lirs_writer_write.restype = ctypes.c_int
lib.lirs_writer_finish.argtypes = [ctypes.c_void_p, _u64p] + _err_args
lib.lirs_writer_finish.restype = ctypes.c_int
lib.lirs_writer_instance_of_input.argtypes = [ctypes.c_void_p, _u64p, ctypes.c_size_t]
lib.lirs_writer_instance_of_input.restype = ctypes.c_size_t
lib.lirs_writer_free.argtypes = [ctypes.c_void_p]
lib.lirs_writer_free.restype = None

# Codes of tf_op/lirs_status.h (LirsCode).
_ERRORS = {
    1: tf.errors.DataLossError,
    2: tf.errors.InvalidArgumentError,
    3: tf.errors.NotFoundError,
    4: tf.errors.InternalError,
}
_ERR_LEN = 4096


def call(fn, *args):
    """Calls a `lirs_*` C function whose last two arguments are (err, err_len);
    raises the matching tf.errors.OpError subclass on a non-zero code."""
    err = ctypes.create_string_buffer(_ERR_LEN)
    code = fn(*args, err, _ERR_LEN)
    if code != 0:
        message = err.value.decode("utf-8", errors="replace")
        raise _ERRORS.get(code, tf.errors.InternalError)(None, None, message)


def path_bytes(path):
    return os.fsencode(os.fspath(path))
