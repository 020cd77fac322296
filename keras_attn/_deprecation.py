"""Old spellings of moved or renamed public names: they keep working for one release
and warn with a `DeprecationWarning` naming the new spelling.

A module whose names moved ends with `__getattr__ = moved(__name__, {...})`: the
old name resolves on first use (PEP 562), so the old module imports nothing of the
new one's package until someone asks for the old name (the package order holds:
`keras_attn.models.seq2seq.export_seq2seq` can point up to `keras_attn.serving`).
"""

from __future__ import annotations

import importlib
import warnings

__all__ = ["deprecated_argument", "moved", "resolve", "warn_deprecated"]


def warn_deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warns that `old` is deprecated in favour of `new` (both as users write them)."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: use {new}.",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def resolve(target: str):
    """The object named by `"package.module:name"` (imported on call)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def moved(old_module: str, names: dict[str, str]):
    """A module `__getattr__` serving `names` (old name -> `"new.module:name"`)."""

    def __getattr__(name: str):
        target = names.get(name)
        if target is None:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        new_module, _, new_name = target.partition(":")
        warnings.warn(
            f"`{old_module}.{name}` moved to `{new_module}.{new_name}`; the old "
            "spelling will be removed in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return resolve(target)

    return __getattr__


def deprecated_argument(kwargs: dict, old: str, new: str, value, owner: str):
    """The value of argument `new`, taking the deprecated spelling `old` from
    `kwargs` (popped, with a warning). Giving both raises."""
    if old not in kwargs:
        return value
    old_value = kwargs.pop(old)
    if value is not None:
        raise ValueError(
            f"`{owner}` takes `{new}` (the new name of `{old}`), not both. "
            f"Received: {new}={value!r}, {old}={old_value!r}"
        )
    warn_deprecated(f"`{owner}({old}=...)`", f"`{new}=`", stacklevel=4)
    return old_value
