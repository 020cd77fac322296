"""The one place keras_attn imports Keras: Keras 3, or tf_keras under
TF_USE_LEGACY_KERAS.

TensorFlow routes `tf.keras` to the `tf_keras` package (Keras 2) when the environment
variable `TF_USE_LEGACY_KERAS` is "1", "true" or "True", and to Keras 3 otherwise. This
module applies the same rule, so a keras_attn layer always lives in the same Keras as
the
user's `tf.keras` model. It reads the variable and never sets it.

Every other module does `from keras_attn.backend import keras, tf`. Layer math is
written
in TensorFlow ops, which run under both generations, compile with XLA and run on TPU.

Also here: the masked softmax every layer uses, dtype-aware mask constants, and the few
calls whose spelling differs between the generations (registration, SavedModel export).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os

import tensorflow as tf

_LEGACY_VALUES = ("true", "True", "1")

#: True when `TF_USE_LEGACY_KERAS` asks for Keras 2 (the `tf_keras` package).
USE_LEGACY_KERAS = os.environ.get("TF_USE_LEGACY_KERAS", None) in _LEGACY_VALUES

if USE_LEGACY_KERAS:
    import tf_keras as keras
else:
    import keras

#: True under Keras 3, False under tf_keras (Keras 2).
KERAS_3 = not USE_LEGACY_KERAS

__all__ = [
    "KERAS_3",
    "Layer",
    "ReplicaBuild",
    "USE_LEGACY_KERAS",
    "as_bool_mask",
    "clone_initializer",
    "export_saved_model",
    "keras",
    "mask_any",
    "mask_fill_value",
    "mask_nonzero",
    "masked_softmax",
    "quiet_save",
    "register",
    "scale_loss",
    "tf",
    "unscale_gradients",
    "variables_to_constants",
    "write_saved_model",
]


class ReplicaBuild:
    """Mixin of keras_attn's models (before `keras.Model` in the bases): `fit` and
    `evaluate` under a tf.distribute strategy build from one replica's first batch.

    Keras 3.15 builds a model's metrics and optimizer under a strategy from the
    first distributed batch averaged over the replicas (`strategy.reduce("MEAN")` in
    `_maybe_symbolic_build`): raw strings (a CTR row, a document) fail there with
    "Value for attr 'T' of string is not in the list of allowed values ... AddN",
    and so would boolean masks. The build needs only the batch's structure, dtypes
    and shapes, which one replica's part has. tf_keras builds otherwise: nothing
    changes there.
    """

    if KERAS_3:

        def _maybe_symbolic_build(self, iterator=None, data_batch=None):
            if iterator is not None and self._distribute_strategy is not None:
                local = self._distribute_strategy.experimental_local_results
                # Keras' epoch iterator yields (first step, last step, iterator);
                # the batch is consumed as Keras' own build consumes it.
                for _, _, it in iterator:
                    data_batch = tf.nest.map_structure(
                        lambda v: (
                            local(v)[0]
                            if isinstance(v, tf.distribute.DistributedValues)
                            else v
                        ),
                        next(it),
                    )
                    break
                iterator = None
            return super()._maybe_symbolic_build(
                iterator=iterator, data_batch=data_batch
            )


class Layer(keras.layers.Layer):
    """`keras.layers.Layer` that builds from every tensor argument, in both generations.

    Keras 3 calls `build(query_shape, key_shape, ...)` with the shape of each tensor
    argument of `call` whose name matches (`query` -> `query_shape`). tf_keras passes
    only
    the first argument's shape. Under tf_keras this base class applies the Keras 3 rule
    itself, and saves and restores all those shapes in the build config, so a reloaded
    layer with two inputs of different widths rebuilds the same weights.
    """

    def cast_inputs(self, *tensors):
        """Casts floating tensors to the layer's compute dtype (None passes through).

        Keras 3 autocasts every tensor argument; tf_keras only the first, so a layer
        with
        several inputs under a mixed policy would otherwise mix float16 and float32.
        """
        dtype = tf.as_dtype(self.compute_dtype)
        cast = []
        for t in tensors:
            if t is not None and not hasattr(t, "op") and not tf.is_tensor(t):
                t = tf.convert_to_tensor(t)  # tf_keras passes NumPy keywords as is
            if t is not None and tf.as_dtype(t.dtype).is_floating and t.dtype != dtype:
                t = tf.cast(t, dtype)
            cast.append(t)
        return cast[0] if len(cast) == 1 else cast

    if not KERAS_3:

        def __call__(self, *args, **kwargs):
            if not self.built:
                shapes = self._shapes_for_build(args, kwargs)
                if shapes is not None:
                    with tf.init_scope():
                        self.build(**shapes)
                    self._build_shapes = {
                        k: None if v is None else v.as_list() for k, v in shapes.items()
                    }
                    self.built = True
            return super().__call__(*args, **kwargs)

        def _shapes_for_build(self, args, kwargs):
            params = [
                p
                for p in inspect.signature(self.build).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            ]
            if len(params) < 2:
                return None  # One input: tf_keras' own build is the same.
            bound = inspect.signature(self.call).bind_partial(*args, **kwargs).arguments
            names = {p.name for p in params}
            return {
                f"{k}_shape": tf.TensorShape(v.shape)
                for k, v in bound.items()
                if f"{k}_shape" in names and v is not None and hasattr(v, "shape")
            }

        def get_build_config(self):
            shapes = getattr(self, "_build_shapes", None)
            if shapes is not None:
                return {"shapes_dict": shapes}
            return super().get_build_config()

        def build_from_config(self, config):
            if "shapes_dict" in config:
                shapes = {
                    k: tf.TensorShape(v) for k, v in config["shapes_dict"].items()
                }
                self.build(**shapes)
                self._build_shapes = config["shapes_dict"]
                self.built = True
                return
            super().build_from_config(config)


def mask_any(mask, axis: int = -1):
    """`mask` reduced with logical OR over `axis`, for `compute_mask`.

    Keras 3 calls `compute_mask` on symbolic KerasTensors while a functional model is
    built, where TensorFlow ops fail; its own ops take both kinds. Mask metadata only:
    layer math stays in TensorFlow ops.
    """
    if KERAS_3:
        return keras.ops.any(keras.ops.cast(mask, "bool"), axis=axis)
    return tf.reduce_any(tf.cast(mask, tf.bool), axis=axis)


def as_bool_mask(mask):
    """A boolean tensor (non-zero = real position) from any mask, or None."""
    if mask is None:
        return None
    mask = tf.convert_to_tensor(mask)
    if mask.dtype == tf.bool:
        return mask
    return tf.not_equal(mask, tf.zeros([], mask.dtype))


def mask_nonzero(ids):
    """`ids != 0` as a boolean mask, for `compute_mask` (see `mask_any`)."""
    if KERAS_3:
        return keras.ops.not_equal(ids, 0)
    return tf.not_equal(ids, tf.zeros([], ids.dtype))


def register(cls):
    """Registers a class for Keras serialization under the package name `keras_attn`."""
    return keras.saving.register_keras_serializable(package="keras_attn")(cls)


def clone_initializer(initializer):
    """A fresh copy of an initializer, for each weight that uses it.

    tf_keras gives identical values to every call of one unseeded initializer instance,
    so two weights built from the same instance would start equal (and stay symmetric).
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


def mask_fill_value(dtype) -> float:
    """The most negative finite value of `dtype`, used to blank masked scores.

    float16 cannot hold -1e9 (its minimum is -65504), so a fixed constant would turn
    into
    -inf and then into NaN in a fully masked row; the dtype's own minimum never
    overflows.
    """
    return tf.as_dtype(dtype).min


def masked_softmax(scores: tf.Tensor, mask: tf.Tensor | None = None, axis: int = -1):
    """Softmax over `axis` that ignores masked positions.

    Args:
        scores: float tensor of attention scores, e.g. `(batch, q_len, k_len)`.
        mask: optional boolean tensor broadcastable to `scores`; True marks a real
            position. Integer or float masks are read as `mask != 0`.
        axis: the axis to normalize over. Defaults to -1.

    Returns:
        Weights of the shape and dtype of `scores`. Masked positions get exactly 0,
        and a
        row without any real position gets all-zero weights (not NaN, not uniform).
    """
    if mask is None:
        return tf.nn.softmax(scores, axis=axis)
    if mask.dtype != tf.bool:
        mask = tf.not_equal(mask, tf.zeros([], mask.dtype))
    dtype = scores.dtype
    # Half precision overflows in exp() far sooner than float32: normalize in float32.
    work_dtype = tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype
    scores = tf.cast(scores, work_dtype)
    scores = tf.where(mask, scores, mask_fill_value(work_dtype))
    weights = tf.nn.softmax(scores, axis=axis)
    # A fully masked row came out uniform above; this zeroes it (and every masked slot).
    weights = tf.where(mask, weights, tf.zeros([], work_dtype))
    return tf.cast(weights, dtype)


def write_saved_model(
    model,
    filepath: str,
    endpoints: dict,
    input_signature,
    input_signatures=None,
    resources=(),
) -> None:
    """Writes a SavedModel of `model`'s variables and lookup tables with one signature
    per `endpoints` item (name -> function of the inputs), through the generation's
    `ExportArchive`; each signed with `input_signature`, or with its own from the
    dict `input_signatures` (name -> signature). `resources`: trackables the
    endpoints use besides the model's (e.g. a `tf.Module` holding a lookup table).

    Both generations track the model's variables and resources without the Keras
    objects themselves: `tf.saved_model.save(model)` under tf_keras also serialized
    every layer with traces of its `call` (a HAN with its tokenizer took 114 s to
    export that way, 10 s through the archive, and longer to load).
    """
    archive = keras.export.ExportArchive()
    archive.track(model)
    for resource in resources:
        archive.track(resource)
    for name, fn in endpoints.items():
        signature = (input_signatures or {}).get(name, input_signature)
        archive.add_endpoint(name, fn, input_signature=signature)
    with quiet_save():
        if KERAS_3:
            archive.write_out(filepath, verbose=False)
        else:
            archive.write_out(filepath)


def variables_to_constants(function):
    """A `tf.function`'s concrete function with the variables it reads as
    constants: TensorFlow's own pass (`tf.compat.v1.graph_util` has only its TF1
    graph form), for graphs whose weights a request never changes. Quiet: the pass
    exports a MetaGraph, which warns of every lookup table's initializer."""
    from tensorflow.python.framework import convert_to_constants

    with quiet_save():
        return convert_to_constants.convert_variables_to_constants_v2(function)


def export_saved_model(model, filepath: str) -> None:
    """Writes `model` as a TensorFlow SavedModel with a `serving_default` signature.

    The result loads with `tf.saved_model.load` in a process that imports neither Keras
    nor keras_attn (TF Serving reads the same files). A model with a
    `serving_input_signature()` method (its inputs by name as `tf.TensorSpec`s) is
    signed with it under Keras 3, which signs a subclassed model from its build
    shapes otherwise (float32 inputs named `args_0`, ...); tf_keras signs it from
    its first call's inputs.
    """
    with quiet_save():
        if KERAS_3:
            signature = getattr(model, "serving_input_signature", None)
            options = {} if signature is None else {"input_signature": [signature()]}
            model.export(filepath, format="tf_saved_model", verbose=False, **options)
        else:
            model.export(filepath)


@contextlib.contextmanager
def quiet_save():
    """Silences what a SavedModel write says besides errors: tf_keras prints the
    endpoints on every export (no switch for it), and TensorFlow logs
    `INFO:tensorflow:Assets written to: <temporary folder>` wherever INFO shows (a
    notebook) and warns of untraced functions: an export says its final path and
    nothing else (the caller reports it)."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def scale_loss(optimizer, loss):
    """`loss` times the loss scale of a mixed_float16 optimizer (else `loss`), for
    a custom `train_step`; call it inside the gradient tape."""
    if KERAS_3:
        return optimizer.scale_loss(loss)
    if isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_scaled_loss(loss)
    return loss


def unscale_gradients(optimizer, gradients):
    """The gradients of a `scale_loss` loss, ready for `apply_gradients` (Keras 3's
    loss-scale optimizer unscales them itself; tf_keras' must be asked)."""
    if not KERAS_3 and isinstance(optimizer, keras.mixed_precision.LossScaleOptimizer):
        return optimizer.get_unscaled_gradients(gradients)
    return gradients
