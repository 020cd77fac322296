"""bench_text's paired accuracy difference (issue 16's value-transform question)."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from benchmarks._stats import paired_difference

pytestmark = pytest.mark.generation_neutral


def test_paired_difference_matches_the_formulas():
    # 100 documents: 70 both right, 12 only b, 4 only a, 14 both wrong.
    a = np.array([1] * 70 + [0] * 12 + [1] * 4 + [0] * 14)
    b = np.array([1] * 70 + [1] * 12 + [0] * 4 + [0] * 14)
    d, low, high, p = paired_difference(a, b)
    assert math.isclose(d, (12 - 4) / 100)
    half = 1.959964 * math.sqrt(12 + 4 - (12 - 4) ** 2 / 100) / 100
    assert math.isclose(low, d - half) and math.isclose(high, d + half)
    assert math.isclose(p, binomtest(4, 16).pvalue)  # McNemar's exact test
    # Swapping the two flips the sign and keeps the p-value.
    d2, _, _, p2 = paired_difference(b, a)
    assert math.isclose(d2, -d) and math.isclose(p2, p)
    # Identical predictions: no difference, p = 1.
    assert paired_difference(a, a) == (0.0, 0.0, 0.0, 1.0)


def test_bootstrap_intervals_of_a_mean_and_of_a_ratio_of_sums():
    from benchmarks._stats import bootstrap_interval, bootstrap_mean

    values = np.random.default_rng(0).normal(1.0, 2.0, 400)
    mean, low, high = bootstrap_mean(values)
    # Near the normal interval mean +- 1.96 sd/sqrt(n) (sd 2, n 400: +-0.196).
    assert low < mean < high
    assert abs((high - low) / 2 - 1.96 * values.std() / 20) < 0.03
    assert bootstrap_mean(np.full(5, 0.25)) == (0.25, 0.25, 0.25)
    # A ratio of sums over resampled units (e.g. hits over items per user).
    hits, items = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0])
    interval = bootstrap_interval(lambda pick: hits[pick].sum() / items[pick].sum(), 3)
    assert interval == (0.5, 0.5)
