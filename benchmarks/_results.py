"""Writes one benchmark's section of benchmarks/RESULTS.md, leaving the others alone."""

from __future__ import annotations

import datetime
import platform
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
_HEADER = (
    "# Benchmark results\n\n"
    "Each section is written by the script it names; rerun the command to refresh it.\n"
    "Ratios come from one run, alternating the implementations, on a shared 2-core CPU "
    "machine: read them as ratios, not as absolute speeds.\n"
)


def write_section(name: str, body: str, command: str) -> None:
    """Replaces (or appends) the section `name` with `body` and the command that made
    it."""
    text = RESULTS.read_text() if RESULTS.exists() else _HEADER
    stamp = datetime.date.today().isoformat()
    section = (
        f"<!-- {name}:start -->\n## {name}\n\n"
        f"Command: `{command}` ({stamp}, {platform.machine()}, "
        f"{platform.python_version()})\n\n{body.strip()}\n<!-- {name}:end -->\n"
    )
    pattern = re.compile(
        rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->\n", re.S
    )
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
