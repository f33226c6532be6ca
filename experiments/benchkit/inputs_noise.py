"""The noise floor of an AutoHeuristic table from its own repeated measurements (most (shape,
choice) cells were measured three times): one repeat's optimum scored on another, and every cell
measured once scored on the other repeats. Used by ``noise_floor_inputs.py`` and, as a note
beside the header's score, by ``bench_inputs.py``."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from benchkit.inputs_truth import read_autoheuristic

REPEATS = 3


def repeats_table(path: Path) -> pd.DataFrame:
    """One row per (shape, choice), one column per repeat (0, 1, ...: the order of the file;
    ``inf`` = failed, NaN = not measured that many times), ``shape`` the shape's number."""
    meta, table = read_autoheuristic(path)
    features = [*meta.get("numerical_features", []), *meta.get("categorical_features", [])]
    table = table.copy()
    table["feedback"] = pd.to_numeric(table["feedback"], errors="coerce").fillna(np.inf)
    table["_repeat"] = table.groupby([*features, "choice"], sort=False).cumcount()
    table["shape"] = table.groupby(features, sort=False).ngroup()
    wide = table.pivot_table(
        index=["shape", "choice"], columns="_repeat", values="feedback", aggfunc="first"
    )
    return wide.reset_index()


def chosen_fraction(wide: pd.DataFrame, chosen_by: str | int, scored_on: pd.Series) -> float:
    """Geomean over the shapes of the best ``scored_on`` value over the value of the choice
    that is fastest by ``chosen_by``; cells where either is missing or failed are left out,
    and shapes with fewer than two such cells."""
    frame = pd.DataFrame(
        {"shape": wide["shape"], "by": wide[chosen_by], "on": scored_on}, index=wide.index
    )
    frame = frame[np.isfinite(frame["by"]) & np.isfinite(frame["on"])]
    frame = frame[frame.groupby("shape")["shape"].transform("size") >= 2]
    if frame.empty:
        return float("nan")
    picked = frame.loc[frame.groupby("shape")["by"].idxmin()].set_index("shape")["on"]
    best = frame.groupby("shape")["on"].min()
    return float(np.exp(np.mean(np.log(best.loc[picked.index] / picked))))


def noise_floor(wide: pd.DataFrame) -> pd.DataFrame:
    """The two figures of the module docstring, one row per (figure, repeat pair)."""
    repeats = [c for c in wide.columns if isinstance(c, int | np.integer)][:REPEATS]
    if len(repeats) < 2:
        raise ValueError("the table has no repeated measurements: no noise floor")
    rows = []
    for a, b in itertools.permutations(repeats, 2):
        rows.append(
            {
                "figure": "repeat a -> repeat b",
                "a": a,
                "b": b,
                "geomean": chosen_fraction(wide, a, wide[b]),
            }
        )
    for a in repeats:
        others = [r for r in repeats if r != a]
        with np.errstate(divide="ignore"):
            pooled = np.exp(np.log(wide[others].astype(np.float64)).mean(axis=1, skipna=False))
        rows.append(
            {
                "figure": "every cell once",
                "a": a,
                "b": "+".join(str(r) for r in others),
                "geomean": chosen_fraction(wide, a, pooled),
            }
        )
    return pd.DataFrame(rows)


def summary(floors: pd.DataFrame) -> str:
    """One line: each figure's mean and range over the repeats."""
    parts = []
    for figure, row in (
        floors.groupby("figure", sort=False)["geomean"].agg(["mean", "min", "max"]).iterrows()
    ):
        parts.append(f"{figure} {row['mean']:.4f} ({row['min']:.4f} - {row['max']:.4f})")
    return "; ".join(parts)
