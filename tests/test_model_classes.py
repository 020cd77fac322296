"""The model classes keep their parts as attributes; the CTR model is composed of
parts passed as objects; `explain_model()` gives the outputs and what explains
them. (That a `.keras` file rebuilds each class with the same settings and outputs
is the first check of the model harness, in tests/test_model_harness.py.)"""

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.layers import InteractingLayer, MMoE
from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    CTRModel,
    TransformerClassifier,
)
from tests.test_model_harness import CASES, ROWS, SPECS, _ctr


def test_ctr_model_keeps_the_parts_it_was_given():
    interaction = InteractingLayer(num_heads=1, key_dim=4)
    mmoe = MMoE(["click", "buy"], num_experts=2, expert_units=[4])
    tower = keras.layers.Dense(3, activation="relu")
    model = CTRModel(
        SPECS,
        ["click", "buy"],
        interaction=interaction,
        multitask=mmoe,
        towers={"click": tower},
    )
    assert model.interaction == [interaction] and model.multitask is mmoe
    assert model.towers == {"click": tower, "buy": None}
    assert sorted(model.heads) == ["buy", "click"] and model.heads["buy"].units == 1
    assert model.sequence_tables["item"].input_dim == 4  # 3 items + 1 OOV bucket
    assert [t.name for t in model.tasks] == ["click", "buy"]
    assert sorted(model.preprocessor(ROWS)) == [
        "categorical_ids",
        "history_lookup",
        "history_mask",
        "item_lookup",
        "numeric_preprocessing",
    ]


def test_ctr_model_rejects_parts_for_other_tasks_or_features():
    with pytest.raises(ValueError, match="`multitask` must mix the experts"):
        CTRModel(SPECS, ["click", "buy"], multitask=MMoE(["click"], num_experts=2))
    with pytest.raises(ValueError, match="`towers` must be a dict"):
        CTRModel(SPECS, ["click"], towers={"buy": keras.layers.Dense(2)})
    with pytest.raises(ValueError, match="`sequence_pooling` must be a dict"):
        CTRModel(SPECS, ["click"], sequence_pooling={"item": keras.layers.Dense(2)})


#: What each model class's explain_model() adds to its outputs.
EXPLAINED = {
    "ctr": {"click_gate_weights", "buy_gate_weights", "field_attention_0"},
    "han": {"word_attention", "sentence_attention"},
    "transformer": {"cls_attention"},
    "bert_classifier": {"cls_attention"},
    "aoa": {"document_scores"},
    "aoa_dot": {"document_scores"},
    "bert_cloze_aoa": {"document_scores"},
    "bert_cloze_dot": {"document_scores"},
}


def _numpy(outputs) -> dict:
    if not isinstance(outputs, dict):
        outputs = {"output": outputs}
    return {k: np.asarray(v) for k, v in outputs.items()}


@pytest.mark.parametrize("name", sorted(EXPLAINED))
def test_explain_model_gives_the_outputs_and_the_weights_that_explain_them(name):
    _, build, inputs, _ = CASES[name]
    model = build()
    feeds = inputs()
    outputs = _numpy(model(feeds, training=False))
    explained = _numpy(model.explain_model()(feeds, training=False))
    # The same forward pass: the model's own outputs, then the weights (a text
    # classifier's probabilities: its signature adds the label from them).
    if name in ("han", "transformer", "bert_classifier"):
        outputs = {"probabilities": outputs["probabilities"]}
    assert set(explained) == set(outputs) | EXPLAINED[name]
    for key, value in outputs.items():
        np.testing.assert_allclose(explained[key], value, atol=1e-6)
    for key in EXPLAINED[name] - {"word_attention"}:
        weights = explained[key]
        # Attention rows over what is not padding sum to 1.
        sums = weights.sum(-1)
        np.testing.assert_allclose(sums[sums > 0.5], 1.0, atol=1e-5)


def test_explain_model_weights_equal_the_layers_own():
    # CTR: the interacting layer's weights on its own input in the graph.
    model = _ctr()
    explainer = model.explain_model()
    # The weights come from the model's own forward pass: no layer of its own.
    assert {layer.name for layer in explainer.layers} <= {
        layer.name for layer in model.layers
    }
    explained = explainer(ROWS)
    fields = keras.Model(model.inputs, model.interaction[0].input)(ROWS)
    _, weights = model.interaction[0](fields, return_attention_scores=True)
    np.testing.assert_allclose(explained["field_attention_0"], weights, atol=1e-6)
    gates = model.gate_weights_model()(ROWS)
    for task in ("click", "buy"):
        np.testing.assert_allclose(
            explained[f"{task}_gate_weights"], gates[task], atol=1e-6
        )
    # Transformer: the [CLS] row of the last layer's weights, as attention_weights
    # computes them eagerly; zero on padded keys.
    _, build, inputs, _ = CASES["transformer"]
    transformer, ids = build(), inputs()
    cls = np.asarray(transformer.explain_model()(ids)["cls_attention"])
    every = np.asarray(transformer.attention_weights(ids)["attention"])
    np.testing.assert_allclose(cls, every[:, -1, :, 0, :], atol=1e-6)
    assert np.all(cls[0, :, -1] == 0.0)  # the padded last token
    # AoA: the head's scores, as scores_model gives them.
    _, build, inputs, _ = CASES["aoa"]
    reader, feeds = build(), inputs()
    np.testing.assert_allclose(
        reader.explain_model()(feeds)["document_scores"],
        reader.scores_model()(feeds),
        atol=1e-6,
    )


def test_explain_model_says_what_it_needs():
    with pytest.raises(ValueError, match="pooling='cls'"):
        TransformerClassifier(30, 2, 6, hidden_dim=8, num_heads=2).explain_model()
    shared = BertBackbone(30, 6, hidden_dim=8, num_heads=2, share_layers=True)
    with pytest.raises(ValueError, match="share_layers=True"):
        BertClassifier(shared, 2).explain_model()
    plain = CTRModel(SPECS[:2], ["click"], embedding_dim=4)
    with pytest.raises(ValueError, match="nothing for an explain model"):
        plain.explain_model()


def test_a_linear_part_adds_each_fields_weight_to_the_tasks_logit(tmp_path):
    keras.utils.set_random_seed(0)
    model = CTRModel(SPECS, ["click"], embedding_dim=4, linear=True)
    # Give the linear part weights of its own to see (they start near 0).
    for w in model.linear["click"].weights:
        w.assign(np.random.default_rng(1).normal(0, 0.5, w.shape))
    out = np.asarray(model(ROWS)["click"])
    # The same model cut before the sum: the deep logit, and each field's weight.
    deep = keras.Model(model.inputs, model.heads["click"].output)(ROWS)
    encoded = model.preprocessor(ROWS)
    terms = model.linear["click"](
        encoded["categorical_ids"], encoded["numeric_preprocessing"]
    )  # (batch, fields, 1): "user" and "price" ("item" has the history's table)
    assert tuple(terms.shape) == (3, 2, 1)
    logit = np.asarray(deep) + np.asarray(terms).sum(axis=1)
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-logit)), rtol=1e-5, atol=1e-6)
    # Kept in the config and through a .keras file; without it, the config is
    # as before.
    assert model.get_config()["linear"] is True
    assert "linear" not in CTRModel(SPECS, ["click"]).get_config()
    path = str(tmp_path / "linear.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(reloaded(ROWS)["click"], out, atol=1e-6)
    with pytest.raises(ValueError, match="`linear` must be"):
        CTRModel(SPECS, ["click"], linear="yes")


def test_field_sum_is_the_sum_over_the_fields_through_the_harness():
    # The linear part's sum (a layer of keras_attn.layers since issue 29: every
    # layer a saved model holds lives there, through the layer harness).
    from keras_attn.layers import FieldSum
    from tests.harness import run_layer_test

    x = np.random.default_rng(0).normal(size=(4, 5, 2)).astype("float32")
    np.testing.assert_allclose(FieldSum()(x).numpy(), x.sum(axis=1), rtol=1e-6)
    run_layer_test(
        FieldSum, {}, {"inputs": x}, (4, 2), expected_num_trainable_weights=0
    )
    with pytest.raises(ValueError, match=r"`inputs` must have shape \(batch, fields"):
        FieldSum()(x[:, :, 0])
