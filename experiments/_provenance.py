"""Where a result comes from: the lines every results file starts with.

The command that made it, the commit (with ``+dirty`` when the working tree differs from it), the
date, the machine (cores, CPU model, GPU if any) and the load average, as ``# `` comment lines
(markdown shows them as a quoted block when written with ``markdown=True``).
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*arguments: str) -> str:
    try:
        result = subprocess.run(
            ["git", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip()


def commit() -> str:
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu() -> str:
    if shutil.which("nvidia-smi") is None:
        return "none"
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return ", ".join(line.strip() for line in result.stdout.splitlines() if line.strip()) or "none"


def load_average() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def provenance(argv: list[str] | None = None) -> list[str]:
    """``key: value`` lines: command, commit, date, machine, load average (1, 5, 15 min)."""
    argv = sys.argv if argv is None else argv
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT) if argv else "?"
    return [
        f"command: python {shlex.join([script, *argv[1:]])}",
        f"commit: {commit()}",
        f"date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"machine: {os.cpu_count()} cores, {cpu_model()}, GPU: {gpu()}",
        f"load average at start: {load_average()}",
    ]


def header(lines: list[str], *, markdown: bool = False) -> str:
    """The lines as a file's first lines: ``# `` comments, or a markdown quote."""
    prefix = "> " if markdown else "# "
    separator = "  \n" if markdown else "\n"
    return (
        separator.join(prefix + line for line in lines) + "\n\n" * markdown + "\n" * (not markdown)
    )
