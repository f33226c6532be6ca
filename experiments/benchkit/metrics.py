"""Scores of benchmark rows (one row per tool, budget, seed and input value).

The per-value and per-run scores are those of :mod:`mlkaps_gpu.analysis`
(``fraction_of_optimum``, ``geometric_mean_fraction``, ``expected_fraction_random_search``);
this module aggregates rows over seeds and compares the project with its peers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchkit.tools import BEST_MEASURED, HEADER
from mlkaps_gpu import analysis
from mlkaps_gpu.analysis import expected_fraction_random_search

__all__ = [
    "done_when_2_counts",
    "expected_fraction_random_search",
    "fraction_of_optimum",
    "geomean",
    "lead_over_best_peer",
    "lead_per_input",
    "mean_sd",
    "per_run",
    "summarize_runs",
]


def fraction_of_optimum(optimum: float, time_value: Any) -> float:
    """``optimum / time_value`` (:func:`mlkaps_gpu.analysis.fraction_of_optimum` of one value);
    0 when the time is missing, not a number, not finite or not positive, or the optimum is not
    finite."""
    try:
        value = float(time_value)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(optimum):
        return 0.0
    return float(analysis.fraction_of_optimum(np.float64(value), float(optimum)))


def geomean(values: Iterable[float]) -> float:
    """One run's score over input values (:func:`mlkaps_gpu.analysis.geometric_mean_fraction`):
    0 when any value is 0 (a failed choice), NaN for no values."""
    return analysis.geometric_mean_fraction(values)


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0 for a single value)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return math.nan, math.nan
    sd = float(np.std(array, ddof=1)) if array.size > 1 else 0.0
    return float(np.mean(array)), sd


def per_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (tool, b, seed): the geomean of the fraction over input values."""
    return rows.groupby(["tool", "b", "seed"], sort=False)["fraction"].apply(geomean).reset_index()


def summarize_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (tool, b, seed): the geomean over input values; then per (tool, b): mean, sd, n."""
    runs = per_run(rows)
    out = []
    for (tool, b), group in runs.groupby(["tool", "b"], sort=False):
        mean, sd = mean_sd(group["fraction"].to_list())
        out.append({"tool": tool, "b": int(b), "mean": mean, "sd": sd, "n": len(group)})
    return pd.DataFrame(out, columns=["tool", "b", "mean", "sd", "n"])


def _difference_of_means(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean of the first sample minus the mean of the second."""
    return np.mean(first, axis=axis) - np.mean(second, axis=axis)


def lead_over_best_peer(rows: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per b: the header's mean fraction minus the best peer's (the peer with the highest mean),
    over seeds, with a ``level`` bootstrap confidence interval of that difference
    (``scipy.stats.bootstrap``, percentile method, the two tools' seeds resampled independently;
    the exact random-search expectation counts as a constant). ``verdict`` says whether the
    interval lies above 0, below 0, or holds 0 (the seeds cannot tell the two apart)."""
    from scipy import stats

    columns = ["b", "peer", "header", "best_peer", "difference", "low", "high", "verdict"]
    out = []
    for b, at in per_run(rows).groupby("b"):
        header = at.loc[at["tool"] == HEADER, "fraction"].to_numpy(dtype=np.float64)
        peers = at[~at["tool"].isin([HEADER, BEST_MEASURED])]
        if len(header) < 2 or peers.empty:
            continue
        means = peers.groupby("tool", sort=False)["fraction"].mean()
        peer = str(means.idxmax())
        other = peers.loc[peers["tool"] == peer, "fraction"].to_numpy(dtype=np.float64)
        # a one-value peer (the exact expectation) is a constant: resample the header alone
        samples: tuple[np.ndarray, ...] = (header, other)
        statistic: Callable[..., Any] = _difference_of_means
        if len(other) == 1:
            samples, statistic = (header - other[0],), np.mean
        result = stats.bootstrap(
            samples,
            statistic,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(int(b)),
        )
        low, high = (float(v) for v in result.confidence_interval)
        difference = float(header.mean() - other.mean())
        verdict = "above" if low > 0 else "below" if high < 0 else "within noise"
        out.append(
            {
                "b": int(b),
                "peer": peer,
                "header": float(header.mean()),
                "best_peer": float(other.mean()),
                "difference": difference,
                "low": low,
                "high": high,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(out, columns=columns)


def lead_per_input(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (b, input value): the header's mean fraction over seeds and the best peer's at that
    input value (the peer with the highest mean there, which may differ from one value to the
    next): where the header's lead comes from, and which input values a peer tunes better."""
    columns = ["b", "input", "header", "peer", "best_peer", "difference"]
    means = rows.groupby(["b", "input", "tool"], sort=False)["fraction"].mean()
    out = []
    for (b, value), at in means.groupby(level=["b", "input"], sort=False):
        at = at.droplevel(["b", "input"])
        peers = at.drop([HEADER, BEST_MEASURED], errors="ignore")
        if HEADER not in at.index or peers.empty:
            continue
        peer = str(peers.idxmax())
        header = float(at[HEADER])
        out.append(
            {
                "b": int(b),
                "input": str(value),
                "header": header,
                "peer": peer,
                "best_peer": float(peers[peer]),
                "difference": header - float(peers[peer]),
            }
        )
    table = pd.DataFrame(out, columns=columns)
    # input values in the order the rows first give them (numeric values stay in numeric order)
    first = {value: index for index, value in enumerate(pd.unique(rows["input"].astype(str)))}
    table["_order"] = table["input"].map(first)
    table = table.sort_values(["_order", "b"], kind="stable").drop(columns="_order")
    return table.reset_index(drop=True)


def done_when_2_counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Per b: (input, seed) runs where the header is below 0.99x and 0.9x of the campaign's best
    measured configuration (ratio = t(best measured) / t(header), 0 if the header's choice
    failed)."""
    header = rows[rows["tool"] == HEADER].set_index(["b", "seed", "input"])["time"]
    best = rows[rows["tool"] == BEST_MEASURED].set_index(["b", "seed", "input"])["time"]
    joined = pd.concat({"header": header, "best": best}, axis=1).dropna(subset=["best"])
    if joined.empty:
        return pd.DataFrame(columns=["b", "runs", "below_0.99", "below_0.9", "min_ratio"])
    ratio = [
        fraction_of_optimum(b, h) for h, b in zip(joined["header"], joined["best"], strict=True)
    ]
    joined = joined.assign(ratio=ratio).reset_index()
    out = []
    for b, group in joined.groupby("b"):
        out.append(
            {
                "b": int(b),
                "runs": len(group),
                "below_0.99": int((group["ratio"] < 0.99).sum()),
                "below_0.9": int((group["ratio"] < 0.9).sum()),
                "min_ratio": float(group["ratio"].min()),
            }
        )
    return pd.DataFrame(out)
