"""Headroom of a merge: how much faster than the expert a small local search around it gets,
and which share of that the shipped choice reaches.

At ``points`` validation points (evenly spread over the validated ones), the expert's
configuration and up to ``neighbours`` of its valid one-parameter (Hamming) neighbours, drawn with
the seed, are measured ``repeats`` rounds each, interleaved. Per point, the headroom is the
expert's median cost over the best candidate's (at least 1: the expert is a candidate); the
shipped choice's speedup is the merged header's measured speedup there (1 when the expert ships).
Its share of the headroom is ``log(speedup) / log(headroom)``, computed only where the headroom
lies beyond the point's noise threshold. The measurements are not stored in the campaign.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import geometric_mean, plain
from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.validation._expert import Reference
from mlkaps_gpu.validation._validate import Validation

#: Defaults of ``mlkaps-gpu merge --headroom-points / --headroom-neighbours``.
DEFAULT_HEADROOM_POINTS = 8
DEFAULT_HEADROOM_NEIGHBOURS = 6


@dataclass(frozen=True)
class HeadroomSettings:
    """Size of the local search around the expert (module docstring)."""

    points: int = DEFAULT_HEADROOM_POINTS
    neighbours: int = DEFAULT_HEADROOM_NEIGHBOURS
    seed: int = 0


def _chosen_points(after: Validation, count: int) -> np.ndarray:
    """Row indices of up to ``count`` compared points, evenly spread."""
    compared = np.flatnonzero((after.points["verdict"] != "failed").to_numpy())
    if len(compared) <= count:
        return compared
    return compared[np.unique(np.linspace(0, len(compared) - 1, count).round().astype(int))]


def _candidates(
    campaign: Campaign, row: pd.Series, settings: HeadroomSettings, rng: np.random.Generator
) -> pd.DataFrame:
    """The expert's configuration at one point and up to ``neighbours`` valid neighbours."""
    space = campaign.space
    expert = {name: row[f"reference_{name}"] for name in space.design_names}
    inputs = {name: row[name] for name in space.input_names}
    here = pd.DataFrame([{**inputs, **expert}])[space.names]
    around = space.neighbours({**inputs, **expert}, "Hamming")
    if len(around) > settings.neighbours:
        around = around.iloc[np.sort(rng.choice(len(around), settings.neighbours, replace=False))]
    around = around.assign(**inputs)[space.names]
    return pd.concat([here, around], ignore_index=True).astype(
        {p.name: p.dtype for p in space.parameters.values()}
    )


def _median_costs(campaign: Campaign, candidates: pd.DataFrame, repeats: int) -> np.ndarray:
    """Median cost (time, or 1 / value of a maximised objective) per candidate row."""
    objective = campaign.setup.objectives[0]
    maximize = campaign.setup.directions[0] == "maximize"
    costs = np.full((len(candidates), repeats), np.nan)
    for round_ in range(repeats):
        results = campaign.setup.executor.run(candidates)
        ok = (results["status"] == "ok").to_numpy()
        values = pd.to_numeric(results[objective], errors="coerce").to_numpy(dtype=np.float64)
        with np.errstate(divide="ignore"):
            cost = 1.0 / values if maximize else values
        costs[:, round_] = np.where(ok & np.isfinite(cost) & (cost > 0), cost, np.nan)
    with np.errstate(all="ignore"):
        return np.nanmedian(costs, axis=1)


def measure_headroom(
    campaign: Campaign,
    expert: Reference,
    after: Validation,
    settings: HeadroomSettings,
    *,
    shipped: bool,
    repeats: int,
) -> dict[str, Any]:
    """The headroom table and its summary (module docstring), JSON-ready."""
    rng = np.random.default_rng(settings.seed)
    rows = []
    for index in _chosen_points(after, settings.points):
        point = after.points.iloc[int(index)]
        candidates = _candidates(campaign, point, settings, rng)
        costs = _median_costs(campaign, candidates, max(2, min(repeats, 3)))
        if not np.isfinite(costs[0]) or not np.any(np.isfinite(costs)):
            continue
        headroom = float(costs[0] / np.nanmin(costs))
        speedup = float(point["speedup"]) if shipped else 1.0
        noise = float(point.get("noise", 0.0)) if np.isfinite(point.get("noise", np.nan)) else 0.0
        beyond = headroom > 1.0 + noise
        rows.append(
            {
                **{name: plain(point[name]) for name in campaign.space.input_names},
                "candidates": len(candidates),
                "headroom": headroom,
                "shipped_speedup": speedup,
                "noise": noise,
                "share": float(np.log(speedup) / np.log(headroom)) if beyond else None,
            }
        )
    shares = [row["share"] for row in rows if row["share"] is not None]
    headrooms = np.array([row["headroom"] for row in rows])
    return {
        "method": (
            f"expert + up to {settings.neighbours} valid one-parameter neighbours, measured "
            f"{max(2, min(repeats, 3))} rounds each, at up to {settings.points} validation points"
        ),
        "points": rows,
        "geomean_headroom": geometric_mean(headrooms) if len(rows) else None,
        "points_with_headroom": len(shares),
        "median_share_reached": float(np.median(shares)) if shares else None,
        "expert": expert.label,
    }
