"""Small data sets shipped with keras_attn, and loaders of larger ones."""

from keras_attn.datasets.census import (
    CENSUS_LABELS,
    census_features,
    census_tasks,
    load_census,
    load_census_sample,
)
from keras_attn.datasets.criteo import (
    criteo_features,
    criteo_integer_bucket,
    load_criteo,
)
from keras_attn.datasets.movielens import (
    MovieLensDIN,
    load_movielens_din,
    movielens_din_features,
)
from keras_attn.datasets.movielens_sequences import (
    MovieLensSequences,
    SequenceExamples,
    load_movielens_sequences,
)

__all__ = [
    "CENSUS_LABELS",
    "MovieLensDIN",
    "MovieLensSequences",
    "SequenceExamples",
    "census_features",
    "census_tasks",
    "criteo_features",
    "criteo_integer_bucket",
    "load_census",
    "load_census_sample",
    "load_criteo",
    "load_movielens_din",
    "load_movielens_sequences",
    "movielens_din_features",
]
