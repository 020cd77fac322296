"""`python -m tests`: the CI tier; `python -m tests --full`: the full tier.

The CI tier (what `.ci/run` and the README's test command run) is the whole suite under
Keras 3, then, under TF_USE_LEGACY_KERAS=1 (Keras 2), the tests that can differ between
the generations: every test not marked `generation_neutral` (the marker says, in the
test file, that what the test exercises is the same code under both generations),
and every test marked `generation_specific` (the harness, `.keras` files, exports,
Keras masks: what can differ, also inside a module marked neutral). Tests marked
`full_tier` (the further cases of a multi-process path that a CI-tier test covers)
run in the full tier only.
The full tier runs everything under both generations: for a release, or a change to
`keras_attn/backend.py` or other generation-specific code.

`--coverage` adds a line-coverage report over `keras_attn/` (pytest-cov; both runs
combined). `--full --coverage` splits each generation's run into the CI tier's part and
the rest, and reports the CI tier's coverage beside the full tier's (the two the CI
tier is held to: within a point). Other arguments go to pytest (e.g.
`python -m tests -m "not slow"`). Every test has a time bound (pytest-timeout,
`timeout` in pyproject.toml), each run lists its slowest tests, and the end prints each
run's wall time. Exits non-zero when any run fails, including pytest's exit 5 ("no
tests collected").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The CI tier leaves out the further cases of a multi-process path (`full_tier`)...
CI_TIER = "not full_tier"
# ...and under Keras 2 runs what can differ between the generations.
ONLY_DIFFERING = "not generation_neutral or generation_specific"
ROOT = Path(__file__).resolve().parents[1]


def _marker_expression(pytest_args: list[str]) -> tuple[list[str], str | None]:
    """Splits a `-m EXPR` (or `-mEXPR`, `-m=EXPR`) out of pytest's arguments."""
    rest, expression = [], None
    args = iter(pytest_args)
    for arg in args:
        if arg == "-m":
            expression = next(args, None)
        elif arg.startswith("-m") and not arg.startswith("--"):
            expression = arg[2:].lstrip("=")
        else:
            rest.append(arg)
    return rest, expression


KERAS_3, KERAS_2 = "Keras 3", "Keras 2 (TF_USE_LEGACY_KERAS=1)"


def _runs(full: bool, pytest_args: list[str]) -> list[tuple[str, bool, list[str]]]:
    """(label, legacy Keras, pytest arguments) of each run of the tier."""
    rest, expression = _marker_expression(pytest_args)
    if full:
        keras3 = keras2 = rest + (["-m", expression] if expression else [])
    else:
        keras3 = [*rest, "-m", _ci_expression(False, expression)]
        keras2 = [*rest, "-m", _ci_expression(True, expression)]
    return [(KERAS_3, False, keras3), (KERAS_2, True, keras2)]


def _ci_expression(legacy: bool, expression: str | None) -> str:
    """The marker expression of the CI tier's run under one generation."""
    parts = [CI_TIER] + ([f"({expression})"] if expression else [])
    if legacy:
        parts.append(f"({ONLY_DIFFERING})")
    return " and ".join(parts)


def _split_runs(pytest_args: list[str]) -> list[tuple[str, bool, list[str], bool]]:
    """The full tier as four runs: (label, legacy, arguments, in the CI tier).

    Each generation's run is cut into the CI tier's part and the rest, so one pass
    over the full tier measures the coverage of both tiers.
    """
    rest, expression = _marker_expression(pytest_args)
    runs = []
    for label, legacy in ((KERAS_3, False), (KERAS_2, True)):
        ci = _ci_expression(legacy, expression)
        others = f"not ({ci})" + (f" and ({expression})" if expression else "")
        runs.append((f"{label}, CI-tier part", legacy, [*rest, "-m", ci], True))
        runs.append((f"{label}, the rest", legacy, [*rest, "-m", others], False))
    return runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full tier: every test under both Keras generations",
    )
    parser.add_argument(
        "--coverage",
        action="store_true",
        help="line coverage of keras_attn/ over both runs (pytest-cov)",
    )
    options, pytest_args = parser.parse_known_args(argv)
    tier = "full tier" if options.full else "CI tier"
    coverage_dir = tempfile.mkdtemp(prefix="keras_attn_coverage_")
    if options.full and options.coverage:
        runs = _split_runs(pytest_args)
    else:
        runs = [(*run, not options.full) for run in _runs(options.full, pytest_args)]
    results = {}
    for index, (label, legacy, args, in_ci_tier) in enumerate(runs):
        env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
        if legacy:
            env["TF_USE_LEGACY_KERAS"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            # A module's tests on one worker: its module-scoped fixtures (exports,
            # trained models, a strategy's subprocess) are made once, not per worker.
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            # What to trim when the tier grows towards its 35-minute budget.
            "--durations=25",
        ]
        if options.coverage:
            # One data file per run, named for its tier: `_coverage_report` combines
            # the CI tier's alone, then all of them.
            part = "ci" if in_ci_tier else "rest"
            data_file = f".coverage.{part}{index}"
            env["COVERAGE_FILE"] = os.path.join(coverage_dir, data_file)
            command += ["--cov=keras_attn", "--cov-report="]
        print(f"==== {tier}: test suite under {label} ====", flush=True)
        start = time.monotonic()
        code = subprocess.call([*command, *args], env=env, cwd=ROOT)
        if code == 5 and options.full and options.coverage and not in_ci_tier:
            code = 0  # a rest that a marker expression left empty
        results[label] = (code, time.monotonic() - start)
    if options.coverage:
        if options.full:
            _coverage_report(coverage_dir, "CI tier", "ci")
        _coverage_report(coverage_dir, tier, "")
    total = sum(seconds for _, seconds in results.values())
    for label, (code, seconds) in results.items():
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        print(f"{tier}, {label}: {verdict} in {seconds / 60:.1f} min")
    print(f"{tier}: {total / 60:.1f} min of tests")
    return 0 if all(code == 0 for code, _ in results.values()) else 1


def _coverage_report(coverage_dir: str, tier: str, prefix: str) -> None:
    """Combines the runs' data files whose part starts with `prefix`, and reports."""
    files = sorted(Path(coverage_dir).glob(f".coverage.{prefix}*"))
    combined = os.path.join(coverage_dir, f"combined{prefix}")
    env = {**os.environ, "COVERAGE_FILE": combined}
    coverage = [sys.executable, "-m", "coverage"]
    # --keep: the full tier's report combines the same files again.
    combine = [*coverage, "combine", "--keep", "--quiet", *map(str, files)]
    subprocess.call(combine, env=env)
    print(f"==== {tier}: coverage of keras_attn/ ({len(files)} runs) ====", flush=True)
    subprocess.call([*coverage, "report", "--sort=cover"], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
