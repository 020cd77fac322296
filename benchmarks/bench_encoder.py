"""Training step of a Transformer encoder stack: float32 vs mixed_bfloat16, with and
without XLA, keras_attn's `TransformerEncoderBlock` vs Keras' own layers, against
this machine's matmul roofline measured in the same run.

Shapes:
- "small": 4 blocks, batch 16 x 128 tokens, dim 256, 4 heads, feed-forward 1024;
- "bert-base-like": dim 768, 12 heads, 128 tokens, feed-forward 3072, but only
  2 blocks at batch 4 (BERT-base has 12 blocks; fewer layers and a small batch keep
  a step within seconds on 2 shared cores; the per-layer shapes are BERT-base's).

One training step = forward, backward and an Adam update, in a `tf.function`
(`jit_compile` on or off), dropout 0, no mask, a mean-squared loss on the last
block's output. "keras" is the same post-norm block built from
`keras.layers.MultiHeadAttention`, `LayerNormalization` and two `Dense` layers
(ReLU). Useful FLOPs are counted in `step_flops` (matmuls only: projections,
scores, weights x values, feed-forward; x3 for forward + backward). Configurations
alternate within each round (the order reversed every other round), rounds repeat,
and each figure is the median over rounds of the best-of-`steps` step time. The
roofline (`bench_roofline`) is measured before and after; the share is of the
better of the two measurements for that dtype (best compile mode). The load
average is reported: other jobs share the CPU.

Run: `python -m benchmarks.bench_encoder` (bounded by `--minutes`, default 12).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

SECTION = "bench_encoder"
SHAPES = {
    "small": dict(layers=4, batch=16, length=128, dim=256, heads=4, ff=1024),
    "bert-base-like": dict(layers=2, batch=4, length=128, dim=768, heads=12, ff=3072),
}


def step_flops(layers, batch, length, dim, heads, ff) -> float:
    """Useful FLOPs of one training step (multiply-add = 2 FLOPs)."""
    tokens = batch * length
    projections = 4 * 2 * tokens * dim * dim  # query, key, value, output
    scores = 2 * batch * length * length * dim  # Q K^T, all heads: H * L^2 * dh
    weighted = 2 * batch * length * length * dim  # weights x V
    feedforward = 2 * 2 * tokens * dim * ff  # dim -> ff -> dim
    forward = layers * (projections + scores + weighted + feedforward)
    return 3.0 * forward  # backward ~ 2x forward


def _keras_block(keras, dim, heads, ff, index):
    """A post-norm encoder block from Keras' own layers (functional)."""
    x = keras.Input((None, dim))
    attention = keras.layers.MultiHeadAttention(
        heads, dim // heads, name=f"mha_{index}"
    )(x, x)
    x1 = keras.layers.LayerNormalization(epsilon=1e-5)(x + attention)
    h = keras.layers.Dense(ff, activation="relu")(x1)
    h = keras.layers.Dense(dim)(h)
    out = keras.layers.LayerNormalization(epsilon=1e-5)(x1 + h)
    return keras.Model(x, out, name=f"keras_block_{index}")


def _stack(impl, shape):
    from keras_attn.backend import keras
    from keras_attn.layers import TransformerEncoderBlock

    s = SHAPES[shape]
    if impl == "keras_attn":
        blocks = [
            TransformerEncoderBlock(
                num_heads=s["heads"], intermediate_dim=s["ff"], dropout=0.0
            )
            for _ in range(s["layers"])
        ]
    else:
        blocks = [
            _keras_block(keras, s["dim"], s["heads"], s["ff"], i)
            for i in range(s["layers"])
        ]
    inputs = keras.Input((s["length"], s["dim"]))
    x = inputs
    for block in blocks:
        x = block(x)
    return keras.Model(inputs, x)


def _step_fn(config):
    """A built model and its compiled training step for one configuration."""
    from keras_attn.backend import keras, tf
    from keras_attn.precision import policy_scope

    shape, impl, policy, xla = config
    s = SHAPES[shape]
    with policy_scope(policy):
        model = _stack(impl, shape)
    optimizer = keras.optimizers.Adam(1e-4)
    x = tf.random.stateless_normal(
        (s["batch"], s["length"], s["dim"]), seed=(1, 2), dtype=tf.float32
    )
    y = tf.random.stateless_normal(x.shape, seed=(3, 4), dtype=tf.float32)

    @tf.function(jit_compile=xla)
    def step():
        with tf.GradientTape() as tape:
            out = tf.cast(model(x, training=True), tf.float32)
            loss = tf.reduce_mean(tf.square(out - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def _time(step, steps) -> float:
    best = float("inf")
    for _ in range(steps):
        start = time.perf_counter()
        step().numpy()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--impls", nargs="+", default=["keras_attn", "keras"])
    parser.add_argument("--policies", nargs="+", default=["float32", "mixed_bfloat16"])
    parser.add_argument("--xla", nargs="+", default=["off", "on"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="timed steps (best)")
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    from benchmarks.bench_roofline import cpu_description, roofline

    deadline = time.monotonic() + 60 * args.minutes
    loads = [os.getloadavg()[0]]
    roofs = [roofline(reps=3)]
    configs = [
        (shape, impl, policy, xla == "on")
        for shape in args.shapes
        for impl in args.impls
        for policy in args.policies
        for xla in args.xla
    ]
    steps = {}
    for config in configs:  # build, trace/compile, warm up (not timed)
        start = time.perf_counter()
        steps[config] = _step_fn(config)
        steps[config]().numpy()
        print(f"warm-up {config}: {time.perf_counter() - start:.0f} s", flush=True)
    times = {c: [] for c in configs}
    rounds = 0
    for r in range(args.rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for config in order:
            times[config].append(_time(steps[config], args.steps))
            print(f"  {config}: {1e3 * times[config][-1]:,.0f} ms", flush=True)
        rounds += 1
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}: load {loads[-1]:.1f}", flush=True)
        if time.monotonic() > deadline:
            break
    roofs.append(roofline(reps=3))
    loads.append(os.getloadavg()[0])
    best_roof = {
        dtype: max(rf[(dtype, jit)] for rf in roofs for jit in (False, True))
        for dtype in ("float32", "bfloat16")
    }
    lines = [
        "| shape | layers | implementation | policy | XLA | ms / step | "
        "useful GFLOP/s | share of roofline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for config in configs:
        shape, impl, policy, xla = config
        seconds = statistics.median(times[config])
        flops = step_flops(**SHAPES[shape])
        rate = flops / seconds / 1e9
        dtype = "bfloat16" if policy == "mixed_bfloat16" else "float32"
        lines.append(
            f"| {shape} | {SHAPES[shape]['layers']} | {impl} | {policy} | "
            f"{'on' if xla else 'off'} | {1e3 * seconds:,.0f} | {rate:,.0f} | "
            f"{100 * rate / best_roof[dtype]:.0f} % of {best_roof[dtype]:,.0f} |"
        )
    roof_lines = [
        "| roofline (2048^3 matmul, GFLOP/s) | float32 | bfloat16 |",
        "|---|---|---|",
    ]
    for when, rf in zip(("before", "after"), roofs):
        roof_lines.append(
            f"| {when}, tf.function / XLA | {rf[('float32', False)]:,.0f} / "
            f"{rf[('float32', True)]:,.0f} | {rf[('bfloat16', False)]:,.0f} / "
            f"{rf[('bfloat16', True)]:,.0f} |"
        )
    flop_note = ", ".join(
        f"{name} {step_flops(**s) / 1e9:,.1f} GFLOP" for name, s in SHAPES.items()
    )
    body = (
        f"CPU: {cpu_description()}. Load average (1 min) over the run: "
        f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores (other jobs "
        f"ran). {rounds} rounds, median of best-of-{args.steps} steps. Useful "
        f"FLOPs per step: {flop_note}.\n\n"
        + "\n".join(lines)
        + "\n\n"
        + "\n".join(roof_lines)
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_encoder " + " ".join(
            f"--{k.replace('_', '-')} {' '.join(v) if isinstance(v, list) else v}"
            for k, v in vars(args).items()
            if k != "no_write"
        )
        name = SECTION
        if args.shapes != list(SHAPES):
            name += f" ({', '.join(args.shapes)})"
        write_section(name, body, command)


if __name__ == "__main__":
    main()
