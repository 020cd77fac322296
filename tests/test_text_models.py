"""HAN and Transformer document classifiers (keras_attn.models.text)."""

import os

import numpy as np
import pytest

from keras_attn.backend import keras, tf
from keras_attn.models.text import (
    build_han_classifier,
    build_transformer_classifier,
    compile_text_classifier,
    han_attention_model,
)

pytestmark = pytest.mark.generation_neutral

SMALL_HAN = {"embedding_dim": 8, "units": 4, "attention_units": 6}
SMALL_TRANSFORMER = {"hidden_dim": 8, "num_heads": 2, "intermediate_dim": 16}


def _ids(shape, seed=0, vocab=30):
    ids = np.random.default_rng(seed).integers(1, vocab, size=shape).astype("int32")
    return ids


@pytest.mark.parametrize("word_encoder", ["gru", "transformer"])
def test_han_outputs_and_padding_invariance(word_encoder):
    model = build_han_classifier(30, 3, word_encoder=word_encoder, **SMALL_HAN)
    ids = _ids((2, 3, 4))
    ids[0, 2] = 0  # an empty sentence
    ids[1, 1, 2:] = 0  # a short one
    out = model(ids)
    assert set(out) == {"probabilities", "label"}
    probs = out["probabilities"].numpy()
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["label"].numpy(), probs.argmax(-1))
    # More padding (words and sentences) changes nothing: the masks are honoured.
    padded = np.zeros((2, 5, 7), "int32")
    padded[:, :3, :4] = ids
    np.testing.assert_allclose(model(padded)["probabilities"], probs, atol=1e-5)


def test_han_attention_weights():
    model = build_han_classifier(30, 2, **SMALL_HAN)
    ids = _ids((2, 3, 4))
    ids[0, 1] = 0
    ids[1, 0, 1:] = 0
    out = han_attention_model(model)(ids)
    words, sentences = out["word_attention"].numpy(), out["sentence_attention"].numpy()
    assert words.shape == (2, 3, 4) and sentences.shape == (2, 3)
    np.testing.assert_allclose(words.sum(-1), [[1, 0, 1], [1, 1, 1]], atol=1e-5)
    assert words[1, 0, 1:].max() == 0.0
    np.testing.assert_allclose(sentences.sum(-1), 1.0, atol=1e-5)
    assert sentences[0, 1] == 0.0
    np.testing.assert_allclose(
        out["probabilities"], model(ids)["probabilities"], atol=1e-6
    )


@pytest.mark.generation_specific
@pytest.mark.slow
def test_han_trains_and_reloads(tmp_path):
    model = compile_text_classifier(
        build_han_classifier(30, 2, dropout=0.0, embedding_dropout=0.0, **SMALL_HAN),
        learning_rate=1e-2,
    )
    x = _ids((16, 2, 3))
    y = (x[:, 0, 0] > 15).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices((x, {"probabilities": y, "label": y}))
    history = model.fit(ds.batch(8), epochs=8, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    path = os.path.join(tmp_path, "han.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded(x)["probabilities"], model(x)["probabilities"], atol=1e-6
    )


@pytest.mark.parametrize("pooling", ["cls", "mean", "attention", "layer_mean"])
def test_transformer_poolings(pooling):
    model = build_transformer_classifier(
        30, 2, sequence_length=6, pooling=pooling, **SMALL_TRANSFORMER
    )
    ids = _ids((3, 6))
    ids[:, 4:] = 0
    out = model(ids)
    assert out["probabilities"].shape == (3, 2)
    np.testing.assert_allclose(out["probabilities"].numpy().sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "attention"])
def test_transformer_padding_length_invariance(pooling):
    # Sinusoidal positions have no table: the same weights serve any length.
    short = build_transformer_classifier(
        30, 2, sequence_length=5, pooling=pooling, **SMALL_TRANSFORMER
    )
    long = build_transformer_classifier(
        30, 2, sequence_length=9, pooling=pooling, **SMALL_TRANSFORMER
    )
    long.set_weights(short.get_weights())
    ids = _ids((2, 5))
    ids[1, 3:] = 0
    padded = np.zeros((2, 9), "int32")
    padded[:, :5] = ids
    np.testing.assert_allclose(
        long(padded)["probabilities"], short(ids)["probabilities"], atol=1e-5
    )


@pytest.mark.parametrize(
    "kwargs", [{"num_layers": 2}, {"num_layers": 3, "share_layers": True}]
)
def test_transformer_attention_weights(kwargs):
    model = build_transformer_classifier(
        30, 2, sequence_length=6, pooling="attention", **SMALL_TRANSFORMER, **kwargs
    )
    ids = _ids((2, 6))
    ids[1, 4:] = 0
    out = model.attention_weights(ids)
    np.testing.assert_allclose(
        out["probabilities"], model(ids)["probabilities"], atol=1e-6
    )
    weights = out["attention"].numpy()
    assert weights.shape == (2, kwargs["num_layers"], 2, 6, 6)
    # Rows are distributions over the real tokens; padded keys get nothing.
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(weights[1, ..., 4:], 0.0)
    # Layer 0's weights are the first block's own, run on the embeddings.
    x = model.embeddings_norm(
        model.embeddings_add(
            [
                model.token_embedding(ids),
                model.position_embedding(model.token_embedding(ids)),
            ]
        )
    )
    _, first = model.transformer_layers[0](
        x, padding_mask=ids > 0, return_attention_scores=True
    )
    np.testing.assert_allclose(weights[:, 0], first.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match=r"`inputs` must be.*\(batch, 6\).*\(2, 5\)"):
        model.attention_weights(ids[:, :5])


def test_transformer_sharing_and_factorized_embedding():
    kwargs = dict(SMALL_TRANSFORMER, num_layers=3, positions="learned")
    unshared = build_transformer_classifier(100, 2, sequence_length=6, **kwargs)
    shared = build_transformer_classifier(
        100, 2, sequence_length=6, share_layers=True, **kwargs
    )
    block = unshared.transformer_layers[0].count_params()
    assert unshared.count_params() - shared.count_params() == 2 * block
    factorized = build_transformer_classifier(
        100, 2, sequence_length=6, embedding_dim=4, **kwargs
    )
    plain_table = 100 * 8
    factor_table = 100 * 4 + 4 * 8 + 8
    assert unshared.count_params() - factorized.count_params() == (
        plain_table - factor_table
    )
    assert factorized(_ids((2, 6)))["probabilities"].shape == (2, 2)


@pytest.mark.generation_specific
@pytest.mark.slow
def test_transformer_trains_and_reloads(tmp_path):
    model = compile_text_classifier(
        build_transformer_classifier(
            30, 2, sequence_length=4, dropout=0.0, **SMALL_TRANSFORMER
        ),
        learning_rate=1e-2,
    )
    x = _ids((16, 4))
    y = (x[:, 0] > 15).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices((x, {"probabilities": y, "label": y}))
    losses = model.fit(ds.batch(8), epochs=8, verbose=0).history["loss"]
    assert losses[-1] < losses[0]
    path = os.path.join(tmp_path, "transformer.keras")
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        reloaded(x)["probabilities"], model(x)["probabilities"], atol=1e-6
    )


def test_validation_errors():
    with pytest.raises(ValueError, match="word_encoder"):
        build_han_classifier(10, 2, word_encoder="lstm")
    with pytest.raises(ValueError, match="num_classes"):
        build_han_classifier(10, 1)
    with pytest.raises(ValueError, match="class_names"):
        build_han_classifier(10, 2, class_names=["a"])
    with pytest.raises(ValueError, match="pooling"):
        build_transformer_classifier(10, 2, 4, pooling="sum")
    with pytest.raises(ValueError, match="num_heads"):
        build_transformer_classifier(10, 2, 4, hidden_dim=10, num_heads=4)
    with pytest.raises(ValueError, match="dropout"):
        build_transformer_classifier(10, 2, 4, dropout=1.5)


def test_widths_must_divide_into_heads():
    from keras_attn.models.text import build_bert

    with pytest.raises(ValueError, match=r"`hidden_dim` .*hidden_dim=10, num_heads=4"):
        build_transformer_classifier(30, 2, 8, hidden_dim=10, num_heads=4)
    with pytest.raises(ValueError, match=r"`hidden_dim` .*hidden_dim=10, num_heads=4"):
        build_bert(30, sequence_length=8, hidden_dim=10, num_heads=4)
    with pytest.raises(ValueError, match=r"`embedding_dim` .*embedding_dim=9"):
        build_han_classifier(
            30, 2, 3, 4, embedding_dim=9, word_encoder="transformer", num_heads=2
        )
    # A GRU word encoder has no heads: any width is fine.
    build_han_classifier(30, 2, 3, 4, embedding_dim=9, units=4, attention_units=6)


def test_text_classifier_predict_traces_once_for_any_number_of_texts():
    from keras_attn.models import TextClassifier, build_transformer_classifier
    from keras_attn.models import text_classifier as module
    from keras_attn.text import Tokenizer

    model = build_transformer_classifier(
        30522, 2, sequence_length=8, class_names=["neg", "pos"], **SMALL_TRANSFORMER
    )
    tokenizer = Tokenizer("bert-base-uncased", sequence_length=8)
    classifier = TextClassifier(model, tokenizer, ["neg", "pos"])
    texts = ["good film", "bad", "", "a longer text than the others, cut at 8"]
    serving = classifier.serving_model()
    labels = serving({"text": tf.constant(texts)})["label"].numpy()
    expected = [v.decode() for v in labels]
    assert classifier.predict(texts) == expected
    assert classifier.predict(texts[:1]) == expected[:1]
    # More texts than one call takes: in batches, in order, the same function.
    module.PREDICT_BATCH, batch = 3, module.PREDICT_BATCH
    try:
        assert classifier.predict(texts * 2) == expected * 2
    finally:
        module.PREDICT_BATCH = batch
    assert classifier._labels_fn[1].experimental_get_tracing_count() == 1
