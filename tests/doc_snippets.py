"""The code blocks of README.md and docs/**/*.md marked runnable, and how to run them.

A block is marked by an HTML comment on the line before its fence (invisible on GitHub
and on the site):

    <!-- runnable: tf -->           python, in the venv with TensorFlow
    <!-- runnable: without-tf -->   python, in the venv without TensorFlow
    <!-- runnable: cli -->          sh, with the built `tfrecord-lirs` on PATH

Each runs as written, in a fresh process whose working directory holds `data/`: two
shards `train.tfrecord-0000i-of-00002` of `tf.train.Example`s (a PNG "image", an int64
"label"), as TensorFlow Datasets writes them, without offset tables."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON_PATH = str(REPO / "python")
MARKER = re.compile(r"^<!-- runnable: ([a-z-]+) -->\n```(\w+)\n(.*?)^```", re.S | re.M)
KINDS = {"tf": "python", "without-tf": "python", "cli": "sh"}
IMAGES = 40


@dataclass
class Snippet:
    path: str  # relative to the repository
    line: int
    kind: str
    code: str

    @property
    def id(self):
        return f"{self.path}:{self.line}"


def documents():
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def snippets(kind=None):
    found = []
    for doc in documents():
        text = doc.read_text()
        for m in MARKER.finditer(text):
            k, lang, code = m.groups()
            assert k in KINDS, f"{doc}: unknown runnable kind {k!r}"
            assert lang == KINDS[k], f"{doc}: a {k} block must be ```{KINDS[k]}, not ```{lang}"
            line = text.count("\n", 0, m.start()) + 2
            found.append(Snippet(str(doc.relative_to(REPO)), line, k, code))
    return [s for s in found if kind is None or s.kind == kind]


def png(i):
    from PIL import Image

    pixels = bytes((i + j) % 256 for j in range(28 * 28))
    out = io.BytesIO()
    Image.frombytes("L", (28, 28), pixels).save(out, format="PNG")
    return out.getvalue()


def write_shards(directory: Path, framed):
    """`directory`/data/train.tfrecord-0000i-of-00002: IMAGES Examples in all."""
    import tfrecord_lirs

    data = directory / "data"
    data.mkdir()
    for shard in range(2):
        records = tfrecord_lirs.serialize_examples(
            [{"image": png(i), "label": i % 10} for i in range(shard, IMAGES, 2)])
        (data / f"train.tfrecord-{shard:05d}-of-00002").write_bytes(framed(records)[0])
    return data


def run(snippet: Snippet, directory: Path, installed: Path | None = None):
    """Runs `snippet` in `directory`: with the package from this tree and the built CLI,
    or, given `installed` (a venv's bin/), with that venv's python and CLI only, as a
    user who installed the wheel runs it."""
    env = {"PYTHONPATH": PYTHON_PATH, "PATH": "/usr/bin:/bin", "HOME": str(directory)}
    if installed is not None:
        env = {"PATH": f"{installed}:/usr/bin:/bin", "HOME": str(directory),
               "VIRTUAL_ENV": str(installed.parent)}
        if snippet.kind == "cli":
            command = ["bash", "-euo", "pipefail", "-c", snippet.code]
        else:
            script = directory / "snippet.py"
            script.write_text(snippet.code)
            command = [str(installed / "python"), str(script)]
    elif snippet.kind == "cli":
        cli = os.environ.get("TFRECORD_LIRS_CLI") or shutil.which("tfrecord-lirs")
        assert cli, "TFRECORD_LIRS_CLI (the built CLI) is not set"
        bin_dir = directory / "bin"
        bin_dir.mkdir()
        (bin_dir / "tfrecord-lirs").symlink_to(os.path.abspath(cli))
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        command = ["bash", "-euo", "pipefail", "-c", snippet.code]
    else:
        script = directory / "snippet.py"
        script.write_text(snippet.code)
        command = [sys.executable, str(script)]
    done = subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (f"{snippet.id} ({snippet.kind}) failed:\n"
                                  f"{snippet.code}\n--- stdout\n{done.stdout}\n--- stderr\n"
                                  f"{done.stderr}")
    return done
