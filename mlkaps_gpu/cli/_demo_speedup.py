"""What the demo's header gains: its choices measured against a fixed default configuration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign

#: Interleaved rounds per size (each an executor call: warm-up and timed repeats).
ROUNDS = 3


def measured_speedups(
    directory: Path,
    answers: Sequence[Mapping[str, Any]],
    default: Mapping[str, Any],
    sizes: Sequence[int],
) -> list[dict[str, Any]]:
    """Per size: the header's configuration and the default measured back to back ``ROUNDS``
    times (order alternating); median times and their ratio (default / header)."""
    campaign = Campaign.open(directory)
    try:
        design = campaign.space.design_names
        rows = []
        for n, answer in zip(sizes, answers, strict=True):
            chosen = {name: answer[name] for name in design}
            pair = pd.DataFrame([{"n": n, **chosen}, {"n": n, **default}])[campaign.space.names]
            times = np.full((2, ROUNDS), np.nan)
            for round_ in range(ROUNDS):
                order = [0, 1] if round_ % 2 == 0 else [1, 0]
                results = campaign.setup.executor.run(pair.iloc[order].reset_index(drop=True))
                ok = (results["status"] == "ok").to_numpy()
                values = np.where(ok, results["time"].to_numpy(dtype=np.float64), np.nan)
                times[order, round_] = values
            header_time, default_time = np.nanmedian(times, axis=1)
            rows.append(
                {
                    "n": n,
                    "configuration": chosen,
                    "header_time": float(header_time),
                    "default_time": float(default_time),
                    "speedup": float(default_time / header_time),
                }
            )
        return rows
    finally:
        campaign.setup.executor.close()


def describe(rows: Sequence[Mapping[str, Any]], default: Mapping[str, Any]) -> list[str]:
    """Aligned lines (under 100 characters) and the geometric mean."""
    shown_default = ", ".join(f"{k}={v}" for k, v in default.items())
    lines = [f"measured against a fixed default ({shown_default}), {ROUNDS} rounds each:"]
    for row in rows:
        chosen = " ".join(f"{k}={v}" for k, v in row["configuration"].items())
        lines.append(
            f"  n={row['n']:<5} {chosen:<22} {1e3 * row['header_time']:8.3f} ms"
            f"  default {1e3 * row['default_time']:8.3f} ms  {row['speedup']:5.2f}x"
        )
    speedups = np.array([row["speedup"] for row in rows], dtype=np.float64)
    finite = speedups[np.isfinite(speedups) & (speedups > 0)]
    if len(finite):
        lines.append(
            f"the header's choices are {float(np.exp(np.mean(np.log(finite)))):.2f}x faster than "
            f"the default (geometric mean over {len(finite)} sizes)"
        )
    return lines
