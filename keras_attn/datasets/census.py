"""The census-income (KDD) data of the MMoE paper: a shipped sample and its tasks.

Tasks as in Ma et al. (KDD 2018): `income` (income above 50K) and `marital` (marital
status "Never married"). The package ships 5,000 rows (see `data/ATTRIBUTION.md`);
`load_census` also reads a larger copy in the same format.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from keras_attn.features.specs import infer_features
from keras_attn.models.ctr import Task

__all__ = [
    "CENSUS_CATEGORICAL_INTEGERS",
    "CENSUS_LABELS",
    "CENSUS_NUMERIC",
    "SAMPLE_PATH",
    "census_features",
    "census_tasks",
    "load_census",
    "load_census_sample",
]

#: The shipped sample: 5,000 rows of UCI Census-Income (KDD), CC BY 4.0.
SAMPLE_PATH = Path(__file__).resolve().parent / "data" / "census_income_sample.csv.gz"
#: The raw label columns (not features).
CENSUS_LABELS = ("income_50k", "marital_stat")
#: The numeric columns; the other integer columns are codes.
CENSUS_NUMERIC = (
    "age",
    "wage_per_hour",
    "capital_gains",
    "capital_losses",
    "stock_dividends",
    "num_emp",
    "weeks_worked",
)
#: Integer-coded categorical columns.
CENSUS_CATEGORICAL_INTEGERS = (
    "det_ind_code",
    "det_occ_code",
    "own_or_self",
    "vet_benefits",
    "year",
)


def census_tasks(income_weight: float = 1.0, marital_weight: float = 1.0) -> list:
    """The MMoE paper's two tasks on the census columns.

    Example:

    >>> [t.name for t in census_tasks()]
    ['income', 'marital']
    """
    return [
        Task(
            "income", label="income_50k", positive="50000+.", loss_weight=income_weight
        ),
        Task(
            "marital",
            label="marital_stat",
            positive="Never married",
            loss_weight=marital_weight,
        ),
    ]


def load_census(path: str | Path) -> pd.DataFrame:
    """Reads a census-income CSV (header row) with "NA" and "?" kept as text."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def load_census_sample() -> pd.DataFrame:
    """The 5,000-row sample shipped in the package, as a DataFrame.

    Example:

    >>> df = load_census_sample()
    >>> df.shape
    (5000, 42)
    """
    return load_census(SAMPLE_PATH)


def census_features(df: pd.DataFrame) -> list:
    """Feature specs fitted on `df`: 7 numeric columns, every other column
    categorical by vocabulary (the labels and `instance_weight` left out)."""
    return infer_features(
        df,
        labels=list(CENSUS_LABELS),
        exclude=["instance_weight"],
        numeric=list(CENSUS_NUMERIC),
        categorical=list(CENSUS_CATEGORICAL_INTEGERS),
    )
