"""The test tiers of `python -m tests`: which run gets which tests."""

import pytest

from tests.__main__ import CI_TIER, ONLY_DIFFERING, _runs, _split_runs
from tests.harness import require_both_generations

pytestmark = pytest.mark.generation_neutral


def test_ci_tier_runs_everything_under_keras_3_and_what_differs_under_keras_2():
    (k3, legacy3, args3), (k2, legacy2, args2) = _runs(False, ["-x", "tests/a.py"])
    assert (legacy3, legacy2) == (False, True)
    assert args3 == ["-x", "tests/a.py", "-m", CI_TIER]
    assert args2 == ["-x", "tests/a.py", "-m", f"{CI_TIER} and ({ONLY_DIFFERING})"]


@pytest.mark.parametrize("spelling", [["-m", "slow"], ["-mslow"], ["-m=slow"]])
def test_a_marker_expression_is_kept_in_both_runs(spelling):
    (_, _, args3), (_, _, args2) = _runs(False, ["-q", *spelling])
    assert args3 == ["-q", "-m", f"{CI_TIER} and (slow)"]
    assert args2 == ["-q", "-m", f"{CI_TIER} and (slow) and ({ONLY_DIFFERING})"]


def test_full_tier_runs_the_same_tests_under_both():
    (_, _, args3), (_, _, args2) = _runs(True, ["-m", "not slow", "-q"])
    assert args3 == args2 == ["-q", "-m", "not slow"]


@pytest.mark.parametrize("extra", [[], ["-m", "slow"]])
def test_full_coverage_splits_each_generation_into_the_ci_part_and_the_rest(extra):
    ci_runs = _runs(False, ["-q", *extra])
    split = _split_runs(["-q", *extra])
    assert [(legacy, in_ci) for _, legacy, _, in_ci in split] == [
        (False, True),
        (False, False),
        (True, True),
        (True, False),
    ]
    for (_, legacy, ci_args), part, rest in zip(ci_runs, split[::2], split[1::2]):
        # The CI part is exactly that generation's CI-tier run...
        assert part[1:3] == (legacy, ci_args)
        # ...and the rest is its complement within the user's expression.
        ci_expression = ci_args[-1]
        expected = f"not ({ci_expression})" + (" and (slow)" if extra else "")
        assert rest[2] == ["-q", "-m", expected]


def test_the_harness_refuses_to_run_in_a_generation_neutral_test():
    with pytest.raises(AssertionError, match="mark the test"):
        require_both_generations("run_layer_test")


@pytest.mark.generation_specific
def test_generation_specific_overrides_the_modules_neutral_marker():
    require_both_generations("run_layer_test")
