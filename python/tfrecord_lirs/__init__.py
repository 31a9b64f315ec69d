"""tfrecord_lirs: random access and full-range shuffling of TFRecord files.

Without TensorFlow (Grain, PyTorch, plain Python):

    source = tfrecord_lirs.DataSource(["train.tfrecord"])      # len(), source[i]
    sampler = tfrecord_lirs.Sampler(source, seed=42)           # an epoch order
    loader = tfrecord_lirs.Loader(["train.tfrecord"], seed=42)  # batches, list[bytes]

With TensorFlow 2.21 (tf.data):

    ds = tfrecord_lirs.LIRSDataset(["train.tfrecord"], seed=42)

Files need an offset table (`<file>.offsets`): write them with
`PaddedWriter`/`pad` (page-aligned) or index existing files with
`build_offset_table`.
"""

import importlib

from tfrecord_lirs import _lirs, errors
from tfrecord_lirs.errors import (
    DataLossError,
    InternalError,
    InvalidArgumentError,
    LIRSError,
    NotFoundError,
)
from tfrecord_lirs.loader import Loader, process_shard
from tfrecord_lirs.sources import DataSource, Sampler

# One version for everything: the workspace's Cargo.toml, compiled into the extension.
__version__ = _lirs.__version__

# The names that need TensorFlow, loaded on first use: `import tfrecord_lirs` works
# without it, and using one of these says which extra to install (tfrecord_lirs._native
# also refuses a TensorFlow other than the one the op library was built for).
_WITH_TENSORFLOW = {
    "LIRSDataset": "tfrecord_lirs.dataset",
    "PadSummary": "tfrecord_lirs.io",
    "PaddedWriter": "tfrecord_lirs.io",
    "build_offset_table": "tfrecord_lirs.io",
    "default_table_path": "tfrecord_lirs.io",
    "is_filler": "tfrecord_lirs.io",
    "pad": "tfrecord_lirs.io",
    "process_io_totals": "tfrecord_lirs.dataset",
    "read": "tfrecord_lirs.io",
    "stock_dataset": "tfrecord_lirs.io",
}


def __getattr__(name):
    module = _WITH_TENSORFLOW.get(name)
    if module is None:
        raise AttributeError(f"module 'tfrecord_lirs' has no attribute {name!r}")
    importlib.import_module("tfrecord_lirs._native")  # the helpful ImportError first
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(_WITH_TENSORFLOW))


__all__ = sorted([
    "DataLossError",
    "DataSource",
    "InternalError",
    "InvalidArgumentError",
    "LIRSError",
    "Loader",
    "NotFoundError",
    "Sampler",
    "errors",
    "process_shard",
    *_WITH_TENSORFLOW,
])
