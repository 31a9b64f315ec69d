"""Every code block of README.md and docs/ marked `<!-- runnable: without-tf -->` or
`<!-- runnable: cli -->` runs as written (tests/doc_snippets.py says how), here in the
venv without TensorFlow, on TFDS-style shards this test writes."""

from pathlib import Path

import pytest

from conftest import framed
from doc_snippets import REPO, run, snippets

WITHOUT_TF = snippets("without-tf")
CLI = snippets("cli")


def test_the_readme_quick_starts_are_marked():
    readme = [s for s in WITHOUT_TF + CLI if s.path == "README.md"]
    assert {s.kind for s in readme} == {"without-tf", "cli"}
    assert sum("torch" in s.code for s in readme) >= 1
    assert sum("grain" in s.code for s in readme) >= 1


@pytest.mark.parametrize("snippet", WITHOUT_TF + CLI, ids=lambda s: s.id)
def test_snippet_runs_as_written(snippet, tmp_path):
    from doc_snippets import write_shards

    data = write_shards(tmp_path, framed)
    run(snippet, tmp_path)
    if snippet.kind == "cli" and snippet.path == "README.md":
        # What the README's CLI lines say they write.
        assert all((data / f"train.tfrecord-0000{i}-of-00002.offsets").exists() for i in (0, 1))
        assert len((tmp_path / "order.txt").read_text().split()) == 40
        assert (tmp_path / "train.padded.offsets").exists()
    assert (REPO / snippet.path).exists()


def test_the_readme_links_resolve():
    """README.md is read on GitHub and in the wheel's clone, outside the site's
    --strict build: its relative links must name files that exist."""
    import re

    text = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\((?![a-z]+:)([^)#\s]+)", text)
    assert targets
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, missing


def test_the_readme_quick_starts_run_from_the_wheel(tmp_path):
    """The README's PyTorch and Grain quick starts, as written, in a fresh venv where
    tfrecord_lirs comes from the wheel only (`make wheel`'s dist/; no PYTHONPATH). The
    venv sees this venv's third-party packages (torch, grain, numpy) through a .pth
    file: what it tests is the package as the wheel installs it."""
    import subprocess
    import sys
    import sysconfig

    from doc_snippets import write_shards

    wheels = sorted((REPO / "dist").glob("tfrecord_lirs-*.whl"))
    if not wheels:
        pytest.skip("no wheel in dist/ (make wheel; make test builds it first)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH to this tree
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    str(wheels[-1])], check=True, timeout=600, env=clean)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "dev-venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run(
        [str(python), "-c", "import tfrecord_lirs; print(tfrecord_lirs.__file__)"],
        capture_output=True, text=True, cwd=tmp_path, env=clean)
    assert where.stdout.startswith(str(venv)), where.stderr
    readme = [s for s in WITHOUT_TF + CLI if s.path == "README.md"]
    assert {s.kind for s in readme} == {"without-tf", "cli"}
    for i, snippet in enumerate(readme):
        directory = tmp_path / f"snippet-{i}"
        directory.mkdir()
        write_shards(directory, framed)
        run(snippet, directory, installed=venv / "bin")
