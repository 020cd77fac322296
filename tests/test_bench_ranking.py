"""benchmarks/bench_ranking.py: the early stop of a validation fit and the
benchmark's own NDCG@10."""

import numpy as np
import pytest

from benchmarks.bench_ranking import PATIENCE, _fallen, ndcg_at_10

pytestmark = pytest.mark.generation_neutral


def test_a_validation_fit_stops_after_patience_falls_in_a_row():
    assert PATIENCE == 2
    assert _fallen([0.77, 0.76, 0.75])
    assert _fallen([0.70, 0.78, 0.77, 0.76])
    assert not _fallen([0.76, 0.75, 0.78])  # fell once, then rose: goes on
    assert not _fallen([0.78, 0.78, 0.77])  # level is not a fall
    assert not _fallen([0.78, 0.77])  # too few checkpoints


def test_ndcg_at_10_ignores_padding():
    labels = np.array([[3.0, 0.0, 1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]])
    scores = np.array([[0.1, 0.9, 0.5, 5.0], [1.0, 2.0, 3.0, 4.0]])
    discounts = 1.0 / np.log2(np.arange(2, 5))
    dcg = (np.array([0.0, 1.0, 7.0]) * discounts).sum()
    ideal = (np.array([7.0, 1.0, 0.0]) * discounts).sum()
    np.testing.assert_allclose(ndcg_at_10(labels, scores), [dcg / ideal, 0.0])
