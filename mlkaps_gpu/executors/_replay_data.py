"""Tables of recorded measurements for replay, and the CSV loader.

A :class:`ReplayTable` holds one row per measured configuration: one column per design
parameter, the objective column (float, NaN on failure), ``status`` (``ok``, ``invalid``,
``compile_error`` or ``runtime_error``), ``message`` and ``raw_times`` (JSON text of the repeat
times). The Kernel Tuner cache loader (``_kernel_tuner_cache``) and :func:`load_replay_csv`
both produce it; :class:`~mlkaps_gpu.executors._replay.ReplayExecutor` looks configurations up in
it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import OK, RUNTIME_ERROR, encode_times

#: Columns every replay table has besides the design columns and the objective column.
RECORD_COLUMNS: tuple[str, ...] = ("status", "message", "raw_times")


class ReplayDataError(ValueError):
    """A replay data file is missing, corrupt or inconsistent; the message names the file."""


@dataclass
class ReplayTable:
    """Recorded measurements of one kernel on one input (one file).

    Attributes:
        path: the file the table was read from.
        keys: design parameter names, in the file's order.
        tune_params: ordered value list of each design parameter.
        objective: name of the objective column of ``records``.
        records: one row per measured configuration (see the module docstring).
    """

    path: Path
    keys: tuple[str, ...]
    tune_params: dict[str, list[Any]]
    objective: str
    records: pd.DataFrame

    @property
    def name(self) -> str:
        """The file's name (without its folder)."""
        return self.path.name

    def n_failed(self) -> int:
        """Records whose status is not ``ok`` (invalid, compile or runtime error)."""
        return int((self.records["status"] != OK).sum())

    def best(self) -> float:
        """Best (smallest) objective value among the ok records (NaN when there is none)."""
        ok = self.records.loc[self.records["status"] == OK, self.objective]
        return float(ok.min()) if len(ok) else math.nan


def value_kind(values: Sequence[Any]) -> Literal["int", "float", "categorical", "bool"]:
    """Parameter kind of a value list: bool, int, float (any number) or categorical."""
    items = list(values)
    if items and all(isinstance(v, (bool, np.bool_)) for v in items):
        return "bool"
    numbers = [v for v in items if isinstance(v, (int, float, np.integer, np.floating))]
    if len(numbers) != len(items) or any(isinstance(v, (bool, np.bool_)) for v in items):
        return "categorical"
    if all(isinstance(v, (int, np.integer)) for v in items):
        return "int"
    return "float"


def normalise_values(values: Sequence[Any], kind: str) -> list[Any]:
    """Python scalars of ``kind`` (categorical values become strings)."""
    if kind == "categorical":
        return [v if isinstance(v, str) else str(v) for v in values]
    if kind == "bool":
        return [bool(v) for v in values]
    if kind == "int":
        return [int(v) for v in values]
    return [float(v) for v in values]


def column_of(values: Sequence[Any], kind: str) -> np.ndarray:
    """A column of ``kind``: int64, float64, bool or object (strings)."""
    dtype = {"int": np.int64, "float": np.float64, "bool": np.bool_, "categorical": object}[kind]
    return np.array(normalise_values(values, kind), dtype=dtype)


def make_records(columns: dict[str, Any]) -> pd.DataFrame:
    """A records frame; object (text) arrays stay ``object`` (pandas 3 would infer ``str``)."""
    series = {
        name: pd.Series(values, dtype=object if values.dtype == object else values.dtype)
        for name, values in ((name, np.asarray(v)) for name, v in columns.items())
    }
    return pd.DataFrame(series)


def drop_duplicates(
    records: pd.DataFrame,
    keys: Sequence[str],
    name: str,
    duplicates: Literal["error", "first"],
    where: Callable[[int], str],
) -> pd.DataFrame:
    """``records`` without configurations measured twice (``duplicates="first"``: the first
    measurement is kept), or a ReplayDataError naming the file and the first repeat
    (``where(position)``, e.g. ``line 9`` of a CSV, ``results[7]`` of a T4 file)."""
    duplicated = records.duplicated(list(keys), keep="first").to_numpy()
    if not duplicated.any():
        return records
    if duplicates == "error":
        first = int(np.flatnonzero(duplicated)[0])
        raise ReplayDataError(
            f"{name}: {int(duplicated.sum())} configuration(s) appear more than once (first "
            f"repeat: {where(first)}); pass duplicates='first' to keep the first measurement"
        )
    return records.loc[~duplicated].reset_index(drop=True)


def unique_in_order(values: Iterable[Any]) -> list[Any]:
    seen: dict[Any, None] = {}
    for value in values:
        seen.setdefault(value, None)
    return list(seen)


def check_file(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.exists():
        raise ReplayDataError(f"{path}: no such file")
    if not path.is_file():
        raise ReplayDataError(f"{path}: not a file")
    return path


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReplayDataError(f"{path.name}: not a readable CSV table ({first})") from None


def _design_columns(
    frame: pd.DataFrame, keys: Sequence[str]
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Numeric design columns as numbers (int64 when integral), others as stripped text."""
    columns: dict[str, Any] = {}
    tune_params: dict[str, list[Any]] = {}
    for key in keys:
        text = frame[key].astype(str).str.strip()
        numbers = pd.to_numeric(text, errors="coerce")
        if len(text) and not numbers.isna().any():
            values = numbers.to_numpy(dtype=np.float64)
            if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
                columns[key] = values.astype(np.int64)
            else:
                columns[key] = values
            tune_params[key] = np.unique(columns[key]).tolist()
        else:
            columns[key] = text.to_numpy(dtype=object)
            distinct = set(columns[key].tolist())
            tune_params[key] = sorted(distinct)  # "" (off) sorts first
    return columns, tune_params


def _measured_columns(
    column: pd.Series, name: str, failure_values: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Objective, status, message and raw times of the CSV's objective column."""
    times = pd.to_numeric(column.astype(str).str.strip(), errors="coerce").to_numpy(
        dtype=np.float64
    )
    status = np.full(len(times), OK, dtype=object)
    message = np.full(len(times), "", dtype=object)
    bad = ~np.isfinite(times)
    status[bad] = RUNTIME_ERROR
    message[bad] = f"no numeric '{name}' value"
    for marker in failure_values:
        hit = ~bad & (times == float(marker))
        status[hit] = RUNTIME_ERROR
        message[hit] = f"'{name}' = {marker!r}, the runner's failure marker"
        bad |= hit
    raw_times = np.array(
        ["[]" if failed else encode_times([t]) for t, failed in zip(times, bad, strict=True)],
        dtype=object,
    )
    return np.where(bad, np.nan, times), status, message, raw_times


def load_replay_csv(
    path: str | os.PathLike[str],
    *,
    design_columns: Sequence[str],
    objective: str = "time",
    objective_column: str | None = None,
    failure_values: Sequence[float] = (),
    duplicates: Literal["error", "first"] = "error",
) -> ReplayTable:
    """Load a CSV table of measurements (e.g. the GC_TLA syr2k tables).

    Args:
        path: the CSV file.
        design_columns: the columns that form the configuration (e.g. ``p0`` .. ``p5``).
        objective: name of the objective column in the returned records (``time`` by default,
            as for Kernel Tuner caches).
        objective_column: the CSV column holding the measured objective (None: the column
            named ``objective`` when the file has one, else the column ``"objective"``, the
            GC_TLA layout).
        failure_values: objective values that mark a failed run (the GC_TLA runner wrote 1.0:
            pass ``(1.0,)`` for its tables); such rows become ``runtime_error``. None by
            default: a measured value is never taken for a failure unless the data says so.
        duplicates: what to do with a configuration measured twice: raise, or keep the first.

    Numeric design columns stay numbers (int64 when integral, else float64). Any other column is
    categorical text: surrounding blanks are stripped and a blank or missing cell becomes the
    empty string ``""`` (for the syr2k pragmas, "off"). Rows whose objective is missing or not a
    number are ``runtime_error``. Other columns are ignored.
    """
    path = check_file(path)
    frame = _read_csv(path)
    keys = tuple(design_columns)
    if not keys:
        raise ReplayDataError(f"{path.name}: no design columns given")
    if objective_column is None:
        objective_column = objective if objective in frame.columns else "objective"
    missing = [c for c in (*keys, objective_column) if c not in frame.columns]
    if missing:
        raise ReplayDataError(
            f"{path.name}: missing column(s) {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    if objective in keys or objective in RECORD_COLUMNS:
        raise ReplayDataError(f"{path.name}: objective name {objective!r} clashes with a column")
    columns, tune_params = _design_columns(frame, keys)
    columns[objective], columns["status"], columns["message"], columns["raw_times"] = (
        _measured_columns(frame[objective_column], objective_column, failure_values)
    )
    records = drop_duplicates(
        make_records(columns), keys, path.name, duplicates, lambda row: f"line {row + 2}"
    )
    return ReplayTable(
        path=path, keys=keys, tune_params=tune_params, objective=objective, records=records
    )
