"""Feature specs, in-model preprocessing layers, and DataFrame/CSV -> tf.data."""

from keras_attn.features.dataset import label_columns, to_dataset
from keras_attn.features.preprocessing import (
    NumericPreprocessing,
    SequenceSplit,
    StackColumns,
    build_preprocessing,
    categorical_lookup,
)
from keras_attn.features.specs import (
    CategoricalFeature,
    Feature,
    NumericFeature,
    SequenceFeature,
    features_from_json,
    features_to_json,
    fit_features,
    infer_features,
    load_features,
    save_features,
)

__all__ = [
    "CategoricalFeature",
    "Feature",
    "NumericFeature",
    "NumericPreprocessing",
    "SequenceFeature",
    "SequenceSplit",
    "StackColumns",
    "build_preprocessing",
    "categorical_lookup",
    "features_from_json",
    "features_to_json",
    "fit_features",
    "infer_features",
    "label_columns",
    "load_features",
    "save_features",
    "to_dataset",
]
