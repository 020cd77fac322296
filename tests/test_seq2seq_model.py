"""Seq2Seq: character vocabularies, the model, .keras reload, and an export that
turns raw strings into raw strings in a TensorFlow-only process."""

import os
import tempfile

import numpy as np
import pytest

from keras_attn.backend import keras
from keras_attn.models import (
    SPECIAL_TOKENS,
    Seq2Seq,
    build_character_vocabulary,
    build_seq2seq,
    encode_characters,
    fit_seq2seq,
)
from keras_attn.serving import export_seq2seq
from tests.tf_only import call_in_tensorflow_only_process


def test_character_vocabulary_and_encoding():
    vocabulary = build_character_vocabulary(["héllo", "lo"], min_count=2)
    assert vocabulary == list(SPECIAL_TOKENS) + ["l", "o"]
    ids = encode_characters(["lol", "hé"], vocabulary, length=5, add_end=True)
    # l=4, o=5, unknown characters are [UNK]=1, [END]=3, padding 0.
    np.testing.assert_array_equal(ids, [[4, 5, 4, 3, 0], [1, 1, 3, 0, 0]])
    starts = encode_characters(["lo"], vocabulary, add_start=True)
    np.testing.assert_array_equal(starts, [[2, 4, 5]])
    with pytest.raises(ValueError, match="`length` must hold the longest text"):
        encode_characters(["hello"], vocabulary, length=3)


def _inputs():
    return {
        "source_ids": np.array([[4, 5, 6, 0], [7, 0, 0, 0]], "int32"),
        "decoder_input_ids": np.array([[2, 5, 4], [2, 6, 0]], "int32"),
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs",
    [
        {"encoder": "bigru", "attention": "luong", "window": 2},
        {
            "encoder": "transformer",
            "attention": "bahdanau",
            "cell": "lstm",
            "source_vocabulary": build_character_vocabulary(["abcdef"]),
            "target_vocabulary": build_character_vocabulary(["abcdefgh"]),
        },
    ],
)
def test_model_outputs_and_keras_reload(kwargs):
    model = build_seq2seq(10, 12, units=8, embedding_dim=4, **kwargs)
    assert (model.units, model.attention) == (8, kwargs["attention"])
    assert isinstance(model, Seq2Seq)
    out = model(_inputs())
    assert set(out) == {"logits"} and out["logits"].shape == (2, 3, 12)
    # A padding column more or less in the source changes nothing.
    shorter = {k: v[:, :3] if k == "source_ids" else v for k, v in _inputs().items()}
    np.testing.assert_allclose(
        model(shorter)["logits"].numpy(), out["logits"].numpy(), atol=1e-5
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seq2seq.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)
    assert isinstance(reloaded, Seq2Seq)
    assert reloaded.get_config() == model.get_config()
    # The vocabularies come back with the model (None when it had none).
    assert reloaded.source_vocabulary == kwargs.get("source_vocabulary")
    assert reloaded.target_vocabulary == kwargs.get("target_vocabulary")
    np.testing.assert_allclose(
        reloaded(_inputs())["logits"].numpy(), out["logits"].numpy(), atol=1e-5
    )
    # The parts are attributes: decoding needs no layer-name lookup.
    states, mask = reloaded.encoder(_inputs()["source_ids"])
    ids = reloaded.decoder.decode(
        states, mask, start_token=2, end_token=3, max_length=4
    )
    assert ids["token_ids"].shape == (2, 4)


def test_fit_seq2seq_rejects_unpaired_data():
    vocabulary = build_character_vocabulary(["ab"])
    # The pairs are checked before the model is touched.
    with pytest.raises(ValueError, match=r"len\(sources\)=2, len\(targets\)=1"):
        fit_seq2seq(None, ["ab", "ba"], ["ba"], vocabulary, vocabulary)


@pytest.mark.slow
def test_reversal_learned_and_served_from_raw_strings_without_keras():
    rng = np.random.default_rng(0)

    def words(n):
        return [
            "".join(rng.choice(list("abcd"), size=rng.integers(3, 5))) for _ in range(n)
        ]

    train, test = words(512), words(24)
    vocabulary = build_character_vocabulary(train)
    keras.utils.set_random_seed(0)
    model = build_seq2seq(
        source_vocabulary=vocabulary,
        target_vocabulary=vocabulary,
        units=32,
        embedding_dim=16,
    )
    history = fit_seq2seq(
        model,
        train,
        [w[::-1] for w in train],
        epochs=6,
        batch_size=32,
        learning_rate=1e-2,
    )
    assert history.history["loss"][-1] < history.history["loss"][0] / 5
    with tempfile.TemporaryDirectory() as tmp:
        path = export_seq2seq(
            model, os.path.join(tmp, "reverse"), max_length=6, beam_width=2
        )
        got = call_in_tensorflow_only_process(path, {"text": np.array(test)})
        # The old spelling, the vocabularies again: the same export, a warning.
        with pytest.warns(DeprecationWarning, match="Passing the vocabularies"):
            old = export_seq2seq(
                model, vocabulary, vocabulary, os.path.join(tmp, "old"), max_length=6
            )
        assert os.path.isdir(old)
    decoded = [t.decode() for t in got["text"]]
    accuracy = np.mean([d == w[::-1] for d, w in zip(decoded, test)])
    assert accuracy >= 0.8, list(zip(test, decoded))
    assert got["scores"].shape == (len(test),) and np.all(got["scores"] <= 0)
