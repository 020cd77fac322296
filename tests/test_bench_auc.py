"""The DeLong AUC intervals of the CTR benchmarks (benchmarks/_stats.py)."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from benchmarks._stats import auc_interval, delong, difference_interval

pytestmark = pytest.mark.generation_neutral


def _scores(n=600, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    a = y + rng.normal(0, 1.5, n)
    b = np.round(a + rng.normal(0, 0.7, n), 1)  # correlated with a, with ties
    return y, a, b


def test_aucs_match_sklearn():
    y, a, b = _scores()
    aucs, cov = delong(y, a, b)
    np.testing.assert_allclose(aucs, [roc_auc_score(y, a), roc_auc_score(y, b)])
    assert cov.shape == (2, 2) and cov[0, 1] > 0  # the two scores are correlated


def test_variance_matches_the_definition():
    # DeLong's variance written out pairwise: V10 of a positive is the share of
    # negatives it outranks (ties half), V01 of a negative the share of positives
    # above it; var = S10 / m + S01 / n.
    y, a, _ = _scores(n=200, seed=1)
    pos, neg = a[y], a[~y]
    psi = (pos[:, None] > neg[None]) + 0.5 * (pos[:, None] == neg[None])
    v10, v01 = psi.mean(1), psi.mean(0)
    expected = v10.var(ddof=1) / len(pos) + v01.var(ddof=1) / len(neg)
    _, cov = delong(y, a)
    assert cov[0, 0] == pytest.approx(expected, rel=1e-10)
    auc, low, high = auc_interval(y, a)
    assert high - low == pytest.approx(2 * 1.959964 * np.sqrt(expected), rel=1e-5)
    assert low < auc < high


def test_difference_interval():
    y, a, b = _scores()
    diff, low, high = difference_interval(y, a, b)
    assert diff == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b))
    assert low < diff < high
    # The same scores: a zero difference with a zero-width interval.
    assert difference_interval(y, a, a) == pytest.approx((0.0, 0.0, 0.0), abs=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        delong(np.ones(4), np.arange(4.0))
