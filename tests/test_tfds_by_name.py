"""TFDS datasets by name and split (`tfrecord_lirs.tfds`): a real TFDS builder writes
TFRecord shards; `data_source` reads every example decoded as TFDS decodes it, in
any order; `files` gives the shards for LIRSDataset, and the `PREFIX@N` sharded spec
names the same shards."""

from __future__ import annotations

import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets", reason="tensorflow-datasets is not installed")

import tfrecord_lirs  # noqa: E402
from tfrecord_lirs import tfds as lirs_tfds  # noqa: E402
from tfrecord_lirs.errors import InvalidArgumentError, NotFoundError  # noqa: E402

EXAMPLES = 90
SHARDS = 3


class LirsTokens(tfds.core.GeneratorBasedBuilder):
    """A small dataset with a variable-length feature, written by TFDS as any other."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.FeaturesDict({
                "tokens": tfds.features.Sequence(np.int64),
                "label": tfds.features.ClassLabel(num_classes=5),
            }))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0), "test": self._generate_examples(1000)}

    def _generate_examples(self, base):
        for i in range(EXAMPLES):
            yield base + i, {"tokens": list(range(base + i, base + i + i % 4)),
                             "label": i % 5}


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    b = LirsTokens(data_dir=str(tmp_path_factory.mktemp("tfds")))
    b.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=SHARDS))
    return b


def as_key(example):
    return (tuple(int(t) for t in example["tokens"]), int(example["label"]))


def test_data_source_reads_every_example_decoded_as_tfds_does(builder):
    files = lirs_tfds.files(builder, "train")
    assert len(files) == SHARDS and all(".tfrecord-" in f for f in files)
    tfrecord_lirs.build_offset_table(files)
    source = lirs_tfds.data_source(builder, "train")
    assert len(source) == EXAMPLES
    want = sorted(as_key(e) for e in tfds.as_numpy(builder.as_dataset(split="train")))
    assert sorted(as_key(source[i]) for i in range(len(source))) == want
    # In a LIRS order, through the Sampler, as a PyTorch/Grain user reads it.
    sampler = tfrecord_lirs.Sampler(source, seed=3)
    got = source.__getitems__(list(sampler))
    assert sorted(as_key(e) for e in got) == want
    raw = lirs_tfds.data_source(builder, "train", decode=False)
    assert isinstance(raw[0], bytes)


def test_files_feed_lirs_dataset_and_the_sharded_spec_names_them(builder):
    files = lirs_tfds.files(builder, "test")
    tfrecord_lirs.build_offset_table(files)
    prefix = files[0].rsplit("-", 3)[0]
    spec = f"{prefix}@{SHARDS}"
    features = builder.info.features
    for given in (files, spec):
        ds = tfrecord_lirs.LIRSDataset(given, seed=5)
        got = sorted(as_key(features.deserialize_example_np(r)) for r in ds.as_numpy_iterator())
        assert got == sorted(as_key(e) for e in tfds.as_numpy(builder.as_dataset(split="test")))


def test_a_missing_split_names_the_splits(builder):
    with pytest.raises(NotFoundError, match="has no split 'valid' .its splits: test, train"):
        lirs_tfds.files(builder, "valid")
    with pytest.raises(InvalidArgumentError, match="data_dir is given with a builder"):
        lirs_tfds.files(builder, "train", data_dir="/tmp")
