"""Where a result comes from: the lines every results file starts with.

The command that made it, the commit (with ``+dirty`` when the working tree differs from it), the
date, the machine (cores, CPU model, GPU if any) and the load average: :func:`provenance` as
``key: value`` lines, which :func:`header` writes as ``# `` comment lines (or a markdown quote
with ``markdown=True``); :func:`markdown_lines` as the ``- key: value`` list that starts the
markdown files of ``bench_peers.py`` and the scripts that read its results.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _git(*arguments: str) -> str:
    try:
        result = subprocess.run(
            ["git", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip()


def commit() -> str:
    """The checkout's commit (12 hex digits), with ``+dirty`` when a tracked file differs."""
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def cpu_model() -> str:
    """The CPU's model name, with its family, model, stepping and cache size where
    ``/proc/cpuinfo`` gives them (a virtual machine may name two CPU generations alike, ``AMD
    EPYC``, whose caches move which configuration of a kernel is fastest)."""
    from mlkaps_gpu.campaign import cpu_id

    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    detail = cpu_id()
    return f"{name} ({detail})" if detail else name


def gpu() -> str:
    """The GPUs ``nvidia-smi`` lists (``none`` without it)."""
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
    """The load average over 1, 5 and 15 minutes."""
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def machine() -> str:
    """This machine as the ``machine:`` line names it: cores, CPU model, GPUs."""
    return f"{os.cpu_count()} cores, {cpu_model()}, GPU: {gpu()}"


def provenance(argv: list[str] | None = None) -> list[str]:
    """``key: value`` lines: command, commit, date, machine, load average (1, 5, 15 min)."""
    argv = sys.argv if argv is None else argv
    script = os.path.relpath(os.path.abspath(argv[0]), ROOT) if argv else "?"
    return [
        f"command: python {shlex.join([script, *argv[1:]])}",
        f"commit: {commit()}",
        f"date: {date()}",
        f"machine: {machine()}",
        f"load average at start: {load_average()}",
    ]


def write_csv(table: Any, path: str | Path, argv: list[str] | None = None, **options: Any) -> None:
    """``table`` (a DataFrame) as CSV at ``path``, its :func:`provenance` first as ``# `` lines
    (read it back with ``pd.read_csv(path, comment="#")``); ``options`` go to ``to_csv``."""
    text = table.to_csv(lineterminator="\n", **options)
    Path(path).write_text(header(provenance(argv)) + text, encoding="utf-8")


def header(lines: list[str], *, markdown: bool = False) -> str:
    """The lines as a file's first lines: ``# `` comments, or a markdown quote."""
    prefix = "> " if markdown else "# "
    separator = "  \n" if markdown else "\n"
    return (
        separator.join(prefix + line for line in lines) + "\n\n" * markdown + "\n" * (not markdown)
    )


def recorded(path: str | Path, key: str) -> str | None:
    """The value of one :func:`provenance` line (``machine``, ``commit``...) at the top of a
    file :func:`header` wrote as ``# `` comments (None where it has none)."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.startswith("#"):
                return None
            name, _, value = line.lstrip("# ").partition(":")
            if name.strip() == key:
                return value.strip()
    return None


def date() -> str:
    """Now, in UTC, to the minute."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def markdown_lines(command: str, *, gpu_note: str = "none (replayed measurements)") -> list[str]:
    """``- key: value`` lines: command (in backticks), commit, date, machine (``gpu_note`` in
    place of the GPU: replayed measurements use none)."""
    return [
        f"- command: `{command}`",
        f"- commit: {commit()}",
        f"- date: {date()}",
        f"- machine: {os.cpu_count()} cores, {cpu_model()}; GPU: {gpu_note}",
    ]


def script_command(script: str, argv: Sequence[str] | None) -> str:
    """The command line that ran ``experiments/<script>`` (``argv``: None for ``sys.argv``)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    return f"python experiments/{script} " + shlex.join(raw)


def versions(
    modules: Sequence[str] = ("mlkaps_gpu", "kernel_tuner", "optuna", "lightgbm", "numpy"),
) -> str:
    """``name version`` of each installed distribution (``not installed`` for the others)."""
    parts = []
    for module in modules:
        try:
            parts.append(f"{module} {importlib.metadata.version(module)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{module} not installed")
    return ", ".join(parts)
