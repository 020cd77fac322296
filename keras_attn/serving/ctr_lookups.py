"""One lookup for all of a CTR export's categorical fields.

A `CTRModel` maps each categorical field's raw value through its own
`StringLookup` or `IntegerLookup`: at census sizes 32 tables, each a handle op and
a find op per request, and a stack of their 32 columns. `FusedLookup` serves the
same ids with one op per string field and three in all: each string column's
64-bit fingerprints (an integer column is its own key), stacked `(batch, fields)`,
each field's column XORed with a salt of its own (so that a value means different
keys in different fields), and one find in one int64 table holding every field's
vocabulary. Census quickstart export at batch 512 (AMD EPYC, step stats): the
lookups' op time ~185 -> ~105-130 µs; at batch 1 a request runs 183 nodes, 217
with a lookup per field.

The ids equal the layers' wherever two values with the same key do not meet: the
table refuses vocabularies in which two keys collide (the export then keeps the
layers), and an unseen string reads a vocabulary's id only if its 64-bit
fingerprint equals that value's key, at odds of about (keys / 2^63) per lookup:
below 10^-13 for a million keys. An unseen integer reads one only if it equals
another field's key XOR both salts (a pseudo-random 62-bit number).

`fused_lookup(lookups)` builds it for the fields whose lookup is a `StringLookup`
or `IntegerLookup` with one out-of-vocabulary id (the default of a categorical
spec); None when there are fewer than two. `fused_ctr_preprocessing(model)` is a
`CTRModel`'s preprocessing with it: what `split_ctr_model(model)[0]` computes.
"""

from __future__ import annotations

import numpy as np

from keras_attn.backend import tf
from keras_attn.models.ctr import split_ctr_model

__all__ = ["FusedLookup", "fused_ctr_preprocessing", "fused_lookup"]

# `Fingerprint64(s) mod _BUCKETS`: `tf.strings.to_hash_bucket_fast` with the
# largest bucket count its int64 output holds, i.e. the fingerprint folded into 63
# bits.
_BUCKETS = 2**63 - 1


def _keys(values, dtype: str) -> np.ndarray:
    """`(n,)` int64 keys of a field's values before the salt, as the request
    graph computes them: a string's fingerprint, an integer itself."""
    if dtype != "string":
        return np.asarray(values, np.int64).reshape([-1])
    if not len(values):
        return np.zeros([0], np.int64)
    return tf.strings.to_hash_bucket_fast(list(values), _BUCKETS).numpy()


def _salts(n: int) -> np.ndarray:
    """`(n,)` int64 salts, one per field: fixed, so an export is reproducible."""
    return np.random.default_rng(0).integers(1, 2**62, size=n, dtype=np.int64)


class FusedLookup(tf.Module):
    """Ids of several categorical fields from one int64 table.

    Args:
        vocabularies: list of lists. Each field's vocabulary in id order (bytes
            or str for a string field, int for an integer field): value
            `vocabularies[j][i]` of field `j` gets id `i + 1`, an unseen value id
            0 (a `StringLookup` or `IntegerLookup` with `num_oov_indices=1`).
        dtypes: list of str, "string" or "int64", one per field.

    Call arguments:
        columns: list of `(batch,)` tensors, one per field, of its dtype.

    Returns:
        `(batch, fields)` int64 ids.

    Raises:
        ValueError: two keys of the table collide (then serve the fields by
            their own lookups).
    """

    def __init__(self, vocabularies, dtypes, name=None):
        super().__init__(name=name)
        salts = _salts(len(vocabularies))
        keys = [_keys(v, d) ^ s for v, d, s in zip(vocabularies, dtypes, salts)]
        ids = [np.arange(1, len(v) + 1, dtype=np.int64) for v in vocabularies]
        keys = np.concatenate(keys)
        if len(np.unique(keys)) != len(keys):
            raise ValueError(
                "The vocabularies' keys collide: serve the fields by their own lookups"
            )
        self.dtypes = list(dtypes)
        self.salts = tf.constant(salts)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(keys, np.concatenate(ids)),
            default_value=0,
        )

    def __call__(self, columns):
        return self.find(self.keys(columns))

    def keys(self, columns):
        """`[(batch,) int64]`: each column's keys before the salt, column by
        column (a string's fingerprint, an integer itself)."""
        # Each string column fingerprinted on its own: a stack of the strings
        # copies every one (at batch 512 and 32 fields it took longer than the
        # 32 fingerprints).
        return [
            tf.strings.to_hash_bucket_fast(c, _BUCKETS)
            if dtype == "string"
            else tf.cast(c, tf.int64)
            for c, dtype in zip(columns, self.dtypes)
        ]

    def find(self, keys):
        """`(batch, fields)` int64 ids of `keys(columns)`."""
        keys = tf.stack(keys, axis=1)  # (batch, fields)
        return self.table.lookup(tf.bitwise.bitwise_xor(keys, self.salts))


# The lookup layers `FusedLookup` stands in for, by class name (both Keras
# generations), with the dtype of their values.
_FUSABLE = {"StringLookup": "string", "IntegerLookup": "int64"}


def _fusable(layer) -> bool:
    """A lookup of one out-of-vocabulary id, no mask token, ids out."""
    config = layer.get_config()
    return (
        type(layer).__name__ in _FUSABLE
        and config.get("num_oov_indices") == 1
        and config.get("mask_token") is None
        and not config.get("invert", False)
        and config.get("output_mode", "int") == "int"
    )


def fused_lookup(lookups: dict):
    """`(FusedLookup, names)` for the fusable layers among `lookups` (field name ->
    lookup layer), names in the dict's order; None for fewer than two fields or
    colliding keys."""
    names = [name for name, layer in lookups.items() if _fusable(layer)]
    if len(names) < 2:
        return None
    # get_vocabulary(): the OOV token first, then the values in id order.
    vocabularies = [lookups[name].get_vocabulary()[1:] for name in names]
    dtypes = [_FUSABLE[type(lookups[name]).__name__] for name in names]
    try:
        return FusedLookup(vocabularies, dtypes, name="fused_lookup"), names
    except ValueError:
        return None


def fused_ctr_preprocessing(model, preprocessor=None):
    """`(raw inputs dict -> encoded dict, FusedLookup)`: `model`'s preprocessing
    with one lookup for its categorical fields, those it cannot take by their own
    layers; None for a model with behaviour histories or fewer than two fields to
    fuse. `encode(inputs, guard)` passes the columns (the fused fields' keys, the
    others' raw values) through `guard` (a list -> the same values, e.g. behind
    the batch-size check) before anything combines them.

    The encoded dict is what `preprocessor` (`split_ctr_model(model)[0]`, cut
    here when not given) returns, by the same keys and dtypes: `categorical_ids`
    `(batch, fields)`, `numeric_preprocessing` from the model's own layer.
    """
    if preprocessor is None:
        preprocessor = split_ctr_model(model)[0]
    outputs = preprocessor.output
    if "categorical_ids" not in outputs or set(outputs) - {
        "categorical_ids",
        "numeric_preprocessing",
    }:
        return None
    names = [f.name for f in model.features if f.kind == "categorical"]
    if len(names) != outputs["categorical_ids"].shape[-1]:
        return None
    lookups = {name: model.get_layer(f"{name}_lookup") for name in names}
    fused = fused_lookup(lookups)
    if fused is None:
        return None
    table, fused_names = fused
    others = [name for name in names if name not in fused_names]
    # The fused block's columns, then the others': back to the fields' order.
    order = np.argsort([names.index(n) for n in fused_names + others]).tolist()
    ids_dtype = outputs["categorical_ids"].dtype
    numeric = None
    if "numeric_preprocessing" in outputs:
        numeric = model.get_layer("numeric_preprocessing")

    plain = others + (list(numeric.columns) if numeric is not None else [])

    def encode(inputs, guard=list):
        # guard: a list of tensors -> the same values; what combines columns
        # (a stack, a concat) reads only its outputs. Each key is one column's.
        keys = table.keys([inputs[name] for name in fused_names])
        guarded = guard(keys + [inputs[name] for name in plain])
        ids = table.find(guarded[: len(keys)])  # (batch, fused)
        inputs = dict(zip(plain, guarded[len(keys) :]))
        if others:
            rest = [tf.cast(lookups[n](inputs[n]), tf.int64) for n in others]
            ids = tf.concat([ids, tf.stack(rest, axis=1)], axis=1)
            ids = tf.gather(ids, order, axis=1)  # (batch, fields)
        encoded = {"categorical_ids": tf.cast(ids, ids_dtype)}
        if numeric is not None:
            encoded["numeric_preprocessing"] = numeric(
                [inputs[name] for name in numeric.columns]
            )
        return encoded

    return encode, table
