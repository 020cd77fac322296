"""Argument and shape checks shared by the layers: each error names the argument, what
was expected and what was received."""

from __future__ import annotations


def check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {sorted(choices)}. Received: {name}={value!r}"
        )


def check_positive_int(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_rate(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )


def static_shape(tensor) -> list:
    """The static shape of a tensor (or TensorShape/tuple) as a list, None where
    unknown."""
    shape = getattr(tensor, "shape", tensor)
    if hasattr(shape, "as_list"):
        return shape.as_list()
    return list(shape)


def check_mask_shape(name: str, mask, expected: list, tensor_name: str) -> None:
    """Raises when a mask's static shape cannot match `expected` (None matches
    anything)."""
    if mask is None:
        return
    got = static_shape(mask)
    ok = len(got) == len(expected) and all(
        g is None or e is None or g == e for g, e in zip(got, expected)
    )
    if not ok:
        raise ValueError(
            f"`{name}` must have shape {tuple(expected)} to match `{tensor_name}`. "
            f"Received: {name}.shape={tuple(got)}"
        )
