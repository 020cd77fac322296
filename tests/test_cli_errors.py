"""The command line checks what it can before training and says what is wrong in
one line naming the argument (issue 28, findings 2, 3 and 8); `--debug` shows the
traceback."""

import re

import numpy as np
import pandas as pd
import pytest

from keras_attn.cli import main
from keras_attn.serving import predict_file


def _frame(n=64, seed=0):
    rng = np.random.default_rng(seed)
    city = rng.choice(["a", "b", "c"], size=n)
    return pd.DataFrame(
        {
            "city": city,
            "age": rng.normal(40, 10, n).round(1),
            "click": (city == "a").astype(int),
        }
    )


def _train(tmp_path, data, *extra):
    args = ["train", "ctr", "--data", str(data), "--labels", "click"]
    args += ["--num-experts", "2", "--embedding-dim", "2", "--epochs", "1"]
    return main(args + ["--batch-size", "16", *map(str, extra)])


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err  # one line, no traceback
    return err


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "train.csv"
    _frame().to_csv(path, index=False)
    return path


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "rows, match",
    [
        (10, r"--data .*: 10 rows, fewer than one batch of --batch-size 16"),
        (0, r"--data .*: CSV file .* has a header and no records"),
    ],
)
def test_too_few_rows_for_one_step_fail_before_training(tmp_path, capsys, rows, match):
    path = tmp_path / "small.csv"
    _frame().iloc[:rows].to_csv(path, index=False)
    assert _train(tmp_path, path) == 2
    err = _error(capsys)
    assert err.startswith("keras-attn train ctr: error: ")
    assert re.search(match, err), err


@pytest.mark.generation_neutral
def test_an_empty_validation_file_fails_before_training(
    tmp_path, capsys, data, monkeypatch
):
    _no_training(monkeypatch)
    empty = tmp_path / "validation.csv"
    _frame().iloc[:0].to_csv(empty, index=False)
    assert _train(tmp_path, data, "--validation", empty) == 2
    err = _error(capsys)
    assert re.search(r"--validation .*validation\.csv: a header and no records", err)


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "click, extra, match",
    [
        ([1] * 64, [], "holds only one class"),
        ([0, 1, 2, 1] * 16, [], r"must hold 0 and 1 .*\[2\].*--positive click=VALUE"),
        ([-1, 1] * 32, [], r"must hold 0 and 1 .*\[-1\]"),
        (["y", "n"] * 32, ["--positive", "click=maybe"], "no value equal"),
        (["y", "n"] * 32, ["--positive", "city=a"], r"'city' is not a label column"),
        (["y", "n"] * 32, ["--positive", "click"], "takes COLUMN=VALUE"),
        (
            ["y", "n", ""] * 21 + ["y"],
            ["--positive", "click=y"],
            r"missing values, at line 4",
        ),
    ],
)
def test_labels_are_checked_before_training(tmp_path, capsys, click, extra, match):
    path = tmp_path / "labels.csv"
    _frame().assign(click=click).to_csv(path, index=False)
    assert _train(tmp_path, path, *extra) == 2
    assert re.search(match, _error(capsys))


def _no_training(monkeypatch):
    import keras_attn.models

    def fit(*args, **kwargs):
        raise AssertionError("training started before the check")

    monkeypatch.setattr(keras_attn.models, "fit_ctr_model", fit)


def test_the_export_target_is_checked_before_training(
    tmp_path, capsys, data, monkeypatch
):
    _no_training(monkeypatch)
    (tmp_path / "exp" / "1").mkdir(parents=True)
    assert _train(tmp_path, data, "--export", tmp_path / "exp", "--version", 1) == 2
    err = _error(capsys)
    assert "--export" in err and "1' already exists" in err
    (tmp_path / "file").write_text("x")
    assert _train(tmp_path, data, "--export", tmp_path / "file") == 2
    assert "is a file" in _error(capsys)
    assert _train(tmp_path, data, "--export", tmp_path / "file" / "m") == 2
    assert "is under the file" in _error(capsys)  # not "no write permission"


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "extra, match",
    [
        (["--backup-dir", "file"], r"`--backup-dir` must be a folder.*is a file"),
        (["--checkpoint-dir", "file/c"], r"`--checkpoint-dir` .*under the file"),
        (["--labels", "click,click"], r"--labels click,click: names \['click'\] more"),
    ],
)
def test_folders_and_labels_are_checked_before_training(
    tmp_path, capsys, data, monkeypatch, extra, match
):
    # --backup-dir naming a file failed after the first epoch, without its name.
    _no_training(monkeypatch)
    (tmp_path / "file").write_text("x")
    extra = [str(tmp_path / e) if "file" in e else e for e in extra]
    assert _train(tmp_path, data, *extra) == 2
    assert re.search(match, _error(capsys))


def test_awkward_column_names_are_renamed_for_serving(tmp_path, capsys):
    path = tmp_path / "names.csv"
    frame = _frame().rename(columns={"city": "home city", "age": "âge"})
    frame.to_csv(path, index=False)
    assert _train(tmp_path, path, "--export", tmp_path / "exp") == 0
    out = capsys.readouterr().out
    assert "'home city': 'home_city'" in out
    # The export takes the safe names, its feature file keeps the columns, and
    # `predict` reads the file's columns through it.
    predicted = tmp_path / "p.csv"
    predict_file(tmp_path / "exp", path, output=predicted, progress=False)
    assert len(pd.read_csv(predicted)) == len(frame)


@pytest.mark.generation_neutral
def test_encoding_is_an_argument(tmp_path, capsys):
    path = tmp_path / "latin.csv"
    text = _frame().rename(columns={"city": "ville_é"}).to_csv(index=False)
    path.write_bytes(text.encode("latin-1"))
    assert _train(tmp_path, path) == 2
    err = _error(capsys)
    assert "is not utf-8 text" in err and "--encoding latin-1" in err
    assert _train(tmp_path, path, "--encoding", "nope") == 2
    assert "--encoding nope: `encoding` must be a text encoding" in _error(capsys)
    # A JSON-lines file opened with an unknown encoding raised LookupError (a
    # traceback).
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"text": "a", "label": 1}\n')
    args = ["train", "text", "--data", str(jsonl), "--text-column", "text"]
    assert main(args + ["--label-column", "label", "--encoding", "nope"]) == 2
    assert "--encoding nope: `encoding` must be a text encoding" in _error(capsys)


@pytest.mark.generation_neutral
def test_a_bad_value_in_the_file_names_line_and_column(tmp_path, capsys):
    frame = _frame(n=1500)
    frame["age"] = frame["age"].astype(object)
    frame.loc[1203, "age"] = "forty"
    path = tmp_path / "late.csv"
    frame.to_csv(path, index=False)
    # The types come from the first 1,000 rows; the pass before training reads all.
    assert _train(tmp_path, path, "--infer-rows", 1000) == 2
    assert "late.csv', line 1205, column 'age'" in _error(capsys)


@pytest.mark.generation_neutral
def test_argument_types_and_debug(tmp_path, capsys, data):
    with pytest.raises(SystemExit):
        _train(tmp_path, data, "--epochs", "0")
    assert "--epochs: must be a positive integer, got '0'" in capsys.readouterr().err
    missing = tmp_path / "none.csv"
    assert _train(tmp_path, missing) == 2
    assert "does not exist" in _error(capsys)
    with pytest.raises(ValueError, match="does not exist"):
        _train(tmp_path, missing, "--debug")


def test_a_failed_export_keeps_the_trained_model(tmp_path, capsys, data, monkeypatch):
    import sys

    from keras_attn.backend import keras, tf

    export_module = sys.modules["keras_attn.serving.export"]

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "new_temp_folder", full_disk)
    assert _train(tmp_path, data, "--export", tmp_path / "exp") == 2
    err = _error(capsys)
    assert "No space left on device" in err
    kept = re.search(r"the trained model is saved in '(.+\.keras)'", err).group(1)
    model = keras.saving.load_model(kept)
    out = model({"city": tf.constant(["a"]), "age": tf.constant([40.0])})
    assert out["click"].shape == (1, 1) and 0 < float(out["click"][0, 0]) < 1


@pytest.mark.generation_neutral
def test_wide_min_df_goes_with_the_wide_part_only(tmp_path, capsys):
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"text": "a b", "label": 1}\n{"text": "c d", "label": 0}\n')
    args = ["train", "text", "--data", str(jsonl), "--text-column", "text"]
    args += ["--label-column", "label"]
    assert main(args + ["--no-wide", "--wide-min-df", "2"]) == 2
    assert "--wide-min-df 2 sets the wide part's n-grams" in _error(capsys)
    with pytest.raises(SystemExit):
        main(args + ["--wide-min-df", "two"])
    err = capsys.readouterr().err
    assert "--wide-min-df: must be a non-negative integer, got 'two'" in err
