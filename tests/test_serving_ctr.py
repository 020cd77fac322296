"""Export of a CTR model for TF Serving, reloaded in a TensorFlow-only process."""

import collections
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import tf
from keras_attn.datasets import census_features, census_tasks, load_census_sample
from keras_attn.features import (
    CategoricalFeature,
    SequenceFeature,
    features_from_json,
    infer_features,
    to_dataset,
)
from keras_attn.models import Task, build_ctr_model
from keras_attn.models.ctr import fit_ctr_model
from keras_attn.serving import export, latest_version, read_features_json
from tests.harness import run_isolated
from tests.test_ctr_model import tiny_din

# Runs in a fresh interpreter: TensorFlow alone serves the raw rows.
_SERVE = r"""
import json, sys
import numpy as np
import tensorflow as tf
def _keras():
    return {m for m in sys.modules if m.split(".")[0] in ("keras", "tf_keras")}
baseline = _keras()
export_dir, rows_path, out_path = sys.argv[1:4]
serve = tf.saved_model.load(export_dir).signatures["serving_default"]
with np.load(rows_path) as data:
    feeds = {k: tf.constant(data[k]) for k in data.files}
outputs = serve(**feeds)
np.savez(out_path, **{k: v.numpy() for k, v in outputs.items()})
ours = [m for m in sys.modules if m.split(".")[0] == "keras_attn"]
extra = sorted(_keras() - baseline) + ours
print(json.dumps({"forbidden": extra[:5], "outputs": sorted(outputs)}))
"""


def _raw_rows(df):
    """Three raw rows: as they come, one with an unseen category, one missing number."""
    rows = df.iloc[:3].copy()
    rows.loc[rows.index[1], "education"] = "Doctorate from Mars"
    rows.loc[rows.index[1], "country_self"] = "Atlantis"
    rows.loc[rows.index[2], "age"] = np.nan
    rows.loc[rows.index[2], "weeks_worked"] = np.nan
    return rows


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    df = load_census_sample().iloc[:800]
    specs = census_features(df)
    tasks = census_tasks()
    model = build_ctr_model(
        specs,
        tasks,
        embedding_dim=4,
        num_experts=2,
        expert_units=(8,),
        tower_units=(4,),
        gate="attention",
    )
    # Trained the fast way: the core on ids encoded once. The export must still
    # take raw rows, through the same (shared) preprocessing layers.
    fit_ctr_model(model, df, batch_size=200, learning_rate=0.01, jit_compile=False)
    return model, specs, df


@pytest.mark.slow
def test_export_serves_raw_rows_in_a_tensorflow_only_process(trained, tmp_path):
    model, specs, df = trained
    path = export(model, tmp_path / "census_mmoe", version=1, features=specs)
    assert path == tmp_path / "census_mmoe" / "1"
    assert (path / "saved_model.pb").exists() and (path / "variables").is_dir()
    assert features_from_json(read_features_json(path)) == specs

    rows = _raw_rows(df)
    batch = next(iter(to_dataset(rows, specs, batch_size=3)))
    expected = {k: v.numpy() for k, v in model(batch).items()}
    feeds = {k: v.numpy() for k, v in batch.items()}
    assert np.isnan(feeds["age"][2])
    for v in expected.values():
        assert np.isfinite(v).all()

    rows_path, out_path = tmp_path / "rows.npz", tmp_path / "out.npz"
    np.savez(
        rows_path,
        **{k: v.astype(str) if v.dtype == object else v for k, v in feeds.items()},
    )
    proc = run_isolated(_SERVE, str(path), str(rows_path), str(out_path), cwd=tmp_path)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"forbidden": [], "outputs": ["income", "marital"]}
    with np.load(out_path) as served:
        for name, value in expected.items():
            np.testing.assert_allclose(served[name], value, atol=1e-5)


@pytest.mark.slow
def test_saved_model_cli_lists_the_named_signature(trained, tmp_path):
    model, specs, _ = trained
    path = export(model, tmp_path / "m")
    cli = Path(sys.executable).with_name("saved_model_cli")
    if not cli.exists():
        pytest.skip("saved_model_cli is not installed beside this Python")
    proc = subprocess.run(
        [str(cli), "show", "--dir", str(path), "--all"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    assert "signature_def['serving_default']" in text
    for spec in specs:
        assert f"inputs['{spec.name}']" in text
    assert "outputs['income']" in text and "outputs['marital']" in text
    assert "DT_STRING" in text and "DT_FLOAT" in text


@pytest.mark.slow
def test_versions_count_up_and_never_overwrite_silently(trained, tmp_path):
    model, _, _ = trained
    base = tmp_path / "m"
    assert latest_version(base) is None
    assert export(model, base).name == "1"
    assert export(model, base).name == "2"
    assert latest_version(base) == 2
    with pytest.raises(ValueError, match="already exists"):
        export(model, base, version=2)
    assert export(model, base, version=2, overwrite=True).name == "2"
    assert sorted(p.name for p in base.iterdir()) == ["1", "2"]  # no temp left
    with pytest.raises(ValueError, match="`version` must be a non-negative"):
        export(model, base, version=-1)


def test_export_of_the_raw_inputs_keeps_their_dtypes(tmp_path):
    df = pd.DataFrame({"c": ["a", "b"], "x": [1.0, 2.0], "y": [0, 1]})
    from keras_attn.features import infer_features

    specs = infer_features(df, labels=["y"])
    model = build_ctr_model(
        specs, ["y"], embedding_dim=2, bottom_units=(2,), tower_units=()
    )
    path = export(model, tmp_path / "tiny", version=7)
    fn = tf.saved_model.load(str(path)).signatures["serving_default"]
    args = fn.structured_input_signature[1]
    assert {k: v.dtype for k, v in args.items()} == {"c": tf.string, "x": tf.float32}
    out = fn(c=tf.constant(["a", "never"]), x=tf.constant([1.0, np.nan]))
    assert list(out) == ["y"] and np.isfinite(out["y"].numpy()).all()


def _request_ops(path) -> collections.Counter:
    """The ops a request runs through `serving_default`: the nodes of its graph and
    of the functions it calls, constants and function arguments left out."""
    graph = tf.saved_model.load(str(path)).signatures["serving_default"].graph
    graph_def = graph.as_graph_def()
    library = {f.signature.name: f for f in graph_def.library.function}
    ops = collections.Counter()

    def walk(nodes):
        for node in nodes:
            called = node.attr["f"].func.name if "f" in node.attr else node.op
            if called in library:
                walk(library[called].node_def)
            elif node.op not in ("Const", "Placeholder", "NoOp"):
                ops[node.op] += 1

    walk(graph_def.node)
    return ops


def test_request_ops_do_not_grow_with_numeric_columns_or_inputs(tmp_path):
    # At batch 1 a request's time is mostly per-op overhead: the numeric
    # preprocessing and the batch-size check run the same ops for 2 numeric
    # columns as for 8 (issue 31: one op per column each, before).
    rng = np.random.default_rng(0)
    counts = {}
    for width in (2, 8):
        df = pd.DataFrame({f"x{j}": rng.normal(size=64) for j in range(width)})
        df["city"] = rng.choice(["a", "b"], 64)
        df["click"] = rng.integers(0, 2, 64)
        specs = infer_features(df, labels=["click"])
        model = build_ctr_model(specs, ["click"], embedding_dim=4)
        counts[width] = _request_ops(export(model, tmp_path / f"w{width}"))
    assert counts[2] == counts[8], counts


@pytest.mark.generation_specific
def test_export_folds_the_core_weights_into_constants(
    trained, tmp_path, monkeypatch, caplog
):
    # serving_default reads no variable: TF Serving's optimizer folds the weight
    # work at load (issue 31); explain keeps reading the variables. A model over
    # the size limit serves its variables. Both give the model's outputs.
    export_module = sys.modules["keras_attn.serving.export"]  # the function shadows it
    model, specs, df = trained
    batch = next(iter(to_dataset(_raw_rows(df), specs, batch_size=3)))
    expected = {k: v.numpy() for k, v in model(batch).items()}
    with caplog.at_level(logging.INFO, logger="tensorflow"):
        folded = export(model, tmp_path / "folded", explain=True)
    # The folding pass warned of each lookup table's initializer: it is quiet.
    assert [r.getMessage() for r in caplog.records] == []
    monkeypatch.setattr(export_module, "FOLD_LIMIT", 0)
    plain = export(model, tmp_path / "plain")
    assert _request_ops(folded)["ReadVariableOp"] == 0
    assert _request_ops(plain)["ReadVariableOp"] > 0
    for path in (folded, plain):
        served = tf.saved_model.load(str(path)).signatures["serving_default"](**batch)
        for name, value in expected.items():
            np.testing.assert_allclose(served[name].numpy(), value, atol=1e-6)
    explain = tf.saved_model.load(str(folded)).signatures["explain"](**batch)
    for name, value in expected.items():
        np.testing.assert_allclose(explain[name].numpy(), value, atol=1e-6)


def _history_specs():
    """A DIN-style model's features: an item, a user and a history of items."""
    return [
        CategoricalFeature("item", vocabulary=["i1", "i2", "i3"]),
        CategoricalFeature("user", vocabulary=["u1", "u2"]),
        SequenceFeature("history", shares="item", max_len=3),
    ]


@pytest.mark.generation_specific
def test_folded_export_of_a_model_with_a_behaviour_history(tmp_path):
    # The core's inputs are the encoded dict's keys (`history_mask`), not the
    # names of the layers that make them (`history_split`, SequenceSplit's second
    # output): under tf_keras the folded export failed with "Missing data for
    # input history_mask" (issue 31).
    model = tiny_din(_history_specs())
    rows = {
        "item": tf.constant(["i1", "i2", "nope", "i3"]),
        "user": tf.constant(["u1", "u2", "u1", "u2"]),
        # Empty, unseen, longer than max_len: the mask and the lookups both count.
        "history": tf.constant(["i1|i2", "", "i9|i3", "i3|i2|i1|i2|i3"]),
    }
    path = export(model, tmp_path / "din")
    assert _request_ops(path)["ReadVariableOp"] == 0  # the weights were folded
    serve = tf.saved_model.load(str(path)).signatures["serving_default"]
    served = serve(**rows)["click"].numpy()
    np.testing.assert_allclose(served, model(rows)["click"].numpy(), atol=1e-6)
    # The history reaches the served output.
    other = serve(**{**rows, "history": tf.constant(["i3", "i1", "", "i1"])})
    assert np.abs(other["click"].numpy() - served).max() > 1e-6


def _two_task_rows(n=64, seed=0):
    """Raw rows of string, integer and numeric fields (one with NaN), two labels."""
    rng = np.random.default_rng(seed)
    age = rng.normal(40, 10, n)
    age[::7] = np.nan
    return pd.DataFrame(
        {
            "city": rng.choice(["a", "b", "c", "d", "e"], n),
            "device": rng.choice(["ios", "android"], n),
            "slot": rng.integers(0, 6, n),
            "age": age,
            "price": rng.exponential(30.0, n),
            "click": rng.integers(0, 2, n),
            "buy": rng.integers(0, 2, n),
        }
    )


_FOLDED_CASES = {
    "softmax_gate_shared_table": dict(gate="softmax", shared_table=True),
    "attention_gate_per_field_tables": dict(gate="attention", expert_units=(8, 4)),
    "general_score": dict(gate="attention", gate_score="general"),
    "categorical_only": dict(gate="softmax", drop=["age", "price"]),
    "numeric_only": dict(gate="attention", drop=["city", "device", "slot"]),
    # The towers and heads as one matmul per depth (block-diagonal kernels).
    "towers_of_two_with_dropout": dict(gate="softmax", tower_units=(4, 3), dropout=0.3),
    "no_towers": dict(gate="attention", tower_units=()),
    # Heads of different activations: the stacked logits split, then each task's.
    "binary_and_regression_heads": dict(gate="softmax", regression="buy"),
}


@pytest.mark.generation_specific
@pytest.mark.parametrize("case", sorted(_FOLDED_CASES))
def test_folded_mmoe_core_serves_the_models_outputs(case, tmp_path):
    # A plain MMoE model's export runs the core with the numeric embeddings folded
    # into the first layer, the fields' rows of its product table summed, no range
    # check and the softmax written out (keras_attn.serving.ctr_core, issue 31):
    # the same outputs as the model, for unseen categories and missing numbers too.
    from keras_attn.models.ctr import split_ctr_model
    from keras_attn.serving.ctr_core import folded_ctr_core

    settings = dict(_FOLDED_CASES[case])
    df = _two_task_rows().drop(columns=settings.pop("drop", []))
    specs = infer_features(df, labels=["click", "buy"])
    sizes = dict(num_experts=3, expert_units=(8,), tower_units=(4,), shared_table=False)
    model = _tiny_mmoe(specs, **{**sizes, **settings})
    assert folded_ctr_core(model) is not None
    rows = df.drop(columns=["click", "buy"]).iloc[:16].copy()
    if "city" in rows:
        rows.loc[rows.index[1], "city"] = "never seen"
    batch = next(iter(to_dataset(rows, specs, batch_size=16)))
    expected = {k: v.numpy() for k, v in model(batch).items()}
    assert min(v.std() for v in expected.values()) > 1e-3  # the rows differ
    path = export(model, tmp_path / case)
    ops = _request_ops(path)
    assert ops["Softmax"] == 0 and ops["ReadVariableOp"] == 0, ops
    served = tf.saved_model.load(str(path)).signatures["serving_default"](**batch)
    for name, value in expected.items():
        np.testing.assert_allclose(served[name].numpy(), value, atol=1e-6)
    # Ids from outside (trusted_ids=False) keep the model's rule: an id out of its
    # field's range reads a zero vector.
    preprocessor, core = split_ctr_model(model)
    encoded = dict(preprocessor(batch))
    if "categorical_ids" in encoded:
        ids = encoded["categorical_ids"].numpy()
        ids[0, 0], ids[2, -1] = 10_000, -3
        encoded["categorical_ids"] = tf.constant(ids)
    checked = folded_ctr_core(model, trusted_ids=False)(encoded)
    for name, value in core(encoded).items():
        np.testing.assert_allclose(checked[name].numpy(), value.numpy(), atol=1e-6)


def test_towers_and_heads_run_as_one_matmul_per_depth(tmp_path):
    # The tasks' towers and heads of one shape run stacked: a block-diagonal
    # kernel per depth (at batch 1 each matmul costs its own fixed overhead).
    # Towers of different shapes run task by task, with the same outputs.
    from keras_attn.backend import keras
    from keras_attn.layers import MMoE
    from keras_attn.models import CTRModel
    from keras_attn.serving.ctr_core import _stacked_tasks, folded_ctr_core

    df = _two_task_rows()
    specs = infer_features(df, labels=list(_TASKS))
    model = _tiny_mmoe(specs, tower_units=(4, 3))
    assert _stacked_tasks(model, list(_TASKS)) is not None
    ops = _request_ops(export(model, tmp_path / "stacked"))
    # The numbers' rows of the first layer, two tower depths, one head.
    assert ops["MatMul"] == 4, ops
    from keras_attn.models.ctr import split_ctr_model

    batch = next(iter(to_dataset(df.iloc[:8], specs, batch_size=8)))
    # One task with a tower, the other without: the first task's or the second's
    # (a first task without one once hid the other's depth from the check).
    for towered in _TASKS:
        uneven = CTRModel(
            specs,
            list(_TASKS),
            embedding_dim=4,
            multitask=MMoE(list(_TASKS), num_experts=2, expert_units=[4]),
            towers={towered: keras.layers.Dense(3, "relu")},
        )
        assert _stacked_tasks(uneven, list(_TASKS)) is None, towered
        preprocessor, core = split_ctr_model(uneven)
        encoded = dict(preprocessor(batch))
        served = folded_ctr_core(uneven)(encoded)
        for name, value in core(encoded).items():
            np.testing.assert_allclose(served[name].numpy(), value.numpy(), atol=1e-6)


def test_models_the_fold_does_not_cover_serve_their_core_as_it_is():
    from keras_attn.serving.ctr_core import folded_ctr_core

    df = _two_task_rows()
    specs = infer_features(df, labels=["click", "buy"])
    tiny = dict(embedding_dim=4, num_experts=2, expert_units=(4,), tower_units=())
    for settings in (
        dict(linear=True),
        dict(interacting_layers=1),
        dict(multitask="ple"),
        dict(multitask="shared_bottom"),
        dict(gate="attention", gate_score="additive"),
    ):
        model = build_ctr_model(specs, ["click", "buy"], **{**tiny, **settings})
        assert folded_ctr_core(model) is None, settings


@pytest.mark.generation_specific
def test_encoded_signature_takes_what_the_preprocessing_makes(tmp_path):
    # export(encoded=True): a second signature on the encoded values, for feature
    # stores that encode beforehand (DeepCTR's SavedModel takes such ids): the
    # model's outputs from the preprocessor's values, an out-of-range id read as a
    # zero vector (the model's rule), the batch-size check kept; warm-up records
    # for the raw signature only.
    from keras_attn.models.ctr import split_ctr_model
    from keras_attn.serving import read_warmup

    df = _two_task_rows()
    specs = infer_features(df, labels=["click", "buy"])
    model = _tiny_mmoe(specs, num_experts=3, expert_units=(8,), tower_units=(4,))
    rows = df.drop(columns=["click", "buy"]).iloc[:8]
    path = export(model, tmp_path / "m", encoded=True, warmup=rows)
    assert {r.model_spec.signature_name for r in read_warmup(path)} == {
        "serving_default"
    }
    batch = next(iter(to_dataset(rows, specs, batch_size=8)))
    preprocessor, core = split_ctr_model(model)
    encoded = {k: v.numpy() for k, v in preprocessor(batch).items()}
    encoded["categorical_ids"][0, 1] = 99  # outside its field's range
    expected = {k: v.numpy() for k, v in core(encoded).items()}
    loaded = tf.saved_model.load(str(path))
    fn = loaded.signatures["encoded"]
    assert sorted(fn.structured_input_signature[1]) == sorted(encoded)
    served = fn(**{k: tf.constant(v) for k, v in encoded.items()})
    assert sorted(served) == ["buy", "click"]
    for name, value in expected.items():
        np.testing.assert_allclose(served[name].numpy(), value, atol=1e-6)
    short = {**encoded, "numeric_preprocessing": encoded["numeric_preprocessing"][:3]}
    with pytest.raises(tf.errors.InvalidArgumentError, match="batch size"):
        fn(**{k: tf.constant(v) for k, v in short.items()})


@pytest.mark.generation_specific
def test_encoded_signature_of_a_model_with_a_behaviour_history(tmp_path):
    model = tiny_din(_history_specs())
    rows = {
        "item": tf.constant(["i1", "i2", "nope"]),
        "user": tf.constant(["u1", "u2", "u1"]),
        "history": tf.constant(["i1|i2", "", "i9|i3"]),
    }
    from keras_attn.models.ctr import split_ctr_model

    preprocessor = split_ctr_model(model)[0]
    path = export(model, tmp_path / "din", encoded=True)
    fn = tf.saved_model.load(str(path)).signatures["encoded"]
    served = fn(**preprocessor(rows))["click"].numpy()
    np.testing.assert_allclose(served, model(rows)["click"].numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="`encoded` must be True or False"):
        export(model, tmp_path / "x", encoded="yes")
    from keras_attn.backend import keras

    x = keras.Input(shape=(1,), name="x")
    other = keras.Model({"x": x}, {"y": keras.layers.Dense(1, name="y")(x)})
    with pytest.raises(ValueError, match="`encoded=True` needs a `CTRModel`"):
        export(other, tmp_path / "y", encoded=True)


_TASKS = ("click", "buy")


def _tiny_mmoe(specs, **settings):
    """A two-task MMoE on `specs` (by default 2 experts, one shared table; `settings`
    override `build_ctr_model`'s arguments, `regression` names a regression task),
    embeddings and biases far from zero (so that a wrong row shows in the
    outputs)."""
    from keras_attn.backend import keras

    defaults = dict(
        embedding_dim=4,
        num_experts=2,
        expert_units=(4,),
        tower_units=(),
        shared_table=True,
        embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0, seed=0),
    )
    settings = {**defaults, **settings}
    # regression="buy": that task a regression (a linear head).
    regression = settings.pop("regression", None)
    tasks = [
        Task(t, kind="regression" if t == regression else "binary") for t in _TASKS
    ]
    model = build_ctr_model(specs, tasks, **settings)
    # Biases away from their zero start too: a bias read for the wrong task or
    # expert shows in the outputs.
    rng = np.random.default_rng(1)
    for weight in model.trainable_weights:
        if not np.any(weight.numpy()):
            weight.assign(rng.uniform(-0.5, 0.5, weight.shape).astype("float32"))
    return model


@pytest.mark.generation_specific
def test_folded_core_reads_zeros_for_an_empty_vocabulary(tmp_path):
    # An all-missing column's lookup holds one placeholder value, whose id is one
    # past the field's range: the model reads a zero vector for it, and so must the
    # folded export (the field's zero row in the product table).
    specs = [
        CategoricalFeature("city", vocabulary=["a", "b"]),
        CategoricalFeature("code", vocabulary=[], dtype="int64"),
        CategoricalFeature("slot", vocabulary=[1, 2], dtype="int64"),
    ]
    model = _tiny_mmoe(specs)
    rows = {
        "city": tf.constant(["a", "b", "z"]),
        "code": tf.constant([-(2**62), 5, -(2**62)], tf.int64),
        "slot": tf.constant([1, 2, 1], tf.int64),
    }
    path = export(model, tmp_path / "m")
    served = tf.saved_model.load(str(path)).signatures["serving_default"](**rows)
    for name, value in model(rows).items():
        np.testing.assert_allclose(served[name].numpy(), value.numpy(), atol=1e-6)


def _mixed_lookup_model():
    """A tiny MMoE model whose categorical fields take every kind of lookup, those
    with one OOV id (fused in the export) between the others."""
    from keras_attn.features import NumericFeature

    specs = [
        CategoricalFeature("city", vocabulary=["a", "b", "c", ""]),
        CategoricalFeature("slot", vocabulary=[1, 2, 3], dtype="int64"),
        CategoricalFeature("device", vocabulary=["ios", "android", "a"]),
        CategoricalFeature("page", vocabulary=["home", "cart"], num_oov_buckets=3),
        CategoricalFeature("query", hash_buckets=7),
        CategoricalFeature("region", vocabulary=["north", "south"]),
        NumericFeature("price", mean=3.0, std=2.0),
    ]
    model = _tiny_mmoe(specs)
    rows = {
        # Known values, unseen ones, the empty string, a value of another field.
        "city": tf.constant(["a", "c", "", "zz", "ios", "b"]),
        "slot": tf.constant([1, 3, 9, 2, 1, 2], tf.int64),
        "device": tf.constant(["ios", "a", "android", "b", "", "nope"]),
        "page": tf.constant(["home", "x", "cart", "y", "home", "z"]),
        "query": tf.constant(["q1", "q2", "q3", "q4", "q5", "q6"]),
        "region": tf.constant(["north", "south", "east", "north", "", "south"]),
        "price": tf.constant([1.0, 5.0, np.nan, 2.0, 3.0, 4.0]),
    }
    return model, rows


@pytest.mark.generation_specific
def test_export_looks_up_the_string_fields_in_one_table(tmp_path):
    # The export's string and integer fields with one OOV id go through one int64
    # table (keras_attn.serving.ctr_lookups, issue 31): the ids of the model's own
    # lookups, in the fields' order, for unseen values and the empty string too;
    # the other fields keep their layers.
    from keras_attn.models.ctr import split_ctr_model
    from keras_attn.serving.ctr_lookups import fused_ctr_preprocessing

    model, rows = _mixed_lookup_model()
    preprocessor = split_ctr_model(model)[0]
    encode, _ = fused_ctr_preprocessing(model)
    expected, got = preprocessor(rows), encode(rows)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype, key
        np.testing.assert_array_equal(got[key].numpy(), value.numpy(), err_msg=key)
    ids = got["categorical_ids"].numpy()
    assert ids[3, 0] == 0 and ids[2, 0] == 4  # "zz" unseen, "" the 4th value
    path = export(model, tmp_path / "m")
    ops = _request_ops(path)
    # One find for city, slot, device and region, one for page; a fingerprint for
    # each of the three strings, one for page's OOV buckets, one for query's hash.
    assert ops["LookupTableFindV2"] == 2 and ops["StringToHashBucketFast"] == 5, ops
    served = tf.saved_model.load(str(path)).signatures["serving_default"](**rows)
    for name, value in model(rows).items():
        np.testing.assert_allclose(served[name].numpy(), value.numpy(), atol=1e-6)


def test_fused_export_checks_batch_sizes_before_combining_columns(tmp_path):
    # The fingerprints run beside the batch-size check, and the check guards
    # the stack of their keys: a string or number column of another size is the
    # check's error naming it, never the stack's, on every call.
    df = _two_task_rows()
    specs = infer_features(df, labels=list(_TASKS))
    model = _tiny_mmoe(specs)
    serve = tf.saved_model.load(str(export(model, tmp_path / "m")))
    serve = serve.signatures["serving_default"]
    rows = df.drop(columns=list(_TASKS)).iloc[:2]
    inputs = {c: tf.constant(rows[c].to_numpy()) for c in rows}
    inputs["age"] = tf.cast(inputs["age"], tf.float32)
    inputs["price"] = tf.cast(inputs["price"], tf.float32)
    for odd in ("device", "price"):
        bad = dict(inputs, **{odd: tf.concat([inputs[odd]] * 2, 0)})
        for _ in range(20):
            with pytest.raises(
                tf.errors.InvalidArgumentError,
                match=f"Input `{odd}` must have the batch size of input `age`",
            ):
                serve(**bad)


def test_colliding_fingerprints_keep_the_fields_own_lookups(monkeypatch):
    # Zero salts make a value shared by two fields one key twice: the fused table
    # refuses it, and the preprocessing falls back to the layers.
    from keras_attn.serving import ctr_lookups

    monkeypatch.setattr(ctr_lookups, "_salts", lambda n: np.zeros(n, np.int64))
    with pytest.raises(ValueError, match="collide"):
        ctr_lookups.FusedLookup([[b"a", b"b"], [b"x", b"a"]], ["string"] * 2)
    model, _ = _mixed_lookup_model()  # "a" is a city and a device
    assert ctr_lookups.fused_ctr_preprocessing(model) is None


@pytest.mark.parametrize("table", ["paired", "per_field", "gathered"])
def test_folded_core_with_or_without_the_table_product(table, monkeypatch):
    # The folded core multiplies the embedding table by the first layer ahead of
    # time, neighbouring fields' rows summed into a table per pair; without pairs
    # past PAIR_ROWS, and past PRODUCT_LIMIT it gathers and multiplies per request.
    # Each gives the model's outputs, for ids out of range too (a zero vector).
    from keras_attn.models.ctr import split_ctr_model
    from keras_attn.serving import ctr_core

    if table == "per_field":
        monkeypatch.setattr(ctr_core, "PAIR_ROWS", 0)
    if table == "gathered":
        monkeypatch.setattr(ctr_core, "PRODUCT_LIMIT", 0)
    model, rows = _mixed_lookup_model()
    preprocessor, core = split_ctr_model(model)
    encoded = dict(preprocessor(rows))
    ids = encoded["categorical_ids"].numpy()
    ids[0, 0], ids[2, -1], ids[4, 3] = 10_000, -3, ids[4, 3] + 1000
    encoded["categorical_ids"] = tf.constant(ids)
    for trusted, batch in ((True, dict(preprocessor(rows))), (False, encoded)):
        served = ctr_core.folded_ctr_core(model, trusted_ids=trusted)(batch)
        for name, value in core(batch).items():
            np.testing.assert_allclose(served[name].numpy(), value.numpy(), atol=1e-6)


def test_a_product_table_past_the_limit_is_not_built(monkeypatch):
    # Millions of ids times the first layer's columns would take gigabytes: the
    # size is checked before anything is multiplied (the table is never read).
    from keras_attn.serving import ctr_core

    kernel = np.zeros((3 * 4, 10), np.float32)  # 3 fields of dim 4, 10 columns
    sizes = [5, 6, 7]  # pairs (6 x 7 rows) and (8 x 1): 50 rows of 40 bytes
    monkeypatch.setattr(ctr_core, "PRODUCT_LIMIT", 50 * 40 - 1)
    assert ctr_core._product_table(None, sizes, 4, kernel) is None
    monkeypatch.setattr(ctr_core, "PRODUCT_LIMIT", 50 * 40)
    table = np.ones((sum(sizes), 4), np.float32)
    product, strides, offsets = ctr_core._product_table(table, sizes, 4, kernel)
    assert product.shape == (50, 10)
    assert strides.tolist() == [7, 1, 1, 1] and offsets.tolist() == [0, 42]
