"""Writes one benchmark's section of benchmarks/RESULTS.md, leaving the others alone."""

from __future__ import annotations

import datetime
import os
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


def cpu_model() -> str:
    """The CPU's model name (`/proc/cpuinfo`) and the number of cores."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def machine(loads) -> str:
    """A sentence for a figure's machine: the CPU and the load while it ran."""
    return (
        f"CPU: {cpu_model()}; load average (1 min) during the run "
        f"{min(loads):.1f}-{max(loads):.1f}, the machine shared with other jobs."
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
