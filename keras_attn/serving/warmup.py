"""TF Serving's warm-up file: `assets.extra/tf_serving_warmup_requests`.

TF Serving replays the requests of this file when it loads a version, before the
version answers, so the first real request does not pay for graph initialisation.
The file is a TFRecord of `PredictionLog` protos, each holding a
`predict_log.request` (a `PredictRequest`); TF Serving reads at most 1000 records.
"""

from __future__ import annotations

from pathlib import Path

from keras_attn.backend import tf
from keras_attn.serving.requests import grpc_request, to_arrays

__all__ = ["WARMUP_FILE", "read_warmup", "write_warmup"]

WARMUP_FILE = "tf_serving_warmup_requests"
_MAX_RECORDS = 1000  # TF Serving's limit


def write_warmup(
    export_dir,
    rows,
    dtypes: dict,
    signatures=("serving_default",),
    model_name: str | None = None,
    features=None,
) -> Path:
    """Writes the warm-up records of `rows` into an export.

    One record per row (batch 1, the common case under load) and one with all rows
    (a batch as the server's batching makes it), for each signature.

    Args:
        export_dir: the version folder.
        rows: raw rows, as for `keras_attn.serving.to_arrays` (at least one).
        dtypes: `{input: dtype name}` of the signatures' inputs.
        signatures: names of the signatures to warm up.
        model_name: str. The `model_spec.name` of the requests. Defaults to the
            name of the folder above `export_dir` (the model's base folder).
        features: optional feature specs for the conversion of the rows.

    Returns:
        The path of the file.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    arrays = to_arrays(rows, dtypes, features)
    n = len(next(iter(arrays.values())))
    if n == 0:
        raise ValueError("`warmup` must hold at least one row. Received: 0 rows")
    batches = [{k: v[i : i + 1] for k, v in arrays.items()} for i in range(n)]
    if n > 1:
        batches.append(arrays)
    records = [(s, b) for s in signatures for b in batches]
    if len(records) > _MAX_RECORDS:
        raise ValueError(
            f"`warmup` gives {len(records)} records; TF Serving reads at most "
            f"{_MAX_RECORDS}: pass fewer rows"
        )
    path = Path(export_dir) / "assets.extra" / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    name = model_name or Path(export_dir).resolve().parent.name
    with tf.io.TFRecordWriter(str(path)) as writer:
        for signature, batch in records:
            request = grpc_request(batch, dtypes, name, signature=signature)
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup(export_dir) -> list:
    """The `PredictRequest`s of an export's warm-up file ([] when it has none)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(export_dir) / "assets.extra" / WARMUP_FILE
    if not path.exists():
        return []
    requests = []
    for record in tf.data.TFRecordDataset(str(path)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        requests.append(log.predict_log.request)
    return requests
