"""`python -m tests`: the whole suite under Keras 3, then under TF_USE_LEGACY_KERAS=1.

Extra arguments go to pytest (e.g. `python -m tests -m "not slow"`). Exits non-zero when
either run fails, including pytest's exit 5 ("no tests collected").
"""

from __future__ import annotations

import os
import subprocess
import sys


def main(argv: list[str]) -> int:
    results = {}
    for label, legacy in (
        ("Keras 3", False),
        ("Keras 2 (TF_USE_LEGACY_KERAS=1)", True),
    ):
        env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
        if legacy:
            env["TF_USE_LEGACY_KERAS"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        print(f"==== test suite under {label} ====", flush=True)
        # The 25 slowest tests are listed: what to trim when the suite grows past
        # the 45-minute CI budget.
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "--durations=25",
        ]
        results[label] = subprocess.call([*command, *argv], env=env)
    for label, code in results.items():
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        print(f"{label}: {verdict}")
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
