"""Feature specs, in-model preprocessing layers, the one reader of CSV files, and
DataFrame/CSV -> tf.data."""

from keras_attn.features.dataset import (
    check_label_classes,
    count_rows,
    frame_tensors,
    label_columns,
    to_dataset,
)
from keras_attn.features.preprocessing import (
    NumericPreprocessing,
    SequenceSplit,
    StackColumns,
    build_preprocessing,
    categorical_lookup,
)
from keras_attn.features.reader import (
    CSVFiles,
    iter_csv_frames,
    read_csv_head,
    read_header,
)
from keras_attn.features.specs import (
    INPUT_NAME,
    CategoricalFeature,
    Feature,
    NumericFeature,
    SequenceFeature,
    features_from_json,
    features_to_json,
    fit_features,
    infer_features,
    input_name,
    is_input_name,
    load_features,
    save_features,
)

__all__ = [
    "INPUT_NAME",
    "CSVFiles",
    "CategoricalFeature",
    "Feature",
    "NumericFeature",
    "NumericPreprocessing",
    "SequenceFeature",
    "SequenceSplit",
    "StackColumns",
    "build_preprocessing",
    "categorical_lookup",
    "check_label_classes",
    "count_rows",
    "features_from_json",
    "features_to_json",
    "fit_features",
    "frame_tensors",
    "infer_features",
    "input_name",
    "is_input_name",
    "iter_csv_frames",
    "label_columns",
    "load_features",
    "read_csv_head",
    "read_header",
    "save_features",
    "to_dataset",
]
