"""The base of keras_attn's model classes: a functional model that keeps its settings.

The KerasHub habit: a model's `__init__` takes its settings (and parts, as objects),
makes its layers, wires the functional graph from `keras.Input`s and calls
`keras.Model.__init__(inputs, outputs)`; the layers then become attributes
(`model.token_embedding`, `model.towers`, ...), so a helper reaches a part by
attribute, never by a layer-name string; `get_config` returns the constructor's
arguments and `from_config` calls the constructor, so a `.keras` file (both Keras
generations) rebuilds the same class and loads its weights into it.
"""

from __future__ import annotations

import copy

from keras_attn.backend import ReplicaBuild, keras

__all__ = ["FunctionalModel", "Parts", "arguments_of", "output_tensors"]


def arguments_of(local_variables: dict) -> dict:
    """A constructor's arguments from its `locals()`, taken first thing in
    `__init__` (without `self`, `name` and `**kwargs`, which Keras handles)."""
    skip = ("self", "name", "kwargs", "__class__")
    return {k: v for k, v in local_variables.items() if k not in skip}


def output_tensors(model) -> dict:
    """A functional model's symbolic outputs by name (`{name: KerasTensor}`): the
    keys of the dict the model was built with, under both generations.

    Not `output_names`: those are the names of the layers that make the outputs, so
    a layer's second output (a `SequenceSplit`'s mask, keyed `history_mask`) would
    be named after the layer (`history_split`). A model built with a list or a
    single tensor has no keys: its outputs go by `output_names`.
    """
    outputs = model.output
    if isinstance(outputs, dict):
        return dict(outputs)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    return dict(zip(model.output_names, outputs))


class Parts:
    """The layers of a model before the model exists, by attribute name.

    tf_keras does not track attributes set on a model before `Model.__init__`, so
    the layers live here while the graph is wired and move onto the model after.
    """

    def __init__(self, **layers):
        self.__dict__.update(layers)


class FunctionalModel(ReplicaBuild, keras.Model):
    """A functional `keras.Model` that keeps its constructor's arguments and parts.

    A subclass builds a `Parts`, wires its graph, then calls `_init_functional`.
    Its `get_config` is the arguments given there (a subclass holding layers or
    other objects among its arguments serializes them itself).
    """

    def _init_functional(
        self, inputs, outputs, parts, arguments, name, settings=(), **kwargs
    ):
        """`keras.Model.__init__(inputs, outputs)`, then the `parts` and the
        `settings` (names of `arguments`) become attributes."""
        # Through the MRO, not `keras.Model.__init__` by name: the first call puts
        # `Functional` into the class's bases, and the next go straight to it.
        super().__init__(inputs, outputs, name=name, **kwargs)
        for attribute, layer in vars(parts).items():
            setattr(self, attribute, layer)
        for setting in settings:
            setattr(self, setting, copy.deepcopy(arguments[setting]))
        # Untracked: plain settings, returned as they came by `get_config`.
        object.__setattr__(self, "_arguments", dict(arguments))

    def get_config(self):
        # Not the functional config (layers and their wiring): the arguments.
        return {
            "name": self.name,
            "trainable": self.trainable,
            **copy.deepcopy(self._arguments),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
