"""One reading of a CSV file: the vocabulary, the training stream and the served
request see the value the DataFrame `pandas.read_csv` gives for the same cell
(issue 28, finding 1), and the file's problems are named before training or with
file, line and column (findings 2, 3 and 8)."""

import copy

import numpy as np
import pandas as pd
import pytest

from keras_attn.features import (
    CategoricalFeature,
    CSVFiles,
    NumericFeature,
    categorical_lookup,
    fit_features,
    infer_features,
    to_dataset,
)
from keras_attn.models import Task

#: Cells pandas rewrites or drops, a column each (and a label).
AWKWARD = {
    "flag": ["true", "TRUE", "false", "True", "FALSE", "false", "true", "True"],
    "code": ["2.0", "02", "3", "2", "3.0", " 3", "02", "4"],
    "city": [" a ", "a", "", "NA", "b", "a", "null", " a "],
    "amount": ["1.5", "", "NA", "2", " 3 ", "1e1", "-0", "inf"],
    "click": ["1", "0", "1.0", "0", "true", "0", "1", "0"],
}


def _write(path, columns, rows=None):
    names = list(columns)
    n = len(next(iter(columns.values())))
    lines = [",".join(names)]
    lines += [",".join(columns[c][i] for c in names) for i in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ids(specs, batches):
    """{feature: ids} of every batch, through each spec's lookup layer."""
    out = {}
    for spec in specs:
        lookup = categorical_lookup(spec) if spec.kind == "categorical" else None
        values = np.concatenate([x[spec.name].numpy() for x, _ in batches])
        out[spec.name] = values if lookup is None else lookup(values).numpy()
    return out


def test_awkward_cells_get_the_ids_of_the_dataframe_pandas_reads(tmp_path):
    path = _write(tmp_path / "awkward.csv", AWKWARD)
    df = pd.read_csv(path)  # what a user has: booleans, floats, NaN for "NA"
    specs = infer_features(df, labels=["click"], categorical=["code"])
    by_name = {f.name: f for f in specs}
    assert by_name["flag"].vocabulary == ["True", "False"]
    assert by_name["code"].vocabulary == ["2", "3", "4"]

    # The vocabulary learned from the file is the DataFrame's.
    unfitted = [
        CategoricalFeature("flag"),
        CategoricalFeature("code"),
        CategoricalFeature("city"),
        NumericFeature("amount"),
    ]
    from_file = {f.name: f for f in fit_features(unfitted, path, chunksize=3)}
    for name in ("flag", "code", "city"):
        assert from_file[name].vocabulary == by_name[name].vocabulary, name
        assert from_file[name].read_as == by_name[name].read_as, name
    assert from_file["amount"].mean == pytest.approx(by_name["amount"].mean)

    # The stream of the file and the DataFrame give the same ids and numbers.
    frame = list(to_dataset(df, specs, ["click"], batch_size=3))
    stream = list(to_dataset(path, specs, ["click"], batch_size=3))
    want, got = _ids(specs, frame), _ids(specs, stream)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert (want["flag"] > 0).all() and (want["code"] > 0).all()  # none OOV
    labels = [
        np.concatenate([y["click"].numpy() for _, y in b]) for b in (frame, stream)
    ]
    np.testing.assert_array_equal(labels[0], labels[1])


@pytest.mark.generation_neutral
def test_read_as_is_decided_per_column_not_per_cell():
    # Hex ids that look like numbers ("1e5") stay text in a text column.
    hexes = pd.Series(["1e5", "00ab", "1e5", "0e12"], name="h")
    hexes.attrs["source"] = "x.csv"  # file text, typed as pandas would
    spec = CategoricalFeature("h").fit(hexes)
    assert spec.read_as == "text" and spec.vocabulary == ["1e5", "00ab", "0e12"]
    numbers = pd.Series(["1e5", "02", "2.0"])
    numbers.attrs["source"] = "x.csv"
    spec = CategoricalFeature("n").fit(numbers)
    assert spec.read_as == "number" and spec.vocabulary == ["2", "100000"]
    # A DataFrame's own text is text, whatever it looks like.
    assert CategoricalFeature("z").fit(pd.Series(["02", "2"])).read_as == "text"


@pytest.mark.generation_neutral
def test_encoding_utf8_bom_and_a_clear_error_for_others(tmp_path):
    text = "âge,click\n30,1\n40,0\n"
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    specs = [NumericFeature("age", mean=0.0, std=1.0, column="âge")]
    ((x, _),) = list(to_dataset(bom, specs, ["click"], batch_size=2))
    assert x["age"].numpy().tolist() == [30.0, 40.0]

    latin = tmp_path / "latin.csv"
    latin.write_bytes(text.encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.csv' is not utf-8 text.*--encoding"):
        to_dataset(latin, specs, ["click"])
    ((x, _),) = list(
        to_dataset(CSVFiles(latin, encoding="latin-1"), specs, ["click"], batch_size=2)
    )
    assert x["age"].numpy().tolist() == [30.0, 40.0]


@pytest.mark.generation_neutral
def test_a_bad_value_late_in_the_file_names_file_line_and_column(tmp_path):
    rows = {"age": [str(i) for i in range(1500)], "click": ["0", "1"] * 750}
    rows["age"][1200] = "forty"
    path = _write(tmp_path / "late.csv", rows)
    specs = [NumericFeature("age", mean=0.0, std=1.0)]
    # Line 1202: the header is line 1, row 0 line 2.
    with pytest.raises(ValueError, match=r"late\.csv', line 1202, column 'age'"):
        to_dataset(path, specs, ["click"])
    short = tmp_path / "short.csv"
    short.write_text("age,click\n1,0\n2\n3,1\n")
    with pytest.raises(ValueError, match=r"short\.csv', line 3: 1 field\(s\)"):
        to_dataset(short, specs, ["click"])


@pytest.mark.generation_neutral
def test_header_problems_are_named(tmp_path):
    twice = tmp_path / "twice.csv"
    twice.write_text("a,b,a\n1,2,3\n")
    with pytest.raises(ValueError, match=r"names the column\(s\) \['a'\] more than"):
        to_dataset(twice, [NumericFeature("b", 0.0, 1.0)])
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="is empty: it needs a header row"):
        to_dataset(empty, [NumericFeature("b", 0.0, 1.0)])
    header_only = tmp_path / "header.csv"
    header_only.write_text("b,click\n")
    with pytest.raises(ValueError, match="with a header and no records"):
        to_dataset(header_only, [NumericFeature("b", 0.0, 1.0)], ["click"])


@pytest.mark.generation_neutral
@pytest.mark.parametrize(
    "values, task, match",
    [
        (["1", "1", "1"], "y", "only one class"),
        (["0", "1", "2"], "y", r"must hold 0 and 1.*\[2\]"),
        (["-1", "1", "-1"], "y", r"must hold 0 and 1.*\[-1\]"),
        (["yes", "no", "no"], Task("y", positive="maybe"), "no value equal"),
        (["yes", "yes", "yes"], Task("y", positive="yes"), "one class"),
        (["yes", "", "no"], Task("y", positive="yes"), r"missing values, at line 3"),
        (["1", "", "0"], "y", r"missing values, at line 3"),
    ],
)
def test_csv_labels_are_checked_before_any_batch(tmp_path, values, task, match):
    path = _write(tmp_path / "y.csv", {"x": ["1", "2", "3"], "y": values})
    with pytest.raises(ValueError, match=match):
        to_dataset(path, [NumericFeature("x", 0.0, 1.0)], [task])
    frame = pd.read_csv(path)
    with pytest.raises(ValueError, match=match.replace("at line 3", "at row 1")):
        to_dataset(frame, [NumericFeature("x", 0.0, 1.0)], [task])


@pytest.mark.generation_neutral
def test_positive_values_read_as_class_names(tmp_path):
    path = _write(tmp_path / "y.csv", {"x": ["1", "2", "3"], "y": ["2.0", "1", " 2"]})
    task = Task("y", positive=2)
    ((_, y),) = list(to_dataset(path, [NumericFeature("x", 0.0, 1.0)], [task], 3))
    assert y["y"].numpy().ravel().tolist() == [1.0, 0.0, 1.0]


def test_specs_unchanged_by_reading(tmp_path):
    # fit_features decides read_as only for specs that have none.
    spec = CategoricalFeature("code", read_as="text")
    path = _write(tmp_path / "c.csv", {"code": ["02", "2"]})
    (fitted,) = fit_features([copy.deepcopy(spec)], path)
    assert fitted.read_as == "text" and fitted.vocabulary == ["02", "2"]


@pytest.mark.generation_neutral
def test_a_cut_or_corrupt_gzip_file_is_named(tmp_path):
    import gzip

    whole = gzip.compress(("x,click\n" + "1,0\n2,1\n" * 2000).encode())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole[: len(whole) // 2])  # a half-written file
    with pytest.raises(ValueError, match=r"cut\.csv\.gz' cannot be read after line"):
        to_dataset(cut, [NumericFeature("x", 0.0, 1.0)], ["click"])
    fake = tmp_path / "fake.csv.gz"
    fake.write_text("x,click\n1,0\n")
    with pytest.raises(ValueError, match=r"fake\.csv\.gz' cannot be read"):
        to_dataset(fake, [NumericFeature("x", 0.0, 1.0)], ["click"])


@pytest.mark.generation_neutral
def test_column_names_a_signature_cannot_carry_are_renamed_or_refused():
    from keras_attn.features import input_name

    assert input_name("home city") == "home_city"
    assert input_name("âge") == "age" and input_name("class") == "class_"
    assert input_name("_x") == "x" and input_name("1st") == "f_1st"
    assert input_name("城市").startswith("f_")
    assert input_name("a b", taken={"a_b"}) == "a_b_2"
    with pytest.raises(ValueError, match=r"Received: name='home city'.*'home_city'"):
        NumericFeature("home city")
    # A task's name too: "âge" is a Python identifier, not a TensorFlow scope name
    # (the model failed to build, naming 'âge_tower').
    with pytest.raises(ValueError, match=r"ASCII .*Task\('age', label='âge'\)"):
        Task("âge")
    df = pd.DataFrame({"home city": ["a", "b"], "a_b": [1.0, 2.0], "y": [0, 1]})
    specs = infer_features(df.rename(columns={"a_b": "home_city"}), labels=["y"])
    # "home city" cannot name an input, and "home_city" is the next column's.
    assert [(f.name, f.column) for f in specs] == [
        ("home_city_2", "home city"),
        ("home_city", None),
    ]


@pytest.mark.generation_neutral
def test_fit_ctr_model_refuses_too_little_data_before_training(tmp_path):
    # Under Keras 3, 10 rows at a batch of 16 ran 0 steps an epoch and returned
    # the untrained model; an empty validation file was named `data`.
    from keras_attn.models import build_ctr_model, fit_ctr_model

    df = pd.DataFrame({"c": ["a", "b"] * 10, "x": np.arange(20.0), "y": [0, 1] * 10})
    specs = infer_features(df, labels=["y"])
    model = build_ctr_model(specs, ["y"], num_experts=1, embedding_dim=2)
    small = tmp_path / "small.csv"
    df.iloc[:10].to_csv(small, index=False)
    with pytest.raises(ValueError, match=r"one full batch.*10 rows, batch_size=16"):
        fit_ctr_model(model, small, batch_size=16)
    empty = tmp_path / "empty.csv"
    df.iloc[:0].to_csv(empty, index=False)
    whole = tmp_path / "whole.csv"
    df.to_csv(whole, index=False)
    with pytest.raises(ValueError, match=r"`validation_data` .*empty\.csv',\) with"):
        fit_ctr_model(model, whole, batch_size=16, validation_data=empty)
    with pytest.raises(ValueError, match=r"`validation_data` .*an empty DataFrame"):
        fit_ctr_model(model, df, batch_size=16, validation_data=df.iloc[:0])
    # The parameter-server fit takes a DataFrame: a path's len() was its name's.
    from keras_attn.cluster import fit_ctr_with_coordinator

    with pytest.raises(ValueError, match=r"`data` must be a DataFrame.*type str"):
        fit_ctr_with_coordinator(model, specs, ["y"], str(small), None, steps=1)
    with pytest.raises(ValueError, match=r"one full batch.*10 rows, batch_size=16"):
        fit_ctr_with_coordinator(model, specs, ["y"], df[:10], None, 1, batch_size=16)
    # A folder written after the first epoch, with a file in the way: before it.
    with pytest.raises(ValueError, match=r"`backup_dir` must be a folder.*is a file"):
        fit_ctr_model(model, whole, batch_size=16, backup_dir=whole)


def test_a_csv_fit_with_a_backup_and_no_seed_takes_the_order_a_restart_takes(tmp_path):
    # seed=None: a CSV fit drew a fresh random seed, so a run restarted from its
    # backup read its remaining epochs in another order (a DataFrame's took 0).
    from keras_attn.backend import keras
    from keras_attn.models import build_ctr_model, fit_ctr_model

    df = pd.DataFrame({"c": list("abcd") * 8, "x": np.arange(32.0), "y": [0, 1] * 16})
    path = tmp_path / "d.csv"
    df.to_csv(path, index=False)
    specs = infer_features(df, labels=["y"])
    keras.utils.set_random_seed(0)
    model = build_ctr_model(specs, ["y"], num_experts=1, embedding_dim=2)
    start = model.get_weights()
    weights = []
    for run in range(2):
        model.set_weights(start)
        # A different global seed each run, as in a restarted process.
        keras.utils.set_random_seed(run + 1)
        fit_ctr_model(model, path, batch_size=4, backup_dir=tmp_path / f"b{run}",
                      jit_compile=False, verbose=0)  # fmt: skip
        weights.append(model.get_weights())
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
