"""keras_attn.precision: the policy scope, the XLA rule, and `mixed_precision=` in the
fit helpers (CTR, text classifier, BERT pretrainer)."""

import numpy as np
import pandas as pd
import pytest

from keras_attn import precision
from keras_attn.backend import keras, tf
from keras_attn.models import build_ctr_model, ctr
from keras_attn.models.bert_pretraining import (
    build_bert_pretrainer,
    fit_bert_pretrainer,
)
from keras_attn.models.ctr import fit_ctr_model
from keras_attn.models.text import build_bert
from keras_attn.models.text_classifier import fit_text_classifier
from keras_attn.precision import (
    check_mixed_precision,
    model_policy,
    policy_scope,
    resolve_jit_compile,
)

TINY = dict(embedding_dim=4, num_experts=2, expert_units=(8,), tower_units=(4,))


def _global():
    return keras.mixed_precision.global_policy().name


def _compute_dtypes(model):
    return {
        tf.as_dtype(layer.compute_dtype).name
        for layer in model._flatten_layers(include_self=False)
    }


def test_policy_scope_sets_then_restores_even_on_error():
    assert _global() == "float32"
    with policy_scope("mixed_bfloat16"):
        assert _global() == "mixed_bfloat16"
        assert keras.layers.Dense(2).compute_dtype == "bfloat16"
    assert _global() == "float32"
    with pytest.raises(RuntimeError, match="boom"):
        with policy_scope("mixed_float16"):
            raise RuntimeError("boom")
    assert _global() == "float32"
    # A policy set before the scope (not float32) comes back too.
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with policy_scope("float32"):
            assert _global() == "float32"
        assert _global() == "mixed_float16"
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.parametrize("value", ["bfloat16", "mixed_bf16", None, 16])
def test_bad_policies_raise_naming_the_argument(value):
    with pytest.raises(ValueError, match="`mixed_precision` must be one of"):
        check_mixed_precision(value)
    with pytest.raises(ValueError, match="`mixed_precision`"):
        with policy_scope(value):
            pass
    assert _global() == "float32"


def test_bad_jit_compile_raises():
    with pytest.raises(ValueError, match="`jit_compile` must be True, False"):
        resolve_jit_compile("xla", "float32", default=True)


@pytest.mark.parametrize("accelerator", [False, True])
@pytest.mark.parametrize("bf16_units", [False, True])
def test_jit_compile_rule(monkeypatch, accelerator, bf16_units):
    monkeypatch.setattr(precision, "has_accelerator", lambda: accelerator)
    monkeypatch.setattr(precision, "cpu_has_bfloat16_units", lambda: bf16_units)
    for auto in ("auto", None):
        got = resolve_jit_compile(auto, "mixed_bfloat16", None)
        if accelerator:
            assert got is None  # the helper's default
        else:
            # CPU: oneDNN's AMX kernels beat XLA; without them XLA is least slow.
            assert got is (not bf16_units)
        assert resolve_jit_compile(auto, "float32", True) is True
        assert resolve_jit_compile(auto, "float32", None) is None
        assert resolve_jit_compile(auto, "mixed_float16", False) is False
    # An explicit choice is kept.
    assert resolve_jit_compile(True, "mixed_bfloat16", False) is True
    assert resolve_jit_compile(False, "float32", True) is False


def _auto_bf16():
    """What "auto" gives a bfloat16 model here (no XLA only with AMX on a CPU)."""
    if precision.has_accelerator():
        return None
    return not precision.cpu_has_bfloat16_units()


def _ctr_frame(n=128, seed=0):
    rng = np.random.default_rng(seed)
    city = rng.choice(["a", "b", "c"], size=n)
    return pd.DataFrame(
        {
            "city": city,
            "age": rng.normal(40, 10, size=n),
            "click": (city == "a").astype(int),
            "buy": rng.integers(0, 2, size=n),
        }
    )


def test_ctr_model_in_bfloat16_trains_with_float32_outputs(monkeypatch):
    from keras_attn.features import infer_features

    df = _ctr_frame()
    specs = infer_features(df, labels=["click", "buy"])
    tasks = ["click", "buy"]
    with pytest.raises(ValueError, match="`mixed_precision` must be one of"):
        build_ctr_model(specs, tasks, mixed_precision="bf16", **TINY)
    model = build_ctr_model(specs, tasks, mixed_precision="mixed_bfloat16", **TINY)
    assert _global() == "float32"
    assert model_policy(model) == "mixed_bfloat16"
    assert model.multitask.compute_dtype == "bfloat16"
    assert "bfloat16" in _compute_dtypes(model)
    with pytest.raises(ValueError, match="policy the model was built under"):
        fit_ctr_model(model, df, batch_size=32, mixed_precision="float32")
    compiled = []
    original = ctr._compile_for_tasks

    def spy(model, tasks, *args, **kwargs):
        compiled.append(kwargs.get("jit_compile"))
        return original(model, tasks, *args, **kwargs)

    monkeypatch.setattr(ctr, "_compile_for_tasks", spy)
    history = fit_ctr_model(model, df, batch_size=32, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    # The core's compile: "auto" by the rule (fit_ctr_model's default: XLA with an
    # accelerator only).
    expected = _auto_bf16()
    assert compiled[0] is (True if expected is None else expected)
    rows = {"city": tf.constant(["a", "zzz"]), "age": tf.constant([30.0, np.nan])}
    for name, value in model(rows).items():
        assert value.dtype == tf.float32, name  # sigmoid heads stay float32
        assert np.isfinite(value.numpy()).all()
    # A float32 model keeps float32 everywhere.
    plain = build_ctr_model(specs, tasks, **TINY)
    assert model_policy(plain) == "float32"
    assert "bfloat16" not in _compute_dtypes(plain)
    # fit_ctr_model's "auto" in float32 too: XLA only with an accelerator (on a CPU
    # every short fit of the CTR benchmarks took longer with XLA's compile).
    first = len(compiled)  # the core's compile, then the raw model's
    fit_ctr_model(plain, df, batch_size=32, verbose=0)
    assert compiled[first] is precision.has_accelerator()


@pytest.mark.slow
def test_text_classifier_in_bfloat16():
    from keras_attn.text import load_review_sample

    texts, labels = load_review_sample()
    with pytest.raises(ValueError, match="`mixed_precision` must be one of"):
        fit_text_classifier(texts[:8], labels[:8], mixed_precision="half")
    clf = fit_text_classifier(
        texts[::20],
        labels[::20],
        model="transformer",
        epochs=1,
        patience=None,
        wide=False,
        mixed_precision="mixed_bfloat16",
        hidden_dim=8,
        num_heads=2,
        intermediate_dim=16,
    )
    assert _global() == "float32"
    assert model_policy(clf.model) == "mixed_bfloat16"
    if _auto_bf16() is False:
        assert not clf.model.jit_compile
    elif _auto_bf16() is True:
        assert clf.model.jit_compile is True
    # An empty document is a fully masked row: finite float32 probabilities.
    texts = ["A wonderful, moving film.", ""]
    probs = clf.model.predict(clf.model_inputs(texts), verbose=0)["probabilities"]
    assert probs.dtype == np.float32 and np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


def test_bert_pretrainer_in_bfloat16():
    vocabulary, length = 50, 12
    with policy_scope("mixed_bfloat16"):
        bert = build_bert(
            vocabulary,
            sequence_length=length,
            hidden_dim=16,
            num_layers=1,
            num_heads=2,
            dropout=0.0,
        )
        model = build_bert_pretrainer(bert)
    assert _global() == "float32"
    assert model_policy(model) == "mixed_bfloat16"
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocabulary, size=(8, length)).astype("int32")
    x = {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "masked_positions": np.tile(np.array([[1, 3, 5]], "int32"), (8, 1)),
    }
    y = {"mlm": ids[:, [1, 3, 5]], "nsp": rng.integers(0, 2, size=8)}
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(4)
    with pytest.raises(ValueError, match="policy the model was built under"):
        fit_bert_pretrainer(model, data, mixed_precision="float32")
    history = fit_bert_pretrainer(model, data, jit_compile="auto")
    assert np.isfinite(history.history["loss"]).all()
    expected = _auto_bf16()
    assert bool(model.jit_compile) is (True if expected is None else expected)
    out = model(x)
    assert out["mlm"].dtype == tf.float32 and out["nsp"].dtype == tf.float32
    assert np.isfinite(out["mlm"].numpy()).all()
