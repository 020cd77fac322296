"""Token embeddings: FactorizedEmbedding (ALBERT's V -> E -> H factorization)."""

from __future__ import annotations

from keras_attn._validation import check_bool, check_ids, check_positive_int
from keras_attn.backend import (
    Layer,
    clone_initializer,
    keras,
    mask_nonzero,
    register,
    tf,
)


@register
class FactorizedEmbedding(Layer):
    """Factorized token embedding: a `V × E` table, then an `E × H` projection.

    `output = E[ids] W + b` with `E` of shape `(vocabulary_size, embedding_dim)` and
    `W` of shape `(embedding_dim, hidden_dim)`. With `embedding_dim` much smaller than
    `hidden_dim` the parameters drop from `V·H` to `V·E + E·H` (ALBERT's first
    parameter reduction).

    Paper: "ALBERT: A Lite BERT for Self-supervised Learning of Language
    Representations", Lan et al., ICLR 2020.

    Args:
        vocabulary_size: int. Number of token ids `V`.
        embedding_dim: int. Width of the table `E`.
        hidden_dim: int. Width of the output `H`.
        use_bias: bool. Whether the projection adds a bias. Defaults to True.
        mask_zero: bool. Whether id 0 is padding; the layer then returns the mask
            `ids != 0`. Defaults to False.
        embeddings_initializer: initializer of the table. Defaults to "uniform".
        kernel_initializer: initializer of the projection. Defaults to
            "glorot_uniform".
        bias_initializer: initializer of the bias. Defaults to "zeros".

    Call arguments:
        inputs: integer `(batch, ...)` token ids in `[0, vocabulary_size)`. An id
            outside is a `ValueError` (eager) or an `InvalidArgumentError` naming
            the layer (in a graph); under XLA, which drops assertions, it reads the
            nearest row (XLA clamps gather indices).

    Returns:
        `(batch, ..., hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> layer = FactorizedEmbedding(vocabulary_size=100, embedding_dim=4, hidden_dim=16)
    >>> layer(np.array([[1, 2, 3]])).shape
    TensorShape([1, 3, 16])
    """

    def __init__(
        self,
        vocabulary_size: int,
        embedding_dim: int,
        hidden_dim: int,
        use_bias: bool = True,
        mask_zero: bool = False,
        embeddings_initializer="uniform",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("embedding_dim", embedding_dim)
        check_positive_int("hidden_dim", hidden_dim)
        self.vocabulary_size = vocabulary_size
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.use_bias = check_bool("use_bias", use_bias)
        self.mask_zero = check_bool("mask_zero", mask_zero)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = mask_zero

    def build(self, inputs_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocabulary_size, self.embedding_dim),
            initializer=clone_initializer(self.embeddings_initializer),
        )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(self.embedding_dim, self.hidden_dim),
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.bias = (
            self.add_weight(
                name="bias",
                shape=(self.hidden_dim,),
                initializer=clone_initializer(self.bias_initializer),
            )
            if self.use_bias
            else None
        )
        self.built = True

    def call(self, inputs):
        ids = check_ids("inputs", tf.cast(inputs, tf.int32), self.vocabulary_size)
        dtype = self.compute_dtype
        table = tf.cast(tf.convert_to_tensor(self.embeddings), dtype)
        kernel = tf.cast(tf.convert_to_tensor(self.kernel), dtype)
        hidden = tf.gather(table, ids)  # (batch, ..., embedding_dim)
        output = tf.einsum("...e,eh->...h", hidden, kernel)
        if self.bias is not None:
            output += tf.cast(tf.convert_to_tensor(self.bias), dtype)
        return output

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return mask_nonzero(inputs)

    def get_config(self):
        config = {
            "vocabulary_size": self.vocabulary_size,
            "embedding_dim": self.embedding_dim,
            "hidden_dim": self.hidden_dim,
            "use_bias": self.use_bias,
            "mask_zero": self.mask_zero,
            "embeddings_initializer": keras.initializers.serialize(
                self.embeddings_initializer
            ),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
