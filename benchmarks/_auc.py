"""AUC with DeLong's variance, for one model or the difference of two on the same
examples.

DeLong, DeLong and Clarke-Pearson (Biometrics 1988), computed with midranks as in
Sun and Xu (IEEE Signal Processing Letters 2014): each positive's and each
negative's structural component, whose covariances give the AUCs' covariance.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm, rankdata


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
