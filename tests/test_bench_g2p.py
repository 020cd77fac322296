"""benchmarks/bench_g2p.py's scoring: edit distance, closest pronunciation, PER/WER
and their bootstrap intervals, checked against values worked out by hand."""

import numpy as np
import pytest

from benchmarks.bench_g2p import (
    bootstrap_intervals,
    edit_distance,
    error_rates,
    split_words,
    word_errors,
)

pytestmark = pytest.mark.generation_neutral


def test_edit_distance():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], ["AH"]) == 1
    assert edit_distance(["K", "AE", "T"], ["K", "AE", "T"]) == 0


def test_each_word_is_scored_against_its_closest_pronunciation():
    predicted = [["T", "AH", "M", "EY", "T", "OW"], ["K", "AE", "T"], ["D", "AO"]]
    references = [
        [("T", "AH", "M", "EY", "T", "OW"), ("T", "AH", "M", "AA", "T", "OW")],
        [("K", "AE", "T", "S")],  # one deletion
        [("D", "AO", "G")],  # one deletion
    ]
    counts = word_errors(predicted, references)
    np.testing.assert_array_equal(counts, [[0, 6], [1, 4], [1, 3]])
    per, wer = error_rates(predicted, references)
    assert per == 2 / 13 and wer == 2 / 3


def test_bootstrap_intervals_hold_the_estimate_and_collapse_without_spread():
    counts = np.array([[0, 5], [1, 4], [2, 6], [0, 3]] * 25)
    (per_lo, per_hi), (wer_lo, wer_hi) = bootstrap_intervals(counts)
    assert per_lo < counts[:, 0].sum() / counts[:, 1].sum() < per_hi
    assert wer_lo < 0.5 < wer_hi
    (per_lo, per_hi), (wer_lo, wer_hi) = bootstrap_intervals(np.array([[1, 4]] * 10))
    assert per_lo == per_hi == 0.25 and wer_lo == wer_hi == 1.0


def test_split_is_by_word_and_fixed():
    words = {f"w{i}": [("AH",)] for i in range(100)}
    train, validation, test = split_words(words)
    assert (len(train), len(validation), len(test)) == (90, 5, 5)
    assert not set(train) & set(test) and not set(validation) & set(test)
    assert split_words(words) == (train, validation, test)
