"""Where the attention layers stay finite under `mixed_float16`.

float16 holds at most 65504, and a dot-product score of two vectors of d entries of
size s is up to s^2 * d. For each layer this script draws inputs `(4, 10, 16)` of
standard deviation s (3 seeds, freshly initialized layers) and reports the largest
s of the grid at which the output and every gradient (inputs and weights) are
finite. Not a timing: the figures do not depend on the machine's load.

    python -m benchmarks.float16_range [--no-write]
"""

from __future__ import annotations

import argparse

import numpy as np

from keras_attn.backend import keras, tf

SCALES = (10, 20, 30, 50, 70, 100, 150, 200, 300, 500, 1000, 3000)


def _layers():
    import keras_attn.layers as L

    return {
        'Attention(score="dot")': (lambda: L.Attention(), 2),
        'Attention(score="scaled_dot")': (lambda: L.Attention(score="scaled_dot"), 2),
        'Attention(score="additive")': (lambda: L.Attention(score="additive"), 2),
        "MultiHeadAttention(2, 8)": (lambda: L.MultiHeadAttention(2, 8), 2),
        "keras.layers.MultiHeadAttention(2, 8)": (
            lambda: keras.layers.MultiHeadAttention(2, 8),
            2,
        ),
        "TransformerEncoderBlock(2, 16)": (
            lambda: L.TransformerEncoderBlock(2, 16),
            1,
        ),
        "InteractingLayer(2, 8)": (lambda: L.InteractingLayer(2, 8), 1),
        "RelativeMultiHeadAttention(2, 8)": (
            lambda: L.RelativeMultiHeadAttention(2, 8),
            1,
        ),
        "ContextAttentionPooling(8)": (lambda: L.ContextAttentionPooling(8), 1),
    }


def _finite(make, n_inputs, scale) -> bool:
    for seed in range(3):
        keras.utils.set_random_seed(seed)  # the same weights on every run
        layer = make()
        x = np.random.default_rng(seed).normal(size=(4, 10, 16)) * scale
        x = tf.constant(x.astype("float32"))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(*([x] * n_inputs))
            loss = tf.reduce_sum(tf.cast(y, tf.float32))
        grads = tape.gradient(loss, [x, *layer.trainable_weights])
        values = [y] + [tf.convert_to_tensor(g) for g in grads if g is not None]
        if not all(np.isfinite(tf.cast(v, tf.float32).numpy()).all() for v in values):
            return False
    return True


def run() -> str:
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        rows = []
        for name, (make, n_inputs) in _layers().items():
            best = None
            for scale in SCALES:
                if not _finite(make, n_inputs, scale):
                    break
                best = scale
            rows.append(f"| {name} | {best if best else '< 10'} |")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return (
        "Under `mixed_float16`: the largest input standard deviation (of the grid "
        f"{', '.join(map(str, SCALES))}) at which outputs and gradients are finite, "
        "inputs (4, 10, 16), seeds 0-2 for inputs and weights, default "
        "initializers. Inputs that come from a layer norm or an embedding (std "
        "about 1) are far inside; `mixed_bfloat16` "
        "has float32's range.\n\n| layer | finite up to std |\n|---|---|\n"
        + "\n".join(rows)
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    body = run()
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section("float16_range", body, "python -m benchmarks.float16_range")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
