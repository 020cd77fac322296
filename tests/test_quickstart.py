"""`keras-attn quickstart` and `keras-attn train ctr`, run as a user runs them."""

import re

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import tf
from keras_attn.cli import build_parser, main
from keras_attn.cli.quickstart import SENTENCES
from keras_attn.datasets import load_census_sample
from keras_attn.serving import read_features_json
from keras_attn.serving.warmup import read_warmup

pytestmark = pytest.mark.generation_neutral


def test_help_lists_the_ctr_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "quickstart" in text and "train" in text
    help_text = build_parser().parse_args(
        ["train", "ctr", "--data", "x", "--labels", "y"]
    )
    assert help_text.model == "mmoe" and help_text.gate == "attention"
    with pytest.raises(SystemExit):
        main(["train", "ctr", "--help"])
    text = capsys.readouterr().out
    for option in (
        "--data",
        "--labels",
        "--positive",
        "--model",
        "--gate",
        "--export",
        "--validation",
        "--hash",
    ):
        assert option in text


def test_shipped_sample_has_both_tasks():
    df = load_census_sample()
    assert df.shape == (5000, 42)
    assert set(df["income_50k"]) == {"- 50000.", "50000+."}
    assert (df["marital_stat"] == "Never married").mean() > 0.3
    assert (df["hisp_origin"] == "NA").any()  # "NA" is a category, not missing


def test_train_warmup_rows_without_validation_are_missing_values():
    from keras_attn.cli.train import _ctr_warmup
    from keras_attn.features import infer_features
    from keras_attn.serving import to_arrays

    df = pd.DataFrame({"city": ["a", "b"], "age": [30.0, 40.0], "y": [0, 1]})
    specs = infer_features(df, labels=["y"])
    args = build_parser().parse_args(["train", "ctr", "--data", "x", "--labels", "y"])
    rows = _ctr_warmup(args, specs, None)
    arrays = to_arrays(rows, {"city": "string", "age": "float32"}, specs)
    assert arrays["city"].tolist() == [b""] and np.isnan(arrays["age"]).all()
    args = build_parser().parse_args(
        ["train", "ctr", "--data", "x", "--labels", "y", "--no-warmup"]
    )
    assert _ctr_warmup(args, specs, None) is None


def test_quickstart_text_flags():
    parser = build_parser()
    assert parser.parse_args(["quickstart"]).text is True
    assert parser.parse_args(["quickstart", "--text"]).text is True
    args = parser.parse_args(["quickstart", "--no-text", "--text-epochs", "2"])
    assert args.text is False and args.text_epochs == 2


@pytest.mark.slow
def test_quickstart_trains_exports_and_serves(tmp_path, capsys):
    # One text epoch keeps CI short: the text checks below are about the output,
    # not about the accuracy of a 1-epoch HAN.
    args = ["quickstart", "--epochs", "3", "--text-epochs", "1"]
    assert main(args + ["--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # Keras' progress lines ("15/15 ..."): never more steps than the epoch has.
    steps = [(int(k), int(n)) for k, n in re.findall(r"\b(\d+)/(\d+) ", out)]
    assert steps and all(k <= n for k, n in steps), out
    aucs = dict(re.findall(r"(income|marital) (0\.\d+)", out.split("Test AUC:")[1]))
    assert float(aucs["income"]) > 0.8 and float(aucs["marital"]) > 0.9, out
    export = tmp_path / "census_mmoe" / "1"
    assert (export / "saved_model.pb").exists()
    assert read_features_json(export) is not None
    preds = re.findall(r"-> income=(\d\.\d+)  marital=(\d\.\d+)", out)
    assert len(preds) == 3, out
    assert all(0.0 <= float(p) <= 1.0 for row in preds for p in row)
    # The text part: accuracy on the held-out shipped reviews, the export, and the
    # labels the reloaded export gives raw sentences.
    text = out.split("Movie reviews")[1]
    accuracy = re.search(r"Test accuracy on 192 held-out reviews: (\S+)", text)
    assert accuracy and 0.0 <= float(accuracy[1]) <= 1.0, text
    assert (tmp_path / "review_han" / "1" / "saved_model.pb").exists()
    # TF Serving's warm-up records, from held-out rows: one request per row (8)
    # and one of all of them.
    assert len(read_warmup(export)) == len(read_warmup(tmp_path / "review_han" / "1"))
    assert len(read_warmup(export)) == 9
    served = re.findall(r"\n  '(.+)' -> (neg|pos) \(neg (\S+), pos (\S+)\)", text)
    assert [s[0] for s in served] == list(SENTENCES), text
    for _, label, neg, pos in served:
        assert abs(float(neg) + float(pos) - 1.0) < 2e-3
        assert label == ("pos" if float(pos) > float(neg) else "neg")


@pytest.mark.slow
def test_train_ctr_on_a_csv(tmp_path, capsys):
    rng = np.random.default_rng(0)
    n = 400
    city = rng.choice(["a", "b", "c"], size=n)
    df = pd.DataFrame(
        {
            "city": city,
            "age": rng.normal(40, 10, n),
            "clicked": np.where(city == "a", "yes", "no"),
            "buy": (rng.random(n) < 0.3).astype(int),
        }
    )
    path = tmp_path / "train.csv"
    df.to_csv(path, index=False)
    code = main(
        [
            "train",
            "ctr",
            "--data",
            str(path),
            "--labels",
            "clicked,buy",
            "--positive",
            "clicked=yes",
            "--model",
            "mmoe",
            "--gate",
            "attention",
            "--num-experts",
            "2",
            "--epochs",
            "8",
            "--batch-size",
            "64",
            "--learning-rate",
            "0.01",
            "--validation",
            str(path),
            "--export",
            str(tmp_path / "exp"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    auc = float(re.search(r"validation AUC clicked: (0\.\d+|1\.0+)", out).group(1))
    assert auc > 0.95, out
    assert (tmp_path / "exp" / "1" / "saved_model.pb").exists()
    # Warm-up records by default, from the first --validation rows.
    requests = read_warmup(tmp_path / "exp" / "1")
    assert len(requests) == 9
    ages = tf.make_ndarray(requests[-1].inputs["age"])
    np.testing.assert_allclose(ages, df["age"].iloc[:8], rtol=1e-6)
    assert main(["train", "ctr", "--data", str(path), "--labels", "nope"]) == 2
    assert "--labels ['nope'] are not columns" in capsys.readouterr().err
