"""This machine's matmul roofline: a 2048^3 matmul in GFLOP/s, float32 and bfloat16,
with and without XLA.

Benchmarks that quote a utilisation measure the roofline in their own run (the CPU
of this machine kind changes from day to day, and other jobs share it):
`from benchmarks.bench_roofline import roofline` and call it beside their timings.
On CPUs with AMX / AVX512-BF16, TensorFlow's oneDNN kernels run bfloat16 matmuls
several times faster than float32; XLA's CPU backend does not use those units.

Run: `python -m benchmarks.bench_roofline` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import time

SECTION = "bench_roofline"
SIZE = 2048


def cpu_description() -> str:
    """The CPU's model name and its matmul-relevant flags (Linux), e.g.
    "AMD EPYC (avx2, fma)": bfloat16 pays where amx_bf16 or avx512_bf16 shows."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    shown = [f for f in wanted if f in flags]
    return f"{model} ({', '.join(shown) or 'no AVX2'})"


def matmul_gflops(
    dtype: str = "float32",
    jit_compile: bool = False,
    size: int = SIZE,
    reps: int = 5,
    inner: int = 4,
) -> float:
    """GFLOP/s of a `size`^3 matmul in `dtype`: the best of `reps` timings of
    `inner` chained matmuls inside one `tf.function`, after a warm-up call."""
    import tensorflow as tf

    a = tf.random.stateless_normal((size, size), seed=(1, 2), dtype=tf.float32)
    b = tf.random.stateless_normal((size, size), seed=(3, 4), dtype=tf.float32)
    a, b = tf.cast(a, dtype) / 32.0, tf.cast(b, dtype) / 32.0

    @tf.function(jit_compile=jit_compile)
    def run(x, y):
        total = tf.zeros((), tf.float32)
        for _ in range(inner):  # unrolled: `inner` independent matmuls
            x = tf.matmul(x, y)
            total += tf.cast(x[0, 0], tf.float32)
        return total

    run(a, b).numpy()  # trace, compile, warm up
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        run(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 * inner / best / 1e9


def roofline(reps: int = 5, xla: bool = True) -> dict:
    """`{(dtype, jit_compile): GFLOP/s}` for float32 and bfloat16, without XLA
    (and with it when `xla`)."""
    modes = (False, True) if xla else (False,)
    return {
        (dtype, jit): matmul_gflops(dtype, jit, reps=reps)
        for jit in modes
        for dtype in ("float32", "bfloat16")
    }


def table(rates: dict, load: float | None = None) -> str:
    lines = [
        "| dtype | tf.function (GFLOP/s) | XLA (GFLOP/s) |",
        "|---|---|---|",
    ]
    for dtype in ("float32", "bfloat16"):
        xla = rates.get((dtype, True))
        lines.append(
            f"| {dtype} | {rates[(dtype, False)]:,.0f} | "
            f"{'-' if xla is None else f'{xla:,.0f}'} |"
        )
    text = "\n".join(lines)
    if load is not None:
        text += (
            f"\n\nLoad average (1 min, highest seen): {load:.1f} on "
            f"{os.cpu_count()} cores."
        )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-xla", action="store_true", help="skip XLA")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    loads = [os.getloadavg()[0]]
    rates = roofline(reps=args.reps, xla=not args.no_xla)
    loads.append(os.getloadavg()[0])
    body = (
        f"CPU: {cpu_description()}. "
        f"A {SIZE}x{SIZE}x{SIZE} matmul, best of {args.reps} timings of 4 chained "
        "matmuls in one `tf.function`.\n\n" + table(rates, max(loads))
    )
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section(SECTION, body, "python -m benchmarks.bench_roofline")


if __name__ == "__main__":
    main()
