"""Export for TF Serving (versioned SavedModels with named signatures; the
retrieval index), warm-up
records, explain signatures, the REST/gRPC requests of raw rows, batch scoring of
a file (`predict_file`) and what an export needs (`inspect_export`)."""

from keras_attn.serving.export import (
    check_export_target,
    export,
    export_text_classifier,
    latest_version,
    load_serving_fn,
    read_features_json,
    resolve_export,
)
from keras_attn.serving.inspection import TF_SERVING_TEXT_OPS, inspect_export
from keras_attn.serving.predict import predict_file
from keras_attn.serving.requests import (
    grpc_request,
    parse_rest_response,
    rest_request,
    signature_dtypes,
    to_arrays,
)
from keras_attn.serving.retrieval import export_retrieval_index
from keras_attn.serving.warmup import read_warmup, write_warmup

__all__ = [
    "TF_SERVING_TEXT_OPS",
    "check_export_target",
    "export",
    "export_retrieval_index",
    "export_text_classifier",
    "grpc_request",
    "inspect_export",
    "latest_version",
    "load_serving_fn",
    "parse_rest_response",
    "predict_file",
    "read_features_json",
    "read_warmup",
    "resolve_export",
    "rest_request",
    "signature_dtypes",
    "to_arrays",
    "write_warmup",
]
