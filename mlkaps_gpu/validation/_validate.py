"""``mlkaps-gpu validate``: measure the header's choices against a reference on a fresh grid.

**Grid.** The validation grid places, along every range input, the centres of ``size`` equal
cells (geometric cells for log-scaled inputs): ``low * (high / low) ** ((i + 0.5) / size)``. The
optimization grid holds the cell *edges* (``geomspace(low, high, size)``), so the two never share
an interior point at the same size; at other sizes they can meet only where integer rounding
merges values (``on_optimization_grid`` in the summary counts such points). Categorical, bool and
value-list inputs take the same values as on the optimization grid (there is nothing in between);
inputs fixed by ``[sampling] fixed`` stay fixed.

**Measurement.** ``repeats`` rounds; each round sweeps every point and measures its two
configurations back to back, the tuned one first where ``point + round`` is even and second
otherwise, so that slow drift of the machine falls equally on both. Each measurement is one
executor call (the executor's own timing policy: warm-ups, timed runs, median) and one row of
the campaign store, like any other sample; its ``message`` ends with
``origin=<purpose>@<time>:<side>:round<r>`` (the store has no other free column).

**Per-point decision.** With ``c`` the log cost (``log(time)``, or ``-log`` of a maximised
objective) of a measurement, each round gives the paired log ratio
``d = c_tuned - c_reference`` of two measurements taken back to back, so the drift between
rounds (large on a shared machine) cancels. The speedup is ``exp(-median d)``, the median over
the rounds of ``reference / tuned``. The tuned configuration is a *progression* where (1) the
one-sided Wilcoxon signed-rank test of the ``d`` (``scipy.stats.wilcoxon``, exact null
distribution) gives ``p < alpha`` for "tuned faster", and (2) the speedup lies beyond the
noise threshold; a *regression* symmetrically. A point whose two configurations are the same
is ``same`` (a measured difference there is noise by construction), one with fewer than two
complete rounds ``failed``. The smallest p-value is ``2 ** -repeats``: 5 repeats are the
fewest that reach ``alpha = 0.05`` (all five rounds in the same direction). The test is per
point, without multiplicity correction (with 5 repeats no correction over hundreds of points
could ever reject); ``false_calls_bound`` in the summary, ``alpha`` times the points with
differing configurations, bounds the expected number of false calls per direction (the noise
threshold makes it loose).

**Noise threshold.** Per point, the A/A spread of the reported speedup given that point's own
round-to-round noise: the round log ratios minus their median are residual noise; with every
sign flip of them, the median is what an A/A comparison with that noise would report; the
threshold is the ``NOISE_QUANTILE`` (0.95) quantile of ``|that median|``. Per point, because
the noise differs by orders of magnitude between configurations (a kernel using every core of
a shared machine is far noisier than a single-threaded one), and a median of sign flips,
because one or two wild rounds out of five move neither the median nor the threshold. The
summary gives the median and 90th percentile over the points; where the two sides share a
configuration the measured speedups are true A/A comparisons, and the summary reports their
spread (``same_configuration_spread``) as a check.
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

from mlkaps_gpu._numbers import geometric_mean, plain
from mlkaps_gpu.campaign import Campaign, CampaignError, EnvironmentMismatchWarning
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.validation._expert import Reference, campaign_header

log = logging.getLogger("mlkaps_gpu")

DEFAULT_REPEATS = 5
DEFAULT_ALPHA = 0.05
NOISE_QUANTILE = 0.95
#: Rounds up to which the tests enumerate every sign flip (random flips past it).
EXACT_SIGNS = 10
#: Points per executor call and store batch (a killed run loses at most one batch).
BATCH_POINTS = 32
SIDES = ("tuned", "reference")
VERDICTS = ("progression", "neutral", "regression", "same", "failed")
Progress = Callable[[str, int, int], None]


# ------------------------------------------------------------------------------------- grid
def parse_grid(text: str, space: Space) -> dict[str, int]:
    """``"32x32"`` (one size per free input, in order), ``"32"`` (all) or ``"m=32,n=16"``."""
    free = [p.name for p in space.inputs if p.name not in space.fixed_inputs]
    try:
        if "=" in text:
            sizes = {}
            for item in text.split(","):
                name, _, value = item.partition("=")
                sizes[name.strip()] = int(value)
            unknown = sorted(set(sizes) - set(free))
            if unknown:
                raise CampaignError(f"--grid {text}: unknown input(s) {unknown} (inputs: {free})")
            sizes = {name: sizes.get(name, 8) for name in free}
        else:
            parts = [int(part) for part in text.lower().split("x")]
            if len(parts) == 1:
                parts = parts * len(free)
            if len(parts) != len(free):
                raise CampaignError(
                    f"--grid {text}: {len(parts)} sizes for {len(free)} inputs {free}"
                )
            sizes = dict(zip(free, parts, strict=True))
    except ValueError:
        raise CampaignError(
            f"--grid {text}: expected sizes such as 32x32, 32 or m=32,n=16"
        ) from None
    bad = {k: v for k, v in sizes.items() if v < 1}
    if bad:
        raise CampaignError(f"--grid {text}: sizes must be >= 1 ({bad})")
    return sizes


def offset_axis(parameter: Parameter, size: int) -> np.ndarray:
    """Cell centres of ``size`` equal (geometric when log) cells over a range input."""
    if parameter.values is not None or parameter.low is None or parameter.high is None:
        return parameter.grid(size)
    fraction = (np.arange(size) + 0.5) / size
    low, high = float(parameter.low), float(parameter.high)
    if parameter.log:
        raw = low * (high / low) ** fraction
    else:
        raw = low + fraction * (high - low)
    if parameter.kind == "int":
        return np.unique(np.clip(np.round(raw), low, high).astype(np.int64))
    return raw.astype(np.float64)


def validation_grid(space: Space, sizes: Mapping[str, int]) -> pd.DataFrame:
    """The validation points: the Cartesian product of the offset axes."""
    axes = []
    for parameter in space.inputs:
        if parameter.name in space.fixed_inputs:
            axes.append(np.array([space.fixed_inputs[parameter.name]], dtype=parameter.dtype))
        else:
            axes.append(offset_axis(parameter, int(sizes.get(parameter.name, 8))))
    mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    return pd.DataFrame(
        {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(space.inputs)}
    ).astype({p.name: p.dtype for p in space.inputs})


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


# ----------------------------------------------------------------------------- statistics
def cost_matrices(
    measurements: pd.DataFrame, n_points: int, repeats: int, *, maximize: bool
) -> dict[str, np.ndarray]:
    """Per side, the (points x repeats) log costs; NaN where a measurement failed."""
    out = {}
    for side in SIDES:
        matrix = np.full((n_points, repeats), np.nan)
        rows = measurements[(measurements["side"] == side) & (measurements["status"] == "ok")]
        values = rows["value"].to_numpy(dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            cost = -np.log(values) if maximize else np.log(values)
        matrix[rows["point"].to_numpy(), rows["round"].to_numpy()] = np.where(
            np.isfinite(cost), cost, np.nan
        )
        out[side] = matrix
    return out


def paired_differences(costs: Mapping[str, np.ndarray]) -> np.ndarray:
    """Per point and round, tuned minus reference log cost (negative: the tuned is faster);
    NaN where either measurement of the round failed."""
    return costs["tuned"] - costs["reference"]


def _sign_patterns(count: int, rng: np.random.Generator) -> np.ndarray:
    """Every +-1 vector of length ``count`` (random ones past ``EXACT_SIGNS``)."""
    if count <= EXACT_SIGNS:
        grid = np.indices((2,) * count).reshape(count, -1).T
        return 1.0 - 2.0 * grid
    return rng.choice([-1.0, 1.0], size=(1 << EXACT_SIGNS, count))


def signed_rank_pvalues(differences: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-sided p-values of Wilcoxon's signed-rank test per point (rows): tuned faster
    (differences below 0), tuned slower. ``scipy.stats.wilcoxon`` with its exact null
    distribution, over the point's complete rounds (zero differences dropped, as Wilcoxon did);
    NaN with fewer than two usable rounds, 1 where every usable round is a tie."""
    from scipy.stats import wilcoxon

    faster = np.full(len(differences), np.nan)
    slower = np.full(len(differences), np.nan)
    counts = np.sum(np.isfinite(differences), axis=1)
    for count in np.unique(counts[counts >= 2]):
        rows = np.flatnonzero(counts == count)
        block = differences[rows]
        values = block[np.isfinite(block)].reshape(-1, int(count))
        tied = np.all(values == 0, axis=1)
        faster[rows[tied]] = slower[rows[tied]] = 1.0
        if np.all(tied):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # exact distribution with ties: SciPy says so
            for alternative, out in (("less", faster), ("greater", slower)):
                result = wilcoxon(values[~tied], alternative=alternative, method="exact", axis=1)
                out[rows[~tied]] = result.pvalue
    return faster, slower


def noise_threshold(
    differences: np.ndarray, rng: np.random.Generator, *, quantile: float = NOISE_QUANTILE
) -> np.ndarray:
    """Per point, the A/A noise of its log speedup (module docstring); NaN with fewer than two
    complete rounds."""
    out = np.full(len(differences), np.nan)
    counts = np.sum(np.isfinite(differences), axis=1)
    for count in np.unique(counts[counts >= 2]):
        rows = np.flatnonzero(counts == count)
        block = differences[rows]
        values = block[np.isfinite(block)].reshape(-1, int(count))
        residuals = values - np.median(values, axis=1, keepdims=True)
        signs = _sign_patterns(int(count), rng)
        for start in range(0, len(rows), 64):
            chunk = residuals[start : start + 64]
            flipped = np.abs(np.median(chunk[:, None, :] * signs[None, :, :], axis=2))
            out[rows[start : start + 64]] = np.quantile(flipped, quantile, axis=1)
    return out


def point_statistics(
    costs: Mapping[str, np.ndarray],
    same: np.ndarray,
    *,
    alpha: float,
    noise_log: np.ndarray,
) -> pd.DataFrame:
    """Per point: median costs, speedup, p-values and the verdict (module docstring)."""
    tuned, reference = costs["tuned"], costs["reference"]
    differences = paired_differences(costs)
    rounds = np.sum(np.isfinite(differences), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows of failed points
        median_tuned = np.nanmedian(tuned, axis=1)
        median_reference = np.nanmedian(reference, axis=1)
        log_speedup = -np.nanmedian(differences, axis=1)
    p_faster, p_slower = signed_rank_pvalues(differences)
    usable = rounds >= 2
    verdict = np.full(len(tuned), "neutral", dtype=object)
    verdict[usable & (p_faster < alpha) & (log_speedup > noise_log)] = "progression"
    verdict[usable & (p_slower < alpha) & (log_speedup < -noise_log)] = "regression"
    verdict[usable & same] = "same"
    verdict[~usable] = "failed"
    return pd.DataFrame(
        {
            "tuned_cost": median_tuned,
            "reference_cost": median_reference,
            "speedup": np.exp(log_speedup),
            "noise": np.exp(noise_log) - 1.0,
            "rounds": rounds,
            "p_faster": p_faster,
            "p_slower": p_slower,
            "verdict": verdict,
        }
    )


def summarize(table: pd.DataFrame, inputs: list[str]) -> dict[str, Any]:
    """Geometric-mean speedup, shares of progressions and regressions among the compared
    points, their means, and the extremes among the points whose configurations differ (a
    same-configuration point's measured ratio is noise, never a regression)."""
    compared = table[table["verdict"] != "failed"]
    differing = compared[compared["verdict"] != "same"]
    speedup = compared["speedup"].to_numpy(dtype=np.float64)
    progressions = compared[compared["verdict"] == "progression"]["speedup"]
    regressions = compared[compared["verdict"] == "regression"]["speedup"]
    n = len(compared)

    def point(row: pd.Series) -> dict[str, Any]:
        return {
            "inputs": {name: plain(row[name]) for name in inputs},
            "speedup": float(row["speedup"]),
            "slowdown": float(1.0 / row["speedup"]),
            "verdict": str(row["verdict"]),
        }

    return {
        "points": len(table),
        "compared": n,
        "failed": int((table["verdict"] == "failed").sum()),
        "same_configuration": int(table["same_configuration"].sum()),
        "geomean_speedup": geometric_mean(speedup) if n else math.nan,
        "median_speedup": float(np.median(speedup)) if n else math.nan,
        "progressions": {
            "count": len(progressions),
            "share": len(progressions) / n if n else math.nan,
            "mean_speedup": float(progressions.mean()) if len(progressions) else None,
        },
        "regressions": {
            "count": len(regressions),
            "share": len(regressions) / n if n else math.nan,
            "mean_slowdown": float((1.0 / regressions).mean()) if len(regressions) else None,
        },
        "worst": point(differing.loc[differing["speedup"].idxmin()]) if len(differing) else None,
        "best": point(differing.loc[differing["speedup"].idxmax()]) if len(differing) else None,
    }


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
    (default: the validation grid of ``sizes``) and decide per point (module docstring)."""
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
