"""`tfrecord_lirs.parse_example` without TensorFlow: records written by Google's
protobuf (the `tfrecord` package's `example_pb2`), decoded one by one and in batches,
with and without a feature spec; every typed error; and image Examples decoded in a
PyTorch DataLoader with spawned workers (`ExampleCollate`) and in a Grain DataLoader
(`tfrecord_lirs.grain.ParseExample`), images through PIL."""

from __future__ import annotations

import io
import pickle

import grain
import numpy as np
import pytest
from tfrecord import example_pb2

from conftest import framed

import tfrecord_lirs
from tfrecord_lirs import FixedLenFeature, Ragged, VarLenFeature, parse_example
from tfrecord_lirs.errors import DataLossError, InvalidArgumentError


def example(**features):
    """A serialized Example; int -> int64_list, float -> float_list, bytes ->
    bytes_list (lists of them for several values; [] an empty int64_list), None -> an
    empty Feature."""
    ex = example_pb2.Example()
    for name, value in features.items():
        f = ex.features.feature[name]
        values = value if isinstance(value, list) else [value]
        if value is None:
            f.SetInParent()
        elif not values:
            f.int64_list.SetInParent()
        elif all(isinstance(v, bytes) for v in values) and values:
            f.bytes_list.value.extend(values)
        elif all(isinstance(v, int) for v in values) and values:
            f.int64_list.value.extend(values)
        else:
            f.float_list.value.extend(values)
    return ex.SerializeToString()


SPEC = {
    "label": FixedLenFeature([], "int64"),
    "xy": FixedLenFeature([2], np.float32),
    "name": FixedLenFeature([], bytes),
    "weight": FixedLenFeature([], "float32", default_value=1.0),
    "tags": VarLenFeature("bytes"),
    "ids": VarLenFeature(np.int64),
}


def test_one_record_with_a_spec_has_tensorflows_shapes():
    record = example(label=7, xy=[1.5, -2.0], name=b"cat", tags=[b"a", b"bc"], ids=[3, 1, 2],
                     unused=[9, 9])
    got = parse_example(record, SPEC)
    assert list(got) == list(SPEC)  # the spec's order; unnamed features left out
    assert got["label"] == 7 and isinstance(got["label"], np.int64)
    assert got["xy"].dtype == np.float32 and got["xy"].tolist() == [1.5, -2.0]
    assert got["name"] == b"cat"  # a 0-d bytes result is its bytes
    assert got["weight"] == np.float32(1.0)  # the default
    assert got["tags"].dtype == object and got["tags"].tolist() == [b"a", b"bc"]
    assert got["ids"].dtype == np.int64 and got["ids"].tolist() == [3, 1, 2]
    # bytearray and memoryview records are one record too.
    assert parse_example(bytearray(record), SPEC)["label"] == 7
    assert parse_example(memoryview(record), SPEC)["name"] == b"cat"


def test_a_batch_stacks_fixed_features_and_gives_ragged_ones_row_lengths():
    records = [example(label=i, xy=[i, i + 0.5], name=b"n%d" % i, ids=list(range(i)),
                       weight=0.25 * i) for i in range(4)]
    records[2] = example(label=2, xy=[2.0, 2.5], name=b"n2", tags=[b"t"])
    got = parse_example(records, SPEC)
    assert got["label"].shape == (4,) and got["label"].tolist() == [0, 1, 2, 3]
    assert got["xy"].shape == (4, 2) and got["xy"][3].tolist() == [3.0, 3.5]
    assert got["name"].dtype == object and got["name"].tolist() == [b"n0", b"n1", b"n2", b"n3"]
    assert got["weight"].tolist() == [0.0, 0.25, 1.0, 0.75]  # record 2 takes the default
    assert isinstance(got["ids"], Ragged)
    assert got["ids"].values.tolist() == [0, 0, 1, 2]
    assert got["ids"].row_lengths.tolist() == [0, 1, 0, 3]
    assert [r.tolist() for r in got["ids"].rows()] == [[], [0], [], [0, 1, 2]]
    assert got["tags"].values.tolist() == [b"t"] and got["tags"].row_lengths.tolist() == [0, 0, 1, 0]
    # The arrays are the caller's (writable, e.g. for torch.from_numpy).
    assert got["label"].flags.writeable and got["ids"].values.flags.writeable
    # A tuple, a generator and an empty batch.
    assert parse_example(tuple(records), SPEC)["label"].tolist() == [0, 1, 2, 3]
    assert parse_example((r for r in records), {"label": SPEC["label"]})["label"].shape == (4,)
    empty = parse_example([], SPEC)
    assert empty["xy"].shape == (0, 2) and empty["ids"].row_lengths.shape == (0,)


def test_without_a_spec_every_feature_is_variable_length():
    records = [example(b=[1, 2], a=b"x"), example(b=[], c=[0.5, 0.25], d=None)]
    one = parse_example(records[0])
    assert list(one) == ["a", "b"]
    assert one["a"].tolist() == [b"x"] and one["b"].tolist() == [1, 2]
    batch = parse_example(records)
    assert list(batch) == ["a", "b", "c", "d"]
    assert batch["b"].values.tolist() == [1, 2] and batch["b"].row_lengths.tolist() == [2, 0]
    assert batch["c"].values.dtype == np.float32
    assert batch["d"].values.tolist() == [] and batch["d"].row_lengths.tolist() == [0, 0]


def test_tensorflow_like_dtypes_and_defaults():
    class DType:  # what tf.string / tf.int64 look like to the package
        def __init__(self, name):
            self.name = name

    spec = {"s": FixedLenFeature([], DType("string"), default_value=b"none"),
            "i": FixedLenFeature([2, 1], DType("int64"), default_value=[[4], [5]]),
            "f": VarLenFeature(DType("float32"))}
    got = parse_example([example(f=[1.0])], spec)
    assert got["s"].tolist() == [b"none"]
    assert got["i"].shape == (1, 2, 1) and got["i"].ravel().tolist() == [4, 5]
    assert got["f"].values.tolist() == [1.0]


def test_typed_errors_name_the_record_and_the_feature():
    good = example(label=1)
    label = {"label": FixedLenFeature([], "int64")}
    cases = [
        (example(other=1), label, InvalidArgumentError,
         'record 1: feature "label" (int64, shape []) is required but missing'),
        (example(label=1.5), label, InvalidArgumentError,
         'record 1: feature "label" holds a float_list, the spec says int64 (int64_list)'),
        (example(label=[1, 2]), label, InvalidArgumentError,
         'record 1: feature "label" has 2 int64 values, its shape [] holds 1'),
        (good[:-2], label, DataLossError, "record 1: not a tf.train.Example"),
        (example(a=1), {"a": FixedLenFeature([-1], "int64")}, InvalidArgumentError,
         'feature "a": shape [-1] has a negative dimension'),
        (example(a=1), {"a": FixedLenFeature([None], "int64")}, InvalidArgumentError,
         'feature "a": shape [-1] has a negative dimension'),
        (example(a=1), {"a": VarLenFeature("float64")}, InvalidArgumentError,
         'dtype "float64" is not a tf.train.Example feature type'),
        (example(a=1), {"a": FixedLenFeature([2], "int64", default_value=[1])},
         InvalidArgumentError, 'feature "a": default value has 1 values, shape [2] holds 2'),
    ]
    for record, spec, error, message in cases:
        with pytest.raises(error) as info:
            parse_example([good, record], spec)
        assert message in str(info.value), (str(info.value), message)
    with pytest.raises(DataLossError, match="record 0: not a tf.train.Example"):
        parse_example(b"\xff" * 11)
    with pytest.raises(TypeError, match="FixedLenSequenceFeature is not supported"):
        class FixedLenSequenceFeature:
            shape, dtype = [], "int64"
        parse_example(good, {"a": FixedLenSequenceFeature()})


def test_parse_example_is_picklable_as_a_collate():
    collate = tfrecord_lirs.ParseExample(SPEC)
    again = pickle.loads(pickle.dumps(collate))
    records = [example(label=i, xy=[0.0, 1.0], name=b"x") for i in range(3)]
    assert again(records)["label"].tolist() == [0, 1, 2]


# Image Examples as TensorFlow Datasets writes them: NAME-train.tfrecord-0000i-of-0000n
# shards of {"image": PNG bytes, "label": int64}.
IMAGE_FEATURES = {"image": FixedLenFeature([], "bytes"), "label": FixedLenFeature([], "int64")}


def image(i):
    return np.full((4, 5, 3), i % 256, dtype=np.uint8)


def write_image_shards(directory, n=40, shards=2):
    from PIL import Image

    paths = []
    for s in range(shards):
        payloads = []
        for i in range(s, n, shards):
            png = io.BytesIO()
            Image.fromarray(image(i)).save(png, format="PNG")
            payloads.append(example(image=png.getvalue(), label=i))
        path = directory / f"demo-train.tfrecord-{s:05d}-of-{shards:05d}"
        data, _ = framed(payloads)
        path.write_bytes(data)
        paths.append(path)
    tfrecord_lirs.build_offset_table([str(p) for p in paths])
    return paths


def decode_images(batch):
    """A collate_fn at module level (a lambda does not survive `spawn`)."""
    from PIL import Image

    got = tfrecord_lirs.parse_example(batch, IMAGE_FEATURES)
    images = np.stack([np.asarray(Image.open(io.BytesIO(b))) for b in got["image"]])
    return images, got["label"]


def test_pytorch_dataloader_with_spawned_workers_decodes_image_examples(tmp_path):
    import torch
    import torch.utils.data as tud

    import tfrecord_lirs.torch

    source = tfrecord_lirs.DataSource([str(p) for p in write_image_shards(tmp_path)])
    sampler = tfrecord_lirs.Sampler(source, seed=3)
    # The ready collate: numbers as tensors, bytes as they are.
    collate = tfrecord_lirs.torch.ExampleCollate(IMAGE_FEATURES)
    data = tud.DataLoader(source, sampler=sampler, batch_size=8, num_workers=2,
                          multiprocessing_context="spawn", collate_fn=collate)
    labels = []
    for batch in data:
        assert isinstance(batch["label"], torch.Tensor) and batch["label"].dtype == torch.int64
        assert batch["image"].dtype == object and len(batch["image"]) == len(batch["label"])
        labels += batch["label"].tolist()
    assert labels == [int(parse_example(source[i], IMAGE_FEATURES)["label"])
                      for i in sampler.order(0)]
    assert sorted(labels) == list(range(40))
    # A collate of one's own at module level, images through PIL.
    data = tud.DataLoader(source, sampler=sampler, batch_size=8, num_workers=2,
                          multiprocessing_context="spawn", collate_fn=decode_images)
    for images, labels in data:
        assert images.shape == (len(labels), 4, 5, 3)
        for img, label in zip(images, labels):
            assert (img == image(int(label))).all()


class GrainDecodeImage(grain.transforms.Map):
    """The image of a parsed Example as a uint8 array, through PIL (at module level:
    Grain's workers unpickle it)."""

    def map(self, element):
        from PIL import Image

        element["image"] = np.asarray(Image.open(io.BytesIO(element["image"])))
        return element


def test_grain_dataloader_with_parse_example_decodes_image_examples(tmp_path):
    from tfrecord_lirs import grain as lirs_grain

    source = tfrecord_lirs.DataSource([str(p) for p in write_image_shards(tmp_path)])
    sampler = lirs_grain.IndexSampler(source, seed=4, num_epochs=1)
    loader = grain.DataLoader(
        data_source=source, sampler=sampler, worker_count=2,
        shard_options=grain.sharding.NoSharding(),
        operations=[lirs_grain.ParseExample(IMAGE_FEATURES), GrainDecodeImage(),
                    grain.transforms.Batch(8)])
    labels = []
    for batch in loader:
        assert batch["image"].shape == (len(batch["label"]), 4, 5, 3) and batch["label"].dtype == np.int64
        for img, label in zip(batch["image"], batch["label"]):
            assert (img == image(int(label))).all()
        labels += batch["label"].tolist()
    assert sorted(labels) == list(range(40))


def test_import_needs_no_numpy():
    # The package depends on nothing: numpy is imported when Examples are decoded.
    import subprocess
    import sys

    code = "import sys, tfrecord_lirs; assert 'numpy' not in sys.modules, 'numpy imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
