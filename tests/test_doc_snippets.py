"""Every code block of README.md and docs/ marked `<!-- runnable: tf -->` runs as
written (tests/doc_snippets.py says how), in the venv with TensorFlow, on TFDS-style
shards this test writes."""

import pytest

from conftest import framed
from doc_snippets import run, snippets, write_shards

TF = snippets("tf")


def test_the_readme_tf_data_quick_start_is_marked():
    assert any(s.path == "README.md" and "LIRSDataset" in s.code for s in TF)


@pytest.mark.parametrize("snippet", TF, ids=lambda s: s.id)
def test_snippet_runs_as_written(snippet, tmp_path):
    write_shards(tmp_path, framed)
    run(snippet, tmp_path)
