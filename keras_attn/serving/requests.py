"""TF Serving requests from raw rows: REST JSON, gRPC `PredictRequest`, and answers.

The REST bodies follow TF Serving's REST API: the row form
`{"signature_name": ..., "instances": [{input: value, ...}, ...]}` (one object per
instance, every input with the same batch size) or the columnar form
`{"signature_name": ..., "inputs": {input: [values...]}}`. JSON types: strings as
JSON strings (bytes that are not UTF-8 as `{"b64": ...}`), floats as numbers or the
tokens `NaN`, `Infinity`, `-Infinity` (which `json.dumps` writes and TF Serving
reads), integers as numbers. The answers are `{"predictions": [...]}` (row) or
`{"outputs": ...}` (columnar); `parse_rest_response` reads both.

`to_arrays` is the one place raw rows become the NumPy arrays a signature takes:
the warm-up records, the requests and `keras-attn predict` all go through it.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np

__all__ = [
    "grpc_request",
    "parse_rest_response",
    "rest_request",
    "signature_dtypes",
    "to_arrays",
]

REST_FORMATS = ("instances", "inputs")


def signature_dtypes(export_dir, signature: str = "serving_default") -> dict:
    """`{input name: numpy dtype name}` of a signature, read from `saved_model.pb`.

    Args:
        export_dir: a version folder (`base/<version>`).
        signature: str. The signature's name. Defaults to "serving_default".

    Returns:
        dict of "string", "float32", "int64", ... by input name.
    """
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import dtypes

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((Path(export_dir) / "saved_model.pb").read_bytes())
    signatures = proto.meta_graphs[0].signature_def
    if signature not in signatures:
        raise ValueError(
            f"`signature` must be one of {sorted(signatures)}. Received: "
            f"signature={signature!r}"
        )
    return {
        name: dtypes.as_dtype(info.dtype).name
        for name, info in signatures[signature].inputs.items()
    }


def _columns(rows) -> dict:
    """Raw rows as `{column: list or array}`."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        return {c: rows[c] for c in rows.columns}
    if isinstance(rows, dict):
        return {k: v for k, v in rows.items()}
    if isinstance(rows, (list, tuple)):
        if all(isinstance(r, (str, bytes)) for r in rows):
            return {"text": list(rows)}  # a text export's one input
        if all(isinstance(r, dict) for r in rows):
            names = list(dict.fromkeys(k for r in rows for k in r))
            return {n: [r.get(n) for r in rows] for n in names}
    raise ValueError(
        "`rows` must be a DataFrame, a list of dicts (one per row), a dict of "
        f"columns or a list of strings (a text export's `text`). Received: "
        f"rows of type {type(rows).__name__}"
    )


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _column_array(name: str, values, dtype: str) -> np.ndarray:
    """One column as `dtype` (string missing -> "", float missing -> NaN)."""
    values = list(values.tolist() if hasattr(values, "tolist") else values)
    if dtype == "string":
        out = []
        for v in values:
            if _missing(v):
                out.append(b"")
            elif isinstance(v, bytes):
                out.append(v)
            elif isinstance(v, str):
                out.append(v.encode("utf-8"))
            else:
                raise ValueError(
                    f"Input {name!r} takes strings. Received: {name}={v!r} "
                    f"({type(v).__name__})"
                )
        return np.array(out, dtype=object)
    kind = np.dtype(dtype).kind
    for v in values:
        if _missing(v):
            if kind != "f":
                raise ValueError(
                    f"Input {name!r} takes {dtype} values and cannot be missing. "
                    f"Received: {name}={v!r}"
                )
            continue
        if isinstance(v, (str, bytes)) or (
            kind in "iu" and isinstance(v, float) and not float(v).is_integer()
        ):
            raise ValueError(
                f"Input {name!r} takes {dtype} numbers. Received: {name}={v!r} "
                f"({type(v).__name__})"
            )
    values = [np.nan if _missing(v) else v for v in values]
    return np.asarray(values, dtype=dtype).reshape(len(values))


def _source(name: str, by_name: dict, columns) -> str:
    """The column of input `name`: its spec's column when the rows have it (the
    data's name for an input renamed to be a serving name), else `name`."""
    spec = by_name.get(name)
    if spec is not None and getattr(spec, "column", None) in columns:
        return spec.column
    return name


def to_arrays(rows, dtypes: dict | str | Path, features=None) -> dict:
    """Raw rows as the arrays a signature takes: `{input: (batch,) array}`.

    Args:
        rows: a DataFrame, a list of dicts (one per row), a dict of columns, or a
            list of strings (the `text` input of a text export).
        dtypes: `{input: dtype name}` (as `signature_dtypes` gives), or an export
            folder to read them from.
        features: optional feature specs: columns they describe are converted as in
            training (`spec.values`), the rest by `dtypes`; an input whose spec has
            a `column` (a data column renamed for serving) is read from that
            column when `rows` have it.

    Returns:
        dict of NumPy arrays by input name: strings as bytes objects (missing ->
        b""), floats as float32 (missing -> NaN), integers as int64.

    Raises:
        ValueError: an input of the signature is not in `rows` (named), columns have
            different lengths, or a value does not fit its input's dtype.

    Example:

    >>> to_arrays([{"city": "a", "age": 30}, {"city": None, "age": None}],
    ...           {"city": "string", "age": "float32"})["age"]
    array([30., nan], dtype=float32)
    """
    import pandas as pd

    if not isinstance(dtypes, dict):
        dtypes = signature_dtypes(dtypes)
    columns = _columns(rows)
    by_name = {f.name: f for f in (features or [])}
    missing = sorted(n for n in dtypes if _source(n, by_name, columns) not in columns)
    if missing:
        raise ValueError(
            f"`rows` must hold every input of the signature {sorted(dtypes)}. "
            f"Missing: {missing}"
        )
    out = {}
    for name, dtype in dtypes.items():
        values = columns[_source(name, by_name, columns)]
        if name in by_name:
            series = values if isinstance(values, pd.Series) else pd.Series(values)
            array = by_name[name].values(series)
            if dtype == "string":
                array = np.array(
                    [v.encode("utf-8") if isinstance(v, str) else v for v in array],
                    dtype=object,
                )
            else:
                array = np.asarray(array, dtype=dtype)
        else:
            array = _column_array(name, values, dtype)
        out[name] = array
    sizes = {n: len(a) for n, a in out.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"Every input of `rows` must have the same number of rows. Received: "
            f"{sizes}"
        )
    return out


def _json_value(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.generic):
        return value.item()
    return value


def rest_request(
    rows,
    dtypes: dict | str | Path,
    signature: str = "serving_default",
    format: str = "instances",
    features=None,
) -> dict:
    """The JSON body of a TF Serving REST `:predict` call for raw rows.

    Args:
        rows: raw rows, as for `to_arrays`.
        dtypes: the signature's input dtypes, or the export folder.
        signature: str. The `signature_name`. Defaults to "serving_default".
        format: str. "instances" (row form, one object per row) or "inputs"
            (columnar form). Defaults to "instances".
        features: optional feature specs (see `to_arrays`).

    Returns:
        A dict that `json.dumps` writes as the request body (non-finite floats as
        `NaN`/`Infinity`, which TF Serving's REST API accepts).

    Example:

    >>> rest_request([{"city": "a", "age": 30.0}], {"city": "string",
    ...              "age": "float32"}, format="inputs")
    {'signature_name': 'serving_default', 'inputs': {'city': ['a'], 'age': [30.0]}}
    """
    if format not in REST_FORMATS:
        raise ValueError(
            f"`format` must be one of {list(REST_FORMATS)}. Received: format={format!r}"
        )
    arrays = to_arrays(rows, dtypes, features)
    columns = {n: [_json_value(v) for v in a.tolist()] for n, a in arrays.items()}
    body = {"signature_name": signature}
    if format == "inputs":
        body["inputs"] = columns
    else:
        n = len(next(iter(columns.values()))) if columns else 0
        body["instances"] = [{k: v[i] for k, v in columns.items()} for i in range(n)]
    return body


def grpc_request(
    rows,
    dtypes: dict | str | Path,
    model_name: str,
    signature: str = "serving_default",
    version: int | None = None,
    features=None,
):
    """A TF Serving gRPC `PredictRequest` for raw rows.

    Args:
        rows: raw rows, as for `to_arrays`.
        dtypes: the signature's input dtypes, or the export folder.
        model_name: str. The model's name on the server (`--model_name`).
        signature: str. The `signature_name`. Defaults to "serving_default".
        version: int. A model version; None asks for the latest.
        features: optional feature specs (see `to_arrays`).

    Returns:
        A `tensorflow_serving.apis.predict_pb2.PredictRequest`.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    if not isinstance(model_name, str) or not model_name:
        raise ValueError(
            f"`model_name` must be a non-empty string. Received: "
            f"model_name={model_name!r}"
        )
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature
    if version is not None:
        request.model_spec.version.value = int(version)
    if not isinstance(dtypes, dict):
        dtypes = signature_dtypes(dtypes, signature)
    for name, array in to_arrays(rows, dtypes, features).items():
        request.inputs[name].CopyFrom(
            tf.make_tensor_proto(array, dtype=tf.as_dtype(dtypes[name]))
        )
    return request


def _decode(value):
    """JSON answer values back to Python: `{"b64": ...}` -> bytes, lists kept."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _array(value) -> np.ndarray:
    """Numbers as a numeric array; strings and bytes as objects (NumPy's fixed-width
    bytes would drop trailing NUL bytes)."""
    array = np.asarray(value)
    if array.dtype.kind in "SU":
        array = np.asarray(value, dtype=object)
    return array


def parse_rest_response(response, output_name: str = "output") -> dict:
    """A TF Serving REST `:predict` answer as `{output name: np.ndarray}`.

    Args:
        response: the body, as str/bytes (NaN/Infinity tokens allowed) or parsed.
        output_name: str. The key for a single output, whose name TF Serving omits.
            Defaults to "output".

    Returns:
        dict of NumPy arrays, batch first.

    Raises:
        ValueError: the answer is TF Serving's `{"error": ...}` (its message is
            kept) or has neither `predictions` nor `outputs`.

    Example:

    >>> parse_rest_response('{"predictions": [{"p": [0.5]}, {"p": [0.25]}]}')["p"]
    array([[0.5 ],
           [0.25]])
    """
    if isinstance(response, (str, bytes)):
        response = json.loads(response)
    if not isinstance(response, dict):
        raise ValueError(
            f"`response` must be a JSON object. Received: {type(response).__name__}"
        )
    if "error" in response:
        raise ValueError(f"TF Serving answered an error: {response['error']}")
    if "predictions" in response:
        rows = _decode(response["predictions"])
        if rows and all(isinstance(r, dict) for r in rows):
            names = list(rows[0])
            return {n: _array([r[n] for r in rows]) for n in names}
        return {output_name: _array(rows)}
    if "outputs" in response:
        outputs = response["outputs"]
        if isinstance(outputs, dict):
            return {n: _array(_decode(v)) for n, v in outputs.items()}
        return {output_name: _array(_decode(outputs))}
    raise ValueError(
        "`response` must hold `predictions` (row form) or `outputs` (columnar "
        f"form). Received keys: {sorted(response)}"
    )
