"""One fine-tuning step of a MiniLM-sized classifier: keras_attn against PyTorch +
transformers (CPU build), alternating in one run.

The model: the shipped all-MiniLM-L6-v2 (`../shared/data/pretrained/`: BERT, 6
layers, hidden 384, 12 heads, exact GELU) with a fresh 4-class head, on the first 16
ag_news documents tokenized to 128 tokens (the same ids for both). One step =
forward, backward and an AdamW update (lr 2e-5, weight decay 0.01), dropout on, in
float32 and, where the CPU has AMX or AVX512-BF16 (`amx_bf16`/`avx512_bf16` in
/proc/cpuinfo), in mixed bfloat16 (Keras' `mixed_bfloat16` policy; PyTorch's
`autocast(bfloat16)`).

keras_attn runs in this process (`BertClassifier.from_pretrained` + a
`tf.function` training step with `keras_attn.optimizers.FusedAdamW`, its slots
made before tracing, with and without `jit_compile`); PyTorch runs in a
worker process of the benchmark environment (`benchmarks/_torch_finetune_worker.py`,
`--torch-python`), so this process never imports torch. Each round runs `--steps`
steps of every implementation in turn (the order reversed every other round); a
figure is the median step time over every round's steps after the first step. The
first step (for keras_attn: tracing, compiling and running) and the model load are
reported apart. Other jobs share the CPU: the load average is printed before and
after, with the CPU model.

Run: `python -m benchmarks.bench_finetune [--rounds 3 --steps 3 --write]`.

`--whole` instead times the whole fine-tune a user waits for, from raw strings:
bench_text's ag_news fitting part (4,800 documents; its test part scored after),
`--epochs` epochs of batches of `--batch` at `--length` pieces, AdamW 5e-5 (no
decay on biases and layer norms), warm-up over the first 10 % of the steps then
linear decay, float32. keras_attn: `fit_text_classifier(model="bert",
checkpoint=...)` without the wide part or early stopping; PyTorch: the worker's
loop with the checkpoint's fast tokenizer and `get_linear_schedule_with_warmup`,
on its best thread count. Wall time includes tokenization, loading, tracing and
every epoch; each runs once, PyTorch first.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SECTION = "bench_finetune"
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CHECKPOINT = SHARED / "pretrained" / "all-MiniLM-L6-v2"
WORKER = Path(__file__).resolve().parent / "_torch_finetune_worker.py"
BATCH, LENGTH, CLASSES = 16, 128, 4


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def has_bf16_units() -> bool:
    with open("/proc/cpuinfo") as f:
        flags = f.read().split()
    return "amx_bf16" in flags or "avx512_bf16" in flags


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def batch_texts() -> tuple[list, list]:
    with gzip.open(SHARED / "ag_news" / "ag_news_dev.csv.gz", "rt") as f:
        rows = list(csv.reader(f))[1 : BATCH + 1]  # after the header
    return [f"{r[1]} {r[2]}" for r in rows], [int(r[0]) - 1 for r in rows]


class TorchWorker:
    """The PyTorch side, in a process of the benchmark environment."""

    def __init__(self, python: str):
        self.process = subprocess.Popen(
            [python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )

    def ask(self, **command) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the PyTorch worker stopped (see its stderr above)")
        return json.loads(line)

    def close(self):
        if self.process.poll() is None:
            self.ask_quit()

    def ask_quit(self):
        self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


class KerasAttnStep:
    """keras_attn's classifier and its training step (`jit_compile` or not)."""

    def __init__(self, inputs, labels, precision: str, jit_compile: bool):
        from keras_attn.backend import keras, tf
        from keras_attn.models import BertClassifier
        from keras_attn.optimizers import FusedAdamW

        keras.mixed_precision.set_global_policy(precision)
        start = time.perf_counter()
        self.model = BertClassifier.from_pretrained(
            CHECKPOINT, num_classes=CLASSES, sequence_length=LENGTH
        )
        self.load_seconds = time.perf_counter() - start
        keras.mixed_precision.set_global_policy("float32")
        optimizer = FusedAdamW(learning_rate=2e-5, weight_decay=0.01)
        variables = self.model.trainable_variables
        # Its slots made before tracing (as `model.fit` does): otherwise the first
        # trace only creates them and the step is traced twice.
        optimizer.build(variables)
        model = self.model

        def step(inputs, labels):
            with tf.GradientTape() as tape:
                probabilities = model(inputs, training=True)["probabilities"]
                loss = tf.reduce_mean(
                    keras.losses.sparse_categorical_crossentropy(labels, probabilities)
                )
            gradients = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(gradients, variables))
            return loss

        self.step = tf.function(step, jit_compile=jit_compile)
        self.inputs = {k: tf.constant(v) for k, v in inputs.items()}
        self.labels = tf.constant(labels)

    def run(self, n: int) -> list:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            self.step(self.inputs, self.labels).numpy()
            times.append(time.perf_counter() - start)
        return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--precisions", default="auto", help="comma-separated, or auto")
    parser.add_argument("--variants", default="tf.function,xla")
    parser.add_argument(
        "--torch-threads",
        default="1,2",
        help="PyTorch's intra-op threads, each a row (on a loaded machine its "
        "OpenMP threads can lose more to waiting than they gain)",
    )
    parser.add_argument(
        "--intra-op",
        type=int,
        default=0,
        help="TensorFlow's intra-op threads (0: its default, the cores)",
    )
    parser.add_argument(
        "--inter-op",
        type=int,
        default=0,
        help="TensorFlow's inter-op threads (0: its default, the cores)",
    )
    parser.add_argument(
        "--torch-python",
        default=os.environ.get("TORCH_PYTHON", sys.executable),
        help="the Python of an environment with torch and transformers "
        "(the `bench` extra); default $TORCH_PYTHON, else this one",
    )
    parser.add_argument("--write", action="store_true", help="update RESULTS.md")
    parser.add_argument(
        "--whole", action="store_true", help="time the whole ag_news fine-tune"
    )
    parser.add_argument("--epochs", type=int, default=4, help="--whole's epochs")
    parser.add_argument("--length", type=int, default=80, help="--whole's pieces")
    parser.add_argument("--batch", type=int, default=32, help="--whole's batch")
    parser.add_argument(
        "--limit", type=int, default=None, help="--whole on this many documents"
    )
    args = parser.parse_args(argv)
    if not CHECKPOINT.is_dir():
        sys.exit(f"{CHECKPOINT} is absent: this benchmark reads ../shared/data")
    if args.whole:
        return whole_finetune(args, argv)
    precisions = (
        ["float32"] + (["mixed_bfloat16"] if has_bf16_units() else [])
        if args.precisions == "auto"
        else args.precisions.split(",")
    )
    variants = args.variants.split(",")
    load_before = load_average()
    print(f"CPU {cpu_model()}, {os.cpu_count()} cores, load {load_before}", flush=True)

    import numpy as np

    from keras_attn.backend import tf

    if args.intra_op:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
    if args.inter_op:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    from keras_attn.models import BertPreprocessor

    texts, labels = batch_texts()
    preprocessor = BertPreprocessor.from_pretrained(CHECKPOINT, LENGTH)
    encoded = {k: v.numpy() for k, v in preprocessor(tf.constant(texts)).items()}
    labels = np.array(labels, "int32")
    worker = TorchWorker(args.torch_python)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            batch_file = os.path.join(tmp, "batch.npz")
            np.savez(batch_file, labels=labels, **encoded)
            for precision in precisions:
                rows += _compare(
                    worker, batch_file, encoded, labels, precision, variants, args
                )
    finally:
        worker.close()
    load_after = load_average()
    table = _table(rows)
    print(table)
    print(f"load {load_before} before, {load_after} after")
    if args.write:
        from benchmarks._results import write_section

        body = (
            f"CPU: {cpu_model()} ({os.cpu_count()} cores), load average "
            f"{load_before} before and {load_after} after (1, 5, 15 min).\n"
            f"Batch {BATCH} x {LENGTH} tokens, all-MiniLM-L6-v2 + a fresh 4-class "
            f"head, AdamW; {args.rounds} rounds x {args.steps} steps alternating; "
            "median step after the first; `first step` includes tracing (and XLA "
            "compilation).\n\n" + table
        )
        # The worker's Python is a machine path: not written into RESULTS.md.
        given = list(argv or sys.argv[1:])
        if "--torch-python" in given:
            index = given.index("--torch-python")
            del given[index : index + 2]
        command = "python -m benchmarks.bench_finetune " + " ".join(given)
        write_section(SECTION, body, command)


def whole_finetune(args, argv) -> None:
    """`--whole`: the ag_news fine-tune in PyTorch, then in keras_attn (module
    docstring)."""
    from benchmarks.bench_text import load, split

    xtr, ytr, xte, yte = split(*load("ag_news"), limit=args.limit)
    ytr, yte = [str(y) for y in ytr], [str(y) for y in yte]
    threads = max(int(t) for t in args.torch_threads.split(","))
    settings = dict(epochs=args.epochs, batch=args.batch, length=args.length)
    loads = [load_average()]
    print(f"CPU {cpu_model()}, {os.cpu_count()} cores, load {loads[0]}", flush=True)
    worker = TorchWorker(args.torch_python)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "data.json")
            with open(data, "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "train_texts": xtr,
                        "train_labels": ytr,
                        "test_texts": xte,
                        "test_labels": yte,
                    },
                    f,
                )
            torch_run = worker.ask(
                op="whole",
                checkpoint=str(CHECKPOINT),
                data=data,
                learning_rate=5e-5,
                warmup=0.1,
                threads=threads,
                **settings,
            )
    finally:
        worker.close()
    loads.append(load_average())
    print(f"PyTorch: {torch_run}", flush=True)
    from keras_attn.models import fit_text_classifier

    start = time.perf_counter()
    clf = fit_text_classifier(
        xtr,
        ytr,
        model="bert",
        checkpoint=str(CHECKPOINT),
        wide=False,
        epochs=args.epochs,
        patience=None,
        batch_size=args.batch,
        sequence_length=args.length,
        seed=0,
    )
    seconds = time.perf_counter() - start
    predicted = clf.predict(xte)
    accuracy = sum(p == y for p, y in zip(predicted, yte)) / len(yte)
    loads.append(load_average())
    print(f"keras_attn: {seconds:.1f} s, accuracy {accuracy:.3f}", flush=True)
    torch_label = f"PyTorch {torch_run['torch']} + transformers " + (
        f"{torch_run['transformers']} ({threads} threads)"
    )
    table = (
        "| implementation | wall time s | x PyTorch | test accuracy |\n"
        "|---|---|---|---|\n"
        f"| {torch_label} | {torch_run['seconds']:.0f} | 1.00 | "
        f"{torch_run['accuracy']:.3f} |\n"
        f"| keras_attn `fit_text_classifier` | {seconds:.0f} | "
        f"{seconds / torch_run['seconds']:.2f} | {accuracy:.3f} |"
    )
    print(table)
    if args.write:
        from benchmarks._results import write_section

        body = (
            f"CPU: {cpu_model()} ({os.cpu_count()} cores); load average (1, 5, 15 "
            f"min) {loads[0]} before PyTorch, {loads[1]} between, {loads[2]} after.\n"
            f"ag_news: {len(xtr):,} documents fitted on, {len(yte):,} test documents "
            f"(bench_text's split); {args.epochs} epochs of batches of {args.batch} "
            f"at {args.length} pieces ({torch_run['steps']} steps), AdamW 5e-5, "
            "warm-up 10 % then linear decay, float32; wall time from raw strings "
            "(tokenization, load, tracing, every epoch), one run each.\n\n" + table
        )
        given = [a for a in (argv or sys.argv[1:])]
        if "--torch-python" in given:
            index = given.index("--torch-python")
            del given[index : index + 2]
        write_section(
            SECTION + "_whole",
            body,
            "python -m benchmarks.bench_finetune " + " ".join(given),
        )


def _compare(worker, batch_file, encoded, labels, precision, variants, args) -> list:
    info = worker.ask(
        op="load", checkpoint=str(CHECKPOINT), batch=batch_file, precision=precision
    )
    threads = [int(t) for t in args.torch_threads.split(",")]
    torch_label = f"PyTorch {info['torch']} + transformers {info['transformers']}"
    results, runners = {}, {}
    for count in threads:
        name = f"{torch_label} ({count} thread{'s' if count > 1 else ''})"
        first = worker.ask(op="steps", n=1, threads=count)["seconds"][0]
        results[name] = {"load": info["load_seconds"], "first": first, "steps": []}
        runners[name] = count
    for variant in variants:
        keras_step = KerasAttnStep(encoded, labels, precision, variant == "xla")
        name = f"keras_attn ({variant})"
        start = time.perf_counter()
        keras_step.run(1)
        results[name] = {
            "load": keras_step.load_seconds,
            "first": time.perf_counter() - start,
            "steps": [],
        }
        runners[name] = keras_step
    order = list(runners)
    for round_index in range(args.rounds):
        for name in order if round_index % 2 == 0 else order[::-1]:
            if isinstance(runners[name], int):
                times = worker.ask(op="steps", n=args.steps, threads=runners[name])
                results[name]["steps"] += times["seconds"]
            else:
                results[name]["steps"] += runners[name].run(args.steps)
            print(f"{precision} round {round_index} {name} done", flush=True)
    # The ratio is against PyTorch's best thread count in this run.
    torch_median = min(
        statistics.median(results[n]["steps"])
        for n in results
        if n.startswith("PyTorch")
    )
    rows = []
    for name, r in results.items():
        median = statistics.median(r["steps"])
        rows.append(
            (
                precision,
                name,
                median,
                min(r["steps"]),
                median / torch_median,
                r["first"],
                r["load"],
            )
        )
    return rows


def _table(rows) -> str:
    lines = [
        "| precision | implementation | step (median) s | step (best) s | "
        "x best PyTorch | first step s | load s |",
        "|---|---|---|---|---|---|---|",
    ]
    for precision, name, median, best, ratio, first, load in rows:
        lines.append(
            f"| {precision} | {name} | {median:.2f} | {best:.2f} | {ratio:.2f} | "
            f"{first:.1f} | {load:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
