"""`keras-attn quickstart` and `keras-attn train ctr`, run as a user runs them."""

import re

import numpy as np
import pandas as pd
import pytest

from keras_attn.cli import build_parser, main
from keras_attn.datasets import load_census_sample
from keras_attn.serving import read_features_json


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


@pytest.mark.slow
def test_quickstart_trains_exports_and_serves(tmp_path, capsys):
    assert (
        main(["quickstart", "--epochs", "3", "--output", str(tmp_path), "--quiet"]) == 0
    )
    out = capsys.readouterr().out
    aucs = dict(re.findall(r"(income|marital) (0\.\d+)", out.split("Test AUC:")[1]))
    assert float(aucs["income"]) > 0.8 and float(aucs["marital"]) > 0.9, out
    export = tmp_path / "census_mmoe" / "1"
    assert (export / "saved_model.pb").exists()
    assert read_features_json(export) is not None
    preds = re.findall(r"-> income=(\d\.\d+)  marital=(\d\.\d+)", out)
    assert len(preds) == 3, out
    assert all(0.0 <= float(p) <= 1.0 for row in preds for p in row)


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
    with pytest.raises(SystemExit, match="not in"):
        main(["train", "ctr", "--data", str(path), "--labels", "nope"])
