"""`keras-attn train text` and the quickstart's text part."""

import gzip
import json

import numpy as np
import pytest

from keras_attn.backend import tf
from keras_attn.cli import main
from keras_attn.cli.train import read_text_file
from keras_attn.serving.warmup import read_warmup

pytestmark = pytest.mark.generation_neutral

ROWS = [
    ("A wonderful film. Loved it!", "pos"),
    ("Dull, far too long. Hated it.", "neg"),
    ("这家酒店很好。服务热情！", "pos"),
    ("房间太脏了。不会再来；", "neg"),
] * 5


def _serve(path, texts):
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    return serve(text=tf.constant(texts))


def test_read_text_file_csv_and_jsonl(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("review,label\n" + "\n".join(f'"{t}",{y}' for t, y in ROWS[:2]))
    assert read_text_file(csv, "review", "label") == (
        [ROWS[0][0], ROWS[1][0]],
        ["pos", "neg"],
    )
    jl = tmp_path / "d.jsonl.gz"
    with gzip.open(jl, "wt") as f:
        f.write(json.dumps({"sentences": ["a b .", "c ."], "label": "neg"}) + "\n")
    assert read_text_file(jl, "sentences", "label") == (["a b . c ."], ["neg"])
    with pytest.raises(ValueError, match="column 'text' not in"):
        read_text_file(csv, "text", "label")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["han", "transformer", "bert"])
def test_train_text_exports_a_raw_string_model(tmp_path, model, capsys):
    csv = tmp_path / "reviews.csv"
    csv.write_text(
        "review,label\n" + "\n".join(f'"{t}",{y}' for t, y in ROWS), encoding="utf-8"
    )
    args = ["train", "text", "--data", str(csv), "--text-column", "review"]
    args += ["--label-column", "label", "--model", model, "--epochs", "2"]
    args += ["--embedding-dim", "8", "--units", "4", "--num-heads", "2"]
    args += ["--max-sentences", "3", "--max-words", "6", "--sequence-length", "12"]
    args += ["--min-count", "1", "--export", str(tmp_path / "export")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "validation accuracy" in out
    path = tmp_path / "export" / "1"
    assert (path / "saved_model.pb").exists()
    # Warm-up records by default: two documents, one at a time and together.
    assert len(read_warmup(path)) == 3
    result = _serve(path, ["Loved it!", "", "很好。"])
    probs = result["probabilities"].numpy()
    assert probs.shape == (3, 2)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    names = np.array(["neg", "pos"])
    assert result["label"].numpy().astype(str).tolist() == list(names[probs.argmax(-1)])
