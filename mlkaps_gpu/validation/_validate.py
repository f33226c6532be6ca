"""``mlkaps-gpu validate``: measure the header's choices against a reference on a fresh grid.

**Measurement.** ``repeats`` rounds; each round sweeps every point and measures its two
configurations back to back, the tuned one first where ``point + round`` is even and second
otherwise, so that slow drift of the machine falls equally on both. Each measurement is one
executor call (the executor's own timing policy: warm-ups, timed runs, median) and one row of
the campaign store, like any other sample; its ``message`` ends with
``origin=<purpose>@<time>:<side>:round<r>`` (the store has no other free column).

The validation grid is :mod:`~mlkaps_gpu.validation._validation_grid`'s; the per-point decision
and its noise threshold are :mod:`~mlkaps_gpu.validation._paired_statistics`'s.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign, CampaignError, EnvironmentMismatchWarning
from mlkaps_gpu.space import Space
from mlkaps_gpu.validation._expert import Reference, campaign_header
from mlkaps_gpu.validation._paired_statistics import (
    DEFAULT_ALPHA,
    NOISE_QUANTILE,
    cost_matrices,
    noise_threshold,
    paired_differences,
    point_statistics,
    summarize,
)
from mlkaps_gpu.validation._validation_grid import validation_grid

log = logging.getLogger("mlkaps_gpu")

DEFAULT_REPEATS = 5
#: Points per executor call and store batch (a killed run loses at most one batch).
BATCH_POINTS = 32
Progress = Callable[[str, int, int], None]


# ------------------------------------------------------------------------------ measuring
def measure_pairs(
    campaign: Campaign,
    points: pd.DataFrame,
    tuned: pd.DataFrame,
    reference: pd.DataFrame,
    *,
    repeats: int,
    tag: str,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Measure both configurations of every point ``repeats`` times, interleaved (see the
    module docstring), appending every measurement to the store.

    Returns one row per measurement: ``point``, ``round``, ``side``, ``order`` (0: measured
    first of its pair), ``value`` (the primary objective) and ``status``.
    """
    space = campaign.space
    objective = campaign.setup.objectives[0]
    n_points = len(points)
    inputs = points[space.input_names].reset_index(drop=True)
    designs = {"tuned": tuned.reset_index(drop=True), "reference": reference.reset_index(drop=True)}
    records = []
    total, done = repeats * n_points, 0
    for round_index in range(repeats):
        for start in range(0, n_points, BATCH_POINTS):
            point = np.repeat(np.arange(start, min(start + BATCH_POINTS, n_points)), 2)
            tuned_first = (point + round_index) % 2 == 0
            second = np.arange(len(point)) % 2 == 1
            side = np.where(tuned_first ^ second, "tuned", "reference")
            rows = inputs.iloc[point].reset_index(drop=True)
            for parameter in space.design:
                values = np.where(
                    side == "tuned",
                    designs["tuned"][parameter.name].to_numpy(dtype=object)[point],
                    designs["reference"][parameter.name].to_numpy(dtype=object)[point],
                )
                rows[parameter.name] = pd.Series(values).astype(parameter.dtype)
            results = campaign.setup.executor.run(rows[space.names])
            results["message"] = [
                f"{str(message or '').strip()} origin={tag}:{s}:round{round_index}".strip()
                for message, s in zip(results["message"], side, strict=True)
            ]
            campaign.store.append(rows[space.names], results)
            records.append(
                pd.DataFrame(
                    {
                        "point": point,
                        "round": round_index,
                        "side": side,
                        "order": second.astype(np.int64),
                        "value": results[objective].to_numpy(dtype=np.float64),
                        "status": results["status"].to_numpy(dtype=object),
                    }
                )
            )
            done += len(point) // 2
            if progress:
                progress(tag.split("@")[0], done, total)
    return pd.concat(records, ignore_index=True)


# ------------------------------------------------------------------------------ the run
@dataclass
class Validation:
    """One validation run: per-point table, raw measurements and the summary.

    Attributes:
        points: one row per point: inputs, ``tuned_<p>`` and ``reference_<p>`` configurations,
            then the columns of :func:`point_statistics` and ``same_configuration``.
        measurements: one row per measurement (see :func:`measure_pairs`).
        summary: :func:`summarize` plus the settings (JSON-ready).
    """

    points: pd.DataFrame
    measurements: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)

    def save(self, folder: Path) -> list[Path]:
        """Write ``points.csv``, ``measurements.csv`` and ``summary.json`` into ``folder``
        (created if needed); returns their paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / "points.csv", folder / "measurements.csv", folder / "summary.json"]
        self.points.to_csv(paths[0], index=False)
        self.measurements.to_csv(paths[1], index=False)
        paths[2].write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n")
        return paths

    @classmethod
    def load(cls, folder: Path) -> Validation:
        """A validation :meth:`save` wrote to ``folder``.

        Raises:
            CampaignError: ``folder`` holds no ``summary.json``.
        """
        if not (folder / "summary.json").exists():
            raise CampaignError(f"{folder}: no validation there (summary.json missing)")
        points = pd.read_csv(folder / "points.csv", keep_default_na=False, na_values=[""])
        measurements = pd.read_csv(folder / "measurements.csv")
        return cls(points, measurements, json.loads((folder / "summary.json").read_text()))

    def configurations(self, side: str, space: Space) -> pd.DataFrame:
        """The ``side`` (tuned / reference) configurations, in the design's dtypes."""
        return pd.DataFrame(
            {p.name: self.points[f"{side}_{p.name}"].astype(p.dtype) for p in space.design}
        )

    def describe(self) -> str:
        """One paragraph of the main numbers."""
        s = self.summary
        worst = s.get("worst") or {}
        where = ", ".join(f"{k}={v}" for k, v in worst.get("inputs", {}).items()) or "-"
        return (
            f"{s['tuned']} vs {s['reference']} at {s['compared']} points "
            f"({s['repeats']} repeats): geometric-mean speedup {s['geomean_speedup']:.3f}x; "
            f"progressions {100 * s['progressions']['share']:.1f}%"
            + _mean(s["progressions"]["mean_speedup"], "mean")
            + f", regressions {100 * s['regressions']['share']:.1f}%"
            + _mean(s["regressions"]["mean_slowdown"], "mean slowdown")
            + f"; worst {worst.get('speedup', math.nan):.3f}x at {where}"
            + f"; median noise threshold +-{100 * s['noise_threshold']:.1f}%"
        )


def _mean(value: float | None, label: str) -> str:
    return f" ({label} {value:.3f}x)" if value is not None else ""


def validate(
    campaign: Campaign,
    reference: Reference,
    *,
    sizes: Mapping[str, int] | None = None,
    points: pd.DataFrame | None = None,
    tuned: Reference | None = None,
    repeats: int = DEFAULT_REPEATS,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
    purpose: str = "validate",
    progress: Progress | None = None,
) -> Validation:
    """Measure ``tuned`` (default: the campaign's header) against ``reference`` at ``points``
    (default: the validation grid of ``sizes``) and decide per point (the module docstrings
    of ``_validate`` and ``_paired_statistics``)."""
    if repeats < 2:
        raise CampaignError(f"--repeats {repeats}: at least 2 repeats are needed for a test")
    if not 0.0 < alpha < 1.0:
        raise CampaignError(f"--alpha {alpha}: must lie in (0, 1)")
    differences = _warn_environment(campaign)
    space = campaign.sampling_space
    if points is None:
        points = validation_grid(space, sizes or {})
    points = points[space.input_names].reset_index(drop=True)
    tuned = tuned or campaign_header(campaign)
    tuned_configs = tuned.configurations(points)
    reference_configs = reference.configurations(points)
    tag = f"{purpose}@{time.strftime('%Y%m%dT%H%M%S')}"
    started = time.perf_counter()
    load_before = _load_average()
    measurements = measure_pairs(
        campaign,
        points,
        tuned_configs,
        reference_configs,
        repeats=repeats,
        tag=tag,
        progress=progress,
    )
    configured = pd.concat(
        [points, tuned_configs.add_prefix("tuned_"), reference_configs.add_prefix("reference_")],
        axis=1,
    )
    metadata = {
        "run": tag,
        "tuned": tuned.label,
        "reference": reference.label,
        "reference_kind": reference.kind,
        **_run_metadata(campaign, points, sizes, measurements),
        "seconds": round(time.perf_counter() - started, 1),
        "load_average": [load_before, _load_average()],
        "environment_warnings": differences,
    }
    validation = Validation(configured, measurements, metadata)
    return reassess(validation, space, repeats=repeats, alpha=alpha, seed=seed)


def _warn_environment(campaign: Campaign) -> list[str]:
    """Warn for each way this machine differs from the campaign's; returns the differences."""
    differences = campaign.environment_warnings()
    for difference in differences:
        warnings.warn(
            f"{campaign.directory}: this machine differs from the one the campaign measured on "
            f"({difference}); the validation measures this machine",
            EnvironmentMismatchWarning,
            stacklevel=3,
        )
    return differences


def _run_metadata(
    campaign: Campaign,
    points: pd.DataFrame,
    sizes: Mapping[str, int] | None,
    measurements: pd.DataFrame,
) -> dict[str, Any]:
    """The objective, the inputs and the grid of a validation run (JSON-ready)."""
    space = campaign.sampling_space
    optimization_grid = campaign.grid()[space.input_names]
    on_grid = points.merge(optimization_grid.drop_duplicates(), on=space.input_names).shape[0]
    return {
        "objective": campaign.setup.objectives[0],
        "direction": campaign.setup.directions[0],
        "inputs": space.input_names,
        "log_inputs": [p.name for p in space.inputs if p.log],
        "grid": {k: int(v) for k, v in (sizes or {}).items()},
        "grid_kind": "cell centres (geometric for log inputs) of equal cells per input",
        "on_optimization_grid": int(on_grid),
        "measurements": len(measurements),
    }


def reassess(
    validation: Validation,
    space: Space,
    *,
    repeats: int | None = None,
    alpha: float | None = None,
    seed: int = 0,
) -> Validation:
    """The statistics of a validation recomputed from its measurements (the run's settings
    unless given): used after measuring, and on a validation loaded from disk."""
    summary = dict(validation.summary)
    repeats = int(repeats if repeats is not None else summary["repeats"])
    alpha = float(alpha if alpha is not None else summary["alpha"])
    points = validation.points[space.input_names].reset_index(drop=True)
    tuned = validation.configurations("tuned", space)
    reference = validation.configurations("reference", space)
    maximize = summary.get("direction") == "maximize"
    costs = cost_matrices(validation.measurements, len(points), repeats, maximize=maximize)
    rng = np.random.default_rng(seed)
    noise_log = noise_threshold(paired_differences(costs), rng)
    same = np.all(space.design_codes(tuned) == space.design_codes(reference), axis=1)
    statistics = point_statistics(costs, same, alpha=alpha, noise_log=noise_log)
    table = pd.concat(
        [
            points,
            tuned.add_prefix("tuned_"),
            reference.add_prefix("reference_"),
            statistics,
            pd.DataFrame({"same_configuration": same}),
        ],
        axis=1,
    )
    summary.update(summarize(table, space.input_names))
    summary.update(_test_settings(table, same, repeats, alpha))
    summary.pop("warning", None)
    if 2.0**-repeats >= alpha:
        summary["warning"] = (
            f"{repeats} repeats: the signed-rank test cannot reach alpha={alpha} "
            f"(smallest p-value {2.0**-repeats:.3g}); no point can be called a progression or "
            "regression"
        )
    return Validation(table, validation.measurements, summary)


def _test_settings(
    table: pd.DataFrame, same: np.ndarray, repeats: int, alpha: float
) -> dict[str, Any]:
    """The test, the noise thresholds and the bound on false calls of a reassessed run."""
    noise = table["noise"].dropna()
    aa = np.abs(np.log(table.loc[same & (table["verdict"] != "failed"), "speedup"]))
    differing = int(np.sum(~same & (table["verdict"] != "failed").to_numpy()))
    return {
        "repeats": repeats,
        "alpha": alpha,
        "test": (
            "one-sided Wilcoxon signed-rank test (scipy.stats.wilcoxon, exact) on the per-round "
            "log ratios tuned / reference, and |log speedup| beyond the noise threshold; "
            "points where both sides have the same configuration are 'same'"
        ),
        "smallest_p_value": 2.0**-repeats,
        "noise_threshold": float(noise.median()) if len(noise) else 0.0,
        "noise_threshold_p90": float(noise.quantile(0.9)) if len(noise) else 0.0,
        "noise_method": (
            f"per point, the {NOISE_QUANTILE:.2f} quantile over every sign flip of "
            "|median of the per-round log ratios minus their median| (the A/A spread of "
            "the reported speedup given that point's round-to-round noise); "
            "noise_threshold is its median over the points, noise_threshold_p90 its 90th "
            "percentile"
        ),
        "same_configuration_spread": (
            {"points": len(aa), "p95": float(np.exp(np.quantile(aa, 0.95)) - 1.0)}
            if len(aa)
            else None
        ),
        "false_calls_bound": float(alpha * differing),
    }


def write_validation(validation: Validation, folder: Path, space: Space) -> list[Path]:
    """``summary.json``, ``points.csv``, ``measurements.csv`` and the figures into ``folder``."""
    from mlkaps_gpu.analysis import speedup_figures

    paths = validation.save(folder)
    paths += speedup_figures(validation.points, validation.summary, space, folder)
    return paths


def _load_average() -> float | None:
    """The machine's one-minute load average (other work perturbs the timings), if known."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None
