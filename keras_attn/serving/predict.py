"""Batch scoring of a file through an export: `predict_file`.

Streams a CSV or JSONL file (optionally .gz) through an export's signature in
batches and writes one row per input row (`keras-attn predict` is its command line):
the file read as in training, the output renamed into place when complete.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from keras_attn._cells import is_missing, read_number
from keras_attn._validation import check_positive_int
from keras_attn.backend import tf
from keras_attn.features.reader import (
    CSVFiles,
    decode_error,
    iter_csv_frames,
    open_text,
)
from keras_attn.features.specs import CellError, features_from_json
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


def _jsonl_chunks(data: Path, batch_size: int, encoding: str):
    import pandas as pd

    handle, raw = open_text(data, encoding)
    try:
        chunks = pd.read_json(
            handle, lines=True, chunksize=batch_size, dtype=False, convert_dates=False
        )
        for chunk in chunks:
            chunk.attrs["position"] = raw.tell()
            yield chunk
    except UnicodeDecodeError as error:
        raise decode_error(data, encoding, None, error) from None
    finally:
        handle.close()
        raw.close()


def _read_numbers(chunk, dtypes: dict, specified) -> None:
    """The text cells of a CSV chunk as numbers, in place, for the numeric inputs
    that no feature spec reads (an export made without `features`): as pandas
    types a column of numbers; other text is an error naming file, line and
    column."""
    import pandas as pd

    for name, dtype in dtypes.items():
        if name in specified or dtype == "string" or name not in chunk.columns:
            continue
        cells = chunk[name]
        numbers = [None if is_missing(v) else read_number(v) for v in cells]
        for i, (cell, number) in enumerate(zip(cells, numbers)):
            if number is None and not is_missing(cell):
                raise CellError(
                    f"Input {name!r} takes {dtype} numbers",
                    name,
                    cells.index[i],
                    cell,
                    source=chunk.attrs.get("source"),
                )
        chunk[name] = pd.Series(
            [float("nan") if n is None else n for n in numbers],
            index=cells.index,
            dtype=object,
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


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _output_names(serve, prefix: str, flat: bool) -> dict:
    """`{output: [the columns it writes]}` (a CSV gets `name_j` columns for an
    output of several values)."""
    names = {}
    for name, spec in serve.structured_outputs.items():
        width = 1
        for d in spec.shape[1:]:
            width *= d if d is not None else 2  # unknown: several columns
        written = f"{prefix}{name}"
        names[name] = (
            [written]
            if width == 1 or not flat
            else [f"{written}_{j}" for j in range(width if width > 1 else 2)]
        )
    return names


def _file_mode(path: Path) -> int:
    """The permissions of the file at `path`, or those a new file gets (0666
    less the umask)."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _check_paths(data: Path, output: Path | None) -> None:
    if output is None:
        return
    if _same_file(data, output):
        raise ValueError(
            "`output` must not be the input file: the predictions would write over "
            f"the rows being read. Received: output={str(output)!r}, data="
            f"{str(data)!r}"
        )
    if output.is_dir():
        raise ValueError(
            f"`output` is a folder; give a file. Received: {str(output)!r}"
        )
    if not output.parent.is_dir():
        raise ValueError(
            f"`output` must be in an existing folder. Received: {str(output)!r} "
            f"(no folder {str(output.parent)!r})"
        )
    if not os.access(output.parent, os.W_OK):
        raise ValueError(
            f"`output` cannot be written: no write permission in {str(output.parent)!r}"
        )


def predict_file(
    model,
    data,
    output=None,
    batch_size: int = 1024,
    signature: str = "serving_default",
    keep=(),
    progress: bool = True,
    prefix: str = "",
    encoding: str = "utf-8",
) -> dict:
    """Streams a CSV or JSONL file (optionally .gz) through an export's signature.

    A CSV file is read by `keras_attn.features.reader`, as in training (its feature
    specs, kept with a CTR export, read each cell as the training stream did). The
    output goes to a temporary file beside `output`, renamed into place when every
    row is written: a failed run leaves an existing `output` as it was, and the
    input is never written over.

    Args:
        model: the export's base or version folder.
        data: a `.csv`, `.jsonl`, `.csv.gz` or `.jsonl.gz` file of raw rows.
        output: a `.csv` or `.jsonl` file, or None for JSONL on stdout.
        batch_size: int. Rows per call. Defaults to 1024.
        signature: str. Defaults to "serving_default".
        keep: input columns copied into the output (e.g. an id column). A kept
            column with an output's name (a CTR task is named after its label
            column) is an error before anything is written: give a `prefix`.
        progress: bool. The progress bar on stderr. Defaults to True.
        prefix: str. Put before each output's name (e.g. "pred_"). Defaults to "".
        encoding: str. The file's text encoding. Defaults to "utf-8" (with or
            without a byte-order mark).

    Returns:
        `{"rows": int, "seconds": float, "export": str}`.
    """
    try:  # registers the tokenizer ops of a text export
        import tensorflow_text  # noqa: F401
    except ImportError:
        pass
    check_positive_int("batch_size", batch_size)
    if not isinstance(prefix, str):
        raise ValueError(f"`prefix` must be a string. Received: prefix={prefix!r}")
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
    output = Path(output) if output else None
    out_suffix = output.suffix.lower() if output else ".jsonl"
    if out_suffix not in (".csv", ".jsonl"):
        raise ValueError(
            f"`--output` must end in .csv or .jsonl. Received: {str(output)!r}"
        )
    _check_paths(data, output)
    if not data.is_file():
        raise ValueError(f"`data` file {str(data)!r} does not exist")
    files = CSVFiles(data, encoding=encoding)  # checks the encoding's name
    keep = list(dict.fromkeys(keep or ()))
    dtypes = signature_dtypes(export_dir, signature)
    specs_json = read_features_json(export_dir)
    features = None
    if specs_json is not None:
        features = [f for f in features_from_json(specs_json) if f.name in dtypes]
    serve = tf.saved_model.load(str(export_dir)).signatures[signature]
    flat = out_suffix == ".csv"
    written = _output_names(serve, prefix, flat)
    clash = sorted({c for c in keep for names in written.values() if c in names})
    if clash:
        raise ValueError(
            f"`keep` columns {clash} have the names of the export's outputs, which "
            "would be written over them: give the outputs a prefix (`prefix='pred_'`; "
            "--prefix pred_ on the command line)"
        )
    by_name = {f.name: f for f in features or []}
    columns = [by_name[n].source if n in by_name else n for n in dtypes] + keep

    if suffix == ".csv":
        # Inputs without a spec (a text export's `text`) are read as written.
        strings = [n for n, d in dtypes.items() if d == "string" and n not in by_name]
        stream = iter_csv_frames(files, columns, batch_size, text_columns=strings)
    else:
        stream = _jsonl_chunks(data, batch_size, encoding)

    if output is not None:
        handle = tempfile.NamedTemporaryFile(
            "w",
            dir=output.parent,
            prefix=f".{output.name}.",
            suffix=".tmp",
            encoding="utf-8",
            newline="",
            delete=False,
        )
        sink = handle
    else:
        sink = sys.stdout
    bar = _Progress(data.stat().st_size, progress)
    first, done = True, False
    try:
        for chunk in stream:
            missing = [c for c in keep if c not in chunk.columns]
            if missing:
                raise ValueError(
                    f"`--keep` names columns that are not in the data: {missing}"
                )
            if suffix == ".csv":
                _read_numbers(chunk, dtypes, by_name)
            arrays = to_arrays(chunk, dtypes, features)
            outputs = serve(**{k: tf.constant(v) for k, v in arrays.items()})
            outputs = {f"{prefix}{k}": v.numpy() for k, v in outputs.items()}
            kept = {c: chunk[c].tolist() for c in keep}
            rows = _output_rows(outputs, kept, len(chunk), flat)
            if flat:
                import pandas as pd

                pd.DataFrame(rows).to_csv(sink, header=first, index=False)
            else:
                sink.writelines(
                    json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows
                )
            first = False
            bar.update(len(chunk), chunk.attrs.get("position", 0))
        if flat and first:
            # No rows: the header alone, so the file still reads as a table.
            header = keep + [c for name in sorted(written) for c in written[name]]
            import pandas as pd

            pd.DataFrame(columns=header).to_csv(sink, index=False)
        done = True
    finally:
        seconds = bar.close()
        if output is not None:
            handle.close()
            if done:
                # mkstemp makes the file private (0600): give it the mode the old
                # output had, or the one open() would give a new file.
                os.chmod(handle.name, _file_mode(output))
                os.replace(handle.name, output)  # the whole output, at once
            else:
                os.unlink(handle.name)
    return {"rows": bar.rows, "seconds": seconds, "export": str(export_dir)}
