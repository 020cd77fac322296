"""The layers the text and seq2seq models are made of, through the layer harness:
pooling, the predicted label, token-id masks and segments, per-sentence wrapping,
the cloze candidate sum, the wide part, the seq2seq encoder, and (in
`keras_attn.text`) the n-gram hasher. Their golden values are tested beside the
models that use them (test_text_wide*.py, test_aoa_reader.py, test_text_models.py);
here every contract of the harness."""

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.layers import (
    CandidateSum,
    NgramLinear,
    PerSentence,
    PlaceholderMask,
    PredictedLabel,
    SegmentIds,
    Seq2SeqEncoder,
    SequencePooling,
    TokenMask,
)
from keras_attn.text import HashedNgrams
from tests.harness import run_layer_test

pytestmark = pytest.mark.slow

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3, 4)).astype("float32")
MASK = np.array([[True, True, False], [False, False, False]])
IDS = np.array([[3, 1, 0, 0, 0], [4, 4, 2, 9, 0]], "int32")


@pytest.mark.parametrize("mode", ["cls", "mean", "max", "flatten"])
def test_sequence_pooling(mode):
    width = 12 if mode == "flatten" else 4
    run_layer_test(
        SequencePooling,
        {"mode": mode},
        {"inputs": X, "mask": MASK},
        (2, width),
        expected_num_trainable_weights=0,
    )


# Integer, boolean and string outputs: no mixed-precision output to check (the
# policy never reaches them) and no loss to train; XLA has no string kernels.
_NOT_FLOAT = dict(run_fit=False, run_xla=False, run_mixed_precision=False)


@pytest.mark.parametrize("class_names", [None, ["a", "b", "c"]])
def test_predicted_label(class_names):
    run_layer_test(
        PredictedLabel,
        {"class_names": class_names},
        {"inputs": RNG.normal(size=(2, 3)).astype("float32")},
        (2,),
        expected_num_trainable_weights=0,
        **_NOT_FLOAT,
    )


@pytest.mark.parametrize("reduce_last", [False, True])
def test_token_mask(reduce_last):
    run_layer_test(
        TokenMask,
        {"reduce_last": reduce_last},
        {"inputs": IDS},
        (2,) if reduce_last else (2, 5),
        expected_num_trainable_weights=0,
        **_NOT_FLOAT,
    )


def test_segment_ids():
    run_layer_test(
        SegmentIds,
        {},
        {"inputs": IDS},
        (2, 5),
        expected_num_trainable_weights=0,
        **_NOT_FLOAT,
    )


def test_placeholder_mask():
    layer = run_layer_test(
        PlaceholderMask,
        {"placeholder_id": 4},
        {"inputs": IDS},
        (2, 5),
        expected_num_trainable_weights=0,
        **_NOT_FLOAT,
    )
    assert layer(IDS).numpy().tolist() == (IDS == 4).tolist()


def test_per_sentence():
    x = RNG.normal(size=(2, 3, 4, 5)).astype("float32")
    mask = RNG.random((2, 3, 4)) < 0.7
    mask[1] = False
    # The layer as a config: made under each policy the harness runs (an instance
    # would keep the policy it was made under).
    gru = keras.layers.serialize(keras.layers.GRU(3, return_sequences=True))
    del gru["config"]["dtype"]
    run_layer_test(
        PerSentence,
        {"layer": gru},
        {"inputs": x, "mask": mask},
        (2, 3, 4, 3),
        expected_num_trainable_weights=3,
    )


def test_candidate_sum():
    run_layer_test(
        CandidateSum,
        {},
        {
            "scores": np.abs(RNG.normal(size=(2, 5))).astype("float32"),
            "document_ids": IDS,
            "candidate_ids": np.array([[3, 1, 0], [4, 9, 7]], "int32"),
        },
        (2, 3),
        expected_num_trainable_weights=0,
    )


@pytest.mark.parametrize(
    "kwargs, non_trainable",
    [
        ({}, 0),
        (
            dict(term_weighting="sublinear", idf=True, combiner="l2", use_bias=True),
            1,
        ),
        (dict(term_weighting="binary", nb_ratio=True, dropout=0.5), 1),
    ],
)
def test_ngram_linear(kwargs, non_trainable):
    run_layer_test(
        NgramLinear,
        {"units": 3, "num_buckets": 16, **kwargs},
        {"inputs": IDS},
        (2, 3),
        expected_num_trainable_weights=1 + kwargs.get("use_bias", False),
        expected_num_non_trainable_weights=non_trainable,
    )


@pytest.mark.parametrize("encoder, width", [("bigru", 8), ("transformer", 4)])
def test_seq2seq_encoder(encoder, width):
    run_layer_test(
        Seq2SeqEncoder,
        {"vocabulary_size": 10, "units": 4, "encoder": encoder},
        {"inputs": IDS},
        [(2, 5, width), (2, 5)],
    )


def test_hashed_ngrams():
    layer = run_layer_test(
        HashedNgrams,
        {"num_buckets": 50, "max_ngrams": 6},
        {"inputs": np.array(["Not bad. Good!", ""], object)},
        (2, 6),
        expected_num_trainable_weights=0,
        op_libraries=("tensorflow_text",),  # its normalizer's ops
        **_NOT_FLOAT,
    )
    # "not", "bad", ".", "not bad", "bad .", then "good": sentence by sentence.
    ids = layer(np.array(["Not bad. Good!", ""], object)).numpy()
    assert (ids[0] > 0).sum() == 6 and (ids[1] == 0).all()
    linear = NgramLinear(2, num_buckets=50, max_ngrams=6, ngram_widths=[1, 3])
    assert HashedNgrams.matching(linear).get_config()["ngram_widths"] == [1, 3]
