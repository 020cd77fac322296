"""Every argument check of the package, and its message.

Each check raises `ValueError("`x` must be ... Received: x=...")`, naming the
argument, what was expected and what came. `where`, when given, names the owner of
the argument (e.g. "numeric feature 'age'") and goes after the argument's name.
Shape checks name both tensors and their shapes.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = [
    "check_activation",
    "check_at_most",
    "check_batch_sizes",
    "check_bool",
    "check_choice",
    "check_class_names",
    "check_divisible",
    "check_finite",
    "check_folder",
    "check_ids",
    "check_int",
    "check_mask_shape",
    "check_positive_int",
    "check_positive_int_list",
    "check_rank",
    "check_rate",
    "check_shape",
    "static_shape",
]


def _message(name, expected, value, where=None) -> str:
    owner = f" of {where}" if where else ""
    return f"`{name}`{owner} must be {expected}. Received: {name}={value!r}"


def _fail(name, expected, value, where=None):
    raise ValueError(_message(name, expected, value, where))


def _is_int(value) -> bool:
    # bool is an int in Python; True is never a count.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_bool(name: str, value, where=None) -> bool:
    """`value` must be a Python (or NumPy) bool: "no" or 1 is not a bool."""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    _fail(name, "a bool (True or False)", value, where)


def check_int(name: str, value, minimum=None, allow_none=False, where=None):
    """`value` must be an int (not a bool) `>= minimum`, or None if allowed."""
    if value is None and allow_none:
        return None
    if _is_int(value) and (minimum is None or value >= minimum):
        return value
    if minimum == 1:
        expected = "a positive integer"
    elif minimum == 0:
        expected = "a non-negative integer"
    elif minimum is None:
        expected = "an integer"
    else:
        expected = f"an integer >= {minimum}"
    if allow_none:
        expected += " or None"
    _fail(name, expected, value, where)


def check_positive_int(name: str, value, allow_none=False, where=None):
    """`value` must be an int >= 1 (or None if allowed)."""
    return check_int(name, value, minimum=1, allow_none=allow_none, where=where)


def check_positive_int_list(name: str, value, where=None) -> list:
    """`value` must be a positive int or a non-empty list of them; returns a list."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values or not all(_is_int(v) and v > 0 for v in values):
        _fail(name, "a non-empty list of positive integers", value, where)
    return values


def check_finite(
    name: str,
    value,
    minimum=None,
    maximum=None,
    exclusive_minimum=False,
    allow_none=False,
    where=None,
):
    """`value` must be a finite real number in the given range (NaN, inf fail)."""
    if value is None and allow_none:
        return None
    ok = _is_number(value) and math.isfinite(value)
    if ok and minimum is not None:
        ok = value > minimum if exclusive_minimum else value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum
    if ok:
        return value
    expected = "a finite number"
    if minimum is not None:
        expected += f" {'>' if exclusive_minimum else '>='} {minimum}"
    if maximum is not None:
        expected += f"{' and' if minimum is not None else ''} <= {maximum}"
    if allow_none:
        expected += " or None"
    _fail(name, expected, value, where)


def check_rate(name: str, value, closed=False, where=None):
    """`value` must be a float in [0, 1) ([0, 1] with `closed`), e.g. a dropout."""
    ok = _is_number(value) and math.isfinite(value)
    if ok and 0.0 <= value and (value <= 1.0 if closed else value < 1.0):
        return value
    _fail(name, f"a float in [0, 1{']' if closed else ')'}", value, where)


def check_choice(name: str, value, choices, where=None):
    """`value` must be one of `choices` (listed in their own order)."""
    choices = list(choices)
    try:
        ok = value in choices
    except TypeError:  # an unhashable value against a dict/set
        ok = False
    if not ok:
        _fail(name, f"one of {choices}", value, where)
    return value


def check_activation(name: str, value, extra=(), where=None):
    """`value` must be a Keras activation (a name, a callable or a serialized one),
    or one of the names in `extra` that the layer computes itself (DIN's "dice").

    Returns the activation function, or the `extra` name as given."""
    if isinstance(value, str) and value in extra:
        return value
    import tensorflow as tf  # only here: the specs import this module too

    try:
        # tf.keras resolves Keras by the rule keras_attn.backend follows (Keras 3,
        # or tf_keras under TF_USE_LEGACY_KERAS): the same `activations.get`.
        return tf.keras.activations.get(value)
    except (ValueError, TypeError) as error:
        # Keras 3 says ValueError for an unknown name, tf_keras TypeError for a
        # value of the wrong type: one message for both.
        expected = "a Keras activation (a name or a callable)"
        if extra:
            expected = " or ".join([*(f'"{e}"' for e in extra), expected])
        raise ValueError(_message(name, expected, value, where)) from error


def check_class_names(class_names, num_classes: int | None = None):
    """`class_names` must be None or a list of names (of `num_classes` when given)."""
    if class_names is None:
        return None
    if isinstance(class_names, (str, bytes)) or not hasattr(class_names, "__len__"):
        _fail("class_names", "a list of names or None", class_names)
    if num_classes is not None and len(class_names) != num_classes:
        _fail("class_names", f"a list of num_classes={num_classes} names", class_names)
    return [str(c) for c in class_names]


def check_divisible(name: str, value, divisor_name: str, divisor) -> None:
    """`value` must be a multiple of the argument `divisor_name`'s value."""
    if value % divisor:
        raise ValueError(
            f"`{name}` must be divisible by `{divisor_name}`. Received: "
            f"{name}={value!r}, {divisor_name}={divisor!r}"
        )


def static_shape(tensor) -> list:
    """The static shape of a tensor (or TensorShape/tuple) as a list, None where
    unknown."""
    shape = getattr(tensor, "shape", tensor)
    if hasattr(shape, "as_list"):
        if shape.rank is None:
            return None
        return shape.as_list()
    return list(shape)


def check_rank(name: str, tensor, ranks, meaning: str = "") -> list:
    """A tensor's (or shape's) static rank must be in `ranks`; returns the shape.

    An unknown rank passes (it is checked where it becomes known)."""
    ranks = [ranks] if isinstance(ranks, int) else list(ranks)
    shape = static_shape(tensor)
    if shape is not None and len(shape) not in ranks:
        wanted = " or ".join(str(r) for r in ranks)
        meaning = f" {meaning}" if meaning else ""
        raise ValueError(
            f"`{name}` must have rank {wanted}{meaning}. "
            f"Received: {name}.shape={tuple(shape)}"
        )
    return shape


def check_mask_shape(name: str, mask, expected: list, tensor_name: str) -> None:
    """Raises when a mask's static shape cannot match `expected` (None matches
    anything)."""
    if mask is None:
        return
    got = static_shape(mask)
    if got is None:
        return
    ok = len(got) == len(expected) and all(
        g is None or e is None or g == e for g, e in zip(got, expected)
    )
    if not ok:
        raise ValueError(
            f"`{name}` must have shape {tuple(expected)} to match `{tensor_name}`. "
            f"Received: {name}.shape={tuple(got)}"
        )


def check_batch_sizes(**tensors) -> None:
    """The batch sizes (axis 0) of the named tensors must agree.

    `q, v = check_batch_sizes(query=q, value=v)`; None tensors are skipped. Known
    static sizes are compared here (a `ValueError`); where a size is only known when
    the graph runs, a `tf.debugging` assertion with the same message is added (an
    `InvalidArgumentError`; XLA compiles assertions to no-ops, so under
    `jit_compile=True` a mismatch fails in the op that meets it instead).

    Returns the tensors in the order given (None stays None). With an assertion
    they come back through `tf.identity` under its control dependency: an op that
    reads them runs after the check, so the named error is the one raised (a graph
    orders nothing else). Read `_keras_mask` from the inputs before this call.
    """
    given = tuple(tensors.values())
    tensors = {n: t for n, t in tensors.items() if t is not None}
    shapes = {n: static_shape(t) for n, t in tensors.items()}
    shapes = {n: s for n, s in shapes.items() if s}  # rank 0 or unknown: skipped
    names = ", ".join(f"`{n}`" for n in shapes)
    message = f"{names} must have the same batch size. Received: " + ", ".join(
        f"{n}.shape={tuple(s)}" for n, s in shapes.items()
    )
    known = {s[0] for s in shapes.values() if s[0] is not None}
    if len(known) > 1:
        raise ValueError(message)
    if len(shapes) < 2 or all(s[0] is not None for s in shapes.values()):
        return given
    import tensorflow as tf  # only for tensors: the specs import this module too

    sizes = [tf.shape(tensors[n])[0] for n in shapes]
    checks = [
        tf.debugging.assert_equal(sizes[0], size, message=message) for size in sizes[1:]
    ]
    checks = [c for c in checks if c is not None]  # eager: already run
    if not checks:
        return given
    with tf.control_dependencies(checks):
        return tuple(None if t is None else tf.identity(t) for t in given)


def check_ids(name: str, ids, size: int):
    """Integer `ids` must lie in `[0, size)`; returns them.

    Eagerly a `ValueError` naming the first bad id; in a graph a `tf.debugging`
    assertion with the same message (dropped under XLA)."""
    import tensorflow as tf

    ok = tf.reduce_all((ids >= 0) & (ids < size))
    if tf.executing_eagerly():
        if not bool(ok):
            values = ids.numpy()
            bad = values[(values < 0) | (values >= size)]
            raise ValueError(
                f"`{name}` must hold ids in [0, {size}). Received: an id of "
                f"{int(bad.flat[0])} in {name}.shape={tuple(values.shape)}"
            )
        return ids
    message = f"`{name}` must hold ids in [0, {size})"
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
        return tf.identity(ids)


def check_at_most(name: str, value, limit, limit_meaning: str) -> None:
    """`value` must be at most `limit` (e.g. `k` and the number of items)."""
    if value > limit:
        raise ValueError(
            f"`{name}` must be at most {limit_meaning} ({limit}). "
            f"Received: {name}={value!r}"
        )


def check_shape(name: str, shape, expected, meaning: str = "") -> None:
    """An array's shape must equal `expected` (None in `expected` matches any
    size)."""
    shape, expected = tuple(shape), tuple(expected)
    ok = len(shape) == len(expected) and all(
        e is None or s == e for s, e in zip(shape, expected)
    )
    if not ok:
        meaning = f" {meaning}" if meaning else ""
        raise ValueError(
            f"`{name}` must have shape {expected}{meaning}. "
            f"Received: {name}.shape={shape}"
        )


def check_folder(name: str, value) -> Path:
    """`value` is a folder, or a path where one can be made: no file stands at it
    or at a folder above it. Checked before training, so that a folder written
    after the first epoch (a backup, a checkpoint, an export) fails before it.
    Returns the nearest folder that exists (itself or one above)."""
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        _fail(name, "a folder path (str)", value)
    path = existing = Path(value)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = (
            "is a file" if existing == path else f"is under the file {str(existing)!r}"
        )
        raise ValueError(
            f"`{name}` must be a folder, or a path where one can be made. Received: "
            f"{name}={str(value)!r}, which {where}"
        )
    return existing
