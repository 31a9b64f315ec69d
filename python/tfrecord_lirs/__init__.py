"""tfrecord_lirs: random access and full-range shuffling of TFRecord files.

Without TensorFlow (Grain, PyTorch, plain Python):

    source = tfrecord_lirs.DataSource(["train.tfrecord"])      # len(), source[i]
    sampler = tfrecord_lirs.Sampler(source, seed=42)           # an epoch order
    loader = tfrecord_lirs.Loader(["train.tfrecord"], seed=42)  # batches, list[bytes]
    tfrecord_lirs.parse_example(records, features)             # tf.train.Example -> numpy
    tfrecord_lirs.parse_sequence_example(records, context, seq)  # tf.train.SequenceExample
    tfrecord_lirs.serialize_examples([{"label": 3}, ...])      # dicts -> tf.train.Example bytes

With TensorFlow 2.21 (tf.data):

    ds = tfrecord_lirs.LIRSDataset(["train.tfrecord"], seed=42)
    ds = tfrecord_lirs.refurbish(files, partial, final, seed=42, reuse_factor=3)
    ds = tfrecord_lirs.augment(files, fn, seed=42, share="/dev/shm/sweep")  # a sweep's jobs

(`tfrecord_lirs.refurbish_tf.serializer(spec)` gives PyTorch and Grain jobs the bytes
these store, to share one store with them.)

Files need an offset table (`<file>.offsets`): write them with
`PaddedWriter`/`pad` (page-aligned) or index existing files with
`build_offset_table` (these need no TensorFlow either).
"""

import importlib
import os


def _load_custom_extension(path):
    """Loads the extension at `path` as tfrecord_lirs._lirs instead of the package's
    own (TFRECORD_LIRS_EXTENSION: the project's fault-injection tests use it for their
    test build, as TFRECORD_LIRS_OP_LIBRARY for the op library's)."""
    import importlib.machinery
    import importlib.util
    import sys

    loader = importlib.machinery.ExtensionFileLoader("tfrecord_lirs._lirs", path)
    spec = importlib.util.spec_from_file_location("tfrecord_lirs._lirs", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules["tfrecord_lirs._lirs"] = module


if os.environ.get("TFRECORD_LIRS_EXTENSION"):
    _load_custom_extension(os.path.abspath(os.environ["TFRECORD_LIRS_EXTENSION"]))

from tfrecord_lirs import _lirs, errors  # noqa: E402
from tfrecord_lirs.errors import (  # noqa: E402
    DataLossError,
    InternalError,
    InvalidArgumentError,
    LIRSError,
    NotFoundError,
    PermissionDeniedError,
    UnavailableError,
)
from tfrecord_lirs.example import (  # noqa: E402
    FixedLenFeature,
    FixedLenSequenceFeature,
    ParseExample,
    Ragged,
    VarLenFeature,
    parse_example,
    parse_sequence_example,
    serialize_example,
    serialize_examples,
)
from tfrecord_lirs.loader import Loader, process_shard  # noqa: E402
from tfrecord_lirs.sources import DataSource, Sampler  # noqa: E402
from tfrecord_lirs.refurbishing import RefurbishSchedule  # noqa: E402
from tfrecord_lirs.writing import (  # noqa: E402
    PadSummary,
    PaddedWriter,
    build_offset_table,
    default_table_path,
    pad,
)

# One version for everything: the workspace's Cargo.toml, compiled into the extension.
__version__ = _lirs.__version__

# The names that need TensorFlow, loaded on first use: `import tfrecord_lirs` works
# without it, and using one of these says which extra to install (tfrecord_lirs._op_library
# also refuses a TensorFlow other than the one the op library was built for).
_WITH_TENSORFLOW = {
    "LIRSDataset": "tfrecord_lirs.dataset",
    "augment": "tfrecord_lirs.refurbish_tf",
    "is_filler": "tfrecord_lirs.io",
    "process_io_totals": "tfrecord_lirs.dataset",
    "read": "tfrecord_lirs.io",
    "refurbish": "tfrecord_lirs.refurbish_tf",
    "stock_dataset": "tfrecord_lirs.io",
}


def __getattr__(name):
    module = _WITH_TENSORFLOW.get(name)
    if module is None:
        raise AttributeError(f"module 'tfrecord_lirs' has no attribute {name!r}")
    importlib.import_module("tfrecord_lirs._op_library")  # the helpful ImportError first
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_WITH_TENSORFLOW))


__all__ = sorted([
    "DataLossError",
    "DataSource",
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "InternalError",
    "InvalidArgumentError",
    "LIRSError",
    "Loader",
    "NotFoundError",
    "PadSummary",
    "PaddedWriter",
    "ParseExample",
    "PermissionDeniedError",
    "Ragged",
    "RefurbishSchedule",
    "Sampler",
    "UnavailableError",
    "VarLenFeature",
    "build_offset_table",
    "default_table_path",
    "errors",
    "pad",
    "parse_example",
    "parse_sequence_example",
    "process_shard",
    "serialize_example",
    "serialize_examples",
    *_WITH_TENSORFLOW,
])
