"""The Hierarchical Attention Network document classifier (Yang et al., NAACL 2016)."""

from __future__ import annotations

from keras_attn._validation import (
    check_choice,
    check_divisible,
    check_int,
    check_positive_int,
    check_rate,
)
from keras_attn.backend import keras, register
from keras_attn.layers.attention import VALUE_TRANSFORMS, ContextAttentionPooling
from keras_attn.layers.per_sentence import PerSentence
from keras_attn.layers.position import SinusoidalPositionEncoding
from keras_attn.layers.token_ids import TokenMask
from keras_attn.layers.transformer import TransformerEncoderBlock
from keras_attn.models.base import FunctionalModel, Parts, arguments_of
from keras_attn.models.classifier_head import (
    CLASSIFIER_SETTINGS,
    apply_head,
    classifier_inputs,
    head_layers,
    head_outputs,
)

__all__ = [
    "WORD_ENCODERS",
    "HANClassifier",
    "build_han_classifier",
    "han_attention_model",
]

WORD_ENCODERS = ("gru", "transformer")


def _encode(han, ids):
    """Runs HAN's encoders (attributes of `han`) on `ids`.

    Masks are passed explicitly (not through Keras mask propagation), so both Keras
    generations see the same graph. Returns the document vector (after dropout) and
    both levels of attention weights.
    """
    word_mask = han.word_mask(ids)  # (batch, sentences, words)
    sentence_mask = han.sentence_mask(ids)  # (batch, sentences)
    x = han.token_embedding(ids)  # (batch, sentences, words, embedding_dim)
    x = han.embedding_dropout(x)
    if han.word_positions is not None:
        x = han.word_position_add([x, han.word_positions(x)])
    x = han.word_encoder(x, mask=word_mask)  # (batch, sentences, words, dim)
    sentences, word_weights = han.word_attention(
        x, mask=word_mask, return_attention_scores=True
    )
    sentences = han.sentence_encoder(sentences, mask=sentence_mask)
    document, sentence_weights = han.sentence_attention(
        sentences, mask=sentence_mask, return_attention_scores=True
    )
    return han.document_dropout(document), word_weights, sentence_weights


@register
class HANClassifier(FunctionalModel):
    """Hierarchical Attention Network for document classification.

    ids `(batch, sentences, words)` -> word embeddings -> word encoder (bidirectional
    GRU of `units` per direction, as in the paper, or a `TransformerEncoderBlock` with
    sinusoidal positions) -> word attention (a learned context vector) -> sentence
    vectors -> bidirectional GRU sentence encoder -> sentence attention -> document
    vector -> softmax. Id 0 is padding: padded words and empty sentences are masked
    everywhere. `explain_model()` gives both levels of attention weights.

    The parts are attributes: `token_embedding`, `word_encoder` (the encoder applied
    to every sentence), `word_attention`, `sentence_encoder`, `sentence_attention`,
    and the head's `output_dense`, `wide`, `predicted_label`. `get_config` returns
    the constructor's arguments, so a `.keras` file reloads the class.

    Paper: "Hierarchical Attention Networks for Document Classification", Yang et
    al., NAACL 2016.

    Args:
        vocabulary_size: int. Number of token ids (id 0 is padding).
        num_classes: int. Number of classes.
        max_sentences: int. Static sentence axis, or None. Defaults to None.
        max_words: int. Static word axis, or None. Defaults to None.
        embedding_dim: int. Width of the word embeddings. Defaults to 100.
        units: int. GRU units per direction. Defaults to 50.
        attention_units: int. Width of both attention projections. Defaults to 100.
        value_transform: None, "linear" or "nonlinear". What both attention levels
            pool: the encoder states (the paper), a square `Dense` projection of
            them, or its `tanh` (see `ContextAttentionPooling`). Defaults to None.
        word_encoder: str. "gru" or "transformer". Defaults to "gru".
        num_heads: int. Heads of the Transformer word encoder. Defaults to 2.
        intermediate_dim: int. Its feed-forward width. Defaults to 2·embedding_dim.
        dropout: float. Dropout on the document vector (and inside the Transformer
            block). Defaults to 0.5.
        embedding_dropout: float. Dropout on the word embeddings. Defaults to 0.25.
        class_names: optional list of str: the `label` output gives names, not ids.
        wide: bool or dict. Adds a wide part: an `NgramLinear` over hashed word
            n-grams (second input `ngram_ids`, from `HashedNgrams`) whose logits are
            added to HAN's before the softmax (wide-and-deep). True uses its
            defaults; a dict gives `NgramLinear` arguments. Defaults to False.
        name: str. Model name. Defaults to "han_classifier".

    Call arguments:
        inputs: int ids `(batch, sentences, words)`; with `wide`,
            `{"token_ids", "ngram_ids": (batch, max_ngrams)}`.

    Returns:
        `{"probabilities": (batch, num_classes), "label": (batch,)}`.

    Example:

    >>> import numpy as np
    >>> model = HANClassifier(50, 2, embedding_dim=8, units=4, attention_units=8)
    >>> out = model(np.ones((3, 4, 5), "int32"))
    >>> out["probabilities"].shape, out["label"].shape
    (TensorShape([3, 2]), TensorShape([3]))
    >>> model.word_attention.units
    8
    """

    def __init__(
        self,
        vocabulary_size: int,
        num_classes: int,
        max_sentences: int | None = None,
        max_words: int | None = None,
        embedding_dim: int = 100,
        units: int = 50,
        attention_units: int = 100,
        value_transform: str | None = None,
        word_encoder: str = "gru",
        num_heads: int = 2,
        intermediate_dim: int | None = None,
        dropout: float = 0.5,
        embedding_dropout: float = 0.25,
        class_names: list[str] | None = None,
        wide: bool | dict = False,
        name: str = "han_classifier",
        **kwargs,
    ):
        arguments = arguments_of(locals())
        for arg in ("vocabulary_size", "embedding_dim", "units", "attention_units"):
            check_positive_int(arg, locals()[arg])
        check_positive_int("num_heads", num_heads)
        check_positive_int("max_sentences", max_sentences, allow_none=True)
        check_positive_int("max_words", max_words, allow_none=True)
        check_positive_int("intermediate_dim", intermediate_dim, allow_none=True)
        check_int("num_classes", num_classes, minimum=2)
        check_choice("word_encoder", word_encoder, WORD_ENCODERS)
        check_choice("value_transform", value_transform, VALUE_TRANSFORMS)
        check_rate("dropout", dropout)
        check_rate("embedding_dropout", embedding_dropout)
        if word_encoder == "transformer":
            check_divisible("embedding_dim", embedding_dim, "num_heads", num_heads)

        # Layers
        if word_encoder == "gru":
            inner = keras.layers.Bidirectional(
                keras.layers.GRU(units, return_sequences=True), name="word_gru"
            )
            positions = add_positions = None
        else:
            inner = TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim or 2 * embedding_dim,
                dropout=dropout,
                name="word_transformer",
            )
            positions = SinusoidalPositionEncoding(name="word_positions")
            add_positions = keras.layers.Add(name="word_position_add")
        parts = Parts(
            word_mask=TokenMask(name="word_mask"),
            sentence_mask=TokenMask(reduce_last=True, name="sentence_mask"),
            token_embedding=keras.layers.Embedding(
                vocabulary_size, embedding_dim, name="embedding"
            ),
            embedding_dropout=keras.layers.Dropout(
                embedding_dropout, name="embedding_dropout"
            ),
            word_positions=positions,
            word_position_add=add_positions,
            word_encoder=PerSentence(inner, name="word_encoder"),
            word_attention=ContextAttentionPooling(
                attention_units,
                value_transform=value_transform,
                name="word_attention",
            ),
            sentence_encoder=keras.layers.Bidirectional(
                keras.layers.GRU(units, return_sequences=True),
                name="sentence_encoder",
            ),
            sentence_attention=ContextAttentionPooling(
                attention_units,
                value_transform=value_transform,
                name="sentence_attention",
            ),
            document_dropout=keras.layers.Dropout(dropout, name="document_dropout"),
            **head_layers(num_classes, class_names, wide),
        )

        # Graph
        inputs, ids, ngram_ids = classifier_inputs(
            (max_sentences, max_words), parts.wide
        )
        document = _encode(parts, ids)[0]
        outputs = head_outputs(parts, document, ngram_ids)
        self._init_functional(
            inputs, outputs, parts, arguments, name, CLASSIFIER_SETTINGS, **kwargs
        )

    @property
    def token_shape(self) -> tuple:
        """The shape of one document's token ids: `(max_sentences, max_words)`."""
        return (self._arguments["max_sentences"], self._arguments["max_words"])

    def pooled_features(self, ids):
        """The document vectors `(batch, 2·units)` (after dropout) that the head
        takes, from token ids; on symbolic or eager tensors."""
        return _encode(self, ids)[0]

    def explain_model(self):
        """A model (sharing the weights) from the same inputs to
        `{"probabilities", "word_attention": (batch, sentences, words),
        "sentence_attention": (batch, sentences)}`: what the export's `explain`
        signature returns, and what to plot."""
        return self.attention_model()

    def attention_model(self):
        """`explain_model()` (its first name)."""
        inputs, ids, ngram_ids = classifier_inputs(self.token_shape, self.wide)
        document, words, sentences = _encode(self, ids)
        outputs = {
            "probabilities": apply_head(self, document, ngram_ids),
            "word_attention": words,
            "sentence_attention": sentences,
        }
        return keras.Model(inputs, outputs, name=f"{self.name}_attention")


def build_han_classifier(*args, **kwargs) -> HANClassifier:
    """`build_han_classifier(...)` is `HANClassifier(...)`: the same arguments.

    Example:

    >>> han = build_han_classifier(50, 2, embedding_dim=8, units=4, attention_units=8)
    >>> type(han).__name__, han.get_config()["units"]
    ('HANClassifier', 4)
    """
    return HANClassifier(*args, **kwargs)


def han_attention_model(model):
    """A model giving a HAN classifier's attention weights for plotting.

    Args:
        model: a `HANClassifier` (trained or not).

    Returns:
        A `keras.Model` (sharing the weights) from the same inputs (`token_ids`, and
        `ngram_ids` with a wide part) to `{"probabilities", "word_attention":
        (batch, sentences, words), "sentence_attention": (batch, sentences)}`.

    Example:

    >>> import numpy as np
    >>> han = build_han_classifier(50, 2, embedding_dim=8, units=4, attention_units=8)
    >>> weights = han_attention_model(han)(np.ones((1, 3, 4), "int32"))
    >>> weights["word_attention"].shape, weights["sentence_attention"].shape
    (TensorShape([1, 3, 4]), TensorShape([1, 3]))
    """
    if not isinstance(model, HANClassifier):
        raise ValueError(
            "`model` must be a HANClassifier (from `build_han_classifier`). "
            f"Received: model={type(model).__name__}"
        )
    return model.attention_model()
