"""Mixed precision for the fit helpers: a policy scope and the XLA choice it implies.

`mixed_precision=` takes "float32" (the default), "mixed_bfloat16" or
"mixed_float16". `policy_scope` sets Keras' global dtype policy while a model is
built (its layers take the policy they are made under) and restores the one that
was set before, under both Keras generations.

`resolve_jit_compile` is the rule the fit helpers apply to `jit_compile="auto"`
(or None): on a machine without a GPU or TPU, a bfloat16 policy trains without
XLA on a CPU with AMX / AVX512-BF16, because TensorFlow's oneDNN kernels use
them while XLA's CPU backend does not (measured on an AMX CPU, a 2048-cube
matmul: ~1,450 GFLOP/s in bfloat16 without XLA, ~280 with it, ~335 in float32),
and with XLA on a CPU without them (there bfloat16 is slower than float32 either
way, and least slow under XLA); every other case keeps the helper's own default.
"""

from __future__ import annotations

import contextlib

from keras_attn._validation import check_choice
from keras_attn.backend import keras, tf

__all__ = [
    "POLICIES",
    "check_jit_compile",
    "check_mixed_precision",
    "check_model_policy",
    "cpu_has_bfloat16_units",
    "has_accelerator",
    "model_policy",
    "policy_scope",
    "resolve_jit_compile",
]

#: The values `mixed_precision=` takes.
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def check_mixed_precision(mixed_precision, name: str = "mixed_precision") -> str:
    """`mixed_precision` must be one of `POLICIES`; returns it."""
    return check_choice(name, mixed_precision, POLICIES)


def check_jit_compile(jit_compile):
    """`jit_compile` must be True, False, None or "auto"; returns it."""
    if jit_compile is None or isinstance(jit_compile, bool) or jit_compile == "auto":
        return jit_compile
    raise ValueError(
        "`jit_compile` must be True, False, None or 'auto'. "
        f"Received: jit_compile={jit_compile!r}"
    )


def _policy_name(policy) -> str:
    return policy if isinstance(policy, str) else policy.name


@contextlib.contextmanager
def policy_scope(mixed_precision: str = "float32"):
    """Sets Keras' global dtype policy inside the block, then restores the old one.

    Layers made inside the block compute in the policy's dtype (their variables
    stay float32 under a mixed policy). The previous policy comes back even when
    the block raises.

    Example:

    >>> from keras_attn.backend import keras
    >>> with policy_scope("mixed_bfloat16"):
    ...     layer = keras.layers.Dense(2)
    >>> layer.compute_dtype, keras.mixed_precision.global_policy().name
    ('bfloat16', 'float32')
    """
    check_mixed_precision(mixed_precision)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(mixed_precision)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def model_policy(model) -> str:
    """The policy a model computes in, as a `POLICIES` name.

    Read from its layers (a model keeps float32 output layers under a mixed
    policy): "mixed_bfloat16" when any layer computes in bfloat16, "mixed_float16"
    when any computes in float16, else "float32".
    """
    dtypes = {tf.as_dtype(model.compute_dtype).name}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        dtypes.add(tf.as_dtype(layer.compute_dtype).name)
    if "bfloat16" in dtypes:
        return "mixed_bfloat16"
    if "float16" in dtypes:
        return "mixed_float16"
    return "float32"


def has_accelerator() -> bool:
    """Whether TensorFlow sees a GPU or TPU (else the model trains on the CPU)."""
    return any(
        d.device_type in ("GPU", "TPU") for d in tf.config.list_physical_devices()
    )


def cpu_has_bfloat16_units() -> bool:
    """Whether the CPU multiplies bfloat16 in hardware (AMX or AVX512-BF16).

    Read from the `flags` of /proc/cpuinfo (Linux); False where it cannot be read.
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


def resolve_jit_compile(jit_compile, mixed_precision: str, default):
    """The `jit_compile` a fit helper compiles with.

    Args:
        jit_compile: True, False, or None / "auto" to choose by policy and device.
        mixed_precision: a `POLICIES` name (the model's policy).
        default: what "auto" gives in every case the rule below leaves alone (the
            helper's own default; None leaves Keras' `compile` default).

    Returns:
        `jit_compile` itself when it is a bool. For "auto", a bfloat16 policy on a
        machine without GPU or TPU: False on a CPU with AMX / AVX512-BF16
        (TensorFlow's oneDNN kernels use them, XLA's CPU backend does not: a
        bfloat16 matmul measured ~5x slower under XLA), True on a CPU without
        them (no kernel is fast then; XLA fuses the casts: an encoder step
        measured 2.3x faster with it). Every other case: `default`.
    """
    check_jit_compile(jit_compile)
    check_mixed_precision(mixed_precision)
    if isinstance(jit_compile, bool):
        return jit_compile
    if mixed_precision == "mixed_bfloat16" and not has_accelerator():
        return not cpu_has_bfloat16_units()
    return default


def check_model_policy(model, mixed_precision, where: str) -> str:
    """The model's policy; `mixed_precision` (when not None) must be it.

    A model's layers take their policy when they are made, so a built model cannot
    change it: build it under `policy_scope(mixed_precision)` instead.
    """
    actual = model_policy(model)
    if mixed_precision is None:
        return actual
    check_mixed_precision(mixed_precision)
    if mixed_precision != actual:
        raise ValueError(
            f"`mixed_precision` must be the policy the model was built under "
            f"({actual!r}) in {where}: build the model inside "
            f"`keras_attn.precision.policy_scope({mixed_precision!r})`. "
            f"Received: mixed_precision={mixed_precision!r}"
        )
    return actual
