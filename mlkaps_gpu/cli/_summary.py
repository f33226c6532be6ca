"""Short human summaries of a campaign's stages (``--json`` prints the raw dictionaries)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Longest line a summary prints.
WIDTH = 118


def _fit(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


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


def stage_line(stage: str, details: Mapping[str, Any]) -> str:
    """One aligned line (at most ``WIDTH`` characters) for a stage's summary."""
    format_ = _FORMATS.get(stage)
    body = (
        format_(details)
        if format_
        else ", ".join(
            f"{k} {_number(v)}" for k, v in details.items() if not isinstance(v, Mapping | list)
        )
    )
    return _fit(f"{stage + ':':<14}{body}")


def interference_warnings(record: Mapping[str, Any] | None) -> list[str]:
    """What ``tune`` says when a share of the measurements was taken while other processes
    kept the machine busy (``campaign_interference``); nothing on a quiet machine, for a replay
    or where the load could not be read."""
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
    return lines
