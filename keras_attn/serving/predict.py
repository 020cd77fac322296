"""Batch scoring of a file through an export: `predict_file`.

Streams a CSV or JSONL file (optionally .gz) through an export's signature in
batches and writes one row per input row (`keras-attn predict` is its command line).
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

from keras_attn.backend import tf
from keras_attn.features.specs import features_from_json
from keras_attn.serving.export import read_features_json, resolve_export
from keras_attn.serving.requests import signature_dtypes, to_arrays

__all__ = ["predict_file"]


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
