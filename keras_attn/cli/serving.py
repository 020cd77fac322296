"""`keras-attn predict` and `keras-attn inspect`: the commands on an export.

`predict` streams a CSV or JSONL file through an export's signature in batches and
writes one row per input row; `inspect` tells what an export takes and returns and
what a TF Serving needs to load it. Registered in `keras_attn.cli.main.COMMANDS` by
`add_predict` and `add_inspect`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

__all__ = [
    "TF_SERVING_TEXT_OPS",
    "add_inspect",
    "add_predict",
    "inspect_export",
    "predict_file",
    "resolve_export",
]

#: The tf-text ops that TF Serving links into its model server, and the first TF
#: Serving release that has them (see the README's serving part).
TF_SERVING_TEXT_OPS = {
    "FastBertNormalize": "2.20",
    "FastWordpieceTokenizeWithOffsets": "2.20",
}


def resolve_export(path) -> Path:
    """A version folder: `path` itself, or the highest version under it."""
    from keras_attn.serving.export import latest_version

    path = Path(path)
    if (path / "saved_model.pb").exists():
        return path
    version = latest_version(path)
    if version is None or not (path / str(version) / "saved_model.pb").exists():
        raise ValueError(
            "`--model` must be an export's version folder (with saved_model.pb) or "
            f"its base folder (with numbered versions). Received: {str(path)!r}"
        )
    return path / str(version)


# ------------------------------------------------------------------------ predict


class _Progress:
    """A one-line progress bar on stderr: share of the file read, rows, rows/s."""

    def __init__(self, total_bytes: int, enabled: bool):
        self.total, self.enabled = max(total_bytes, 1), enabled
        self.start = time.perf_counter()
        self.rows = 0

    def update(self, rows: int, position: int) -> None:
        self.rows += rows
        if not self.enabled:
            return
        share = min(position / self.total, 1.0)
        bar = "#" * int(share * 30)
        rate = self.rows / max(time.perf_counter() - self.start, 1e-9)
        sys.stderr.write(
            f"\r[{bar:<30}] {share:4.0%} {self.rows:,} rows {rate:,.0f} rows/s"
        )
        sys.stderr.flush()

    def close(self) -> float:
        seconds = time.perf_counter() - self.start
        if self.enabled:
            sys.stderr.write("\n")
        return seconds


def _chunks(handle, suffix: str, batch_size: int, string_inputs):
    import pandas as pd

    if suffix == ".jsonl":
        yield from pd.read_json(
            handle, lines=True, chunksize=batch_size, dtype=False, convert_dates=False
        )
        return
    # As the CSV training path reads it: "NA" stays text, only "" is missing.
    yield from pd.read_csv(
        handle,
        chunksize=batch_size,
        keep_default_na=False,
        na_values=[""],
        dtype={n: str for n in string_inputs},
    )


def _scalar(value):
    return value.item() if hasattr(value, "item") else value


def _output_rows(outputs: dict, keep: dict, n: int, flat: bool) -> list[dict]:
    """One dict per input row: kept columns, then each output (scalar, columns or
    a list)."""
    import numpy as np

    rows = [{k: v[i] for k, v in keep.items()} for i in range(n)]
    for name in sorted(outputs):
        value = outputs[name]
        if value.dtype == object:
            value = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value)
        value = value.reshape(n, -1) if value.ndim > 1 else value.reshape(n, 1)
        width = value.shape[1]
        for i in range(n):
            if width == 1:
                rows[i][name] = _scalar(value[i, 0])
            elif flat:
                for j in range(width):
                    rows[i][f"{name}_{j}"] = _scalar(value[i, j])
            else:
                rows[i][name] = [_scalar(v) for v in value[i]]
    return rows


def predict_file(
    model,
    data,
    output=None,
    batch_size: int = 1024,
    signature: str = "serving_default",
    keep=(),
    progress: bool = True,
) -> dict:
    """Streams a CSV or JSONL file (optionally .gz) through an export's signature.

    Args:
        model: the export's base or version folder.
        data: a `.csv`, `.jsonl`, `.csv.gz` or `.jsonl.gz` file of raw rows.
        output: a `.csv` or `.jsonl` file, or None for JSONL on stdout.
        batch_size: int. Rows per call. Defaults to 1024.
        signature: str. Defaults to "serving_default".
        keep: input columns copied into the output (e.g. an id column).
        progress: bool. The progress bar on stderr. Defaults to True.

    Returns:
        `{"rows": int, "seconds": float, "export": str}`.
    """
    import tensorflow as tf

    from keras_attn.serving.export import read_features_json
    from keras_attn.serving.requests import signature_dtypes, to_arrays

    try:  # registers the tokenizer ops of a text export
        import tensorflow_text  # noqa: F401
    except ImportError:
        pass
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or batch_size < 1
    ):
        raise ValueError(
            "`batch_size` must be a positive integer. Received: "
            f"batch_size={batch_size!r}"
        )
    export_dir = resolve_export(model)
    data = Path(data)
    suffixes = [s.lower() for s in data.suffixes]
    compressed = suffixes[-1:] == [".gz"]
    suffix = suffixes[-2] if compressed and len(suffixes) > 1 else suffixes[-1:][0]
    if suffix not in (".csv", ".jsonl"):
        raise ValueError(
            f"`--data` must be a .csv or .jsonl file (optionally .gz). Received: "
            f"{str(data)!r}"
        )
    out_suffix = Path(output).suffix.lower() if output else ".jsonl"
    if out_suffix not in (".csv", ".jsonl"):
        raise ValueError(
            f"`--output` must end in .csv or .jsonl. Received: {str(output)!r}"
        )
    dtypes = signature_dtypes(export_dir, signature)
    specs_json = read_features_json(export_dir)
    features = None
    if specs_json is not None:
        from keras_attn.features.specs import features_from_json

        features = [f for f in features_from_json(specs_json) if f.name in dtypes]
    serve = tf.saved_model.load(str(export_dir)).signatures[signature]
    strings = [n for n, d in dtypes.items() if d == "string"]

    raw = open(data, "rb")
    handle = gzip.GzipFile(fileobj=raw) if compressed else raw
    sink = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
    bar = _Progress(data.stat().st_size, progress)
    first = True
    try:
        for chunk in _chunks(handle, suffix, batch_size, strings):
            missing = [c for c in keep if c not in chunk.columns]
            if missing:
                raise ValueError(
                    f"`--keep` names columns that are not in the data: {missing}"
                )
            arrays = to_arrays(chunk, dtypes, features)
            outputs = serve(**{k: tf.constant(v) for k, v in arrays.items()})
            outputs = {k: v.numpy() for k, v in outputs.items()}
            kept = {c: chunk[c].tolist() for c in keep}
            rows = _output_rows(outputs, kept, len(chunk), out_suffix == ".csv")
            if out_suffix == ".csv":
                import pandas as pd

                pd.DataFrame(rows).to_csv(sink, header=first, index=False)
            else:
                sink.writelines(
                    json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows
                )
            first = False
            bar.update(len(chunk), raw.tell())
    finally:
        seconds = bar.close()
        handle.close()
        raw.close()
        if output:
            sink.close()
    return {"rows": bar.rows, "seconds": seconds, "export": str(export_dir)}


def _predict(args: argparse.Namespace) -> int:
    report = predict_file(
        args.model,
        args.data,
        output=args.output,
        batch_size=args.batch_size,
        signature=args.signature,
        keep=args.keep or (),
        progress=not args.quiet,
    )
    if not args.quiet:
        rate = report["rows"] / max(report["seconds"], 1e-9)
        print(
            f"{report['rows']:,} rows through {report['export']} in "
            f"{report['seconds']:.1f} s ({rate:,.0f} rows/s)",
            file=sys.stderr,
        )
    return 0


def add_predict(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="batch-score a CSV/JSONL file with an export",
        description="Streams a CSV or JSONL file (optionally .gz) of raw rows through "
        "an export's signature in batches, with a progress bar on stderr, and writes "
        "one row per input row: CSV or JSONL by the --output extension, JSONL on "
        "stdout without --output.",
    )
    parser.add_argument("--model", required=True, help="export base or version folder")
    parser.add_argument("--data", required=True, help="FILE.csv or FILE.jsonl (.gz)")
    parser.add_argument("--output", help="FILE.csv or FILE.jsonl (default: stdout)")
    parser.add_argument("--batch-size", type=int, default=1024, help="rows per call")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--keep", nargs="+", help="input columns copied to the output")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.set_defaults(func=_predict)


# ------------------------------------------------------------------------ inspect


def _graph(export_dir: Path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((export_dir / "saved_model.pb").read_bytes())
    return proto.meta_graphs[0]


def _tensor_info(info) -> dict:
    from tensorflow.python.framework import dtypes

    shape = None
    if not info.tensor_shape.unknown_rank:
        shape = [None if d.size < 0 else d.size for d in info.tensor_shape.dim]
    return {"dtype": dtypes.as_dtype(info.dtype).name, "shape": shape}


def _version(text: str) -> tuple[int, int]:
    major, minor = (int(p) for p in text.split(".")[:2])
    return major, minor


def inspect_export(path) -> dict:
    """What an export takes, returns and needs.

    Args:
        path: the export's base or version folder.

    Returns:
        A dict: `export`, `signatures` (`{name: {"inputs": {name: {dtype, shape}},
        "outputs": ...}}`), `features` (the feature specs JSON, parsed, or None),
        `warmup_records`, `ops` (sorted), `core_ops`, `tf_text_ops` (those TF Serving
        links), `unknown_ops` (neither: TF Serving cannot load the export),
        `written_by` (the TensorFlow version) and `min_tf_serving` (the lowest TF
        Serving release that loads it, with `min_tf_serving_reason`).
    """
    import tensorflow as tf

    from keras_attn.serving.export import read_features_json
    from keras_attn.serving.warmup import WARMUP_FILE

    export_dir = resolve_export(path)
    meta = _graph(export_dir)
    signatures = {
        name: {
            "inputs": {k: _tensor_info(v) for k, v in sorted(sig.inputs.items())},
            "outputs": {k: _tensor_info(v) for k, v in sorted(sig.outputs.items())},
        }
        for name, sig in sorted(meta.signature_def.items())
        if not name.startswith("__")
    }
    ops = {n.op for n in meta.graph_def.node}
    for fn in meta.graph_def.library.function:
        ops |= {n.op for n in fn.node_def}
    library = {fn.signature.name for fn in meta.graph_def.library.function}
    ops -= library  # calls of the graph's own functions
    core = sorted(op for op in ops if hasattr(tf.raw_ops, op))
    text = sorted(op for op in ops if op in TF_SERVING_TEXT_OPS)
    unknown = sorted(ops - set(core) - set(text))
    writer = meta.meta_info_def.tensorflow_version or tf.__version__
    floor, reasons = (
        _version(writer),
        [
            f"written by TensorFlow {writer}: a TF Serving release bundles its "
            "TensorFlow and loads graphs of that version or older"
        ],
    )
    for op in text:
        if _version(TF_SERVING_TEXT_OPS[op]) > floor:
            floor = _version(TF_SERVING_TEXT_OPS[op])
        reasons.append(f"{op} is linked from TF Serving {TF_SERVING_TEXT_OPS[op]}")
    specs = read_features_json(export_dir)
    warmup = export_dir / "assets.extra" / WARMUP_FILE
    return {
        "export": str(export_dir),
        "signatures": signatures,
        "features": json.loads(specs) if specs is not None else None,
        "warmup_records": (
            sum(1 for _ in tf.data.TFRecordDataset(str(warmup)))
            if warmup.exists()
            else 0
        ),
        "ops": sorted(ops),
        "core_ops": core,
        "tf_text_ops": text,
        "unknown_ops": unknown,
        "written_by": writer,
        "min_tf_serving": None if unknown else f"{floor[0]}.{floor[1]}",
        "min_tf_serving_reason": (
            f"ops {unknown} are neither TensorFlow core nor linked by TF Serving"
            if unknown
            else "; ".join(reasons)
        ),
    }


def _shape(shape) -> str:
    if shape is None:
        return "unknown rank"
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def _inspect(args: argparse.Namespace) -> int:
    info = inspect_export(args.model)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"Export {info['export']} (written by TensorFlow {info['written_by']})")
    for name, sig in info["signatures"].items():
        print(f"\nSignature {name!r}")
        for part in ("inputs", "outputs"):
            print(f"  {part}:")
            for k, v in sig[part].items():
                print(f"    {k:24s} {v['dtype']:8s} {_shape(v['shape'])}")
    specs = info["features"]
    if specs is None:
        print("\nFeature specs: none written with the export")
    else:
        print(f"\nFeature specs ({len(specs['features'])}):")
        for f in specs["features"]:
            print(f"    {f['name']:24s} {f['kind']}")
    print(f"\nWarm-up records: {info['warmup_records']}")
    print(
        f"\nOps: {len(info['ops'])} ({len(info['core_ops'])} TensorFlow core"
        + (
            f"; tf-text linked by TF Serving: {', '.join(info['tf_text_ops'])}"
            if info["tf_text_ops"]
            else ""
        )
        + ")"
    )
    if info["unknown_ops"]:
        print(f"  NOT loadable by TF Serving: {', '.join(info['unknown_ops'])}")
    print(
        f"Lowest TF Serving version: {info['min_tf_serving'] or 'none'} "
        f"({info['min_tf_serving_reason']})"
    )
    return 0


def add_inspect(subparsers) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="show an export's signatures, feature specs, ops and TF Serving floor",
        description="Signatures (inputs and outputs: name, dtype, shape), the "
        "feature specs JSON, the warm-up records, the ops the graph uses (TensorFlow "
        "core, or the tf-text ops TF Serving links) and the lowest TF Serving release "
        "that loads the export.",
    )
    parser.add_argument("model", help="export base or version folder")
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    parser.set_defaults(func=_inspect)
