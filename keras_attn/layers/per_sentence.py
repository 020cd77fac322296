"""A sequence layer applied to every sentence of a document, mask included."""

from __future__ import annotations

from keras_attn.backend import Layer, as_bool_mask, keras, register, tf

__all__ = ["PerSentence"]


@register
class PerSentence(Layer):
    """Applies a sequence layer to every sentence of `(batch, sentences, words, dim)`.

    Folds the sentence axis into the batch, calls `layer` on
    `(batch·sentences, words, dim)` with the matching word mask, and unfolds the
    result. Unlike `TimeDistributed` it always passes the mask on, in both Keras
    generations.

    Args:
        layer: a Keras layer taking `(batch, words, dim)` and a `mask`, such as
            `Bidirectional(GRU(..., return_sequences=True))`.

    Call arguments:
        inputs: `(batch, sentences, words, dim)`.
        mask: optional boolean `(batch, sentences, words)`, True at real words.
        training: bool, passed to `layer`.

    Returns:
        `(batch, sentences, words, out_dim)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.backend import keras
    >>> gru = keras.layers.GRU(4, return_sequences=True)
    >>> PerSentence(gru)(np.ones((2, 3, 5, 8), "float32")).shape
    TensorShape([2, 3, 5, 4])
    """

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        if isinstance(layer, dict):
            layer = keras.layers.deserialize(layer)
        if not isinstance(layer, keras.layers.Layer):
            raise ValueError(
                "`layer` must be a Keras layer taking (batch, words, dim) and a mask. "
                f"Received: layer={layer!r}"
            )
        self.layer = layer
        self.supports_masking = True

    def build(self, inputs_shape):
        shape = list(inputs_shape)
        if len(shape) != 4 or shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (batch, sentences, words, dim) with a known "
                f"dim. Received: inputs.shape={tuple(shape)}"
            )
        if not self.layer.built:
            self.layer.build((None, shape[2], shape[3]))
        self.built = True

    def call(self, inputs, mask=None, training=None):
        shape = tf.shape(inputs)
        words, dim = inputs.shape[2], inputs.shape[3]
        flat = tf.reshape(inputs, [-1, shape[2], dim])
        if words is not None:
            flat = tf.ensure_shape(flat, [None, words, dim])
        flat_mask = None
        if mask is not None:
            flat_mask = tf.reshape(as_bool_mask(mask), [-1, shape[2]])
        out = self.layer(flat, mask=flat_mask, training=training)
        # (batch, sentences, words, out_dim)
        return tf.reshape(out, tf.concat([shape[:3], tf.shape(out)[2:]], axis=0))

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "layer": keras.layers.serialize(self.layer)}
