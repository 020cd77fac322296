"""HierarchicalAttentionPooling: HAN's word attention then sentence attention."""

from __future__ import annotations

from keras_attn._validation import (
    check_choice,
    check_mask_shape,
    check_positive_int,
    check_rate,
    static_shape,
)
from keras_attn.backend import (
    Layer,
    as_bool_mask,
    clone_initializer,
    keras,
    register,
    tf,
)
from keras_attn.layers.attention import VALUE_TRANSFORMS, ContextAttentionPooling


@register
class HierarchicalAttentionPooling(Layer):
    """Word attention within each sentence, then sentence attention over a document.

    For word vectors `h_st` of sentence `s`: `s_s = Σ_t α_st h_st` with
    `α_st = softmax_t(tanh(W_w h_st + b_w)ᵀ u_w)`, then the document vector
    `v = Σ_s β_s s_s` with `β_s = softmax_s(tanh(W_s s_s + b_s)ᵀ u_s)`. Both levels
    are `ContextAttentionPooling`; all sentences are pooled in one batched op, with no
    loop over the sentence axis. An empty sentence (no real word) pools to zeros and
    is left out of the sentence attention; a document with no real sentence gives a
    zero vector. Put a sentence encoder between the levels by calling
    `word_attention` and `sentence_attention` yourself.

    Paper: "Hierarchical Attention Networks for Document Classification", Yang et
    al., NAACL 2016.

    Args:
        units: int. Width of the word-level projection and context.
        sentence_units: int. Width of the sentence-level projection and context.
            Defaults to `units`.
        dropout: float. Dropout rate on both levels' weights. Defaults to 0.0.
        kernel_initializer: initializer of the projections. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the biases. Defaults to "zeros".
        context_initializer: initializer of the contexts. Defaults to
            "glorot_uniform".
        value_transform: None, "linear" or "nonlinear". What both levels pool:
            the raw states (the paper), a square `Dense` projection of them, or its
            `tanh` (see `ContextAttentionPooling`). Defaults to None.

    Call arguments:
        inputs: `(batch, sentences, words, dim)`.
        mask: optional boolean `(batch, sentences, words)`, True at real words.
        sentence_mask: optional boolean `(batch, sentences)`, True at real sentences;
            combined with "has at least one real word" when `mask` is given.
        training: bool, whether dropout is active.
        return_attention_scores: bool. Also return both levels' weights. Defaults
            to False.

    Returns:
        `(batch, dim)`, and with `return_attention_scores=True` also the word weights
        `(batch, sentences, words)` and the sentence weights `(batch, sentences)`.

    Example:

    >>> import numpy as np
    >>> layer = HierarchicalAttentionPooling(units=16)
    >>> layer(np.ones((2, 4, 6, 8), "float32")).shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        units: int,
        sentence_units: int | None = None,
        dropout: float = 0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        context_initializer="glorot_uniform",
        value_transform: str | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_positive_int("sentence_units", sentence_units, allow_none=True)
        check_rate("dropout", dropout)
        check_choice("value_transform", value_transform, VALUE_TRANSFORMS)
        self.value_transform = value_transform
        self.units = units
        self.sentence_units = sentence_units
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.context_initializer = keras.initializers.get(context_initializer)
        self.word_attention = self._pooling(units, "word_attention")
        self.sentence_attention = self._pooling(
            sentence_units or units, "sentence_attention"
        )

    def _pooling(self, units, name):
        return ContextAttentionPooling(
            units=units,
            dropout=self.dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            context_initializer=clone_initializer(self.context_initializer),
            value_transform=self.value_transform,
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, inputs_shape):
        shape = static_shape(inputs_shape)
        if len(shape) != 4 or shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, sentences, words, dim) with a known "
                f"dim. Received: inputs.shape={tuple(shape)}"
            )
        self.word_attention.build(shape)
        self.sentence_attention.build(shape[:2] + shape[3:])
        self.built = True

    def call(
        self,
        inputs,
        mask=None,
        sentence_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        inputs = self.cast_inputs(inputs)
        mask, sentence_mask = as_bool_mask(mask), as_bool_mask(sentence_mask)
        shape = static_shape(inputs)
        check_mask_shape("mask", mask, shape[:-1], "inputs")
        check_mask_shape("sentence_mask", sentence_mask, shape[:2], "inputs")
        # (batch, sentences, dim), (batch, sentences, words)
        sentences, word_weights = self.word_attention(
            inputs, mask=mask, training=training, return_attention_scores=True
        )
        if mask is not None:
            has_words = tf.reduce_any(mask, axis=-1)
            sentence_mask = (
                has_words if sentence_mask is None else sentence_mask & has_words
            )
        # (batch, dim), (batch, sentences)
        document, sentence_weights = self.sentence_attention(
            sentences,
            mask=sentence_mask,
            training=training,
            return_attention_scores=True,
        )
        if return_attention_scores:
            return document, word_weights, sentence_weights
        return document

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = {
            "units": self.units,
            "sentence_units": self.sentence_units,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "context_initializer": keras.initializers.serialize(
                self.context_initializer
            ),
            "value_transform": self.value_transform,
        }
        return {**super().get_config(), **config}
