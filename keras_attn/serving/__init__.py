"""Export for TF Serving (versioned SavedModels with named signatures), warm-up
records, explain signatures, the seq2seq export, and the REST/gRPC requests of raw
rows."""

from keras_attn.serving.export import (
    export,
    export_text_classifier,
    latest_version,
    load_serving_fn,
    read_features_json,
)
from keras_attn.serving.requests import (
    grpc_request,
    parse_rest_response,
    rest_request,
    signature_dtypes,
    to_arrays,
)
from keras_attn.serving.seq2seq import export_seq2seq
from keras_attn.serving.warmup import read_warmup, write_warmup

__all__ = [
    "export",
    "export_seq2seq",
    "export_text_classifier",
    "grpc_request",
    "latest_version",
    "load_serving_fn",
    "parse_rest_response",
    "read_features_json",
    "read_warmup",
    "rest_request",
    "signature_dtypes",
    "to_arrays",
    "write_warmup",
]
