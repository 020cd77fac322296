"""The core of a plain CTR model as its export serves it: field embeddings folded
into the multitask block's first layer.

A `CTRModel` without interaction layers, sequence features or a linear part, whose
multitask block is an `MMoE` of dense experts, computes
`concat(flatten(fields), numbers) @ W` as the first thing after its lookups: every
input column is multiplied by a weight before anything else sees it. A numeric
field's embedding is its value times a learned vector, so its `dim` columns of that
product fold into one row of `W` (`x * v @ W_rows = x * (v @ W_rows)`), and the
expert and gate kernels read `fields * dim + numbers` columns instead of
`(fields + numbers) * dim + numbers`: at census sizes 263 instead of 319, the width
of DeepCTR's MMoE on the same fields. Each field's rows are then multiplied by their
rows of that first layer ahead of time (`row @ W_field`: a table of the first
layer's outputs, experts' and softmax gates' columns side by side), and two
neighbouring fields of small vocabularies share a table of their rows' sums (a
row per pair of values), so the request runs one sparse segment sum over that
table (each example's pairs' rows summed, never a `(batch, fields, columns)`
tensor) and one matmul for the numbers, with no numeric-embedding product and no
concat. An id outside its field's range (from the `encoded` signature, or an empty
vocabulary's placeholder) reads the field's zero row: the model's zero vector. At
census sizes and batch 512 the request's first layer went from a gather of 16,384
rows and four matmuls to a sum of 8,192 rows and one matmul (bench_serving,
RESULTS.md). A table past `PRODUCT_LIMIT` keeps the gather and matmuls.

After the first layer: the experts' first bias sits in the table's first group
of rows, and towers and heads of one shape are one matmul per depth with the
tasks' kernels on a block diagonal (`_stacked_tasks`). At batch 1 a request's
time is mostly per-op overhead: the census export's request ran 188 nodes before
these and runs 167.

`folded_ctr_core(model)` builds that function, with the model's weights as NumPy
constants (towers of other shapes are called as they are); `None` for a model of
another shape, which serves its core as it is.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from keras_attn.backend import tf
from keras_attn.layers.mmoe import _FUSED_FIRST_LAYER, _LINEAR_SCORES, MMoE
from keras_attn.models.ctr import CTRModel

__all__ = ["PAIR_ROWS", "PRODUCT_LIMIT", "folded_ctr_core"]

# The embedding table times the first layer, `(rows, columns)` float32, is built
# up to this many bytes (census: 5,193 rows of pairs x 136 columns, 2.8 MB); a
# larger one (millions of ids) keeps the table and multiplies per request.
PRODUCT_LIMIT = 64 * 2**20
# Two neighbouring fields share a table of their rows' sums when each pair of the
# model has at most this many (census: at most 1,980).
PAIR_ROWS = 4096


def _exp_normalize(logits, axis):
    """Softmax written out (max, exp, sum, divide): the same values within float32
    rounding, and at a few experts several times faster than the fused kernel."""
    e = tf.exp(logits - tf.reduce_max(logits, axis=axis, keepdims=True))
    return e / tf.reduce_sum(e, axis=axis, keepdims=True)


def _plain(model) -> bool:
    """Whether `model` is a CTR model the fold covers: field embeddings flattened
    (with the numbers beside them) straight into an MMoE of dense experts, in
    float32."""
    embedding = getattr(model, "field_embedding", None)
    mmoe = getattr(model, "multitask", None)
    if (
        not isinstance(model, CTRModel)
        or embedding is None
        or model.interaction
        or model.sequence_pooling
        or getattr(model, "linear", None)
        or not isinstance(mmoe, MMoE)
        or mmoe.experts
        or (mmoe.gate == "attention" and mmoe.gate_score not in _LINEAR_SCORES)
        # The layer runs a larger first layer as one matmul per expert.
        or np.prod(mmoe.expert_layers[0][0].shape) > _FUSED_FIRST_LAYER
    ):
        return False
    layers = [embedding, mmoe, *model.heads.values()]
    layers += [t for t in model.towers.values() if t is not None]
    return all(layer.compute_dtype == "float32" for layer in layers)


def _first_layer(model):
    """The first-layer weights over the request's columns `(fields * dim +
    numbers, ...)`: the experts' fused kernel `(.., experts * units)` and the
    softmax gates' `(.., tasks * experts)` (None for the attention gate)."""
    embedding, mmoe = model.field_embedding, model.multitask
    fields, dim = len(embedding.vocabulary_sizes), embedding.embedding_dim
    numbers = embedding.num_numeric
    kernel = np.asarray(mmoe.expert_layers[0][0], np.float64)  # (experts, in, units)
    experts, width, units = kernel.shape
    # (in, experts * units), expert-major columns, as the layer fuses them.
    kernels = [kernel.transpose(1, 0, 2).reshape(width, experts * units)]
    if mmoe.gate == "softmax":
        kernels += [np.asarray(k, np.float64) for k in mmoe.gate_kernels]
    w = np.concatenate(kernels, axis=1)
    if width != fields * dim + numbers * dim + numbers:
        raise ValueError(f"MMoE input width {width} does not match the fields")
    if numbers:
        start = fields * dim
        vectors = np.asarray(embedding.numeric_embeddings, np.float64)  # (num, dim)
        rows = w[start : start + numbers * dim].reshape(numbers, dim, -1)
        # One row per number: its embedding's rows weighed by its vector, plus the
        # row that reads the number itself.
        folded = np.einsum("nd,ndc->nc", vectors, rows) + w[start + numbers * dim :]
        w = np.concatenate([w[:start], folded], axis=0)
    w = w.astype(np.float32)
    cut = experts * units
    return w[:, :cut], (w[:, cut:] if mmoe.gate == "softmax" else None)


def _columns(expert_kernel, gate_kernel):
    """The first layer's kernels side by side: `(in, experts * units [+ tasks *
    experts])`."""
    if gate_kernel is None:
        return expert_kernel
    return np.concatenate([expert_kernel, gate_kernel], axis=1)


def _product_table(table, sizes, dim, kernel):
    """The embedding table times the first layer, as the request reads it.

    Field `f`'s `sizes[f]` rows times its `dim` rows of `kernel`, then a zero row
    (id `sizes[f]`: what an id outside the field reads). Fields `2i` and `2i + 1`
    share a table of their rows' sums, `(e_a * e_b, columns)` for extents
    `e = size + 1`, when every such pair has at most `PAIR_ROWS` rows (an odd last
    field is paired with a one-row field of zeros): a request then sums half as
    many rows.

    Returns:
        `(product, strides, offsets)`, or None past `PRODUCT_LIMIT`: `product`
        `(rows, columns)` float32; `strides` `(fields [+ 1],)` int64 and
        `offsets` `(groups,)` int64, where group `g`'s row for ids `(a, b)` is
        `offsets[g] + a * strides[2g] + b` (`offsets[f] + id` unpaired).
    """
    columns = kernel.shape[1]
    # The tables' sizes first: nothing is multiplied for a table past the limit.
    extents = [size + 1 for size in sizes] + [1] * (len(sizes) % 2)
    pairs = list(zip(extents[::2], extents[1::2]))
    paired = len(sizes) > 1 and all(a * b <= PAIR_ROWS for a, b in pairs)
    heights = [a * b for a, b in pairs] if paired else extents[: len(sizes)]
    if sum(heights) * columns * 4 > PRODUCT_LIMIT:
        return None
    parts, start = [], 0
    for field, size in enumerate(sizes):
        rows = np.asarray(table[start : start + size], np.float64)
        rows = rows @ np.asarray(kernel[field * dim : (field + 1) * dim], np.float64)
        parts.append(np.concatenate([rows, np.zeros((1, columns))]))  # (size + 1, c)
        start += size
    if paired:
        parts += [np.zeros((1, columns))] * (len(sizes) % 2)  # a one-row field
        # Row a * e_b + b of a pair's table: field a's row a plus field b's row b.
        parts = [
            (a[:, None] + b[None, :]).reshape(-1, columns)
            for a, b in zip(parts[::2], parts[1::2])
        ]
        strides = [n for _, b in pairs for n in (b, 1)]
    else:
        strides = [1] * len(sizes)
    offsets = np.cumsum([0] + heights[:-1])
    product = np.concatenate(parts).astype(np.float32)
    return product, np.asarray(strides, np.int64), offsets.astype(np.int64)


class _Dense(NamedTuple):
    """A `Dense` layer's weights as NumPy, and its activation (`config` as its
    config names it, to compare two layers')."""

    kernel: np.ndarray  # (in, out)
    bias: np.ndarray  # (out,)
    config: object
    activation: object


def _dense_stack(layer):
    """`[_Dense, ...]` of a tower (None: no layers), a `Dense` or a `Sequential`
    of `Dense` and `Dropout` layers (dropout does nothing in inference); None for
    any other layer, or a quantized or non-float32 `Dense`."""
    if layer is None:
        return []
    layers = getattr(layer, "layers", None)
    if layers is None or type(layer).__name__ != "Sequential":
        layers = [layer]
    stack = []
    for dense in layers:
        name = type(dense).__name__
        if name == "Dropout":
            continue
        if (
            name != "Dense"
            or dense.compute_dtype != "float32"
            or getattr(dense, "quantization_mode", None)
        ):
            return None
        kernel = np.asarray(dense.kernel, np.float32)
        bias = (
            np.asarray(dense.bias, np.float32)
            if dense.use_bias
            else np.zeros(kernel.shape[1], np.float32)
        )
        config = dense.get_config()["activation"]
        stack.append(_Dense(kernel, bias, config, dense.activation))
    return stack


def _block_diagonal(kernels):
    """`(sum of ins, sum of outs)`: the kernels on the diagonal, zeros elsewhere."""
    out = np.zeros([sum(k.shape[0] for k in kernels), sum(k.shape[1] for k in kernels)])
    row = column = 0
    for k in kernels:
        out[row : row + k.shape[0], column : column + k.shape[1]] = k
        row, column = row + k.shape[0], column + k.shape[1]
    return out.astype(np.float32)


def _stacked_tasks(model, tasks):
    """`(batch, tasks * units) -> outputs dict`: every task's tower and head as
    one matmul per depth, the tasks' kernels on a block diagonal (the mixed
    inputs side by side, task-major); None when the towers differ in depth or
    activations, or hold other layers than `Dense` and `Dropout`.

    At batch 1 oneDNN's fused matmul costs ~4-7 µs whatever its size: the
    census export's two towers and two heads ran four, this runs two (the heads'
    activations applied once when they share one, else per task after the
    split).
    """
    towers = [_dense_stack(model.towers[task]) for task in tasks]
    heads = [_dense_stack(model.heads[task]) for task in tasks]
    if any(s is None for s in towers + heads) or any(len(h) != 1 for h in heads):
        return None
    # Each task's layers, its head last.
    stacks = [tower + head for tower, head in zip(towers, heads)]
    depth = len(stacks[0])
    # Every task as deep as the first, and its towers' activations the same (the
    # heads' may differ: applied after the split).
    if any(len(s) != depth for s in stacks) or any(
        s[d].config != stacks[0][d].config for s in stacks for d in range(depth - 1)
    ):
        return None
    layers = [
        (
            _block_diagonal([s[d].kernel for s in stacks]),
            np.concatenate([s[d].bias for s in stacks]),
        )
        for d in range(depth)
    ]
    heads = [s[-1] for s in stacks]
    shared = all(h.config == heads[0].config for h in heads)
    widths = [h.kernel.shape[1] for h in heads]

    def call(mixed):
        h = mixed
        for d, (kernel, bias) in enumerate(layers):
            h = tf.matmul(h, kernel) + bias
            if d < depth - 1:
                h = stacks[0][d].activation(h)
        if shared:
            return dict(zip(tasks, tf.split(heads[0].activation(h), widths, axis=1)))
        outs = tf.split(h, widths, axis=1)
        return {t: head.activation(o) for t, head, o in zip(tasks, heads, outs)}

    return call


def folded_ctr_core(model, trusted_ids: bool = True):
    """`encoded dict -> outputs dict` for `model`'s core with the fold above, or
    None when `model` is not a plain CTR model of an MMoE.

    Args:
        model: a `CTRModel`.
        trusted_ids: bool. The ids come from the model's own lookups, so lie in
            range (or are an empty vocabulary's placeholder, one past it, which
            reads the zero row): no range check. False keeps the model's rule (an
            id outside its field's range reads a zero vector), for ids from
            outside. Defaults to True.
    """
    if not _plain(model):
        return None
    empty = any(
        f.kind == "categorical" and f.hash_buckets is None and not f.vocabulary
        for f in model.features
    )
    embedding, mmoe = model.field_embedding, model.multitask
    sizes = list(embedding.vocabulary_sizes)
    fields, dim = len(sizes), embedding.embedding_dim
    numbers = embedding.num_numeric
    expert_kernel, gate_kernel = _first_layer(model)
    experts, units = mmoe.num_experts, mmoe.expert_layers[0][0].shape[-1]
    # (experts * units,): the experts' first bias, in their columns' order.
    expert_bias = np.asarray(mmoe.expert_layers[0][1], np.float32).reshape(-1)
    deeper = [
        (np.asarray(k, np.float32), np.asarray(b, np.float32))
        for k, b in mmoe.expert_layers[1:]
    ]
    kernel = _columns(expert_kernel, gate_kernel)
    table = offsets = product = None
    if fields:
        table = np.concatenate([np.asarray(t, np.float32) for t in embedding.tables])
        offsets = np.asarray(embedding._offsets, np.int64)
        product = _product_table(table, sizes, dim, kernel)
    tasks = list(mmoe.tasks)
    activation = mmoe._activation_fn
    stacked = _stacked_tasks(model, tasks)
    # The numbers' rows of the first layer, and where its gate columns start.
    number_rows = kernel[fields * dim :]
    cut = experts * units

    def project(parts, kernel):
        # (batch, columns): one matmul per part, the parts never concatenated.
        id_rows = fields * dim
        out = None
        for part, rows in parts:
            term = tf.matmul(
                part, kernel[:id_rows] if rows == "ids" else kernel[id_rows:]
            )
            out = term if out is None else out + term
        return out

    def first_layer(encoded):
        # (batch, experts * units + gate columns): the first layer's product,
        # the experts' bias included (it sits in the table's first group), from
        # the product table's rows summed per example.
        ids = encoded["categorical_ids"]  # (batch, fields)
        if not ids.dtype.is_integer:
            ids = tf.floor(ids)
        ids = tf.cast(ids, tf.int64)
        if not trusted_ids:
            # An id outside its field reads the field's zero row (id `size`).
            limit = tf.constant(sizes, tf.int64)
            ids = tf.where((ids >= 0) & (ids < limit), ids, limit)
        if len(strides) > fields:
            ids = tf.pad(ids, [[0, 0], [0, 1]])  # the one-row field of zeros
        if len(group_rows) < len(strides):
            # (batch, pairs): a * e_b + b per pair of neighbouring fields.
            ids = tf.reduce_sum(tf.reshape(ids * strides, [-1, len(group_rows), 2]), 2)
        rows = ids + group_rows  # (batch, groups)
        # Example i owns row i's entries of the flat rows: its index broadcast
        # over the groups (six ops where `tf.repeat` ran eleven; an int64
        # floor division of the flat positions took ~40 µs more at batch 512).
        # Every example has rows, so the segments' count is the batch, and an
        # empty batch gives (0, columns).
        shape = tf.shape(rows)
        examples = tf.broadcast_to(tf.range(shape[0])[:, None], shape)
        out = tf.sparse.segment_sum(
            product, tf.reshape(rows, [-1]), tf.reshape(examples, [-1])
        )
        if numbers:
            numeric = tf.cast(encoded["numeric_preprocessing"], tf.float32)
            out += tf.matmul(numeric, number_rows)
        return out

    def unfolded(encoded):
        parts = []
        if fields:
            ids = encoded["categorical_ids"]  # (batch, fields)
            if not ids.dtype.is_integer:
                ids = tf.floor(ids)
            if ids.dtype not in (tf.int32, tf.int64):
                ids = tf.cast(ids, tf.int64)
            start = tf.constant(offsets, ids.dtype)
            if trusted_ids and not empty:
                rows = tf.gather(table, ids + start)  # (batch, fields, dim)
            else:
                in_range = (ids >= 0) & (ids < tf.constant(sizes, ids.dtype))
                ids = tf.where(in_range, ids, tf.zeros_like(ids)) + start
                rows = tf.gather(table, ids) * tf.cast(in_range, tf.float32)[..., None]
            parts.append((tf.reshape(rows, [-1, fields * dim]), "ids"))
        if numbers:
            numeric = tf.cast(encoded["numeric_preprocessing"], tf.float32)
            parts.append((numeric, "numbers"))
        gate_logits = None if gate_kernel is None else project(parts, gate_kernel)
        return rest(project(parts, expert_kernel), gate_logits)

    def rest(expert_columns, gate_logits, biased=False):
        # expert_columns: (batch, experts * units), the bias added when `biased`;
        # gate_logits: (batch, tasks * experts) of softmax gates, None for the
        # attention gate.
        if not biased:
            expert_columns += expert_bias
        hidden = activation(tf.reshape(expert_columns, [-1, experts, units]))
        if deeper:
            columns = tf.unstack(hidden, num=experts, axis=1)
            for kernel, bias in deeper:
                columns = [
                    activation(tf.matmul(h, k) + b)
                    for h, k, b in zip(columns, kernel, bias)
                ]
            hidden = tf.stack(columns, axis=1)  # (batch, experts, out units)
        # Each task's mix as a product and a sum over the experts, the tasks'
        # gates by one unstack. A Session call of the mix alone (census sizes,
        # AMD EPYC) took 200 / 225 µs at batch 64 / 512 this way, 220 / 242 by
        # one batched matmul and 200 / 300 by one broadcast product of every
        # task (the same at batch 1).
        if gate_logits is not None:
            logits = tf.reshape(gate_logits, [-1, len(tasks), experts])
            by_task = tf.unstack(_exp_normalize(logits, axis=2), num=len(tasks), axis=1)
        else:
            gates = _exp_normalize(mmoe._folded_scores(hidden), axis=1)  # (b, e, t)
            by_task = tf.unstack(gates, num=len(tasks), axis=2)
        # (batch, experts) each -> (batch, units) each.
        mixed = [tf.reduce_sum(g[:, :, None] * hidden, axis=1) for g in by_task]
        if stacked is not None:
            return stacked(tf.concat(mixed, axis=1) if len(mixed) > 1 else mixed[0])
        outputs = {}
        for task, h in zip(tasks, mixed):
            tower = model.towers[task]
            if tower is not None:
                h = tower(h, training=False)
            outputs[task] = model.heads[task](h)
        return outputs

    if product is None:
        return unfolded
    product, strides, group_rows = product
    # The experts' first bias in the first group's rows (each example reads one
    # of them, its zero row included): one add fewer per request.
    first_group = slice(group_rows[0], group_rows[1] if len(group_rows) > 1 else None)
    product[first_group, :cut] += expert_bias

    # Plain TensorFlow, no Python control flow on tensors: nothing for AutoGraph
    # to convert (under tf_keras it failed to read this closure's source, and
    # warned).
    @tf.autograph.experimental.do_not_convert
    def core(encoded):
        columns = first_layer(encoded)
        if gate_kernel is None:
            return rest(columns, None, biased=True)
        return rest(*tf.split(columns, [cut, columns.shape[-1] - cut], 1), biased=True)

    return core
