"""tfrecord_lirs: random access and full-range shuffling of TFRecord files.

    ds = tfrecord_lirs.LIRSDataset(["train.tfrecord"], seed=42)

Files need an offset table (`<file>.offsets`): write them with
`PaddedWriter`/`pad` (page-aligned) or index existing files with
`build_offset_table`.
"""

# First: says which extra to install when TensorFlow is missing, and refuses a
# TensorFlow other than the one the op library was built for.
from tfrecord_lirs import _native  # (isort: skip)
from tfrecord_lirs.dataset import LIRSDataset
from tfrecord_lirs.io import (
    PadSummary,
    PaddedWriter,
    build_offset_table,
    default_table_path,
    is_filler,
    pad,
    read,
    stock_dataset,
)

# The version of the op library loaded (its _build_info.py, by tf_op/Makefile).
__version__ = _native._build_info.VERSION

__all__ = [
    "LIRSDataset",
    "PadSummary",
    "PaddedWriter",
    "build_offset_table",
    "default_table_path",
    "is_filler",
    "pad",
    "read",
    "stock_dataset",
]
