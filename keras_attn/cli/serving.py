"""`keras-attn predict` and `keras-attn inspect`: the commands on an export.

Argument parsing only: `keras_attn.serving.predict_file` streams a file through an
export, `keras_attn.serving.inspect_export` tells what an export takes and returns
and what a TF Serving needs to load it. Registered in `keras_attn.cli.main.COMMANDS`
by `add_predict` and `add_inspect`.
"""

from __future__ import annotations

import argparse
import json
import sys

from keras_attn._deprecation import moved
from keras_attn.cli.arguments import positive

__all__ = ["add_inspect", "add_predict"]

# Library names that lived here until 0.x; they moved to `keras_attn.serving`.
__getattr__ = moved(
    __name__,
    {
        name: f"keras_attn.serving:{name}"
        for name in (
            "TF_SERVING_TEXT_OPS",
            "inspect_export",
            "predict_file",
            "resolve_export",
        )
    },
)


def _predict(args: argparse.Namespace) -> int:
    from keras_attn.serving import predict_file

    report = predict_file(
        args.model,
        args.data,
        output=args.output,
        batch_size=args.batch_size,
        signature=args.signature,
        keep=args.keep or (),
        progress=not args.quiet,
        prefix=args.prefix,
        encoding=args.encoding,
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
    parser.add_argument(
        "--batch-size", type=positive, default=1024, help="rows per call"
    )
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--keep", nargs="+", help="input columns copied to the output")
    parser.add_argument(
        "--prefix",
        default="",
        help="put before each output's name (e.g. pred_), needed when a kept "
        "column has an output's name",
    )
    parser.add_argument(
        "--encoding",
        default="utf-8",
        help="text encoding of --data (UTF-8 with or without a byte-order "
        "mark by default)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.set_defaults(func=_predict)


# ------------------------------------------------------------------------ inspect


def _shape(shape) -> str:
    if shape is None:
        return "unknown rank"
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"


def _inspect(args: argparse.Namespace) -> int:
    from keras_attn.serving import inspect_export

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
