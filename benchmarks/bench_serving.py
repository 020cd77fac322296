"""Serving latency of the quickstart's exports, and `keras-attn predict` throughput.

One process builds the two exports of `keras-attn quickstart` (the census MMoE with
the attention gate, the HAN on the shipped reviews; one epoch each: latency does not
depend on the weights), both with their `explain` signature. Then, for each export, a
fresh process that imports TensorFlow (and tensorflow-text) alone loads it and times
calls of each signature at batch 1, 64 and 512: p50 and p99 of the wall time per call
(the graph run plus the Python call of the concrete function, after 20 warm-up calls),
the `explain` and plain signatures alternating call by call, and beside them the
plain signature's graph run by a TF1 `Session` callable (how TF Serving runs a
SavedModel: the graph's time plus the callable's conversion of each input from
NumPy). Then the quickstart's model with softmax gates against DeepCTR's SavedModel
of the same MMOE: keras_attn's raw-value `serving_default`, its `encoded` signature
(ids in, as DeepCTR's) and DeepCTR's, by Session callables in one process,
alternating, each beside the same inputs fed to a graph that only reads their sizes
(the conversion alone; the call minus it is the graph's own time) and with the
graph's span from the step stats of traced calls; `--rounds` such processes one
after the other, each figure the median over them (one process's p50 ratio moves
by a few per cent from one to the next). Last, `keras-attn predict` scores the
census dev file (../shared/data/census_income/, skipped when absent) in a fresh
process: rows/s over the file (the export's load not included) and the command's
wall time.

    python -m benchmarks.bench_serving [--calls 300] [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
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


# Keras 2 (DeepCTR needs it): DeepCTR's MMOE of the quickstart's sizes with its
# softmax gates, trained one epoch on the shipped census sample from ids this script
# encodes, saved as a SavedModel; prints the encoded first 64 rows as feeds.
_DEEPCTR_EXPORT = r"""
import json, sys
import numpy as np
import tensorflow as tf
from deepctr.feature_column import DenseFeat, SparseFeat
from deepctr.models import MMOE
from benchmarks.bench_ctr import _labels
from keras_attn.cli.quickstart import CTR_SETTINGS
from keras_attn.datasets import load_census_sample
df = load_census_sample()
numeric = ["age", "wage_per_hour", "capital_gains", "capital_losses",
           "stock_dividends", "num_emp", "weeks_worked"]
drop = {"income_50k", "marital_stat", "instance_weight"}
sparse = [c for c in df.columns if c not in drop and c not in numeric]
vocab = {c: {v: i + 1 for i, v in enumerate(sorted(df[c].astype(str).unique()))}
         for c in sparse}
stats = {c: (df[c].mean(), df[c].std() or 1.0) for c in numeric}
def encode(rows):
    out = {c: rows[c].astype(str).map(vocab[c]).fillna(0).to_numpy("int32")[:, None]
           for c in sparse}
    for c in numeric:
        out[c] = ((rows[c].to_numpy("float32") - stats[c][0]) / stats[c][1])[:, None]
    return out
dim = CTR_SETTINGS["embedding_dim"]
columns = [SparseFeat(c, len(vocab[c]) + 1, embedding_dim=dim) for c in sparse]
columns += [DenseFeat(c, 1) for c in numeric]
model = MMOE(columns, num_experts=CTR_SETTINGS["num_experts"],
             expert_dnn_hidden_units=CTR_SETTINGS["expert_units"],
             tower_dnn_hidden_units=CTR_SETTINGS["tower_units"],
             task_types=["binary", "binary"], task_names=["income", "marital"])
model.compile("adam", loss=["binary_crossentropy", "binary_crossentropy"])
y = _labels(df)
model.fit(encode(df), [y["income"], y["marital"]], batch_size=256, verbose=0)
model.save(sys.argv[1])
feeds = {k: {"dtype": v.dtype.name, "values": v.tolist()}
         for k, v in encode(df.iloc[:64]).items()}
print(json.dumps(feeds))
"""

# SavedModels' signatures, each by a TF1 Session callable (as TF Serving runs
# them), called in turn: all see the same machine. Arguments: calls, batches, then
# (export, feeds, signature) per graph.
_SESSION_RUNS = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
calls, batches = int(sys.argv[1]), json.loads(sys.argv[2])
graphs = [(sys.argv[i], json.load(open(sys.argv[i + 1], encoding="utf-8")),
           sys.argv[i + 2]) for i in range(3, len(sys.argv), 3)]
runs = []
for export_dir, feeds, name in graphs:
    graph = tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session(graph=graph)
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir)
    # The same inputs into a graph that only reads their shapes: what the callable
    # costs before the graph runs (converting each input from NumPy).
    bare = tf.Graph()
    with bare.as_default():
        inputs = [tf.compat.v1.placeholder(meta.signature_def[name].inputs[n].dtype)
                  for n in feeds]
        read = tf.add_n([tf.size(x) for x in inputs])
        bare_session = tf.compat.v1.Session(graph=bare)
    runs.append((graph, session, meta.signature_def[name], feeds,
                 bare_session.make_callable(read, inputs)))
result = {}
for batch in batches:
    fns = []
    for graph, session, sig, feeds, bare in runs:
        arrays = {n: np.array((f["values"] * batch)[:batch],
                              dtype=object if f["dtype"] == "string" else f["dtype"])
                  for n, f in feeds.items()}
        with graph.as_default():
            run = session.make_callable([t.name for t in sig.outputs.values()],
                                        [sig.inputs[n].name for n in arrays])
        fns.append((run, bare, list(arrays.values())))
    times = [([], []) for _ in fns]
    n = calls  # a few ms a call at batch 512: as many calls as at batch 1
    for i in range(20 + n):
        for k, (run, bare, values) in enumerate(fns):  # all see the same machine
            for j, call in enumerate((run, bare)):
                start = time.perf_counter()
                call(*values)
                if i >= 20:
                    times[k][j].append(time.perf_counter() - start)
    # The graph's own span (first op's start to last op's end, from the step
    # stats of traced runs): what TF Serving's C++ Session::Run pays once the
    # request is parsed; tracing adds to every graph alike.
    spans = []
    for (graph, session, sig, feeds, bare), (run, _, values) in zip(runs, fns):
        fetches = [t.name for t in sig.outputs.values()]
        feed = dict(zip([sig.inputs[n].name for n in feeds], values))
        options = tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        span = []
        for _ in range(max(n // 3, 20)):
            meta = tf.compat.v1.RunMetadata()
            session.run(fetches, feed, options=options, run_metadata=meta)
            stats = [s for d in meta.step_stats.dev_stats for s in d.node_stats]
            span.append(max(s.all_start_micros + s.all_end_rel_micros for s in stats)
                        - min(s.all_start_micros for s in stats))
        spans.append(float(np.median(span)) / 1e3)
    result[batch] = [{"p50": float(np.percentile(t, 50) * 1e3),
                      "p99": float(np.percentile(t, 99) * 1e3), "calls": len(t),
                      "inputs_p50": float(np.percentile(b, 50) * 1e3),
                      "span_p50": span}
                     for (t, b), span in zip(times, spans)]
print(json.dumps(result))
"""


def time_against_deepctr(folder: Path, calls: int, rounds: int = 3) -> list | None:
    """keras_attn's export of the quickstart's census model with softmax gates (the
    model DeepCTR's MMOE is), raw values in (`serving_default`) and encoded values
    in (`encoded`), against DeepCTR's SavedModel of the same sizes, ids in: the
    three graphs by Session callables, alternating call by call, in `rounds` fresh
    processes. `[{batch: [raw, encoded, DeepCTR]}]`, a dict per round; None when
    DeepCTR is not installed."""
    from keras_attn.backend import tf
    from keras_attn.cli.quickstart import CTR_SETTINGS
    from keras_attn.datasets import census_features, census_tasks, load_census_sample
    from keras_attn.models import build_ctr_model, fit_ctr_model
    from keras_attn.models.ctr import split_ctr_model
    from keras_attn.serving import export, signature_dtypes, to_arrays

    deepctr_dir = folder / "deepctr_mmoe"
    feeds = run_json(
        ["-c", _DEEPCTR_EXPORT, deepctr_dir], missing="deepctr", legacy=True
    )
    if feeds is None:
        print(
            "DeepCTR is not installed: the comparison with its SavedModel is left out"
        )
        return None
    deepctr_feeds = folder / "deepctr_feeds.json"
    deepctr_feeds.write_text(json.dumps(feeds), encoding="utf-8")
    df = load_census_sample()
    specs, tasks = census_features(df), census_tasks()
    settings = {**CTR_SETTINGS, "gate": "softmax"}
    model = build_ctr_model(specs, tasks, name="census_mmoe_softmax", **settings)
    fit_ctr_model(model, df, batch_size=256, jit_compile=False, verbose=0)
    ours = export(model, folder / "census_mmoe_softmax", features=specs, encoded=True)
    arrays = to_arrays(df.iloc[:64], signature_dtypes(ours), specs)
    our_feeds = folder / "softmax_feeds.json"
    our_feeds.write_text(json.dumps(_feeds(arrays)), encoding="utf-8")
    preprocessor = split_ctr_model(model)[0]
    encoded = preprocessor({k: tf.constant(v) for k, v in arrays.items()})
    encoded_feeds = folder / "softmax_encoded_feeds.json"
    encoded_feeds.write_text(
        json.dumps(_feeds({k: v.numpy() for k, v in encoded.items()})),
        encoding="utf-8",
    )
    results = []
    for _ in range(rounds):
        times = run_json(
            ["-c", _SESSION_RUNS, calls, json.dumps(list(BATCHES))]
            + [ours, our_feeds, "serving_default", ours, encoded_feeds, "encoded"]
            + [deepctr_dir, deepctr_feeds, "serving_default"],
            legacy=None,
            timeout=1800,
            cwd=folder,
            pythonpath=False,
        )
        results.append({int(k): v for k, v in times.items()})
    return results


def _feeds(arrays: dict) -> dict:
    """Request arrays as JSON: `{name: {"dtype", "values"}}`."""
    return {
        k: {
            "dtype": "string" if v.dtype == object else v.dtype.name,
            "values": [x.decode() for x in v] if v.dtype == object else v.tolist(),
        }
        for k, v in arrays.items()
    }


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
    ctr_feeds = _feeds(arrays)
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
    parser.add_argument(
        "--no-peer", action="store_true", help="leave out DeepCTR's SavedModel"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="fresh processes timing the three graphs against DeepCTR's",
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        exports = build_exports(Path(folder))
        timings = {k: time_export(p, f, args.calls) for k, (p, f) in exports.items()}
        predict = time_predict(exports["ctr"][0])
        peer = None
        if not args.no_peer:
            peer = time_against_deepctr(Path(folder), args.calls, args.rounds)
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
        "as TF Serving runs it (C++ `Session::Run`): the graph's own time plus the "
        "callable's conversion of each input from NumPy (at batch 1 most of the "
        "call; see the split below).",
    ]
    if peer:
        lines += [
            "",
            "Against DeepCTR's own SavedModel of the same model (the quickstart's "
            "sizes with softmax gates, DeepCTR `MMOE` saved by tf_keras; it takes ids "
            "and standardized numbers encoded beforehand). keras_attn's "
            "`serving_default` takes the raw values and does the lookups and "
            "standardization in its graph (the headline ratio); its `encoded` "
            "signature (`export(..., encoded=True)`) takes what the model's "
            "preprocessing makes, as DeepCTR's does. The three graphs by Session "
            f"callables in one process, called in turn; {len(peer)} such processes "
            "one after the other: each figure is the median over them (one "
            "process's p50 ratio moves by a few per cent from one to the next; the "
            "last column has each's).",
            "",
            "| batch | keras_attn raw p50 / p99 | keras_attn encoded p50 / p99 | DeepCTR p50 / p99 | raw / DeepCTR (p50, p99) | encoded / DeepCTR (p50, p99) | raw / DeepCTR p50, each process |",  # noqa: E501
            "|---|---|---|---|---|---|---|",
        ]

        def median(batch, value):
            """The median over the processes of `value(raw, encoded, DeepCTR)`,
            each a graph's timings at `batch`."""
            return statistics.median(value(*r[batch]) for r in peer)

        for batch in peer[0]:
            p50 = [median(batch, lambda *g, i=i: g[i]["p50"]) for i in range(3)]
            p99 = [median(batch, lambda *g, i=i: g[i]["p99"]) for i in range(3)]
            each = [r[batch][0]["p50"] / r[batch][2]["p50"] for r in peer]
            lines.append(
                f"| {batch} | {p50[0]:.2f} / {p99[0]:.2f} | "
                f"{p50[1]:.2f} / {p99[1]:.2f} | {p50[2]:.2f} / {p99[2]:.2f} | "
                f"{statistics.median(each):.2f}x, "
                f"{median(batch, lambda a, b, c: a['p99'] / c['p99']):.2f}x | "
                f"{median(batch, lambda a, b, c: b['p50'] / c['p50']):.2f}x, "
                f"{median(batch, lambda a, b, c: b['p99'] / c['p99']):.2f}x | "
                + ", ".join(f"{x:.2f}" for x in each)
                + " |"
            )
        lines += [
            "",
            "Where a call's time goes, p50 ms (medians over the processes), for "
            "keras_attn raw / encoded / DeepCTR: the inputs alone (the same arrays "
            "into a graph that only reads their sizes: the callable's conversion "
            "from NumPy, per input and per string), the call minus that (the "
            "graph's own time, untraced), and the graph's span in traced calls "
            "(first op to last, from the step stats; tracing adds a cost per op, "
            "and DeepCTR's graph runs more ops).",
            "",
            "| batch | inputs alone | call minus inputs | traced span | raw / DeepCTR (call minus inputs, span) |",  # noqa: E501
            "|---|---|---|---|---|",
        ]
        for batch in peer[0]:
            inputs = [
                median(batch, lambda *g, i=i: g[i]["inputs_p50"]) for i in range(3)
            ]
            own = [
                median(batch, lambda *g, i=i: g[i]["p50"] - g[i]["inputs_p50"])
                for i in range(3)
            ]
            span = [median(batch, lambda *g, i=i: g[i]["span_p50"]) for i in range(3)]
            lines.append(
                f"| {batch} | "
                + " / ".join(f"{t:.2f}" for t in inputs)
                + " | "
                + " / ".join(f"{t:.2f}" for t in own)
                + " | "
                + " / ".join(f"{t:.2f}" for t in span)
                + f" | {own[0] / own[2]:.2f}x, {span[0] / span[2]:.2f}x |"
            )
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
