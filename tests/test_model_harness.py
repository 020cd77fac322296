"""Every model class of `keras_attn.models` through the model harness
(`tests.harness.run_model_test`): `.keras` round trip (same class, config and
outputs), both mixed policies close to float32, the SavedModel reloaded by
TensorFlow alone, one XLA training step; tiny sizes. Unmarked: each generation
saves, exports and compiles differently."""

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.features import CategoricalFeature, NumericFeature, SequenceFeature
from keras_attn.layers import PLE, AttentionSequencePooling, InteractingLayer
from keras_attn.models import (
    AoAReader,
    BertBackbone,
    BertClassifier,
    BertClozeReader,
    BertPretrainer,
    CTRModel,
    HANClassifier,
    HistoryEncoder,
    ItemEncoder,
    Seq2Seq,
    SequentialRetrieval,
    TransformerClassifier,
    split_ctr_model,
)
from keras_attn.models.base import output_tensors
from tests.harness import run_model_test

SPECS = [
    CategoricalFeature("item", vocabulary=["i1", "i2", "i3"]),
    CategoricalFeature("user", vocabulary=["u1", "u2"]),
    NumericFeature("price", mean=1.0, std=2.0),
    SequenceFeature("history", shares="item", max_len=3),
]
ROWS = {
    "item": np.array(["i1", "i3", "nope"]),
    "user": np.array(["u1", "u2", "u1"]),
    "price": np.array([1.0, np.nan, 3.0], "float32"),
    "history": np.array(["i1|i2", "", "i3|i3|i1|i2"]),
}


def _ids(shape, vocabulary=30, seed=0):
    ids = np.random.default_rng(seed).integers(1, vocabulary, size=shape)
    ids[0, ..., -1] = 0  # some padding
    return ids.astype("int32")


def _ctr(**kwargs):
    return CTRModel(
        SPECS,
        ["click", "buy"],
        embedding_dim=4,
        interaction=[InteractingLayer(num_heads=1, key_dim=4, name="interacting")],
        sequence_pooling={"history": AttentionSequencePooling(hidden_units=(4,))},
        multitask=PLE(["click", "buy"], expert_units=[4], num_levels=1),
        towers={"buy": keras.Sequential([keras.layers.Dense(3, activation="relu")])},
        embeddings_initializer=keras.initializers.RandomUniform(-0.5, 0.5),
        **kwargs,
    )


def _ctr_core(model, rows):
    # The lookups of raw strings have no XLA kernel: the XLA step trains the
    # numeric core (it shares the model's weights) on the encoded rows.
    preprocessor, core = split_ctr_model(model)
    return core, {k: np.asarray(v) for k, v in preprocessor(rows).items()}


def _probabilities(model, inputs):
    # The `label` output gathers class-name strings, which XLA cannot compile: the
    # XLA step trains the numeric part (the same weights), up to the probabilities.
    probabilities = output_tensors(model)["probabilities"]
    return keras.Model(model.input, probabilities), inputs


def _bert():
    return BertBackbone(30, sequence_length=6, hidden_dim=8, num_layers=2, num_heads=2)


def _pairs(n=2):
    ids = _ids((n, 6))
    return {"token_ids": ids, "segment_ids": (ids > 10).astype("int32")}


def _history_encoder(pooling="last"):
    return HistoryEncoder(
        20, history_length=5, embedding_dim=8, num_layers=1, pooling=pooling
    )


def _item_encoder():
    genres = np.eye(21, 3, k=-1) + np.eye(21, 3, k=-4)  # (num_items + 1, genres)
    return ItemEncoder(20, num_genres=3, embedding_dim=8, item_genres=genres)


HISTORIES = np.array(
    [[0, 0, 3, 7, 9], [0, 0, 0, 0, 0], [1, 2, 3, 4, 5], [0, 0, 0, 6, 6]], "int32"
)


def _case(cls, build, inputs, **arguments):
    return cls, build, inputs, arguments


def _pretraining_inputs():
    return {**_pairs(), "masked_positions": np.array([[1, 2], [3, 0]], "int32")}


#: name -> (model class, build, inputs, further arguments of run_model_test)
CASES = {
    "ctr": _case(CTRModel, lambda: _ctr(linear=True), lambda: ROWS, xla_part=_ctr_core),
    "han": _case(
        HANClassifier,
        lambda: HANClassifier(
            30,
            2,
            embedding_dim=8,
            units=4,
            attention_units=8,
            class_names=["neg", "pos"],
            wide={"num_buckets": 16, "max_ngrams": 5},
        ),
        lambda: {"token_ids": _ids((2, 3, 4)), "ngram_ids": _ids((2, 5), 17)},
        xla_part=_probabilities,
    ),
    "transformer": _case(
        TransformerClassifier,
        lambda: TransformerClassifier(
            30,
            3,
            6,
            hidden_dim=8,
            num_heads=2,
            intermediate_dim=16,
            embedding_dim=4,
            positions="learned",
            pooling="cls",
        ),
        lambda: _ids((2, 6)),
    ),
    "bert": _case(BertBackbone, _bert, _pairs),
    "bert_classifier": _case(
        BertClassifier, lambda: BertClassifier(_bert(), 2, dropout=0.0), _pairs
    ),
    # A subclassed model: exported with its serving_input_signature (int32 inputs
    # by name; Keras 3 signed it float32 `args_0`, ... from its build shapes).
    "bert_pretrainer": _case(
        BertPretrainer, lambda: BertPretrainer(_bert()), _pretraining_inputs
    ),
    "aoa": _case(
        AoAReader,
        lambda: AoAReader(30, embedding_dim=8, units=4),
        lambda: {
            "document_ids": _ids((2, 7)),
            "query_ids": _ids((2, 3), seed=1),
            "candidate_ids": _ids((2, 4), seed=2),
        },
    ),
    "aoa_dot": _case(
        AoAReader,
        lambda: AoAReader(30, embedding_dim=8, units=4, head="dot", placeholder_id=3),
        lambda: {
            "document_ids": _ids((2, 7)),
            "query_ids": np.array([[3, 5, 3], [7, 3, 0]], "int32"),
            "candidate_ids": _ids((2, 4), seed=2),
        },
    ),
    **{
        f"bert_cloze_{head}": _case(
            BertClozeReader,
            lambda head=head: BertClozeReader(_bert(), head=head),
            lambda: {
                "document_ids": _ids((2, 6)),
                "query_ids": np.array(
                    [[2, 5, 9, 0, 0, 0], [4, 2, 0, 0, 0, 0]], "int32"
                ),
                "candidate_ids": _ids((2, 3), seed=2),
            },
        )
        for head in ("aoa", "dot")
    },
    **{
        f"seq2seq_{encoder}_{attention}": _case(
            Seq2Seq,
            lambda encoder=encoder, attention=attention: Seq2Seq(
                12, 14, encoder=encoder, attention=attention, units=8, embedding_dim=4
            ),
            lambda: {
                "source_ids": _ids((2, 5), 12),
                "decoder_input_ids": _ids((2, 4), 14, seed=1),
            },
        )
        for encoder, attention in [("bigru", "luong"), ("transformer", "bahdanau")]
    },
    # "last" pooling: the query tower of the next case.
    "history_encoder": _case(
        HistoryEncoder,
        lambda: _history_encoder("attention"),
        lambda: {"history": HISTORIES},
    ),
    "item_encoder": _case(
        ItemEncoder, _item_encoder, lambda: {"item": np.array([1, 5, 20, 3], "int32")}
    ),
    "sequential_retrieval": _case(
        SequentialRetrieval,
        lambda: SequentialRetrieval(_history_encoder(), _item_encoder()),
        lambda: {"history": HISTORIES},
        # Its own train_step: the retrieval task's loss on (history, next item).
        train_inputs={"history": HISTORIES, "item": np.array([10, 2, 6, 7], "int32")},
    ),
}

#: Cases that fail, and why: each is a finding to fix (strict: a fix must remove
#: the entry). Name -> (condition, reason).
XFAIL = {}


def _params():
    for name in sorted(CASES):
        condition, reason = XFAIL.get(name, (False, ""))
        marks = [pytest.mark.xfail(condition, reason=reason, strict=True)]
        yield pytest.param(name, marks=marks if condition else [], id=name)


@pytest.mark.slow
@pytest.mark.parametrize("name", _params())
def test_model_harness(name):
    cls, build, inputs, arguments = CASES[name]
    model = run_model_test(build, inputs(), **arguments)
    assert type(model) is cls


def test_every_model_class_has_a_case():
    import keras_attn.models as models

    classes = {
        name
        for name in models.__all__
        if isinstance(getattr(models, name), type)
        and issubclass(getattr(models, name), keras.Model)
    }
    covered = {cls.__name__ for cls, _, _, _ in CASES.values()}
    assert classes - covered == set(), "model classes without a harness case"
