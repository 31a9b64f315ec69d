"""TensorFlow Datasets by name and split, read through offset tables (needs
`tensorflow_datasets`; imported on first use of this module).

`tfds.data_source` gives random access to datasets written as ArrayRecord only; most
of the TFDS catalog is written as TFRecord shards, which this module opens:

    source = tfrecord_lirs.tfds.data_source("mnist", "train")   # decoded examples
    sampler = tfrecord_lirs.Sampler(source, seed=42)            # full-range shuffle
    loader = torch.utils.data.DataLoader(source, sampler=sampler, batch_size=64)

    files = tfrecord_lirs.tfds.files("mnist", "train")           # for LIRSDataset/Loader
    ds = tfrecord_lirs.LIRSDataset(files, seed=42)

The files are the split's shards in shard order (TFDS's own), so the orders are those
of the same list given to `Sampler`, `Loader`, `LIRSDataset` or the CLI.
"""

import tensorflow_datasets as _tfds

from tfrecord_lirs import errors as _errors
from tfrecord_lirs.sources import DataSource


def _builder(name_or_builder, data_dir):
    if isinstance(name_or_builder, str):
        return _tfds.builder(name_or_builder, data_dir=data_dir)
    if data_dir is not None:
        raise _errors.InvalidArgumentError(
            "data_dir is given with a builder: the builder has its own data_dir")
    return name_or_builder


def files(name_or_builder, split, data_dir=None):
    """The TFRecord shards of `split` of a prepared TFDS dataset (a name such as
    "mnist" or "mnist:3.0.1", or a `tfds.core.DatasetBuilder`), in shard order."""
    builder = _builder(name_or_builder, data_dir)
    info = builder.info
    if split not in info.splits:
        raise _errors.NotFoundError(
            f"{info.full_name} has no split {split!r} (its splits: "
            f"{', '.join(sorted(info.splits))}; a slice such as 'train[:10%]' is not "
            f"taken: give the split and cut the ids)")
    fmt = getattr(info.file_format, "value", info.file_format)
    if str(fmt) != "tfrecord":
        raise _errors.InvalidArgumentError(
            f"{info.full_name} is written as {fmt}, not TFRecord: use "
            f"tfds.data_source({info.name!r}, split={split!r})")
    return [str(p) for p in info.splits[split].filepaths]


class TFDSSource(DataSource):
    """A `DataSource` over a TFDS split's shards whose items are the dataset's
    examples decoded by its features (`features.deserialize_example_np`: numpy
    values, as `tfds.data_source` gives); `decode=False`: the serialized records."""

    def __init__(self, name_or_builder, split, data_dir=None, *, decode=True, **kwargs):
        builder = _builder(name_or_builder, data_dir)
        self.builder = builder
        self.split = split
        self._decode = builder.info.features.deserialize_example_np if decode else None
        super().__init__(files(builder, split), **kwargs)

    def __getitem__(self, index):
        record = super().__getitem__(index)
        return record if self._decode is None else self._decode(record)

    def __getitems__(self, indices):
        records = super().__getitems__(indices)
        return records if self._decode is None else [self._decode(r) for r in records]

    _getitems = __getitems__

    def __getstate__(self):
        return {**super().__getstate__(), "builder": self.builder, "split": self.split,
                "decode": self._decode is not None}

    def __setstate__(self, state):
        super().__setstate__(state)
        self.builder, self.split = state["builder"], state["split"]
        self._decode = (self.builder.info.features.deserialize_example_np
                        if state["decode"] else None)


def data_source(name_or_builder, split, data_dir=None, *, decode=True, **kwargs):
    """Random access to `split` of a prepared TFDS dataset written as TFRecord: a
    `TFDSSource` (`len`, `source[i]`, Grain's and PyTorch's protocols). `kwargs`: as
    for `DataSource` (`cache_dir`, `backend`, ...)."""
    return TFDSSource(name_or_builder, split, data_dir, decode=decode, **kwargs)


__all__ = ["TFDSSource", "data_source", "files"]
