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
    """The CPU's model name (`/proc/cpuinfo`), the number of cores and the matrix
    extensions that decide its speeds (bfloat16 through AMX or AVX512-BF16)."""
    name, flags = None, set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name is None:
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    known = [
        ("avx2", "AVX2"),
        ("avx512f", "AVX-512"),
        ("avx512_bf16", "AVX512-BF16"),
        ("amx_bf16", "AMX"),
    ]
    extensions = [label for flag, label in known if flag in flags]
    if flags and "amx_bf16" not in flags:
        extensions.append("no AMX")
    return ", ".join([name, f"{os.cpu_count()} cores", *extensions])


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
        f"{platform.python_version()}; {cpu_model()})\n\n{body.strip()}\n"
        f"<!-- {name}:end -->\n"
    )
    pattern = re.compile(
        rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->\n", re.S
    )
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
