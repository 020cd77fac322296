"""build_ctr_model: MMoE/PLE/shared bottom, AutoInt, DIN, on raw feature inputs."""

import os
import warnings

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import keras, tf
from keras_attn.features import (
    CategoricalFeature,
    NumericFeature,
    SequenceFeature,
    infer_features,
    to_dataset,
)
from keras_attn.layers import AttentionSequencePooling
from keras_attn.models import Task, build_ctr_model, compile_ctr_model
from keras_attn.models.ctr import fit_ctr_model, gate_weights_model, split_ctr_model

TINY = dict(
    embedding_dim=4, num_experts=2, expert_units=(8,), tower_units=(4,), key_dim=4
)


def tiny_din(specs, units=4, **kwargs):
    """A tiny single-task ("click") DIN-style model on `specs`: one bottom layer
    and one activation-unit layer of `units`, no tower, its vectors far enough
    apart that another history moves the output visibly."""
    return build_ctr_model(
        specs,
        ["click"],
        embedding_dim=4,
        bottom_units=(units,),
        tower_units=(),
        din_hidden_units=(units,),
        embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0, seed=0),
        **kwargs,
    )


def _synthetic(n=256, seed=0):
    """click depends on the city, buy on the age: both learnable from one field."""
    rng = np.random.default_rng(seed)
    city = rng.choice(["a", "b", "c", "d"], size=n)
    age = rng.normal(40, 10, size=n)
    age[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "city": city,
            "age": age,
            "click": np.isin(city, ["a", "b"]).astype(int),
            "buy": (np.nan_to_num(age, nan=40.0) > 40).astype(int),
        }
    )


def _rows():
    return {
        "city": tf.constant(["a", "zzz-unseen", "c"]),
        "age": tf.constant([30.0, np.nan, 55.0]),
    }


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(gate="softmax"),
        dict(gate="attention"),
        dict(multitask="ple", num_levels=1, num_shared_experts=1, num_task_experts=1),
        dict(multitask="shared_bottom", bottom_units=(8,)),
        dict(interacting_layers=2, num_heads=2),
    ],
    ids=["mmoe_softmax", "mmoe_attention", "ple", "shared_bottom", "autoint"],
)
def test_outputs_keyed_by_task_and_finite_on_bad_rows(kwargs):
    df = _synthetic(32)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY, **kwargs)
    assert sorted(t.name.split(":")[0] for t in model.inputs) == ["age", "city"]
    # The flat arguments became the model's parts.
    assert len(model.interaction) == kwargs.get("interacting_layers", 0)
    block = {"mmoe": "MMoE", "ple": "PLE", "shared_bottom": "Sequential"}
    assert type(model.multitask).__name__ == block[kwargs.get("multitask", "mmoe")]
    out = model(_rows())
    assert sorted(out) == ["buy", "click"]
    for v in out.values():
        v = v.numpy()
        assert v.shape == (3, 1)
        assert np.isfinite(v).all() and ((v > 0) & (v < 1)).all()


@pytest.mark.generation_neutral
@pytest.mark.slow
@pytest.mark.parametrize("gate", ["softmax", "attention"])
def test_mmoe_learns_both_tasks(gate):
    df = _synthetic(512)
    specs = infer_features(df, labels=["click", "buy"])
    tasks = [Task("click"), Task("buy", loss_weight=2.0)]
    model = build_ctr_model(specs, tasks, **TINY, gate=gate)
    model.compile(learning_rate=0.02)
    ds = to_dataset(df, specs, tasks, batch_size=64, shuffle=True, seed=0)
    model.fit(ds, epochs=15, verbose=0)
    logs = model.evaluate(
        to_dataset(df, specs, tasks, 256), return_dict=True, verbose=0
    )
    assert logs["click_auc"] > 0.95, logs
    assert logs["buy_auc"] > 0.9, logs


def test_gate_weights_model_gives_distributions_over_experts():
    df = _synthetic(16)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY, gate="attention")
    gates = gate_weights_model(model)(_rows())
    assert sorted(gates) == ["buy", "click"]
    for g in gates.values():
        assert g.shape == (3, 2)
        np.testing.assert_allclose(g.numpy().sum(axis=1), 1.0, atol=1e-5)
    shared = build_ctr_model(specs, ["click"], **TINY)
    with pytest.raises(ValueError, match="has no MMoE or PLE block"):
        gate_weights_model(shared)


def _din_specs():
    return [
        CategoricalFeature("item", vocabulary=["i1", "i2", "i3", "i4"]),
        CategoricalFeature("user", vocabulary=["u1", "u2"]),
        NumericFeature("price", mean=1.0, std=1.0),
        SequenceFeature("hist_item", shares="item", max_len=3),
    ]


def _din_rows(hist):
    n = len(hist)
    return {
        "item": tf.constant(["i1", "i2", "nope"][:n]),
        "user": tf.constant(["u1", "u2", "u1"][:n]),
        "price": tf.constant([1.0, np.nan, 3.0][:n]),
        "hist_item": tf.constant(hist),
    }


def test_din_single_task_shares_the_item_table():
    model = tiny_din(_din_specs(), units=8)
    poolings = [x for x in model.layers if isinstance(x, AttentionSequencePooling)]
    assert [p.name for p in poolings] == ["hist_item_din_pooling"]
    assert model.sequence_pooling == {"hist_item": poolings[0]}
    table = model.sequence_tables["item"]
    assert table.input_dim == 5  # 4 items + 1 OOV bucket, for candidate and history
    out = model(_din_rows(["i1|i2|i3|i4", "", "i9"]))["click"].numpy()
    assert np.isfinite(out).all()  # an empty history pools to zeros, not NaN
    # The history reaches the output: another history, same candidate and user.
    other = model(_din_rows(["i2|i3", "i4", "i9"]))["click"].numpy()
    assert np.abs(other[:2] - out[:2]).max() > 1e-6
    # Truncation keeps the 3 most recent ids: an older id changes nothing.
    a = model(_din_rows(["i4|i2|i3|i1"]))["click"].numpy()
    b = model(_din_rows(["i1|i2|i3|i1"]))["click"].numpy()
    c = model(_din_rows(["i2|i3|i1"]))["click"].numpy()
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, c, atol=1e-6)
    # A different recent history does change the prediction.
    d = model(_din_rows(["i4|i4|i4"]))["click"].numpy()
    assert np.abs(a - d).max() > 1e-4


def test_din_interaction_reaches_the_activation_unit():
    kwargs = dict(embedding_dim=4, bottom_units=(8,), din_hidden_units=(8,))
    model = build_ctr_model(
        _din_specs(), ["click"], din_interaction="outer_product", **kwargs
    )
    unit = model.sequence_pooling["hist_item"].local_activation_unit
    assert unit.interaction == "outer_product"
    assert unit.kernels[0].shape == (3 * 4 + 4 * 4, 8)
    with pytest.raises(ValueError, match="din_interaction='outer'"):
        build_ctr_model(_din_specs(), ["click"], din_interaction="outer", **kwargs)


@pytest.mark.slow
def test_keras_save_and_reload_gives_the_same_outputs(tmp_path):
    df = _synthetic(32)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY, gate="attention")
    path = os.path.join(tmp_path, "ctr.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    assert type(reloaded) is type(model)
    for name, value in model(_rows()).items():
        np.testing.assert_allclose(reloaded(_rows())[name].numpy(), value.numpy())


def test_builder_validation():
    df = _synthetic(16)
    specs = infer_features(df, labels=["click", "buy"])
    with pytest.raises(ValueError, match="`multitask` must be one of"):
        build_ctr_model(specs, ["click", "buy"], multitask="moe")
    with pytest.raises(ValueError, match="'age' is not fitted"):
        build_ctr_model([NumericFeature("age")], ["click"])
    with pytest.raises(ValueError, match="also feature names"):
        build_ctr_model(specs, ["city"])
    with pytest.raises(ValueError, match="unique"):
        build_ctr_model(specs, ["click", "click"])
    with pytest.raises(ValueError, match="Python identifier"):
        Task("my task")
    with pytest.raises(ValueError, match="`kind` must be one of"):
        Task("t", kind="multiclass")
    bad_seq = [*specs, SequenceFeature("hist", shares="age", max_len=2)]
    with pytest.raises(ValueError, match="shares 'age', which is not a categorical"):
        build_ctr_model(bad_seq, ["click"])
    model = build_ctr_model(specs, ["click"], **TINY)
    with (
        pytest.warns(DeprecationWarning, match="compile_ctr_model"),
        pytest.raises(ValueError, match=r"Tasks \['buy'\] are not outputs"),
    ):
        compile_ctr_model(model, ["buy"])


def test_compile_wires_loss_weights_and_auc():
    df = _synthetic(64)
    specs = infer_features(df, labels=["click", "buy"])
    tasks = [Task("click", loss_weight=0.0), Task("buy")]
    model = build_ctr_model(specs, tasks, **TINY)
    model.compile(learning_rate=0.01)
    logs = model.evaluate(to_dataset(df, specs, tasks, 64), return_dict=True, verbose=0)
    assert {"click_auc", "buy_auc"} <= set(logs)
    # With weight 0 on click the total is the buy loss alone.
    assert logs["loss"] == pytest.approx(logs["buy_loss"], rel=1e-4)


def test_compile_ctr_model_matches_tasks_with_the_output_dict_keys():
    # The output dict's keys are the task names; the layers are named otherwise,
    # in the other order (a check against output_names refused this model).
    x = keras.Input((3,), name="x")
    outputs = {
        "click": keras.layers.Dense(1, "sigmoid", name="b_dense")(x),
        "buy": keras.layers.Dense(1, "sigmoid", name="a_dense")(x),
    }
    model = keras.Model({"x": x}, outputs)
    compile_ctr_model(model, [Task("click", loss_weight=0.0), Task("buy")])
    rng = np.random.default_rng(0)
    inputs = {"x": rng.normal(size=(8, 3)).astype("float32")}
    labels = {"click": np.ones((8, 1)), "buy": rng.integers(0, 2, (8, 1))}
    logs = model.evaluate(inputs, labels, return_dict=True, verbose=0)
    # With weight 0 on click the total is buy's loss, from buy's output.
    buy = model.predict(inputs, verbose=0)["buy"]
    expected = keras.losses.binary_crossentropy(labels["buy"], buy)
    assert logs["loss"] == pytest.approx(float(np.mean(expected)), rel=1e-4)
    with pytest.raises(ValueError, match=r"Tasks \['view'\] .* \['click', 'buy'\]"):
        compile_ctr_model(model, ["click", "view"])

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1, "sigmoid", name="dense")

        def call(self, inputs):
            return {"click": self.dense(inputs["x"])}

    # Never called: its outputs are unknown until its first step, which matches
    # the loss dict with them.
    subclassed = compile_ctr_model(Subclassed(), ["click"])
    history = subclassed.fit(inputs, {"click": labels["buy"]}, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize("gate", ["softmax", "attention"])
def test_split_model_composes_to_the_whole_on_raw_rows(gate):
    df = _synthetic(32)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY, gate=gate)
    preprocessor, core = split_ctr_model(model)
    encoded = preprocessor(_rows())  # an unseen city, a missing age
    assert sorted(encoded) == ["categorical_ids", "numeric_preprocessing"]
    assert encoded["categorical_ids"].dtype.is_integer
    assert np.isfinite(encoded["numeric_preprocessing"].numpy()).all()
    whole, parts = model(_rows()), core(encoded)
    for name in ("click", "buy"):
        np.testing.assert_allclose(parts[name].numpy(), whole[name].numpy(), atol=1e-6)
    # One set of weights: the core's are the model's own variables.
    assert {id(w) for w in core.weights} <= {id(w) for w in model.weights}
    with (
        pytest.warns(DeprecationWarning, match="split_ctr_model"),
        pytest.raises(ValueError, match="`features` must be the feature specs"),
    ):
        split_ctr_model(model, _din_specs())


def test_split_din_model_cuts_histories_and_masks():
    specs = _din_specs()
    model = build_ctr_model(
        specs, ["click"], embedding_dim=4, bottom_units=(8,), din_hidden_units=(8,)
    )
    preprocessor, core = split_ctr_model(model)
    rows = _din_rows(["i1|i2|i3|i4", "", "i9"])
    encoded = preprocessor(rows)
    assert encoded["hist_item_mask"].dtype == tf.bool
    np.testing.assert_array_equal(
        encoded["hist_item_mask"].numpy(),
        [[True, True, True], [False, False, False], [True, False, False]],
    )
    np.testing.assert_allclose(
        core(encoded)["click"].numpy(), model(rows)["click"].numpy(), atol=1e-6
    )


def _item_frame(n=16):
    return pd.DataFrame(
        {
            "item": ["i1", "i2", "i3", "i1"] * (n // 4),
            "price": [1.0, 2.0, np.nan, 0.5] * (n // 4),
            "history": ["i1|i2", "", "i3", "i2|i2|i1"] * (n // 4),
            "click": [1, 0, 1, 0] * (n // 4),
        }
    )


_ITEM = CategoricalFeature("item", vocabulary=["i1", "i2", "i3"])
_PRICE = NumericFeature("price", mean=1.0, std=1.0)
_HISTORY = SequenceFeature("history", shares="item", max_len=3)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("specs", "linear"),
    [
        ([_ITEM, _PRICE, _HISTORY], False),
        ([_ITEM, _PRICE, _HISTORY], True),
        ([_ITEM, _HISTORY], False),
        ([_PRICE], True),
    ],
    ids=["item_price_history", "linear", "item_history", "numeric_only"],
)
def test_models_without_a_plain_categorical_field(specs, linear, tmp_path):
    # Every categorical feature is a history's item, or there is none: no
    # `categorical_ids`; the constructor failed in FieldEmbedding.build before.
    names = [f.name for f in specs]
    df = _item_frame()[[*names, "click"]]
    model = tiny_din(specs, linear=linear)
    encoded = sorted(split_ctr_model(model)[0].output)
    assert "categorical_ids" not in encoded
    assert ("numeric_preprocessing" in encoded) == ("price" in names)
    rows = {n: tf.constant(df[n].values[:4]) for n in names}
    before = model.predict(rows, verbose=0)["click"]
    history = fit_ctr_model(
        model, df, batch_size=16, learning_rate=0.1, jit_compile=False, verbose=0
    )
    assert np.isfinite(history.history["loss"]).all()
    after = model.predict(rows, verbose=0)["click"]
    assert np.isfinite(after).all() and np.abs(after - before).max() > 1e-6
    if "price" in names:  # the numbers reach the output
        other = model.predict({**rows, "price": rows["price"] + 3.0}, verbose=0)
        assert np.abs(other["click"] - after).max() > 1e-6
    path = str(tmp_path / "ctr.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded.predict(rows, verbose=0)["click"], after, atol=1e-6
    )


def test_linear_part_needs_a_plain_field():
    with pytest.raises(
        ValueError,
        match=r"`linear=True` needs a categorical feature that no sequence shares.*"
        r"Received: linear=True with features \['item', 'history'\]",
    ):
        build_ctr_model([_ITEM, _HISTORY], ["click"], embedding_dim=4, linear=True)


@pytest.mark.slow
def test_fit_ctr_model_trains_the_model_that_takes_raw_values():
    df = _synthetic(512)
    specs = infer_features(df, labels=["click", "buy"])
    tasks = [Task("click"), Task("buy", loss_weight=2.0)]
    model = build_ctr_model(specs, tasks, **TINY, gate="attention")
    before = model(_rows())["click"].numpy()
    history = fit_ctr_model(
        model,
        df,
        epochs=15,
        batch_size=64,
        seed=0,
        learning_rate=0.02,
        jit_compile=False,
        validation_data=df.iloc[:100],
        verbose=0,
    )
    assert len(history.history["val_click_auc"]) == 15
    assert not np.allclose(model(_rows())["click"].numpy(), before)
    # The raw model is compiled afterwards and has learned both tasks.
    logs = model.evaluate(
        to_dataset(df, specs, tasks, 256), return_dict=True, verbose=0
    )
    assert logs["click_auc"] > 0.95, logs
    assert logs["buy_auc"] > 0.9, logs


@pytest.mark.slow
def test_fit_ctr_model_under_xla_matches_the_raw_model():
    df = _synthetic(256)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY)
    history = fit_ctr_model(model, df, batch_size=100, jit_compile=True, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    preprocessor, core = split_ctr_model(model)
    for name, value in model(_rows()).items():
        np.testing.assert_allclose(
            core(preprocessor(_rows()))[name].numpy(), value.numpy(), atol=1e-6
        )


def test_fit_ctr_model_epochs_are_full_batches_of_the_rows():
    df = _synthetic(250)
    specs = infer_features(df, labels=["click", "buy"])
    model = build_ctr_model(specs, ["click", "buy"], **TINY)
    counts = []

    class Count(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            counts.append(0)

        def on_train_batch_end(self, batch, logs=None):
            counts[-1] += 1

    fit_ctr_model(
        model,
        df,
        epochs=3,
        batch_size=100,
        jit_compile=False,
        steps_per_execution=1,
        callbacks=[Count()],
        verbose=0,
    )
    assert counts == [2, 2, 2]  # 250 rows: two full batches of 100 per epoch
    with pytest.raises(ValueError, match=r"250 rows, batch_size=256"):
        fit_ctr_model(model, df, batch_size=256, verbose=0)


def test_the_model_owns_its_tasks_and_the_old_spellings_warn():
    df = _synthetic(64)
    specs = infer_features(df, labels=["click", "buy"])
    tasks = [Task("click", loss_weight=0.0), Task("buy")]
    model = build_ctr_model(specs, tasks, **TINY)
    # compile_ctr_model(model) is model.compile(): the model's tasks and weights.
    compile_ctr_model(model, learning_rate=0.01)
    logs = model.evaluate(to_dataset(df, specs, tasks, 64), return_dict=True, verbose=0)
    assert logs["loss"] == pytest.approx(logs["buy_loss"], rel=1e-4)
    # A plain model (the core) has no tasks of its own: they must be given.
    _, core = split_ctr_model(model)
    with pytest.raises(ValueError, match="`tasks` must be given"):
        compile_ctr_model(core)
    # The old spellings: they warn, and the tasks given are used as before.
    with pytest.warns(DeprecationWarning, match=r"model\.compile"):
        compile_ctr_model(model, [Task("click"), Task("buy", loss_weight=0.0)])
    logs = model.evaluate(to_dataset(df, specs, tasks, 64), return_dict=True, verbose=0)
    assert logs["loss"] == pytest.approx(logs["click_loss"], rel=1e-4)
    with pytest.warns(DeprecationWarning, match="split_ctr_model"):
        split_ctr_model(model, specs)
    for call in (
        lambda: fit_ctr_model(model, specs, tasks, df, batch_size=32, verbose=0),
        lambda: fit_ctr_model(model, specs, tasks, data=df, batch_size=32, verbose=0),
        lambda: fit_ctr_model(
            model, data=df, features=specs, tasks=tasks, batch_size=32, verbose=0
        ),
    ):
        with pytest.warns(
            DeprecationWarning, match="`fit_ctr_model\\(model, \\.\\.\\.\\)`"
        ):
            history = call()
        assert len(history.history["loss"]) == 1
    # The new spelling: data alone, positional or by keyword, and no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        fit_ctr_model(model, df, batch_size=32, verbose=0)
        fit_ctr_model(model, data=df, batch_size=32, verbose=0)
    with pytest.raises(TypeError, match="options by keyword"):
        fit_ctr_model(model, specs, tasks, df, 2)
    with pytest.raises(ValueError, match="`data` must be a DataFrame"):
        fit_ctr_model(model)
