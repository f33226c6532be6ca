"""Exhaustive truth over many input points, and the score of an answer at every point.

A :class:`Truth` holds, for ``P`` input points and ``C`` configurations, the time of every
(point, configuration) cell: NaN where the configuration is not listed at that point (it violates
a constraint, or the data do not hold it), ``inf`` where it was listed and failed. A tool answers
one configuration index per point (``-1``: no answer); the answer's fraction of optimum is
``t_opt / t(answer)``, and an answer that failed or is not listed at a point scores as that
point's slowest listed successful time (the fraction itself comes from
:func:`mlkaps_gpu.analysis.fraction_of_optimum`).

Also here: the reader of PyTorch AutoHeuristic files (line 1 JSON metadata, then a CSV with the
features, ``choice`` and ``feedback``; repeated rows are repeats: the median per (shape, choice)),
and the features the models of the peers see (log of the numeric inputs, codes of the
categorical ones, the design values).
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from mlkaps_gpu.analysis import fraction_of_optimum

#: a Triton choice's parameters: ``BLOCK-M=64``, ``numstages=3`` ...
_CHOICE_FIELD = re.compile(r"([A-Za-z][A-Za-z0-9-]*)=(-?\d+)")
#: thresholds of the "points below" counts
LOW_FRACTIONS = (0.67, 0.9)


@dataclass
class Truth:
    """Every (input point, configuration) cell of one problem.

    Attributes:
        name: label of the problem.
        inputs: one row per input point (input columns only).
        configs: one row per configuration (design columns); its index is the config index.
        labels: a readable name per configuration (the data's ``choice`` string, or
            ``block=32 order=ijk``).
        times: ``P x C`` times; NaN = not listed at the point, ``inf`` = failed.
        numeric_inputs: the numeric input columns (features are their logs).
        categorical_inputs: the categorical input columns (features are codes).
        size_inputs: the numeric inputs a figure multiplies into "the size" (default: all).
    """

    name: str
    inputs: pd.DataFrame
    configs: pd.DataFrame
    labels: list[str]
    times: np.ndarray
    numeric_inputs: list[str]
    categorical_inputs: list[str]
    size_inputs: list[str] | None = None

    def __post_init__(self) -> None:
        self.times = np.asarray(self.times, dtype=np.float64)
        if self.times.shape != (len(self.inputs), len(self.configs)):
            raise ValueError(
                f"{self.name}: times has shape {self.times.shape}, expected "
                f"({len(self.inputs)}, {len(self.configs)})"
            )
        keep = np.isfinite(self.times).any(axis=1)
        if not keep.all():  # a point where nothing ran cannot be scored
            self.inputs = self.inputs[keep].reset_index(drop=True)
            self.times = self.times[keep]
        self.inputs = self.inputs.reset_index(drop=True)
        self.configs = self.configs.reset_index(drop=True)

    @property
    def n_points(self) -> int:
        return len(self.inputs)

    @property
    def listed(self) -> np.ndarray:
        """``P x C``: the cells a tool may measure (successful or failed)."""
        return ~np.isnan(self.times)

    @property
    def n_cells(self) -> int:
        return int(self.listed.sum())

    @property
    def optimum(self) -> np.ndarray:
        """Best successful time per point."""
        return np.min(np.where(np.isfinite(self.times), self.times, np.inf), axis=1)

    @property
    def slowest(self) -> np.ndarray:
        """Slowest successful time per point (what a failed or unlisted answer scores)."""
        return np.max(np.where(np.isfinite(self.times), self.times, -np.inf), axis=1)

    def best_config(self) -> np.ndarray:
        """Index of the best configuration per point."""
        return np.argmin(np.where(np.isfinite(self.times), self.times, np.inf), axis=1)

    def size_axis(self) -> tuple[np.ndarray, str]:
        """What a figure plots the points against: the one size input, else the product of the
        size inputs (:attr:`size_inputs`, default the numeric inputs)."""
        names = self.size_inputs or self.numeric_inputs
        if len(names) == 1:
            return self.inputs[names[0]].to_numpy(dtype=np.float64), names[0]
        values = np.ones(self.n_points)
        for name in names:
            values = values * np.maximum(self.inputs[name].to_numpy(dtype=np.float64), 1.0)
        return values, " x ".join(names)

    def config_index(self, design: pd.DataFrame) -> np.ndarray:
        """The configuration index of each row of ``design`` (design columns); -1 where the row
        is no configuration of the truth."""
        columns = list(self.configs.columns)
        keys = {
            tuple(_plain(v) for v in row): i
            for i, row in enumerate(self.configs[columns].itertuples(index=False))
        }
        return np.array(
            [
                keys.get(tuple(_plain(v) for v in row), -1)
                for row in design[columns].itertuples(index=False)
            ],
            dtype=np.int64,
        )


def _plain(value: object) -> object:
    """A hashable value equal across numpy / Python types (64 and 64.0 and np.int64(64))."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | float | np.integer | np.floating):
        number = float(value)
        return int(number) if number.is_integer() else number
    return str(value)


# ------------------------------------------------------------------------------ scoring
def answer_times(truth: Truth, answers: np.ndarray) -> np.ndarray:
    """The time of each point's answer; the point's slowest successful time where the answer
    is -1, not listed there, or failed."""
    answers = np.asarray(answers, dtype=np.int64)
    rows = np.arange(truth.n_points)
    safe = np.clip(answers, 0, len(truth.configs) - 1)
    chosen = truth.times[rows, safe]
    usable = (answers >= 0) & np.isfinite(chosen)
    return np.where(usable, chosen, truth.slowest)


def point_fractions(truth: Truth, answers: np.ndarray) -> np.ndarray:
    """``t_opt / t(answer)`` per point (see :func:`answer_times`)."""
    # the optimum broadcasts per point (the helper is written for one space's optimum)
    return fraction_of_optimum(answer_times(truth, answers), truth.optimum)  # type: ignore[arg-type]


def summarize_fractions(fractions: np.ndarray) -> dict[str, float]:
    """Geomean, worst point and the counts of points below each of :data:`LOW_FRACTIONS`."""
    values = np.asarray(fractions, dtype=np.float64)
    if values.size == 0:
        raise ValueError("summarize_fractions: no points")
    positive = np.maximum(values, 1e-300)
    out = {"geomean": float(np.exp(np.mean(np.log(positive)))), "worst": float(values.min())}
    for level in LOW_FRACTIONS:
        out[f"below_{level:g}"] = float((values < level).sum())
    return out


# ------------------------------------------------------------------------------ features
def _signed_log(values: np.ndarray) -> np.ndarray:
    return np.sign(values) * np.log1p(np.abs(values))


def input_features(truth: Truth, table: pd.DataFrame) -> np.ndarray:
    """Features of the input columns of ``table``: signed log of the numeric ones, codes (in the
    truth's order of values; -1 for a value the truth lacks) of the categorical ones."""
    columns = [_signed_log(table[n].to_numpy(dtype=np.float64)) for n in truth.numeric_inputs]
    for name in truth.categorical_inputs:
        values = sorted(truth.inputs[name].astype(str).unique())
        codes = {v: i for i, v in enumerate(values)}
        columns.append(np.array([codes.get(str(v), -1) for v in table[name]], dtype=np.float64))
    return np.column_stack(columns) if columns else np.zeros((len(table), 0))


def design_features(truth: Truth, table: pd.DataFrame) -> np.ndarray:
    """Features of the design columns of ``table``: numeric values as they are, codes (in the
    truth's order) of the others."""
    columns = []
    for name in truth.configs.columns:
        reference = truth.configs[name]
        if pd.api.types.is_numeric_dtype(reference) and not pd.api.types.is_bool_dtype(reference):
            columns.append(pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=np.float64))
        else:
            codes = {v: i for i, v in enumerate(sorted(reference.astype(str).unique()))}
            columns.append(np.array([codes.get(str(v), -1) for v in table[name]], dtype=float))
    return np.column_stack(columns)


def scaled_input_features(truth: Truth) -> tuple[np.ndarray, np.ndarray]:
    """The truth's points for distances: log numeric inputs scaled to unit spread, and the
    categorical codes (which must match when possible)."""
    numeric = (
        np.column_stack(
            [_signed_log(truth.inputs[n].to_numpy(dtype=np.float64)) for n in truth.numeric_inputs]
        )
        if truth.numeric_inputs
        else np.zeros((truth.n_points, 0))
    )
    spread = numeric.std(axis=0) if len(numeric) else np.ones(numeric.shape[1])
    numeric = (numeric - numeric.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    categorical = input_features(truth, truth.inputs)[:, len(truth.numeric_inputs) :]
    return numeric, categorical


# ------------------------------------------------------------------------------ AutoHeuristic
def parse_choice(choice: str) -> dict[str, object]:
    """A ``choice`` string as design values: ``kind`` (``triton`` or the extern name) and the
    Triton parameters (``BLOCK_M`` ...; -1 where the choice has none)."""
    if choice.startswith("type=triton"):
        fields = {k.replace("-", "_"): int(v) for k, v in _CHOICE_FIELD.findall(choice[5:])}
        return {"kind": "triton", **fields}
    return {"kind": choice}


def _metadata_line(path: Path, handle: IO[str]) -> dict:
    try:
        meta = json.loads(handle.readline())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: line 1 is not JSON metadata ({error})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: line 1 is not a JSON object of metadata")
    return meta


def autoheuristic_metadata(path: str | Path) -> dict:
    """The metadata (line 1) of an AutoHeuristic file, without reading its table."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return _metadata_line(path, handle)


def read_autoheuristic(path: str | Path) -> tuple[dict, pd.DataFrame]:
    """The metadata (line 1) and the table of an AutoHeuristic file (gzip or plain text)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        meta = _metadata_line(path, handle)
        table = pd.read_csv(handle)
    features = [*meta.get("numerical_features", []), *meta.get("categorical_features", [])]
    missing = [c for c in [*features, "choice", "feedback"] if c not in table.columns]
    if not features or missing:
        raise ValueError(
            f"{path}: expected numerical_features / categorical_features in the metadata and "
            f"the columns choice, feedback; missing {missing or 'the feature lists'}"
        )
    return meta, table


def autoheuristic_truth(path: str | Path, name: str | None = None) -> Truth:
    """A :class:`Truth` from an AutoHeuristic file: the median of the repeats per (shape,
    choice) (``inf`` = failed, kept as a failure when the median is not finite)."""
    meta, table = read_autoheuristic(path)
    numeric = list(meta.get("numerical_features", []))
    categorical = list(meta.get("categorical_features", []))
    features = numeric + categorical
    table = table.copy()
    table["feedback"] = pd.to_numeric(table["feedback"], errors="coerce").fillna(math.inf)
    cells = table.groupby([*features, "choice"], sort=True, dropna=False)["feedback"].median()
    wide = cells.unstack("choice")
    choices = list(wide.columns)
    parsed = [parse_choice(c) for c in choices]
    design_names = sorted({k for p in parsed for k in p} - {"kind"})
    configs = pd.DataFrame(
        {
            "kind": [p["kind"] for p in parsed],
            **{k: [int(p.get(k, -1)) for p in parsed] for k in design_names},  # type: ignore[call-overload]
        }
    )
    inputs = wide.index.to_frame(index=False)
    times = wide.to_numpy(dtype=np.float64)  # NaN where the choice was not listed
    # the leading numeric features are the shape (m, k, n; b, h, m, n ...), strides follow
    sizes = list(itertools.takewhile(lambda name: "stride" not in name, numeric))
    return Truth(
        name=name or Path(path).name.split(".")[0],
        inputs=inputs,
        configs=configs,
        labels=[str(c) for c in choices],
        times=times,
        numeric_inputs=numeric,
        categorical_inputs=categorical,
        size_inputs=sizes or None,
    )


def truth_from_cells(
    cells: pd.DataFrame,
    *,
    name: str,
    numeric_inputs: Sequence[str],
    categorical_inputs: Sequence[str],
    design: Sequence[str],
    time_column: str = "time",
) -> Truth:
    """A :class:`Truth` from a long table of cells (inputs, design, time; a non-finite time is a
    failure)."""
    inputs_cols = [*numeric_inputs, *categorical_inputs]
    table = cells.copy()
    table[time_column] = pd.to_numeric(table[time_column], errors="coerce").fillna(math.inf)
    points = table[inputs_cols].drop_duplicates().sort_values(inputs_cols).reset_index(drop=True)
    configs = table[list(design)].drop_duplicates().sort_values(list(design))
    configs = configs.reset_index(drop=True)
    point_index = {tuple(map(_plain, r)): i for i, r in enumerate(points.itertuples(index=False))}
    config_index = {tuple(map(_plain, r)): i for i, r in enumerate(configs.itertuples(index=False))}
    times = np.full((len(points), len(configs)), np.nan)
    rows = [point_index[tuple(map(_plain, r))] for r in table[inputs_cols].itertuples(index=False)]
    cols = [
        config_index[tuple(map(_plain, r))] for r in table[list(design)].itertuples(index=False)
    ]
    times[rows, cols] = table[time_column].to_numpy(dtype=np.float64)
    labels = [
        " ".join(f"{k}={_plain(v)}" for k, v in zip(design, row, strict=True))
        for row in configs.itertuples(index=False)
    ]
    return Truth(
        name=name,
        inputs=points,
        configs=configs,
        labels=labels,
        times=times,
        numeric_inputs=list(numeric_inputs),
        categorical_inputs=list(categorical_inputs),
    )
