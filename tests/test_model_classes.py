"""The model classes keep their parts as attributes; the CTR model is composed of
parts passed as objects. (That a `.keras` file rebuilds each class with the same
settings and outputs is the first check of the model harness, in
tests/test_model_harness.py.)"""

import pytest

from keras_attn.backend import keras
from keras_attn.layers import InteractingLayer, MMoE
from keras_attn.models import CTRModel
from tests.test_model_harness import ROWS, SPECS


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
