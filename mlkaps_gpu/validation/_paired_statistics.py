"""The paired comparison of two configurations per point: from the measurements of
``validate`` to a speedup, p-values, a noise threshold and a verdict per point, and a summary.

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

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import geometric_mean, plain

DEFAULT_ALPHA = 0.05
NOISE_QUANTILE = 0.95
#: Rounds up to which the tests enumerate every sign flip (random flips past it).
EXACT_SIGNS = 10
SIDES = ("tuned", "reference")
VERDICTS = ("progression", "neutral", "regression", "same", "failed")


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


__all__ = [
    "DEFAULT_ALPHA",
    "NOISE_QUANTILE",
    "SIDES",
    "VERDICTS",
    "cost_matrices",
    "noise_threshold",
    "paired_differences",
    "point_statistics",
    "signed_rank_pvalues",
    "summarize",
]
