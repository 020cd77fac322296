"""Executes notebooks/document_classification.ipynb (small) and fails on any error."""

import os
import sys
from pathlib import Path

import pytest

NOTEBOOK = (
    Path(__file__).resolve().parents[1] / "notebooks" / "document_classification.ipynb"
)


@pytest.mark.slow
def test_document_classification_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    kernelspec = pytest.importorskip("ipykernel.kernelspec")
    # A kernel spec for this very interpreter, found before any other "python3".
    prefix = tmp_path / "jupyter"
    kernelspec.install(kernel_name="keras-attn-test", prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("KERAS_ATTN_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    # The notebook exports into a temporary folder and removes it: point the
    # temporary folder at tmp_path to check that nothing is left behind.
    exports = tmp_path / "tmp"
    exports.mkdir()
    monkeypatch.setenv("TMPDIR", str(exports))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="keras-attn-test",
        timeout=600,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2, "the attention heatmaps were not drawn"
    assert not list(exports.glob("keras_attn_han_*")), "the export was not removed"
    assert sys.executable  # the kernel spec points at this interpreter
    spec = (prefix / "share/jupyter/kernels/keras-attn-test/kernel.json").read_text()
    assert os.path.basename(sys.executable) in spec
