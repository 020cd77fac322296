"""Export for TF Serving (versioned SavedModels with named signatures)."""

from keras_attn.serving.export import (
    export,
    latest_version,
    load_serving_fn,
    read_features_json,
)

__all__ = ["export", "latest_version", "load_serving_fn", "read_features_json"]
