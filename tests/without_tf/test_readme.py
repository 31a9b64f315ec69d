"""The docs' Example decoding (docs/getting-started/python.md) and their complete
PyTorch and Grain scripts (docs/getting-started/pytorch.md, grain.md), run as
written in this venv without TensorFlow, on shards laid out as TensorFlow Datasets
writes them (`data/mnist-train.tfrecord-0000i-of-00002`, PNG "image" and int64
"label" Examples, written here with Google's protobuf and PIL)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tfrecord import example_pb2

from conftest import framed

import tfrecord_lirs

DOCS = [Path(__file__).resolve().parents[2] / "README.md",
        *sorted((Path(__file__).resolve().parents[2] / "docs").rglob("*.md"))]
PYTHON_PATH = str(Path(__file__).resolve().parents[2] / "python")
IMAGES = 40


def snippet(first_line):
    """The ```python block of README.md or docs/ whose first line is `first_line`."""
    blocks = [b for doc in DOCS
              for b in re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)]
    found = [b for b in blocks if b.startswith(first_line)]
    assert len(found) == 1, f"the docs have {len(found)} python blocks starting {first_line!r}"
    return found[0]


def image(i):
    return (np.arange(28 * 28).reshape(28, 28) + i).astype(np.uint8)


@pytest.fixture
def tfds_dir(tmp_path):
    from PIL import Image

    data = tmp_path / "data"
    data.mkdir()
    for shard in range(2):
        payloads = []
        for i in range(shard, IMAGES, 2):
            png = io.BytesIO()
            Image.fromarray(image(i)).save(png, format="PNG")
            ex = example_pb2.Example()
            ex.features.feature["image"].bytes_list.value.append(png.getvalue())
            ex.features.feature["label"].int64_list.value.append(i % 10)
            payloads.append(ex.SerializeToString())
        path = data / f"mnist-train.tfrecord-{shard:05d}-of-00002"
        path.write_bytes(framed(payloads)[0])
    return tmp_path


def run_script(directory, name, text, *args):
    script = directory / name
    script.write_text(text)
    env = {"PYTHONPATH": PYTHON_PATH, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script), *args], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_readme_pytorch_script_runs_as_written(tfds_dir):
    out = run_script(tfds_dir, "train_torch.py", snippet("# train_torch.py"))
    epochs = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert epochs == [f"epoch {e}: {IMAGES} images of shape (28, 28)" for e in range(2)]
    # A second launch finds the tables current and runs the same way.
    out = run_script(tfds_dir, "train_torch.py", snippet("# train_torch.py"))
    assert out.splitlines()[-1] == f"epoch 1: {IMAGES} images of shape (28, 28)"


def test_the_readme_grain_script_runs_as_written(tfds_dir):
    out = run_script(tfds_dir, "train_grain.py", snippet("# train_grain.py"))
    assert out.splitlines()[-1] == f"2 epochs: {2 * IMAGES} images of shape (28, 28)"


def test_the_readme_grain_script_parses_grains_flags(tfds_dir):
    # Grain's options are absl flags: reading one before they are parsed raises
    # UnparsedFlagAccessError. The script parses them, so its command line sets them.
    text = snippet("# train_grain.py") + '    print("debug:", grain.config.py_debug_mode)\n'
    out = run_script(tfds_dir, "train_grain.py", text)
    assert out.splitlines()[-1] == "debug: False", out
    out = run_script(tfds_dir, "train_grain.py", text, "--grain_py_debug_mode")
    assert out.splitlines()[-1] == "debug: True", out


def test_the_readme_decoding_snippet_runs_as_written(tfds_dir):
    files = sorted(str(p) for p in (tfds_dir / "data").iterdir())
    tfrecord_lirs.build_offset_table(files)
    source = tfrecord_lirs.DataSource(files)
    ex = example_pb2.Example()
    ex.features.feature["label"].int64_list.value.append(3)
    ex.features.feature["image"].bytes_list.value.append(b"png")
    ex.features.feature["bbox"].float_list.value.extend([0.25, 0.5, 0.75, 1.0])
    names = {"tfrecord_lirs": tfrecord_lirs, "record": ex.SerializeToString(),
             "records": [ex.SerializeToString()] + source.__getitems__([0, 1])}
    exec(snippet("FEATURES = "), names)
    assert names["one"]["label"] == 3 and names["one"]["bbox"].tolist() == [0.25, 0.5, 0.75, 1.0]
    batch = names["batch"]
    assert batch["label"].tolist() == [3, 0, 2]
    assert batch["bbox"].row_lengths.tolist() == [4, 0, 0]
