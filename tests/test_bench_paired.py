"""bench_text's paired accuracy difference (issue 16's value-transform question)."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from benchmarks.bench_text import paired_difference

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
