"""Short human summaries of a campaign's stages (``--json`` prints the raw dictionaries).

On a terminal, every text is wrapped at word boundaries to its width (``COLUMNS``, else the
terminal's size), continuation lines indented under the first line's text: no line is cut
mid-word. Off a terminal (a pipe, a log file) the stage summaries are wrapped at words to
:data:`PIPE_WIDTH` and each warning stays on one line, as a log reader greps it (``COLUMNS``
alone does not count: a child of a program that loaded readline inherits one without having a
terminal).
"""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

#: Narrowest width wrapped to (a tiny terminal still gets whole words).
MIN_WIDTH = 40
#: The stage name's column.
_LABEL = 14
#: Width of the stage summaries off a terminal (the length they were cut at before).
PIPE_WIDTH = 118


def terminal_width() -> int | None:
    """The width to wrap to when stdout or stderr is a terminal: ``COLUMNS``, else the
    terminal's; None when neither is a terminal (nothing to fit)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if not stream.isatty():
                continue
            columns = os.environ.get("COLUMNS", "")
            if columns.isdigit() and int(columns) > 0:
                return max(MIN_WIDTH, int(columns))
            return max(MIN_WIDTH, os.get_terminal_size(stream.fileno()).columns)
        except (AttributeError, OSError, ValueError):
            continue
    return None


def wrap(text: str, *, width: int | None = None, first: str = "", indent: int = 0) -> str:
    """``text`` after ``first`` (a prefix such as a stage name) wrapped at word boundaries to
    ``width`` (default: :func:`terminal_width`; one line where that is None) columns,
    continuation lines indented by ``indent`` spaces. A word longer than a line stays whole on
    a line of its own."""
    flat = " ".join(text.split())
    width = width or terminal_width()
    if width is None:
        return first + flat
    return textwrap.fill(
        flat,
        width=width,
        initial_indent=first,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _sampling(details: Mapping[str, Any]) -> str:
    status = details.get("status") or {}
    failed = sum(int(n) for s, n in status.items() if s != "ok")
    text = f"{details.get('samples', '?')} samples"
    if failed:
        shown = ", ".join(f"{n} {s}" for s, n in sorted(status.items()) if s != "ok")
        text += f" ({failed} failed: {shown})"
    seconds = details.get("executor_seconds")
    if seconds is not None:
        text += f", {_number(seconds)} s in the kernel"
    return text


def _modeling(details: Mapping[str, Any]) -> str:
    text = f"surrogate trained on {details.get('trained_on', '?')} measurements"
    if details.get("transferred"):
        text += f" (+{details['transferred']} transferred)"
    accuracy = {k: v for k, v in details.items() if isinstance(v, Mapping)}
    for objective, metrics in accuracy.items():
        shown = ", ".join(
            f"{name} {_number(value)}"
            for name, value in metrics.items()
            if isinstance(value, int | float)
        )
        if shown:
            text += f"; {objective}: {shown}"
    return text


def _optimization(details: Mapping[str, Any]) -> str:
    text = f"{details.get('grid_points', '?')} grid points ({details.get('method', '?')})"
    if details.get("from_measurements") is not None:
        text += f", {details['from_measurements']} answered from measurements"
    if details.get("seconds") is not None:
        text += f", {_number(details['seconds'])} s"
    return text


def _trees(details: Mapping[str, Any]) -> str:
    leaves = details.get("leaves")
    count = sum(leaves.values()) if isinstance(leaves, Mapping) else leaves
    text = (
        f"{details.get('mode', '?')} tree, depth {details.get('depth', '?')}, {count} leaves; "
        f"header {details.get('header', '?')} verified on {details.get('verified_inputs', '?')} "
        f"inputs, {details.get('mismatches', '?')} mismatches"
    )
    regret = details.get("measured_regret")
    if isinstance(regret, Mapping) and regret.get("mean") is not None:
        text += f"; measured regret mean {100 * regret['mean']:.1f}%"
    return text


_FORMATS = {
    "sampling": _sampling,
    "modeling": _modeling,
    "optimization": _optimization,
    "trees": _trees,
}


def stage_line(stage: str, details: Mapping[str, Any], *, width: int | None = None) -> str:
    """A stage's summary after its aligned name, wrapped at words to ``width`` (default: the
    terminal's, else :data:`PIPE_WIDTH`) with continuation lines aligned under the text."""
    format_ = _FORMATS.get(stage)
    body = (
        format_(details)
        if format_
        else ", ".join(
            f"{k} {_number(v)}" for k, v in details.items() if not isinstance(v, Mapping | list)
        )
    )
    width = width or terminal_width() or PIPE_WIDTH
    return wrap(body, width=width, first=f"{stage + ':':<{_LABEL}}", indent=_LABEL)


#: What ``tune`` prints before each warning.
WARNING_PREFIX = "mlkaps-gpu: warning: "


def interference_warnings(
    record: Mapping[str, Any] | None, *, width: int | None = None
) -> list[str]:
    """What ``tune`` says when a share of the measurements was taken while other processes
    kept the machine busy (``campaign_interference``); nothing on a quiet machine, for a replay
    or where the load could not be read. Each warning is wrapped at words to ``width``
    (default: the terminal's) with room for :data:`WARNING_PREFIX` on its first line and its
    continuation lines indented by two spaces."""
    if not record or not record.get("sustained"):
        return []
    lines = [
        f"{record['disturbed']} of {record['measurements']} measurements "
        f"({100 * record['share']:.0f} %) were taken while other processes used "
        f"{_number(record['median_other_cores'])} CPU cores (median over those batches; from "
        f"{_number(record['threshold_cores'])} with no core idle): the machine was busy, and "
        "they measure a loaded machine; tune again on a quiet one (a new --out) to trust them"
    ]
    if record.get("answers_on_disturbed"):
        points = record.get("points") or []
        shown = "; ".join(
            ", ".join(f"{k}={_number(v)}" for k, v in point.items()) for point in points[:8]
        )
        more = f" and {len(points) - 8} more" if len(points) > 8 else ""
        lines.append(
            f"{record['answers_on_disturbed']} of {record['answers']} grid points' answers rest "
            f"only on measurements of a busy machine: {shown}{more}"
        )
    room = " " * len(WARNING_PREFIX)
    return [wrap(line, width=width, first=room, indent=2)[len(room) :] for line in lines]
