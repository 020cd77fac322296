"""Small data sets shipped with keras_attn, and their loaders."""

from keras_attn.datasets.census import (
    CENSUS_LABELS,
    census_features,
    census_tasks,
    load_census,
    load_census_sample,
)

__all__ = [
    "CENSUS_LABELS",
    "census_features",
    "census_tasks",
    "load_census",
    "load_census_sample",
]
