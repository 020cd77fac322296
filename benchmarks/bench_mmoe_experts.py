"""MMoE's first expert layer: one fused matmul for all experts vs one matmul per expert.

Every expert reads the same input, so the first layer can run as one
`(batch, dim) x (dim, experts * units)` matmul. `MMoE` does so while the stacked
kernel holds at most `keras_attn.layers.mmoe._FUSED_FIRST_LAYER` values; this script
times both formulations of the same layer (the bound patched to force each) at the
census benchmark's size (319 inputs, 8 experts of 64) and at bench_recsys_layers'
(624 inputs, 8 experts of 256, 128), forward + backward with the input's gradient,
batch 512, as a `tf.function` and under XLA. Timings alternate between the two
formulations; each figure is the median over rounds of 20 steps.

    python -m benchmarks.bench_mmoe_experts [--rounds 9] [--no-write]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from keras_attn.backend import tf
from keras_attn.layers import MMoE
from keras_attn.layers import mmoe as mmoe_module

BATCH = 512
SIZES = [(319, (64,)), (624, (256, 128))]


def _step(layer, x, jit_compile: bool, fused: bool):
    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x)
            loss = sum(tf.reduce_sum(y * y) for y in outputs.values())
        return tape.gradient(loss, [x, *layer.trainable_weights])

    # The path is chosen while tracing: trace (and compile) under the bound that
    # forces it.
    saved = mmoe_module._FUSED_FIRST_LAYER
    mmoe_module._FUSED_FIRST_LAYER = math.inf if fused else 0
    try:
        step()
    finally:
        mmoe_module._FUSED_FIRST_LAYER = saved
    return step


def _time_round(step, rounds_out: list):
    """Appends one round's mean ms per step (20 steps); run() takes the median."""
    start = time.perf_counter()
    for _ in range(20):
        grads = step()
    grads[0].numpy()
    rounds_out.append((time.perf_counter() - start) / 20 * 1e3)


def run(rounds: int) -> str:
    rng = np.random.default_rng(0)
    rows = []
    for dim, units in SIZES:
        x = tf.constant(rng.normal(size=(BATCH, dim)).astype("float32"))
        layer = MMoE(["a", "b"], num_experts=8, expert_units=units)
        layer(x)
        kernel_values = dim * 8 * units[0]
        for jit in (False, True):
            steps = {f: _step(layer, x, jit, f) for f in (True, False)}
            times = {True: [], False: []}
            for _ in range(rounds):
                for fused, step in steps.items():
                    _time_round(step, times[fused])
            fused_ms = statistics.median(times[True])
            separate_ms = statistics.median(times[False])
            chosen = (
                "fused"
                if kernel_values <= mmoe_module._FUSED_FIRST_LAYER
                else ("per expert")
            )
            rows.append(
                f"| {dim} -> 8 x {units} | {kernel_values:,} | "
                f"{'XLA' if jit else 'tf.function'} | {fused_ms:.2f} | "
                f"{separate_ms:.2f} | {separate_ms / fused_ms:.2f}x | {chosen} |"
            )
    return (
        f"Batch {BATCH}, 2 tasks, softmax gates, forward + backward (input gradient "
        f"included), median over {rounds} rounds of 20 steps, alternating. The bound: "
        f"{mmoe_module._FUSED_FIRST_LAYER:,} kernel values.\n\n"
        "| experts | first-layer kernel values | mode | fused ms | per expert ms "
        "| per expert / fused | MMoE uses |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    body = run(args.rounds)
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(
            "bench_mmoe_experts",
            body,
            f"python -m benchmarks.bench_mmoe_experts --rounds {args.rounds}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
