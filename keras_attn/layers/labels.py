"""The predicted label of a classifier's probabilities: its index or its name."""

from __future__ import annotations

from keras_attn._validation import check_class_names
from keras_attn.backend import Layer, keras, register, tf

__all__ = ["PredictedLabel"]


@register
class PredictedLabel(Layer):
    """The most probable class: its index, or its name when `class_names` is given.

    Args:
        class_names: optional list of str, the name of each class index. Defaults to
            None (int64 indices).

    Call arguments:
        inputs: `(batch, num_classes)` probabilities or logits.

    Returns:
        `(batch,)` int64 indices, or strings with `class_names`.

    Example:

    >>> import numpy as np
    >>> PredictedLabel(["neg", "pos"])(np.array([[0.2, 0.8]], "float32")).numpy()
    array([b'pos'], dtype=object)
    """

    def __init__(self, class_names: list[str] | None = None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        self.class_names = check_class_names(class_names)

    def call(self, inputs):
        index = tf.argmax(inputs, axis=-1, output_type=tf.int64)
        if self.class_names is None:
            return index
        return tf.gather(tf.constant(self.class_names), index)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs):
        dtype = "int64" if self.class_names is None else "string"
        return keras.KerasTensor(inputs.shape[:-1], dtype)

    def get_config(self):
        return {**super().get_config(), "class_names": self.class_names}
