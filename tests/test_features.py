"""Feature specs, in-model preprocessing layers and DataFrame/CSV -> tf.data."""

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import keras, tf
from keras_attn.features import (
    CategoricalFeature,
    NumericFeature,
    NumericPreprocessing,
    SequenceFeature,
    SequenceSplit,
    StackColumns,
    categorical_lookup,
    features_from_json,
    features_to_json,
    fit_features,
    infer_features,
    to_dataset,
)
from keras_attn.features.preprocessing import _split_int_histories
from keras_attn.models import Task

pytestmark = pytest.mark.generation_neutral


def _frame():
    return pd.DataFrame(
        {
            "city": ["b", "a", "b", None, "c", "b"],
            "code": [3, 1, 3, 2, 1, 3],
            "income": [10.0, 20.0, np.nan, 40.0, 50.0, 60.0],
            "visits": list(range(100, 106)),
            "member": [True, False, True, True, False, False],
            "label": ["yes", "no", "yes", "no", "no", "yes"],
            "click": [1, 0, 1, 0, 0, 1],
        }
    )


def test_categorical_vocabulary_by_frequency_then_value():
    spec = CategoricalFeature("c", num_oov_buckets=2).fit(
        pd.Series(["z", "y", "z", "x", "y", "z", None])
    )
    assert spec.vocabulary == ["z", "y", "x"]  # missing values learn no entry
    assert spec.vocabulary_size == 5


def test_categorical_min_frequency_and_max_tokens():
    series = pd.Series(list("aaabbc"))
    assert CategoricalFeature("c", min_frequency=2).fit(series).vocabulary == ["a", "b"]
    assert CategoricalFeature("c", max_tokens=1).fit(series).vocabulary == ["a"]


def test_categorical_float_column_of_integers_reads_as_integer_text():
    spec = CategoricalFeature("c").fit(pd.Series([3.0, np.nan, 4.0]))
    assert spec.vocabulary == ["3", "4"]
    assert spec.values(pd.Series([3.0, np.nan])).tolist() == ["3", ""]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"dtype": "float32"}, "`dtype` of categorical feature 'c'"),
        ({"num_oov_buckets": 0}, "num_oov_buckets"),
        ({"hash_buckets": -3}, "hash_buckets"),
        ({"hash_buckets": 8, "vocabulary": ["a"]}, "not both"),
    ],
)
def test_categorical_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CategoricalFeature("c", **kwargs)


def test_unfitted_vocabulary_size_is_a_clear_error():
    with pytest.raises(ValueError, match="no vocabulary yet"):
        _ = CategoricalFeature("c").vocabulary_size


def test_numeric_fit_matches_numpy():
    x = np.array([1.0, 2.0, 4.0, np.nan, 9.0])
    spec = NumericFeature("x").fit(pd.Series(x))
    real = x[~np.isnan(x)]
    assert spec.mean == pytest.approx(real.mean())
    assert spec.std == pytest.approx(real.std())
    assert spec.missing_indicator is True
    assert NumericFeature("x").fit(pd.Series(real)).missing_indicator is False
    assert NumericFeature("x").fit(pd.Series([5.0, 5.0])).std == 1.0
    logged = NumericFeature("x", log=True).fit(pd.Series(real))
    assert logged.mean == pytest.approx(np.log1p(real).mean())


def test_numeric_with_text_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Numeric feature 'x' needs numbers.*'abc'"):
        NumericFeature("x").fit(pd.Series(["1.5", "abc"]))


def test_int64_categorical_with_text_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'c' \(dtype 'int64'\) needs numbers.*'x'"):
        CategoricalFeature("c", dtype="int64").fit(pd.Series(["1", "x"]))


def test_infer_features_kinds_and_overrides():
    df = _frame()
    specs = infer_features(df, labels=["label", "click"], max_integer_categories=3)
    kinds = {f.name: (f.kind, getattr(f, "dtype", None)) for f in specs}
    assert kinds == {
        "city": ("categorical", "string"),
        "code": ("categorical", "int64"),
        "income": ("numeric", None),
        "visits": ("numeric", None),
        "member": ("categorical", "string"),
    }
    by_name = {f.name: f for f in specs}
    assert by_name["city"].vocabulary == ["b", "a", "c"]
    assert by_name["income"].missing_indicator is True
    assert by_name["code"].vocabulary == [3, 1, 2]

    forced = infer_features(
        df,
        labels=["label", "click"],
        exclude=["member"],
        numeric=["code"],
        categorical=["visits"],
        overrides={"city": CategoricalFeature("city", hash_buckets=16)},
    )
    by_name = {f.name: f for f in forced}
    assert "member" not in by_name
    assert by_name["code"].kind == "numeric"
    assert by_name["visits"].kind == "categorical"
    assert by_name["city"].hash_buckets == 16 and by_name["city"].vocabulary is None


def test_infer_features_hashes_high_cardinality():
    df = pd.DataFrame({"user": [f"u{i}" for i in range(50)]})
    (spec,) = infer_features(df, hash_threshold=10)
    assert spec.hash_buckets == 100


def test_infer_features_missing_column_names_it_and_the_columns_present():
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['nope'\].*'city'"):
        infer_features(_frame(), labels=["nope"])


def test_json_round_trip():
    specs = infer_features(_frame(), labels=["label", "click"]) + [
        SequenceFeature("hist", shares="city", max_len=7)
    ]
    again = features_from_json(features_to_json(specs))
    assert again == specs
    assert [type(f) for f in again] == [type(f) for f in specs]


def test_fit_features_from_csv_chunks_equals_dataframe(tmp_path):
    df = _frame()
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)

    def specs():
        return [CategoricalFeature("city"), NumericFeature("income")]

    from_frame = fit_features(specs(), df)
    from_csv = fit_features(specs(), [path], chunksize=2)
    assert from_csv[0].vocabulary == from_frame[0].vocabulary
    assert from_csv[1].mean == pytest.approx(from_frame[1].mean)
    assert from_csv[1].std == pytest.approx(from_frame[1].std)
    assert from_csv[1].missing_indicator is True


def test_numeric_preprocessing_golden_and_nan():
    layer = NumericPreprocessing(
        means=[2.0, 1.0], stds=[4.0, 0.5], logs=[False, True], indicators=[True, False]
    )
    a = np.array([6.0, np.nan, -2.0], "float32")
    b = np.array([np.e - 1.0, 0.0, np.nan], "float32")
    out = layer([a, b]).numpy()
    expected = np.array(
        [
            [(6.0 - 2.0) / 4.0, (1.0 - 1.0) / 0.5, 0.0],
            [0.0, (0.0 - 1.0) / 0.5, 1.0],
            [(-2.0 - 2.0) / 4.0, 0.0, 0.0],
        ]
    )
    np.testing.assert_allclose(out, expected, atol=1e-6)
    assert np.isfinite(out).all()
    revived = NumericPreprocessing.from_config(layer.get_config())
    np.testing.assert_allclose(revived([a, b]).numpy(), out)


def test_numeric_preprocessing_validation():
    with pytest.raises(ValueError, match="one entry per column"):
        NumericPreprocessing([0.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="`stds` must be positive"):
        NumericPreprocessing([0.0], [0.0])


def test_sequence_split_truncates_to_most_recent_and_masks():
    tokens, mask = SequenceSplit(max_len=3)(tf.constant(["a|b|c|d", "x", "", "p||q|"]))
    assert tokens.numpy().astype(str).tolist() == [
        ["b", "c", "d"],
        ["x", "", ""],
        ["", "", ""],
        ["p", "q", ""],
    ]
    assert mask.numpy().tolist() == [
        [True, True, True],
        [True, False, False],
        [False, False, False],
        [True, True, False],
    ]
    ids, _ = SequenceSplit(max_len=2, output_dtype="int64")(tf.constant(["7|8|9"]))
    assert ids.numpy().tolist() == [[8, 9]]
    with pytest.raises(ValueError, match="max_len"):
        SequenceSplit(max_len=0)


_HISTORIES = [
    "7|8|9",
    "",
    "|",
    "12||3|",
    "|0|007|5",
    "1|2|3|4|5|6",
    "42",
    "123456789012345678",
    "9|",
]


@pytest.mark.parametrize("max_len", [1, 3, 8])
@pytest.mark.parametrize("separator", ["|", ","])
def test_sequence_split_int_host_path_equals_the_string_ops(max_len, separator):
    # Eager int64 splits run in NumPy (_split_int_histories); in a graph the string
    # ops run: the same ids and mask, row boundaries, empty ids and the last
    # max_len kept included.
    rng = np.random.default_rng(0)
    rows = [h.replace("|", separator) for h in _HISTORIES]
    rows += [
        separator.join(str(v) for v in rng.integers(0, 10 ** rng.integers(1, 6), k))
        for k in rng.integers(0, 12, 40)
    ]
    layer = SequenceSplit(max_len, separator=separator, output_dtype="int64")
    assert _split_int_histories([r.encode() for r in rows], max_len, separator)
    eager = layer(tf.constant(rows))
    graph = tf.function(layer)(tf.constant(rows))
    for host, ops in zip(eager, graph):
        assert host.dtype == ops.dtype
        assert host.numpy().tolist() == ops.numpy().tolist()


@pytest.mark.parametrize(
    "rows, separator",
    [
        (["1 |2"], "|"),  # whitespace: the string ops strip it
        (["-1|2"], "|"),
        (["1||2"], "||"),
        (["1234567890123456789"], "|"),
    ],
)
def test_split_int_histories_leaves_other_rows_to_the_string_ops(rows, separator):
    assert _split_int_histories([r.encode() for r in rows], 2, separator) is None
    layer = SequenceSplit(2, separator=separator, output_dtype="int64")
    eager = layer(tf.constant(rows))
    graph = tf.function(layer)(tf.constant(rows))
    for host, ops in zip(eager, graph):
        assert host.numpy().tolist() == ops.numpy().tolist()


def test_stack_columns():
    out = StackColumns()([np.array([1, 2], "int64"), np.array([[3, 4], [5, 6]])])
    assert out.dtype == tf.int32
    assert out.numpy().tolist() == [[1, 3, 4], [2, 5, 6]]


def test_lookup_sends_unseen_to_oov_and_known_after_the_buckets():
    spec = CategoricalFeature("c", vocabulary=["a", "b"], num_oov_buckets=2)
    ids = categorical_lookup(spec)(tf.constant(["a", "b", "never", ""])).numpy()
    assert ids[:2].tolist() == [2, 3]
    assert all(0 <= i < 2 for i in ids[2:])
    hashed = categorical_lookup(CategoricalFeature("c", hash_buckets=5))
    ids = hashed(tf.constant(["a", "b", "zzz"])).numpy()
    assert ((ids >= 0) & (ids < 5)).all()
    ints = categorical_lookup(CategoricalFeature("n", vocabulary=[7, 9], dtype="int64"))
    assert ints(tf.constant([9, 7, 123], "int64")).numpy().tolist() == [2, 1, 0]


def _specs():
    return [
        CategoricalFeature("city", vocabulary=["b", "a"]),
        CategoricalFeature("code", vocabulary=[3, 1], dtype="int64"),
        NumericFeature("income", mean=30.0, std=10.0, missing_indicator=True),
    ]


def test_to_dataset_from_dataframe():
    df = _frame()
    tasks = [Task("yes", label="label", positive="yes"), "click"]
    x, y = next(iter(to_dataset(df, _specs(), tasks, batch_size=4)))
    assert sorted(x) == ["city", "code", "income"]
    assert x["city"].numpy().astype(str).tolist() == ["b", "a", "b", ""]
    assert x["code"].dtype == tf.int64
    income = x["income"].numpy()
    assert income.dtype == np.float32 and np.isnan(income[2])  # the model imputes
    assert y["yes"].numpy().ravel().tolist() == [1.0, 0.0, 1.0, 0.0]
    assert y["click"].numpy().shape == (4, 1)
    sizes = [len(b[1]["click"]) for b in to_dataset(df, _specs(), ["click"], 4)]
    assert sizes == [4, 2]


def test_to_dataset_shuffles_rows_not_columns():
    df = pd.DataFrame({"x": np.arange(64.0), "y": np.arange(64.0)})
    specs = [NumericFeature("x", mean=0.0, std=1.0)]
    y = Task("y", kind="regression")
    x, y = next(iter(to_dataset(df, specs, [y], batch_size=64, shuffle=True, seed=1)))
    assert x["x"].numpy().tolist() != list(range(64))
    np.testing.assert_array_equal(x["x"].numpy(), y["y"].numpy().ravel())


def test_to_dataset_errors():
    df = _frame()
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['zip'\].*'city'"):
        to_dataset(df, [CategoricalFeature("zip", ["1"])], ["click"])
    bad = df.assign(income=["1", "2", "three", "4", "5", "6"])
    with pytest.raises(ValueError, match="Numeric feature 'income' needs numbers"):
        to_dataset(bad, _specs(), ["click"])
    with pytest.raises(ValueError, match="Label column 'label' is not numeric"):
        to_dataset(df, _specs(), ["label"])
    with pytest.raises(ValueError, match="batch_size"):
        to_dataset(df, _specs(), ["click"], batch_size=0)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_to_dataset_streams_csv_like_the_dataframe(tmp_path, compression):
    df = _frame()
    path = tmp_path / ("data.csv.gz" if compression else "data.csv")
    df.to_csv(path, index=False, compression=compression)
    tasks = [Task("yes", label="label", positive=["yes"]), "click"]
    from_csv = list(to_dataset(str(path), _specs(), tasks, batch_size=6))
    ((x, y),) = list(to_dataset(df, _specs(), tasks, batch_size=6))
    assert len(from_csv) == 1
    cx, cy = from_csv[0]
    for name in x:
        a, b = x[name].numpy(), cx[name].numpy()
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
            np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)])
        else:
            assert a.tolist() == b.tolist(), name
    for name in y:
        np.testing.assert_array_equal(y[name].numpy(), cy[name].numpy())


def test_to_dataset_with_a_preprocessor_encodes_frames_once_and_csv_batches(tmp_path):
    from keras_attn.models import build_ctr_model, split_ctr_model

    df = _frame()
    specs = _specs()
    model = build_ctr_model(specs, ["click"], embedding_dim=2, bottom_units=(2,))
    preprocessor, _ = split_ctr_model(model)
    ((raw, _),) = list(to_dataset(df, specs, ["click"], batch_size=6))
    expected = {k: v.numpy() for k, v in preprocessor(raw).items()}
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    for data in (df, str(path)):
        batches = list(
            to_dataset(data, specs, ["click"], batch_size=4, preprocessor=preprocessor)
        )
        assert [len(y["click"]) for _, y in batches] == [4, 2]
        for name, value in expected.items():
            got = np.concatenate([x[name].numpy() for x, _ in batches])
            np.testing.assert_allclose(got, value, atol=1e-6, err_msg=name)
    features_only = next(iter(to_dataset(df, specs, preprocessor=preprocessor)))
    assert sorted(features_only) == sorted(expected)


def test_to_dataset_csv_errors(tmp_path):
    path = tmp_path / "data.csv"
    _frame().assign(income=["1", "x", "2", "3", "4", "5"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match="Numeric feature 'income' needs numbers"):
        to_dataset(path, _specs(), ["click"])
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['zip'\]"):
        to_dataset(path, [NumericFeature("zip", 0.0, 1.0)], ["click"])
    with pytest.raises(ValueError, match="does not exist"):
        to_dataset(tmp_path / "none.csv", _specs(), ["click"])


def test_sequence_column_of_lists_is_joined():
    df = pd.DataFrame({"hist": [["a", "b"], "c|d", None]})
    spec = SequenceFeature("hist", shares="item", max_len=2)
    x = next(iter(to_dataset(df, [spec], batch_size=3)))
    assert x["hist"].numpy().astype(str).tolist() == ["a|b", "c|d", ""]


@pytest.mark.generation_specific
def test_raw_strings_train_through_to_dataset():
    # Keras 3 refuses NumPy object arrays in fit; to_dataset is the path in both.
    spec = CategoricalFeature("city", vocabulary=["a", "b"])
    inp = keras.Input(shape=(), dtype="string", name="city")
    ids = categorical_lookup(spec)(inp)
    vec = keras.layers.Flatten()(keras.layers.Embedding(3, 2)(ids))
    out = keras.layers.Dense(1, activation="sigmoid", name="click")(vec)
    model = keras.Model({"city": inp}, {"click": out})
    model.compile("adam", {"click": "binary_crossentropy"})
    df = pd.DataFrame({"city": ["a", "b"] * 8, "click": [1, 0] * 8})
    history = model.fit(to_dataset(df, [spec], ["click"], 8), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"][-1])
