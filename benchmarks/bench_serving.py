"""Serving latency of the quickstart's exports, and `keras-attn predict` throughput.

One process builds the two exports of `keras-attn quickstart` (the census MMoE with
the attention gate, the HAN on the shipped reviews; one epoch each: latency does not
depend on the weights), both with their `explain` signature. Then, for each export, a
fresh process that imports TensorFlow (and tensorflow-text) alone loads it and times
calls of each signature at batch 1, 64 and 512: p50 and p99 of the wall time per call
(the graph run plus the Python call of the concrete function, after 20 warm-up calls),
the `explain` and plain signatures alternating call by call, and beside them the
plain signature's graph run by a TF1 `Session` callable (how TF Serving runs a
SavedModel: the graph time without Python's conversions). Last, `keras-attn
predict` scores the census dev file (../shared/data/census_income/, skipped when
absent) in a fresh process: rows/s over the file (the export's load not included) and
the command's wall time.

    python -m benchmarks.bench_serving [--calls 300] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._ctr_runs import ROOT, run_json, run_python

CENSUS_DEV = (
    ROOT.parent / "shared" / "data" / "census_income" / "census_income_dev.csv.gz"
)
BATCHES = (1, 64, 512)

_TIMER = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
import tensorflow_text  # the text export's tokenizer ops
export_dir, feeds_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
loaded = tf.saved_model.load(export_dir)
feeds = json.load(open(feeds_path, encoding="utf-8"))
# The graph as TF Serving runs it: a Session over the SavedModel's MetaGraph, one
# callable per signature (no Python conversion of inputs and outputs per call).
graph = tf.Graph()
with graph.as_default():
    session = tf.compat.v1.Session(graph=graph)
    meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
result = {}
for batch in json.loads(sys.argv[4]):
    args, arrays = {}, {}
    for name, spec in feeds.items():
        values = (spec["values"] * batch)[:batch]
        args[name] = tf.constant(values, dtype=spec["dtype"])
        arrays[name] = args[name].numpy()
    fns = {s: loaded.signatures[s] for s in ("serving_default", "explain")}
    sig = meta.signature_def["serving_default"]
    with graph.as_default():
        run = session.make_callable(
            [t.name for t in sig.outputs.values()],
            [sig.inputs[name].name for name in arrays],
        )
    values = list(arrays.values())
    calls_of = {**{s: (lambda f=f: f(**args)) for s, f in fns.items()},
                "session": lambda: run(*values)}
    times = {s: [] for s in calls_of}
    n = max(calls // max(batch // 64, 1), 20)
    for i in range(20 + n):
        for s, call in calls_of.items():  # alternating: all see the same machine
            start = time.perf_counter()
            call()
            if i >= 20:
                times[s].append(time.perf_counter() - start)
    result[batch] = {
        s: {"p50": float(np.percentile(t, 50) * 1e3),
            "p99": float(np.percentile(t, 99) * 1e3), "calls": len(t)}
        for s, t in times.items()
    }
print(json.dumps(result))
"""


def build_exports(folder: Path) -> dict:
    """The quickstart's two exports, with explain signatures; returns their paths and
    a few raw rows of each as `{name: {dtype, values}}`."""
    from keras_attn.cli.quickstart import SETTINGS, build_census_model
    from keras_attn.datasets import census_features, census_tasks, load_census_sample
    from keras_attn.models import fit_ctr_model, fit_text_classifier
    from keras_attn.serving import export, signature_dtypes, to_arrays
    from keras_attn.text.datasets import load_review_sample

    df = load_census_sample()
    specs, tasks = census_features(df), census_tasks()
    model = build_census_model(specs, tasks)
    fit_ctr_model(model, df, batch_size=256, jit_compile=False, verbose=0)
    ctr = export(model, folder / "census_mmoe", features=specs, explain=True)
    arrays = to_arrays(df.iloc[:64], signature_dtypes(ctr), specs)
    ctr_feeds = {
        k: {
            "dtype": "string" if v.dtype == object else v.dtype.name,
            "values": [x.decode() for x in v] if v.dtype == object else v.tolist(),
        }
        for k, v in arrays.items()
    }
    texts, labels = load_review_sample()
    clf = fit_text_classifier(
        texts, labels, model="han", epochs=1, patience=None, verbose=0, **SETTINGS
    )
    han = export(clf, folder / "review_han", explain=True)
    han_feeds = {"text": {"dtype": "string", "values": list(texts[:64])}}
    return {"ctr": (ctr, ctr_feeds), "han": (han, han_feeds)}


def time_export(path: Path, feeds: dict, calls: int) -> dict:
    feeds_path = path.parent / "feeds.json"
    feeds_path.write_text(json.dumps(feeds), encoding="utf-8")
    # TensorFlow alone loads the export: keras_attn is not on the path.
    times = run_json(
        ["-c", _TIMER, path, feeds_path, calls, json.dumps(list(BATCHES))],
        legacy=None,
        timeout=1800,
        cwd=path.parent,
        pythonpath=False,
    )
    return {int(k): v for k, v in times.items()}


def time_predict(path: Path) -> dict | None:
    if not CENSUS_DEV.exists():
        print(f"{CENSUS_DEV} is absent: the `keras-attn predict` figure is skipped")
        return None
    out = path.parent / "predicted.csv"
    start = time.perf_counter()
    proc = run_python(
        [
            "-m",
            "keras_attn.cli",
            "predict",
            "--model",
            path,
            "--data",
            CENSUS_DEV,
            "--output",
            out,
            "--batch-size",
            "1024",
        ],  # fmt: skip
        legacy=None,
    )
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    match = re.search(r"([\d,]+) rows through .* in ([\d.]+) s", proc.stderr)
    rows, seconds = int(match.group(1).replace(",", "")), float(match.group(2))
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "wall": wall,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls at batch 1")
    parser.add_argument("--no-write", action="store_true", help="leave RESULTS.md")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        exports = build_exports(Path(folder))
        timings = {k: time_export(p, f, args.calls) for k, (p, f) in exports.items()}
        predict = time_predict(exports["ctr"][0])
    load = f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"
    lines = [
        "p50 / p99 ms per call of each signature, TensorFlow alone in a fresh process "
        "(the quickstart's exports; the machine was shared with other jobs while this "
        f"ran, load average {load} at the start / end on {os.cpu_count()} CPUs, so "
        "read the ratios first):",
        "",
        "| export | batch | serving_default p50 / p99 | graph (Session) p50 / p99 | explain p50 / p99 | explain / plain (p50) |",  # noqa: E501
        "|---|---|---|---|---|---|",
    ]
    for kind, name in (("ctr", "census MMoE"), ("han", "review HAN (raw strings)")):
        for batch, t in timings[kind].items():
            plain, graph, explain = t["serving_default"], t["session"], t["explain"]
            lines.append(
                f"| {name} | {batch} | {plain['p50']:.2f} / {plain['p99']:.2f} | "
                f"{graph['p50']:.2f} / {graph['p99']:.2f} | "
                f"{explain['p50']:.2f} / {explain['p99']:.2f} | "
                f"{explain['p50'] / plain['p50']:.2f} |"
            )
    lines += [
        "",
        "serving_default and explain: the loaded signature called from Python "
        "(`tf.saved_model.load(...).signatures[...]`). graph (Session): the same "
        "serving_default graph run by a TF1 `Session` callable over the SavedModel, "
        "as TF Serving runs it (C++ `Session::Run`): the graph's own time plus a few "
        "microseconds of the callable.",
    ]
    if predict:
        lines += [
            "",
            f"`keras-attn predict` on the census dev file ({predict['rows']:,} rows, "
            f"batch 1024, CSV out): {predict['rows_per_s']:,.0f} rows/s over the file "
            f"({predict['seconds']:.1f} s), {predict['wall']:.1f} s for the whole "
            "command (Python and TensorFlow start-up, the export's load).",
        ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        from benchmarks._results import write_section

        write_section("bench_serving", body, "python -m benchmarks.bench_serving")
    return 0


if __name__ == "__main__":
    sys.exit(main())
