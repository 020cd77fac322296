"""The TPU path, kept honest without a TPU: each model's training step compiles
with XLA (`jit_compile=True`) at static shapes under `mixed_bfloat16`, with several
steps per execution, on batches that hold numbers only.

XLA has no string kernels, so a lookup or tokenizer left inside a step fails the
compile; `check_static_input` refuses a string or an unknown dimension first.
"""

import numpy as np
import pandas as pd
import pytest

from keras_attn.backend import keras, tf
from keras_attn.training import check_static_input

BATCH, STEPS = 8, 2


def _train(model, ds):
    check_static_input(ds)
    history = model.fit(ds, epochs=2, steps_per_epoch=STEPS, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and np.isfinite(losses).all(), losses
    return history


@pytest.fixture
def bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy("float32")


def _ids_dataset(x, y):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return ds.batch(BATCH, drop_remainder=True)


def test_check_static_input_refuses_strings_and_ragged_batches():
    with pytest.raises(ValueError, match=r"fixed shapes.*string"):
        check_static_input(tf.data.Dataset.from_tensors(tf.constant(["a"])))
    with pytest.raises(ValueError, match=r"Received element specs: \['int64\(None,\)'"):
        check_static_input(tf.data.Dataset.range(5).batch(2))


@pytest.mark.slow
def test_ctr_core_step_compiles(bfloat16):
    from keras_attn.features import SequenceFeature, infer_features, to_dataset
    from keras_attn.models import build_ctr_model, compile_ctr_model, split_ctr_model

    rng = np.random.default_rng(0)
    n = 32
    df = pd.DataFrame(
        {
            "item": rng.choice(["i1", "i2", "i3"], n),
            "city": rng.choice(["a", "b"], n),
            "age": rng.normal(40, 10, n),
            "click": rng.integers(0, 2, n),
            "buy": rng.integers(0, 2, n),
        }
    )
    specs = infer_features(df, labels=["click", "buy"])
    specs.append(SequenceFeature("hist", shares="item", max_len=3))
    df["hist"] = ["i1|i2", "", "i3|i3|i1|i2"] * 10 + ["i1", "i2"]
    model = build_ctr_model(
        specs,
        ["click", "buy"],
        num_experts=2,
        expert_units=(8,),
        gate="attention",
        din_hidden_units=(8,),
        interacting_layers=1,
    )
    preprocessor, core = split_ctr_model(model)
    ds = to_dataset(
        df,
        specs,
        ["click", "buy"],
        batch_size=BATCH,
        num_epochs=None,
        drop_remainder=True,
        preprocessor=preprocessor,
    )
    compile_ctr_model(
        core, ["click", "buy"], jit_compile=True, steps_per_execution=STEPS
    )
    _train(core, ds)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["han", "transformer", "bert"])
def test_text_classifier_step_compiles(bfloat16, kind):
    from keras_attn.models import (
        build_bert,
        build_bert_classifier,
        build_han_classifier,
        build_transformer_classifier,
        compile_text_classifier,
    )

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 4 * BATCH).astype("int32")
    y = {"probabilities": labels, "label": labels}  # "label" has no loss
    if kind == "han":
        model = build_han_classifier(
            30, 2, 3, 5, embedding_dim=8, units=4, attention_units=4
        )
        x = rng.integers(0, 30, (4 * BATCH, 3, 5)).astype("int32")
    elif kind == "transformer":
        model = build_transformer_classifier(
            30, 2, 6, hidden_dim=8, num_layers=1, num_heads=2
        )
        x = rng.integers(0, 30, (4 * BATCH, 6)).astype("int32")
    else:
        bert = build_bert(
            30, sequence_length=6, hidden_dim=8, num_layers=1, num_heads=2
        )
        model = build_bert_classifier(bert, 2)
        ids = rng.integers(1, 30, (4 * BATCH, 6)).astype("int32")
        x = {"token_ids": ids, "segment_ids": np.zeros_like(ids)}
    compile_text_classifier(model, jit_compile=True, steps_per_execution=STEPS)
    _train(model, _ids_dataset(x, y))


@pytest.mark.slow
def test_bert_pretrainer_step_compiles(bfloat16):
    from keras_attn.models import build_bert, build_bert_pretrainer
    from keras_attn.models.bert_pretraining import compile_bert_pretrainer

    rng = np.random.default_rng(2)
    n = 4 * BATCH
    ids = rng.integers(1, 30, (n, 6)).astype("int32")
    x = {
        "token_ids": ids,
        "segment_ids": np.zeros_like(ids),
        "masked_positions": rng.integers(0, 6, (n, 2)).astype("int32"),
    }
    y = {
        "mlm": rng.integers(0, 30, (n, 2)).astype("int32"),
        "nsp": rng.integers(0, 2, n).astype("int32"),
    }
    model = build_bert_pretrainer(
        build_bert(30, sequence_length=6, hidden_dim=8, num_layers=1, num_heads=2)
    )
    compile_bert_pretrainer(model, jit_compile=True, steps_per_execution=STEPS)
    _train(model, _ids_dataset(x, y))
