"""tfrecord_lirs: random access and full-range shuffling of TFRecord files.

    ds = tfrecord_lirs.LIRSDataset(["train.tfrecord"], seed=42)

Files need an offset table (`<file>.offsets`): write them with
`PaddedWriter`/`pad` (page-aligned) or index existing files with
`build_offset_table`.
"""

# First: says which extra to install when TensorFlow is missing, and refuses a
# TensorFlow other than the one the op library was built for.
from tfrecord_lirs import _native  # noqa: F401  (isort: skip)
from tfrecord_lirs._build_info import VERSION as __version__
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
