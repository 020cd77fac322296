"""Fuzz: random awkward CSV cells read the same from the file as from the DataFrame
`pandas.read_csv` gives for it (issue 28): the column types, the vocabularies, the
ids and numbers the model gets, and an export's predictions through `predict_file`.

Two derandomized examples a test by default (the CI tier);
`KERAS_ATTN_HYPOTHESIS=thorough` runs 200.
"""

import copy
import csv
import os

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_attn.features import (
    fit_features,
    infer_features,
    read_csv_head,
    to_dataset,
)

settings.register_profile(
    "csv-ci",
    max_examples=int(os.environ.get("KERAS_ATTN_CSV_EXAMPLES", "2")),
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "csv-thorough",
    max_examples=200,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = "csv-" + os.environ.get("KERAS_ATTN_HYPOTHESIS", "ci")

#: What pandas rewrites, drops or reads in its own way.
SPELLINGS = [
    "true", "TRUE", "True", "false", "FALSE", "False", "2.0", "02", "2", "-0",
    "1e3", "+3", ".5", "5.", "inf", "-Infinity", " a ", "a", "A", "", "NA", "N/A",
    "null", "None", "nan", "NaN", "#N/A", "x y", "é", "1,5", "0x10", "1_000", "  ",
    '"q"', "line\nbreak", " 4 ", "0e12", "1e5",
]  # fmt: skip
NUMBERS = [
    "2.0", "02", "2", "-0", "1e3", "+3", ".5", "5.", "inf", " 4 ", "", "NA", "null",
    "true", "false",
]  # fmt: skip

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
    max_size=4,
)
_number = st.one_of(
    st.integers(-300, 300).map(str),
    st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    st.sampled_from(NUMBERS),
)
_cell = st.one_of(st.sampled_from(SPELLINGS), _number, _text)
_label = st.sampled_from(["0", "1", "1.0", "0.0", "true", "FALSE", " 1"])


@st.composite
def awkward_rows(draw):
    n = draw(st.integers(2, 24))
    rows = [["a", "2", "1", "0"], ["b", "3", "2.5", "1"]]  # both classes, a value each
    for _ in range(n):
        rows.append([draw(_cell), draw(_cell), draw(_number), draw(_label)])
    return rows


def _write(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["c1", "c2", "n", "y"])
        writer.writerows(rows)
    return path


def _raw(specs, data):
    """{feature: values} of every batch of `data` (raw model inputs)."""
    batches = list(to_dataset(data, specs, ["y"], batch_size=7))
    out = {
        f.name: np.concatenate([x[f.name].numpy() for x, _ in batches]) for f in specs
    }
    out["y"] = np.concatenate([y["y"].numpy() for _, y in batches])
    return out


def _ids(spec, values):
    """A categorical spec's ids, as its lookup layer gives them (one OOV bucket)."""
    if spec.kind != "categorical":
        return values
    index = {v: i + 1 for i, v in enumerate(spec.vocabulary)}
    keys = [v.decode("utf-8") if isinstance(v, bytes) else int(v) for v in values]
    return np.array([index.get(k, 0) for k in keys])


def _same(a, b, name):
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
        # A subnormal float32 (3e-42) comes out of the CSV stream as 0: the stream's
        # NumPy runs in TensorFlow's threads, which flush subnormals to zero (so
        # does every TensorFlow op the model applies to it).
        tiny = np.finfo("float32").tiny
        np.testing.assert_allclose(
            a[~np.isnan(a)], b[~np.isnan(b)], atol=tiny, err_msg=name
        )
    else:
        assert a.tolist() == b.tolist(), name


def _kind(dtype) -> str:
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_numeric_dtype(dtype):
        return "number"
    return "text"


@pytest.mark.generation_neutral
@settings(settings.get_profile(PROFILE))
@given(rows=awkward_rows())
def test_file_and_dataframe_give_the_same_types_vocabularies_and_ids(tmp_path, rows):
    path = _write(tmp_path / "fuzz.csv", rows)
    df = pd.read_csv(path)
    head = read_csv_head(path, 1000)
    for c in df.columns:  # the column types pandas gives
        assert _kind(head[c].dtype) == _kind(df[c].dtype), (c, df[c].tolist())
    specs = infer_features(df, labels=["y"], categorical=["c2"], numeric=["n"])
    unfitted = [copy.deepcopy(f) for f in specs]
    for f in unfitted:
        if f.kind == "categorical":
            f.vocabulary, f.read_as = None, None
        else:
            f.mean = f.std = f.missing_indicator = None
    for fitted, from_file in zip(specs, fit_features(unfitted, path, chunksize=5)):
        if fitted.kind == "categorical":
            assert from_file.vocabulary == fitted.vocabulary, fitted.name
        else:
            assert from_file.mean == pytest.approx(fitted.mean), fitted.name
    frame, stream = _raw(specs, df), _raw(specs, path)
    for f in specs:
        _same(_ids(f, frame[f.name]), _ids(f, stream[f.name]), f.name)
    _same(frame["y"], stream["y"], "y")


@pytest.mark.slow
@settings(settings.get_profile(PROFILE))
@given(rows=awkward_rows())
def test_file_and_dataframe_give_the_same_predictions(tmp_path_factory, rows):
    from keras_attn.models import build_ctr_model
    from keras_attn.serving import export, predict_file

    tmp = tmp_path_factory.mktemp("fuzz")
    path = _write(tmp / "fuzz.csv", rows)
    df = pd.read_csv(path)
    specs = infer_features(df, labels=["y"], categorical=["c2"], numeric=["n"])
    model = build_ctr_model(specs, ["y"], num_experts=2, embedding_dim=2)
    expected = np.concatenate(
        [
            model(x, training=False)["y"].numpy().ravel()
            for x, _ in to_dataset(df, specs, ["y"], batch_size=64)
        ]
    )
    exported = export(model, tmp / "exp", features=specs)
    predict_file(exported, path, output=tmp / "p.csv", batch_size=5, progress=False)
    got = pd.read_csv(tmp / "p.csv")["y"].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-6)
