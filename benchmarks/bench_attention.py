"""MultiHeadSelfAttention against keras.layers.MultiHeadAttention: forward + backward.

Batch 32, length 256, dim 256, 8 heads of 32, float32, on this machine's CPU, as a
`tf.function` ("graph") and under XLA (`jit_compile=True`). The two layers get the same
weights and inputs; timings alternate between them so that machine noise hits both.

    python -m benchmarks.bench_attention [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from keras_attn.backend import KERAS_3, keras, tf
from keras_attn.layers import MultiHeadSelfAttention

BATCH, LENGTH, DIM, HEADS = 32, 256, 256, 8


def _step_fn(layer, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def step(x, mask):
        with tf.GradientTape() as tape:
            tape.watch(x)
            if isinstance(layer, MultiHeadSelfAttention):
                y = layer(x, mask=mask)
            else:
                y = layer(x, x, attention_mask=mask[:, tf.newaxis, :])
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, [x, *layer.trainable_weights])

    return step


def _time(step, x, mask, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        grads = step(x, mask)
        grads[0].numpy()
        times.append(time.perf_counter() - start)
    return times


def run(repeats: int) -> str:
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(BATCH, LENGTH, DIM)).astype("float32"))
    lengths = rng.integers(LENGTH // 2, LENGTH + 1, size=BATCH)
    mask = tf.constant(np.arange(LENGTH)[None, :] < lengths[:, None])
    ours = MultiHeadSelfAttention(num_heads=HEADS, key_dim=DIM // HEADS)
    theirs = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=DIM // HEADS)
    ours(x, mask=mask)
    theirs(x, x)
    ours.set_weights(theirs.get_weights())
    rows = []
    for jit in (False, True):
        steps = {"keras_attn": _step_fn(ours, jit), "keras": _step_fn(theirs, jit)}
        for step in steps.values():  # trace, compile and warm up
            _time(step, x, mask, 3)
        samples = {name: [] for name in steps}
        for _ in range(repeats):  # alternate, one call at a time
            for name, step in steps.items():
                samples[name] += _time(step, x, mask, 1)
        med = {name: statistics.median(s) * 1000 for name, s in samples.items()}
        rows.append(
            (("XLA" if jit else "tf.function"), med["keras_attn"], med["keras"])
        )
    generation = f"Keras {keras.__version__}" + ("" if KERAS_3 else " (tf_keras)")
    lines = [
        f"MultiHeadSelfAttention vs keras.layers.MultiHeadAttention, {generation}, "
        f"batch {BATCH}, length {LENGTH}, dim {DIM}, {HEADS} heads, padding mask, "
        f"forward+backward, median of {repeats} alternating calls.",
        "",
        "| mode | keras_attn (ms) | keras (ms) | ratio keras_attn/keras |",
        "|---|---|---|---|",
    ]
    for mode, a, b in rows:
        lines.append(f"| {mode} | {a:.1f} | {b:.1f} | {a / b:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    body = run(args.repeats)
    print(body)
    from benchmarks._results import write_section

    name = "bench_attention" + ("" if KERAS_3 else " (tf_keras)")
    prefix = "" if KERAS_3 else "TF_USE_LEGACY_KERAS=1 "
    command = f"{prefix}python -m benchmarks.bench_attention --repeats {args.repeats}"
    write_section(name, body, command)


if __name__ == "__main__":
    main()
