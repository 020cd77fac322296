"""Non-finite numbers (inf, -inf, beyond 1e19) are missing values, or an error by
choice, in the specs' statistics, the in-model preprocessing, training and export."""

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import tf
from keras_attn.datasets import census_features, census_tasks, load_census_sample
from keras_attn.features import (
    NumericFeature,
    NumericPreprocessing,
    fit_features,
    to_dataset,
)
from keras_attn.features.specs import NON_FINITE_LIMIT
from keras_attn.models import build_ctr_model
from keras_attn.models.ctr import fit_ctr_model
from keras_attn.serving import export

pytestmark = pytest.mark.generation_neutral

BAD = [np.inf, -np.inf, 1e30, 3e38]


@pytest.mark.parametrize("log", [False, True])
def test_layer_imputes_non_finite_like_nan_and_sets_the_indicator(log):
    layer = NumericPreprocessing([1.0], [2.0], logs=[log], indicators=[True])
    x = np.array([3.0, np.nan, *BAD], "float32")
    out = layer([x]).numpy()
    t = np.sign(3.0) * np.log1p(3.0) if log else 3.0
    np.testing.assert_allclose(out[0], [(t - 1.0) / 2.0, 0.0], rtol=1e-6)
    # Every bad value gives exactly the NaN row: 0 and the indicator set.
    bad_rows = out[1:] if not log else out[1:3]  # log(3e38) = 88 is a real value
    np.testing.assert_array_equal(bad_rows, np.tile([[0.0, 1.0]], (len(bad_rows), 1)))
    assert np.isfinite(out).all()


def test_a_standardized_value_beyond_the_limit_is_missing_too():
    # |x| is below the limit, but (x - mean) / std is not.
    layer = NumericPreprocessing([0.0], [1e-3], indicators=[True])
    out = layer([np.array([1e17, 1.0], "float32")]).numpy()
    np.testing.assert_allclose(out, [[0.0, 1.0], [1000.0, 0.0]], rtol=1e-5)
    assert 1e17 / 1e-3 > NON_FINITE_LIMIT


def test_fit_statistics_ignore_non_finite_values(tmp_path):
    clean = np.array([1.0, 4.0, 7.0, 2.0])
    column = pd.Series([*clean, np.nan, *BAD])
    spec = NumericFeature("x").fit(column)
    assert spec.mean == pytest.approx(clean.mean())
    assert spec.std == pytest.approx(clean.std())
    assert spec.missing_indicator is True
    # The chunked CSV path agrees.
    path = tmp_path / "x.csv"
    pd.DataFrame({"x": column}).to_csv(path, index=False)
    (from_csv,) = fit_features([NumericFeature("x")], [path], chunksize=3)
    assert from_csv.mean == pytest.approx(clean.mean())
    assert from_csv.std == pytest.approx(clean.std())


def test_error_mode_names_the_column():
    df = pd.DataFrame({"wage": [1.0, np.inf, 3.0]})
    with pytest.raises(ValueError, match=r"'wage' .*non-finite value inf in row 1"):
        NumericFeature("wage", non_finite="error").fit(df["wage"])
    spec = NumericFeature("wage", mean=0.0, std=1.0, non_finite="error")
    with pytest.raises(ValueError, match="'wage'"):
        to_dataset(df, [spec])
    # NaN stays a missing value in error mode.
    assert NumericFeature("wage", non_finite="error").fit(pd.Series([1.0, None])).fitted
    layer = NumericPreprocessing([0.0], [1.0], non_finite=["error"], columns=["wage"])
    with pytest.raises(tf.errors.InvalidArgumentError, match="'wage'"):
        layer([np.array([1.0, np.inf], "float32")])
    with pytest.raises(ValueError, match="`non_finite` of numeric feature 'w'"):
        NumericFeature("w", non_finite="drop")


def _census_with_inf(n=600, fraction=0.02, seed=0):
    df = load_census_sample().iloc[:n].copy()
    rng = np.random.default_rng(seed)
    bad = rng.random(n) < fraction
    df["wage_per_hour"] = df["wage_per_hour"].astype("float64")
    df.loc[bad, "wage_per_hour"] = np.inf
    return df, bad


@pytest.mark.generation_specific
@pytest.mark.slow
def test_census_with_inf_trains_finite_and_exports_inf_as_missing(tmp_path):
    df, bad = _census_with_inf()
    assert bad.sum() > 5
    specs = census_features(df)
    tasks = census_tasks()
    wage = next(f for f in specs if f.name == "wage_per_hour")
    finite = df.loc[~bad, "wage_per_hour"].to_numpy()
    assert wage.mean == pytest.approx(finite.mean())
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=4,
        num_experts=2,
        expert_units=(8,),
        tower_units=(4,),
    )
    history = fit_ctr_model(
        model,
        df,
        batch_size=100,
        learning_rate=0.01,
        jit_compile=False,
        verbose=0,
    )
    assert np.isfinite(history.history["loss"]).all()
    for w in model.weights:
        assert np.isfinite(w.numpy()).all(), w.name
    clean = next(iter(to_dataset(df[~bad].iloc[:64], specs, batch_size=64)))
    income = model(clean)["income"].numpy()
    assert np.unique(income.round(6)).size > 10

    # One row three times: inf, NaN and -inf in the column give one output.
    rows = df[~bad].iloc[:1]
    rows = pd.concat([rows] * 3, ignore_index=True)
    rows["wage_per_hour"] = [np.inf, np.nan, -np.inf]
    batch = next(iter(to_dataset(rows, specs, batch_size=3)))
    out = model(batch)
    path = export(model, tmp_path / "m", version=1, features=specs)
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    served = serve(**batch)
    for name in ("income", "marital"):
        for v in (out[name].numpy(), served[name].numpy()):
            assert np.isfinite(v).all()
            np.testing.assert_allclose(v[0], v[1], rtol=1e-6)
            np.testing.assert_allclose(v[2], v[1], rtol=1e-6)
        np.testing.assert_allclose(served[name].numpy(), out[name].numpy(), atol=1e-5)
