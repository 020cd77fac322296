"""Local (windowed) against global multi-head self-attention on long sequences.

`MultiHeadSelfAttention(window=128)` against the same layer without a window, at
lengths 512 to 8192, on a padded document (the last eighth of the positions masked;
`--no-mask` drops the mask): wall time and peak memory of one forward+backward step (a
`tf.function` computing the gradient of a sum of the outputs with respect to the
weights and the inputs). Each (mode, length) runs in a fresh subprocess, so its peak
resident memory (`ru_maxrss`) is its own; the table reports the peak above the
subprocess' resident memory just before the first step (TensorFlow and the layer
already loaded). Modes alternate at every length. A global run that does not finish
within `--timeout` seconds, or runs out of memory, is reported as skipped.

Run: `python -m benchmarks.bench_long_sequence` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from benchmarks._ctr_runs import last_json, run_python

SECTION = "bench_long_sequence"
BATCH, DIM, HEADS, KEY_DIM, WINDOW = 1, 128, 4, 32, 128
LENGTHS = (512, 1024, 2048, 4096, 8192)

_CHILD = r"""
import json, resource, sys, time
import numpy as np
import tensorflow as tf
from keras_attn.layers import MultiHeadSelfAttention

mode, length, batch, dim, heads, key_dim, window, repeats, use_mask = sys.argv[1:10]
use_mask = use_mask == "1"
length, batch, dim = int(length), int(batch), int(dim)
heads, key_dim, window, repeats = int(heads), int(key_dim), int(window), int(repeats)
layer = MultiHeadSelfAttention(
    num_heads=heads, key_dim=key_dim, window=window if mode == "local" else None
)
x = tf.constant(np.random.default_rng(0).normal(size=(batch, length, dim)), tf.float32)
# A padded document: the last eighth of the positions is padding.
mask = tf.constant(np.arange(length)[None] < length - length // 8)
mask = tf.broadcast_to(mask, (batch, length)) if use_mask else None
layer(x[:, :8])

@tf.function
def step(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x, mask=mask))
    return tape.gradient(loss, [x] + layer.trainable_variables)

def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

step.get_concrete_function(tf.TensorSpec(x.shape, tf.float32))
before = peak_mib()
times = []
for _ in range(repeats + 1):
    start = time.perf_counter()
    [g.numpy() for g in step(x)]
    times.append(time.perf_counter() - start)
print(json.dumps({
    "ms": 1000 * float(np.median(times[1:])),
    "peak_mib": peak_mib() - before,
    "rss_mib": peak_mib(),
}))
"""


def run_one(
    mode: str, length: int, repeats: int, timeout: int, mask: bool = True
) -> dict:
    args = [mode, length, BATCH, DIM, HEADS, KEY_DIM, WINDOW, repeats, int(mask)]
    try:
        proc = run_python(["-c", _CHILD, *args], legacy=None, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"over {timeout} s"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"skipped": f"failed (exit {proc.returncode}): {tail[0][:80]}"}
    return last_json(proc)


def _cell(result, key, fmt):
    return result["skipped"] if "skipped" in result else fmt.format(result[key])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument(
        "--no-mask", action="store_true", help="without the padding mask"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)

    rows = []
    for length in args.lengths:
        repeats = args.repeats if length <= 2048 else max(1, args.repeats - 1)
        mask = not args.no_mask
        local = run_one("local", length, repeats, args.timeout, mask)
        dense = run_one("global", length, repeats, args.timeout, mask)
        print(length, "local", local, "global", dense, flush=True)
        rows.append((length, local, dense))

    lines = [
        f"`MultiHeadSelfAttention`, batch {BATCH}, dim {DIM}, {HEADS} heads of "
        f"{KEY_DIM}, float32, "
        + ("no mask" if args.no_mask else "padding mask (last eighth padded)")
        + ", one forward+backward step (`tf.function`), median of "
        f"{args.repeats} after a warm-up ({max(1, args.repeats - 1)} from 4096 on); "
        "peak memory = resident high-water mark above the process' resident memory "
        "before the first step, one fresh subprocess per cell.",
        "",
        "| length | local w=128 (ms) | global (ms) | speed-up | local peak (MiB) "
        "| global peak (MiB) | memory ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for length, local, dense in rows:
        both = "skipped" not in local and "skipped" not in dense
        speedup = f"{dense['ms'] / local['ms']:.1f}x" if both else "-"
        memory = (
            f"{dense['peak_mib'] / max(local['peak_mib'], 1.0):.1f}x" if both else "-"
        )
        lines.append(
            f"| {length} | {_cell(local, 'ms', '{:.0f}')} "
            f"| {_cell(dense, 'ms', '{:.0f}')} | {speedup} "
            f"| {_cell(local, 'peak_mib', '{:.0f}')} "
            f"| {_cell(dense, 'peak_mib', '{:.0f}')} | {memory} |"
        )
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        command = "python -m benchmarks.bench_long_sequence"
        extra = " ".join(sys.argv[1:]) if argv is None else " ".join(argv)
        section = SECTION + (" (no mask)" if args.no_mask else "")
        write_section(section, body, f"{command} {extra}".strip())


if __name__ == "__main__":
    main()
