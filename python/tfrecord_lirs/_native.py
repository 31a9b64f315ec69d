"""Loads the op library (`_lirs_ops.so`) twice over: as TensorFlow ops and,
for the file-writing helpers and the argument checks, as the C ABI of its Rust
library through ctypes (crates/tfrecord-lirs-ffi/src/c_api.rs: one table of
functions, returned by the library's `lirs_c_api()`).

Both views share one copy of the Rust core, which decides every rule and error;
this module only translates: error codes to tf.errors classes (or ValueError for
the argument checks).

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
_i64p = ctypes.POINTER(ctypes.c_int64)
_str = ctypes.c_char_p
_err = [ctypes.c_char_p, ctypes.c_size_t]


class PadConfig(ctypes.Structure):
    """`c_api::PadConfig`."""
    _fields_ = [("page_size", _u64), ("fit", _str), ("compression", _str),
                ("trust_table", ctypes.c_bool), ("overwrite", ctypes.c_bool)]


class PadSummary(ctypes.Structure):
    """`c_api::PadSummary`."""
    _fields_ = [("instances", _u64), ("pages", _u64), ("filler_bytes", _u64),
                ("data_bytes", _u64), ("inputs_mapped", _u64), ("page_reads", _u64),
                ("unpadded_page_reads", _u64)]


def _fn(restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)


_status = ctypes.c_int
_writer = ctypes.c_void_p
# `c_api::Progress`: (bytes done, bytes in all the files).
Progress = ctypes.CFUNCTYPE(None, _u64, _u64)
_paths = ctypes.POINTER(ctypes.c_char_p)


class _CApi(ctypes.Structure):
    """`c_api::CApi`, field for field (checked by its version)."""
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("build_offset_table", _fn(_status, _str, _str, _u64p, *_err)),
        ("pad_file", _fn(_status, _str, _str, ctypes.POINTER(PadConfig),
                         ctypes.POINTER(PadSummary), ctypes.c_char_p, ctypes.c_size_t,
                         *_err)),
        ("writer_create", _fn(_status, _str, ctypes.POINTER(PadConfig),
                              ctypes.POINTER(_writer), *_err)),
        ("writer_write", _fn(_status, _writer, _str, ctypes.c_size_t, _u64p, *_err)),
        ("writer_finish", _fn(_status, _writer, ctypes.POINTER(PadSummary), *_err)),
        ("writer_instance_of_input", _fn(ctypes.c_size_t, _writer, _u64p, ctypes.c_size_t)),
        ("writer_free", _fn(None, _writer)),
        ("check_backend", _fn(_status, _str, *_err)),
        ("check_fit", _fn(_status, _str, *_err)),
        ("check_shard", _fn(_status, _i64p, _i64p, *_err)),
        ("default_table_path", _fn(ctypes.c_size_t, _str, ctypes.c_char_p, ctypes.c_size_t)),
        ("check_page_size", _fn(_status, ctypes.c_int64, *_err)),
        ("build_offset_tables", _fn(_status, _paths, ctypes.c_size_t, ctypes.c_size_t,
                                    Progress, _u64p, *_err)),
        ("pad_files", _fn(_status, _paths, ctypes.c_size_t, _str, ctypes.POINTER(PadConfig),
                          ctypes.c_size_t, Progress, ctypes.POINTER(PadSummary), *_err)),
        ("check_compression_type", _fn(_status, _str, *_err)),
        ("check_buffer_size", _fn(_status, _i64p, *_err)),
        ("error_code_name", _fn(ctypes.c_char_p, ctypes.c_int32)),
    ]


_C_API_VERSION = 4
lib.lirs_c_api.restype = ctypes.POINTER(_CApi)
api = lib.lirs_c_api().contents
if api.version != _C_API_VERSION:
    raise ImportError(f"tfrecord_lirs: the op library {LIB_PATH} has C ABI version {api.version}, "
                      f"this package needs {_C_API_VERSION}: rebuild it with `make -C tf_op`")

_ERR_LEN = 4096


def error_class(code):
    """The tf.errors.OpError subclass of a C ABI error code, by the library's name
    of the code (e.g. "DataLoss" -> tf.errors.DataLossError)."""
    name = api.error_code_name(code).decode("ascii")
    return getattr(tf.errors, name + "Error", tf.errors.InternalError)


def run(fn, args, length=_ERR_LEN):
    """(code, message) of a C ABI call whose last two arguments are (err, err_len)."""
    err = ctypes.create_string_buffer(length)
    code = fn(*args, err, length)
    return code, err.value.decode("utf-8", errors="replace")


def call(fn, *args):
    """Calls a C ABI function whose last two arguments are (err, err_len); raises the
    tf.errors.OpError subclass of its error code."""
    code, message = run(fn, args)
    if code != 0:
        raise error_class(code)(None, None, message)


def check(fn, *args):
    """Calls one of the C ABI's argument checks; raises ValueError with Rust's message."""
    code, message = run(fn, args)
    if code != 0:
        raise ValueError(message)


def text(value, name):
    """`value` (a str) as the bytes a C ABI string argument takes; ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {value!r}")
    return value.encode("utf-8")


def check_backend(backend):
    check(api.check_backend, text(backend, "backend"))
    return backend


def check_fit(fit):
    check(api.check_fit, text(fit, "fit"))
    return fit


def check_compression_type(compression_type):
    """ValueError (with the core's text) unless LIRSDataset can take it; None is ""."""
    if compression_type is None:
        compression_type = ""
    check(api.check_compression_type, text(compression_type, "compression_type"))


def check_buffer_size(buffer_size):
    """ValueError (with the core's text) unless `buffer_size` is None or an int the
    core accepts (a tensor is checked by value when it is a constant)."""
    if buffer_size is None:
        return
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int):
        value = tf.get_static_value(buffer_size)
        if value is None:
            return  # not known yet: TFRecordDataset checks it at run time; LIRS reads no stream
        buffer_size = int(value)
    if not -(1 << 63) <= buffer_size < (1 << 63):
        raise ValueError(f"buffer_size out of range: {buffer_size}")
    check(api.check_buffer_size, ctypes.byref(ctypes.c_int64(buffer_size)))


def paths_array(paths):
    """A C array of the byte paths of `paths` (and its length)."""
    encoded = [path_bytes(p) for p in paths]
    return (ctypes.c_char_p * max(len(encoded), 1))(*encoded), len(encoded)


def check_page_size(page_size):
    """ValueError (with the core's text) unless `page_size` is a valid page size."""
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise ValueError(f"page_size must be an int, got {page_size!r}")
    if not -(1 << 63) <= page_size < (1 << 63):
        raise ValueError(f"page_size out of range: {page_size}")
    check(api.check_page_size, page_size)
    return page_size


def check_shard(num_shards, shard_index):
    """Checks the pair; either may be None (not known yet, e.g. a tensor)."""
    n = None if num_shards is None else ctypes.byref(ctypes.c_int64(num_shards))
    i = None if shard_index is None else ctypes.byref(ctypes.c_int64(shard_index))
    check(api.check_shard, n, i)


def default_table_path(path):
    """The offset table used for data file `path` when none is given (a str)."""
    data = path_bytes(path)
    size = len(data) + 64
    while True:
        out = ctypes.create_string_buffer(size)
        n = api.default_table_path(data, out, size)
        if n < size:
            return os.fsdecode(out.raw[:n])
        size = n + 1


def path_bytes(path):
    return os.fsencode(os.fspath(path))
