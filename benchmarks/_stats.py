"""The benchmarks' statistics, in one place: intervals of what they measure.

- AUC with DeLong's variance, for one model or the difference of two on the same
  examples (DeLong, DeLong and Clarke-Pearson, Biometrics 1988, computed with
  midranks as in Sun and Xu, IEEE Signal Processing Letters 2014: each positive's
  and each negative's structural component, whose covariances give the AUCs'
  covariance): `delong`, `auc_interval`, `difference_interval`.
- An accuracy's Wilson score interval (`wilson`), and the paired difference of two
  classifiers on the same examples with McNemar's exact test (`paired_difference`).
- Percentile bootstrap intervals of any statistic of resampled units (words, users,
  lists): `bootstrap_interval`, and `bootstrap_mean` for a mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.stats import norm, rankdata

Z_95 = 1.959964


def delong(labels, *scores) -> tuple[np.ndarray, np.ndarray]:
    """AUCs of one or more score vectors and their DeLong covariance matrix.

    Args:
        labels: 0/1 array `(n,)`.
        *scores: one or more score arrays `(n,)` on the same examples.

    Returns:
        `(aucs (k,), covariance (k, k))`.
    """
    y = np.asarray(labels).astype(bool).ravel()
    s = np.stack([np.asarray(x, dtype="float64").ravel() for x in scores])
    pos, neg = s[:, y], s[:, ~y]
    m, n = pos.shape[1], neg.shape[1]
    if m == 0 or n == 0:
        raise ValueError("`labels` must hold both classes")
    rank_pos = np.stack([rankdata(x) for x in pos])  # (k, m) ranks among positives
    rank_neg = np.stack([rankdata(x) for x in neg])  # (k, n) among negatives
    rank_all = np.stack([rankdata(x) for x in np.concatenate([pos, neg], 1)])
    aucs = (rank_all[:, :m].sum(1) - m * (m + 1) / 2) / (m * n)
    v10 = (rank_all[:, :m] - rank_pos) / n  # per positive: share of negatives below
    v01 = 1.0 - (rank_all[:, m:] - rank_neg) / m  # per negative: share above it
    cov = np.atleast_2d(np.cov(v10)) / m + np.atleast_2d(np.cov(v01)) / n
    return aucs, cov


def auc_interval(labels, score, level: float = 0.95) -> tuple[float, float, float]:
    """`(auc, low, high)`: the AUC and its DeLong interval."""
    aucs, cov = delong(labels, score)
    half = norm.ppf(0.5 + level / 2) * np.sqrt(cov[0, 0])
    return float(aucs[0]), float(aucs[0] - half), float(aucs[0] + half)


def difference_interval(labels, a, b, level: float = 0.95):
    """`(auc(a) - auc(b), low, high)`: paired DeLong interval of the difference."""
    aucs, cov = delong(labels, a, b)
    diff = aucs[0] - aucs[1]
    half = norm.ppf(0.5 + level / 2) * np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    return float(diff), float(diff - half), float(diff + half)


def wilson(correct: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion `correct / n`."""
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def paired_difference(a, b, z: float = Z_95) -> tuple[float, float, float, float]:
    """Accuracy of `b` minus `a` on the same examples (0/1 arrays): the difference,
    its 95 % Wald interval for matched pairs, and McNemar's exact two-sided
    p-value."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    n = len(a)
    only_b, only_a = int(np.sum(b & ~a)), int(np.sum(a & ~b))
    d = (only_b - only_a) / n
    half = z * math.sqrt(max(only_b + only_a - (only_b - only_a) ** 2 / n, 0)) / n
    k, m = min(only_a, only_b), only_a + only_b
    p = min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2**m) if m else 1.0
    return d, d - half, d + half, p


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    n: int,
    num: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The percentile interval of `statistic(indices)` over `num` resamples of `n`
    units with replacement (`indices` `(n,)` picks the units of one resample)."""
    draws = np.random.default_rng(seed).integers(0, n, size=(num, n))
    values = np.array([statistic(pick) for pick in draws])
    low, high = np.quantile(values, [0.5 - level / 2, 0.5 + level / 2])
    return float(low), float(high)


def bootstrap_mean(
    values, num: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """`(mean, low, high)`: a mean over units and its bootstrap 95 % interval."""
    values = np.asarray(values, dtype="float64")
    low, high = bootstrap_interval(
        lambda pick: values[pick].mean(), len(values), num, seed
    )
    return float(values.mean()), low, high
