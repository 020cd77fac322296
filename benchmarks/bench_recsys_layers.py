"""Training-step time of keras_attn's recommender layers against DeepCTR's.

Compares, at the same sizes and with the same optimizer step:
- `InteractingLayer` vs DeepCTR's `InteractingLayer` (39 fields x dim 16, 2 heads of
  8, residual on);
- `AttentionSequencePooling` vs DeepCTR's `AttentionSequencePoolingLayer` (history
  50, dim 16, MLP (80, 40) with Dice, raw weights, history lengths uniform in 1-50:
  keras_attn gets the mask and computes real items only, DeepCTR the lengths);
- `MMoE` vs DeepCTR's `MMOE` model (input 39 x 16 = 624, 8 experts of (256, 128),
  two tasks with towers of 64: the same model built around keras_attn's `MMoE`).

DeepCTR runs only with `TF_USE_LEGACY_KERAS=1` and tries to reach a package index on
import, so it runs in a tf_keras subprocess, alternating round by round with keras_attn
under tf_keras. The headline compares it with keras_attn under Keras 3 (the default
generation) in its own subprocess; the two kinds of subprocess alternate, `--repeats`
times each, and every figure is the median over all their rounds. A separate XLA
part times the same steps with `tf.function(jit_compile=True)` for both libraries.
Ratios go to benchmarks/RESULTS.md.

Run: `python -m benchmarks.bench_recsys_layers` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from benchmarks._ctr_runs import ROOT, run_json

BATCH = 256
FIELDS, DIM = 39, 16
HISTORY = 50
EXPERTS = 8
SECTION = "Recommender layers vs DeepCTR (training step)"


def _train_step(tf, model, optimizer, jit_compile=False):
    @tf.function(jit_compile=jit_compile)
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            if not isinstance(outputs, (list, tuple)):
                outputs = [outputs]
            loss = tf.add_n(
                [
                    tf.reduce_mean(tf.square(tf.cast(o, tf.float32) - t))
                    for o, t in zip(outputs, targets)
                ]
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def _mmoe_step_flops() -> float:
    """Multiply-add FLOPs of one MMoE training step's matmuls (both libraries).

    Forward `2·m·k·n` per matmul; backward the kernel gradient of each, and the
    input gradient of each layer whose input depends on weights (not the first
    expert layer or the gates, whose input is the data).
    """
    tasks, towers = 2, 64
    first = 2 * BATCH * FIELDS * DIM * EXPERTS * 256 * 2  # forward + kernel grad
    second = 2 * BATCH * 256 * 128 * EXPERTS * 3
    gates = 2 * BATCH * FIELDS * DIM * EXPERTS * tasks * 2
    mixing = 2 * BATCH * tasks * EXPERTS * 128 * 3
    tower = tasks * 2 * BATCH * (128 * towers + towers) * 3
    return float(first + second + gates + mixing + tower)


def _gemm_rate(tf, rounds: int) -> list:
    """GFLOP/s of the MMoE's largest matmul alone ((batch, 624) x (624, 2048)), the
    ceiling for a step made mostly of it."""
    a = tf.random.normal((BATCH, FIELDS * DIM))
    b = tf.random.normal((FIELDS * DIM, EXPERTS * 256))
    matmul = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    matmul(a, b).numpy()
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(20):
            out = matmul(a, b)
        out.numpy()
        seconds = (time.perf_counter() - start) / 20
        rates.append(2 * BATCH * FIELDS * DIM * EXPERTS * 256 / seconds / 1e9)
    return rates


def _models(keras, tf, with_deepctr, bf16=False):
    """{case: {impl: (model, inputs, output shapes)}} at the benchmark's sizes."""
    import numpy as np

    from keras_attn.layers import AttentionSequencePooling, InteractingLayer, MMoE
    from keras_attn.precision import policy_scope

    rng = np.random.default_rng(0)
    cases = {}

    fields = rng.normal(size=(BATCH, FIELDS, DIM)).astype("float32")
    query = rng.normal(size=(BATCH, DIM)).astype("float32")
    keys = rng.normal(size=(BATCH, HISTORY, DIM)).astype("float32")
    lengths = rng.integers(1, HISTORY + 1, size=(BATCH, 1))
    mask = np.arange(HISTORY)[None, :] < lengths
    flat = rng.normal(size=(BATCH, FIELDS * DIM)).astype("float32")
    tasks = ["ctr", "ctcvr"]

    def ours(impl):
        x = keras.Input((FIELDS, DIM))
        model = keras.Model(x, InteractingLayer(num_heads=2, key_dim=8)(x))
        cases.setdefault("InteractingLayer", {})[impl] = (model, fields)

        q, k, m = (
            keras.Input((DIM,)),
            keras.Input((HISTORY, DIM)),
            keras.Input((HISTORY,), dtype="bool"),
        )
        pooled = AttentionSequencePooling(hidden_units=(80, 40), activation="dice")(
            q, k, mask=m
        )
        cases.setdefault("AttentionSequencePooling", {})[impl] = (
            keras.Model([q, k, m], pooled),
            [query, keys, mask],
        )

        x = keras.Input((FIELDS * DIM,), name="x")
        mixed = MMoE(tasks, num_experts=EXPERTS, expert_units=(256, 128))(x)
        outs = []
        for task in tasks:
            h = keras.layers.Dense(64, activation="relu")(mixed[task])
            h = keras.layers.Dense(1, use_bias=False, dtype="float32")(h)
            outs.append(
                keras.layers.Activation("sigmoid", dtype="float32", name=task)(h)
            )
        cases.setdefault("MMoE", {})[impl] = (keras.Model(x, outs), flat)

    ours("keras_attn")
    if bf16:
        with policy_scope("mixed_bfloat16"):
            ours("keras_attn bf16")

    if with_deepctr:
        from deepctr.feature_column import DenseFeat
        from deepctr.layers.interaction import InteractingLayer as DeepInteracting
        from deepctr.layers.sequence import AttentionSequencePoolingLayer
        from deepctr.models.multitask import MMOE

        x = keras.Input((FIELDS, DIM))
        layer = DeepInteracting(att_embedding_size=8, head_num=2, use_res=True)
        cases["InteractingLayer"]["DeepCTR"] = (keras.Model(x, layer(x)), fields)

        q3, k = keras.Input((1, DIM)), keras.Input((HISTORY, DIM))
        n = keras.Input((1,), dtype="int32")
        layer = AttentionSequencePoolingLayer(
            att_hidden_units=(80, 40), att_activation="dice"
        )
        cases["AttentionSequencePooling"]["DeepCTR"] = (
            keras.Model([q3, k, n], layer([q3, k, n])),
            [query[:, None, :], keys, lengths.astype("int32")],
        )

        model = MMOE(
            [DenseFeat("x", FIELDS * DIM)],
            num_experts=EXPERTS,
            expert_dnn_hidden_units=(256, 128),
            tower_dnn_hidden_units=(64,),
            task_names=tuple(tasks),
        )
        cases["MMoE"]["DeepCTR"] = (model, flat)
    return cases


def _worker(
    with_deepctr: bool, rounds: int, steps: int, xla: bool, bf16: bool = False
) -> dict:
    """{case: {impl: [seconds per step, one per round]}}; impl gets " XLA" for the
    jit-compiled step. Implementations of a case alternate round by round."""
    from keras_attn.backend import keras, tf

    results = {}
    for case, impls in _models(keras, tf, with_deepctr, bf16).items():
        runners = {}
        for impl, (model, inputs) in impls.items():
            outputs = model(inputs)
            outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            targets = [tf.zeros_like(tf.cast(o, tf.float32)) for o in outputs]
            feeds = (
                [tf.constant(a) for a in inputs]
                if isinstance(inputs, list)
                else tf.constant(inputs)
            )
            for jit in (False, True) if xla else (False,):
                # Both variants update the same model's weights (each with its own
                # optimizer): the step time does not depend on their values.
                step = _train_step(tf, model, keras.optimizers.SGD(1e-3), jit)
                try:
                    for _ in range(3):  # trace (and compile) and warm up
                        step(feeds, targets).numpy()
                except Exception as error:  # reported, not fatal
                    print(f"{case} {impl} jit={jit}: {error!r}"[:300], file=sys.stderr)
                    continue
                runners[impl + (" XLA" if jit else "")] = (step, feeds, targets)
        times = {impl: [] for impl in runners}
        order = list(runners)
        for r in range(rounds):
            for impl in order if r % 2 == 0 else order[::-1]:
                step, feeds, targets = runners[impl]
                start = time.perf_counter()
                for _ in range(steps):
                    loss = step(feeds, targets)
                loss.numpy()
                times[impl].append((time.perf_counter() - start) / steps)
        results[case] = times
    results["gemm"] = {"GFLOP/s": _gemm_rate(tf, rounds)}
    return results


def _run_worker(
    legacy: bool, rounds: int, steps: int, xla: bool, bf16: bool = False
) -> dict:
    args = ["-m", "benchmarks.bench_recsys_layers", "--worker"]
    args += ["--rounds", str(rounds), "--steps", str(steps)]
    if legacy:
        args.append("--deepctr")
    if not xla:
        args.append("--no-xla")
    if bf16:
        args.append("--bf16")
    return run_json(args, legacy=legacy, timeout=1800, cwd=ROOT)


def _rows(sizes, legacy, keras3, deep_key, ours_key) -> list[str]:
    """One table row per layer: DeepCTR's `deep_key` run (tf_keras) against
    keras_attn's `ours_key` runs under Keras 3 and in DeepCTR's process."""
    rows = []
    for case in sizes:
        deep = legacy[case].get(deep_key)
        ours2 = legacy[case].get(ours_key)
        ours3 = keras3[case].get(ours_key)
        rows.append(
            f"| `{case}` | {_ms(deep)} | {_ms(ours3)} | {_ratio(deep, ours3)} | "
            f"{_ms(ours2)} | {_ratio(deep, ours2)} |"
        )
    return rows


def _ms(times) -> str:
    return "n/a" if not times else f"{statistics.median(times) * 1e3:.2f}"


def _ratio(slow, fast) -> str:
    if not slow or not fast:
        return "n/a"
    return f"{statistics.median(slow) / statistics.median(fast):.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--deepctr", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--repeats", type=int, default=2, help="subprocesses of each generation"
    )
    parser.add_argument("--no-xla", action="store_true", help="skip the XLA part")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="also time keras_attn under mixed_bfloat16 (section with a ' bf16' name)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    xla = not args.no_xla
    if args.worker:
        print(
            json.dumps(_worker(args.deepctr, args.rounds, args.steps, xla, args.bf16))
        )
        return

    loads = [os.getloadavg()[0]]
    # {generation: {case: {impl: [per-round seconds]}}}, pooled over subprocesses
    # that alternate: tf_keras, Keras 3, Keras 3, tf_keras, ...
    pooled = {"tf_keras": {}, "keras3": {}}
    for r in range(args.repeats):
        for legacy in (True, False) if r % 2 == 0 else (False, True):
            result = _run_worker(legacy, args.rounds, args.steps, xla, args.bf16)
            loads.append(os.getloadavg()[0])
            gen = pooled["tf_keras" if legacy else "keras3"]
            for case, impls in result.items():
                for impl, times in impls.items():  # "gemm" holds GFLOP/s
                    gen.setdefault(case, {}).setdefault(impl, []).extend(times)
    legacy, keras3 = pooled["tf_keras"], pooled["keras3"]
    rounds = args.rounds * args.repeats
    lines = [
        f"Batch {BATCH}; median over {rounds} rounds ({args.repeats} subprocesses x "
        f"{args.rounds}) of {args.steps} SGD steps (forward, backward, update) in "
        "`tf.function`. DeepCTR 0.9.4 runs under tf_keras (`TF_USE_LEGACY_KERAS=1`), "
        "alternating round by round with keras_attn under tf_keras in the same "
        "subprocess; keras_attn under Keras 3 (its default generation) runs in its "
        "own subprocess, the two kinds alternating. Headline: DeepCTR (tf_keras) vs "
        "keras_attn (Keras 3). 1-minute load average at the start and after each "
        f"subprocess: {', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} "
        "cores (other jobs share them: above the core count, read the ratios as "
        "noise-bound).",
        "",
        "| layer | sizes | DeepCTR ms/step (tf_keras) | keras_attn ms/step (Keras 3) "
        "| speed-up | keras_attn ms/step (tf_keras, same process as DeepCTR) "
        "| speed-up (same process) |",
        "|---|---|---|---|---|---|---|",
    ]
    sizes = {
        "InteractingLayer": f"{FIELDS} fields x {DIM}, 2 heads x 8, residual",
        "AttentionSequencePooling": f"history {HISTORY} x {DIM}, MLP (80, 40), Dice",
        "MMoE": f"input {FIELDS * DIM}, {EXPERTS} experts (256, 128), 2 tasks",
    }
    for case in sizes:
        deep = legacy[case].get("DeepCTR")
        ours2 = legacy[case].get("keras_attn")
        ours3 = keras3[case].get("keras_attn")
        lines.append(
            f"| `{case}` | {sizes[case]} | {_ms(deep)} | {_ms(ours3)} | "
            f"{_ratio(deep, ours3)} | {_ms(ours2)} | {_ratio(deep, ours2)} |"
        )
    if xla:
        lines += [
            "",
            "With XLA (`tf.function(jit_compile=True)` around the same step, both "
            "libraries compiled; same subprocesses and rounds):",
            "",
            "| layer | DeepCTR XLA ms/step (tf_keras) "
            "| keras_attn XLA ms/step (Keras 3) | speed-up "
            "| keras_attn XLA ms/step (tf_keras) "
            "| speed-up (same process) |",
            "|---|---|---|---|---|---|",
        ]
        lines += _rows(sizes, legacy, keras3, "DeepCTR XLA", "keras_attn XLA")
    if args.bf16:
        lines += [
            "",
            "keras_attn under `mixed_bfloat16` (built in "
            "`keras_attn.precision.policy_scope`, no XLA; same subprocesses and "
            "rounds) against DeepCTR's float32 step:",
            "",
            "| layer | DeepCTR ms/step (tf_keras) | keras_attn bf16 ms/step (Keras 3) "
            "| speed-up | keras_attn bf16 ms/step (tf_keras) "
            "| speed-up (same process) |",
            "|---|---|---|---|---|---|",
        ]
        lines += _rows(sizes, legacy, keras3, "DeepCTR", "keras_attn bf16")
    rates = legacy.get("gemm", {}).get("GFLOP/s", []) + keras3.get("gemm", {}).get(
        "GFLOP/s", []
    )
    deep = legacy["MMoE"].get("DeepCTR")
    if rates and deep:
        rate = max(rates)  # the best the machine did: a ceiling
        floor_ms = _mmoe_step_flops() / (rate * 1e9) * 1e3
        lines += [
            "",
            f"Roofline of the MMoE step: its matmuls are {_mmoe_step_flops() / 1e9:.2f}"
            f" GFLOP (forward and backward); its largest matmul alone runs at "
            f"{rate:.0f} GFLOP/s here at best (over the same subprocesses), so no "
            f"implementation of this model can take less than about {floor_ms:.1f} "
            f"ms/step. DeepCTR takes {_ms(deep)} ms: 1.3x faster would be "
            f"{statistics.median(deep) * 1e3 / 1.3:.1f} ms, "
            + (
                "below that floor."
                if statistics.median(deep) * 1e3 / 1.3 < floor_ms
                else "above that floor."
            ),
        ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_recsys_layers" + "".join(
            f" --{k.replace('_', '-')}" + ("" if v is True else f" {v}")
            for k, v in vars(args).items()
            if k in ("rounds", "steps", "repeats") or (v is True and k != "no_write")
        )
        write_section(SECTION + (" bf16" if args.bf16 else ""), body, command)


if __name__ == "__main__":
    main()
