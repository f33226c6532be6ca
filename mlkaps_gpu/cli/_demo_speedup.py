"""How close the demo's header is to the truth: at each demo size every valid configuration is
timed, so the header's answer is scored against the best one measured there (the fraction of the
optimum, t_best / t_header) and against a fixed default (the speed-up, t_default / t_header)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import geometric_mean, plain
from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.executors import PythonExecutor

#: Timed runs per configuration (after one untimed warm-up); its time is their median.
TIMED_RUNS = 5


def measure_sizes(
    directory: Path,
    answers: Sequence[Mapping[str, Any]],
    default: Mapping[str, Any],
    sizes: Sequence[int],
    function: str,
) -> list[dict[str, Any]]:
    """Per size: every valid configuration timed alike (``function`` called once untimed, then
    ``TIMED_RUNS`` times, in a worker process as the campaign measured it); the header's answer,
    the best configuration and the default among them, with their times and ratios."""
    campaign = Campaign.open(directory)
    campaign.setup.executor.close()
    space = campaign.space
    (size_input,) = space.input_names
    design = space.design_names
    executor = PythonExecutor(function, measure=True, warmup=1, repeats=TIMED_RUNS)
    rows: list[dict[str, Any]] = []
    try:
        for n, answer in zip(sizes, answers, strict=True):
            codes = space.valid_design_codes({size_input: n})
            inputs = pd.DataFrame({size_input: np.full(len(codes), n)})
            table = space.assemble(inputs, codes)
            results = executor.run(table)
            ok = (results["status"] == "ok").to_numpy()
            times = np.where(ok, results["time"].to_numpy(dtype=np.float64), np.inf)
            chosen = {name: answer[name] for name in design}
            best = int(np.argmin(times))
            rows.append(
                {
                    size_input: int(n),
                    "configurations": len(table),
                    "header": chosen,
                    "header_time": _time_of(table, times, chosen),
                    "best": {name: plain(table[name].iloc[best]) for name in design},
                    "best_time": float(times[best]),
                    "default_time": _time_of(table, times, default),
                }
            )
    finally:
        executor.close()
    for row in rows:
        row["fraction_of_optimum"] = row["best_time"] / row["header_time"]
        row["speedup"] = row["default_time"] / row["header_time"]
    return rows


def _time_of(table: pd.DataFrame, times: np.ndarray, configuration: Mapping[str, Any]) -> float:
    """The time measured for ``configuration`` (inf: not a valid configuration at that size,
    or it failed)."""
    match = np.ones(len(table), dtype=bool)
    for name, value in configuration.items():
        match &= (table[name] == value).to_numpy()
    return float(times[match][0]) if match.any() else float("inf")


def geometric_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Geometric means over the sizes of the fraction of the optimum and of the speed-up over
    the default (a size whose answer failed or was not valid scores 0 and no speed-up)."""
    fractions = np.array([row["fraction_of_optimum"] for row in rows], dtype=np.float64)
    speedups = np.array([row["speedup"] for row in rows], dtype=np.float64)
    finite = speedups[np.isfinite(speedups) & (speedups > 0)]
    return {
        "fraction_of_optimum": geometric_mean(fractions) if np.all(fractions > 0) else 0.0,
        "speedup": geometric_mean(finite) if len(finite) else None,
    }


def json_record(
    rows: Sequence[Mapping[str, Any]], default: Mapping[str, Any], report: Path
) -> dict[str, Any]:
    """What ``--json`` prints: every size's measurements (a failed time as null), the default,
    the geometric means and the report's path."""
    means = geometric_means(rows)
    return {
        "sizes": [{k: _finite_or_none(v) for k, v in row.items()} for row in rows],
        "default": dict(default),
        "geomean_fraction_of_optimum": means["fraction_of_optimum"],
        "geomean_speedup": means["speedup"],
        "report": str(report),
    }


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not np.isfinite(value) else value


def describe(rows: Sequence[Mapping[str, Any]], default: Mapping[str, Any]) -> list[str]:
    """Aligned lines (under 100 characters): per size the header's answer and the best
    configuration measured there, then the geometric means."""
    shown_default = ", ".join(f"{k}={v}" for k, v in default.items())
    name = next(iter(rows[0])) if rows else "n"
    lines = [
        f"every valid configuration timed at {len(rows)} sizes (median of {TIMED_RUNS} runs); "
        f"speed-up over a fixed default ({shown_default}):",
        f"  {name:>5}  {'header':<19} {'time':>9}   {'best measured':<19} {'time':>9}"
        f"  {'fraction':>8}  {'speed-up':>8}",
    ]
    for row in rows:
        lines.append(
            f"  {row[name]:>5}  {_configuration(row['header']):<19} {_ms(row['header_time'])}"
            f"   {_configuration(row['best']):<19} {_ms(row['best_time'])}"
            f"  {row['fraction_of_optimum']:8.3f}  {row['speedup']:7.2f}x"
        )
    means = geometric_means(rows)
    text = (
        f"geometric mean over {len(rows)} sizes: {means['fraction_of_optimum']:.3f} of the "
        "optimum measured at each size"
    )
    if means["speedup"] is not None:
        text += f", {means['speedup']:.2f}x faster than the default"
    lines.append(text)
    return lines


def _configuration(configuration: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in configuration.items())


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:6.2f} ms" if np.isfinite(seconds) else f"{'failed':>9}"
