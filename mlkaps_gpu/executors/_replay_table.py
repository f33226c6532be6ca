"""Replay tables over inputs: rows of (input point, configuration, objective).

A table replay reads measurements of a kernel at many input points (the shapes a library calls
it with), a few configurations per point: a CSV or Parquet table with ``input_columns`` beside
``design_columns``, or PyTorch AutoHeuristic's files (``_autoheuristic``). Rows with the same
(inputs, configuration) are repeats of one measurement: the cell's objective is the **median**
of its finite repeat times (``aggregate = "mean"`` for their mean) and its raw times are the
repeats; a cell whose every repeat failed is a ``runtime_error`` (a failed result, stored as
such). :class:`InputTable` holds the cells; :class:`TableReplayExecutor` answers from it and
tells the campaign which (point, configuration) rows exist
(:meth:`~TableReplayExecutor.listed_rows`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import INVALID, OK, RUNTIME_ERROR, Executor, ExecutorError
from mlkaps_gpu.executors._replay_data import ReplayDataError, check_file
from mlkaps_gpu.space import (
    IdentifierError,
    Parameter,
    PointIndex,
    SpaceError,
    check_distinct,
    check_identifier,
)

#: Message of a result whose (input point, configuration) the table does not list.
NOT_LISTED = "configuration not listed for this input point in the replay table"
#: Columns of an :class:`InputTable`'s records besides the inputs, the design and the objective.
CELL_COLUMNS: tuple[str, ...] = ("status", "message", "n_repeats", "n_runs")
#: Ratio max / min above which a positive integer input is declared on a log scale.
_LOG_RATIO = 8.0

Aggregate = Literal["median", "mean"]


@dataclass
class InputTable:
    """Measured cells of a kernel over input points.

    Attributes:
        path: the file the table was read from.
        inputs: the input parameters (declared from the data: a numeric column is a range
            from its least to its largest recorded value, log-scaled when positive and
            ``max >= 8 min``; a text column is categorical, a True / False column bool).
        design: the design parameters (their recorded values).
        objective: the objective column of ``records``.
        records: one row per (input point, configuration) cell: the input and design columns,
            the objective (NaN for a failed cell), ``status`` (``ok`` or ``runtime_error``),
            ``message``, ``n_repeats`` (finite repeats) and ``n_runs`` (rows of the file),
            plus any ``extra`` column of the loader (e.g. AutoHeuristic's ``choice``).
        times: the finite repeat times of every cell, grouped by cell (``offsets``).
        offsets: cell ``i``'s repeat times are ``times[offsets[i]:offsets[i + 1]]``.
        metadata: what the file says besides the table (AutoHeuristic's JSON line).
    """

    path: Path
    inputs: list[Parameter]
    design: list[Parameter]
    objective: str
    records: pd.DataFrame
    times: np.ndarray
    offsets: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def input_names(self) -> list[str]:
        return [p.name for p in self.inputs]

    @property
    def design_names(self) -> list[str]:
        return [p.name for p in self.design]

    @property
    def name(self) -> str:
        return self.path.name

    def n_points(self) -> int:
        """Distinct input points."""
        return int(self.records.groupby(self.input_names, sort=False).ngroups)

    def listed_rows(self) -> pd.DataFrame:
        """The (input point, configuration) rows that exist (failed cells included)."""
        return self.records[[*self.input_names, *self.design_names]]


def cells_from_runs(
    runs: pd.DataFrame,
    *,
    path: Path,
    input_columns: Sequence[str],
    design_columns: Sequence[str],
    times: np.ndarray,
    failed: np.ndarray,
    objective: str = "time",
    aggregate: Aggregate = "median",
    extra: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> InputTable:
    """Group runs (rows of a file) into cells: the repeats of one (inputs, configuration).

    Args:
        runs: one row per run, with the input, design and ``extra`` columns (inputs and design
            already typed: numbers, bools or text).
        times: the measured objective of each run.
        failed: which runs failed (their time is not used).
        aggregate: the cell's objective from its finite repeats: ``median`` or ``mean``.
        extra: columns kept per cell (their first run's value).
    """
    if aggregate not in ("median", "mean"):
        raise ReplayDataError(
            f"{path.name}: aggregate must be 'median' or 'mean', not {aggregate!r}"
        )
    name = path.name
    inputs_, design_ = list(input_columns), list(design_columns)
    _check_names(name, inputs_, design_, objective)
    if runs.empty:
        raise ReplayDataError(f"{name}: no measurement rows")
    for column in [*inputs_, *design_]:
        if runs[column].isna().any():
            row = int(np.flatnonzero(runs[column].isna().to_numpy())[0])
            raise ReplayDataError(f"{name}: column {column!r} is empty in data row {row + 1}")
    inputs = [_declare(name, column, runs[column], as_input=True) for column in inputs_]
    design = [_declare(name, column, runs[column], as_input=False) for column in design_]
    cells = PointIndex([*inputs, *design], runs)
    cell = cells.row_ids
    times = np.asarray(times, dtype=np.float64)
    good = ~np.asarray(failed, dtype=bool) & np.isfinite(times)
    values = np.where(good, times, np.nan)
    frame = pd.DataFrame({"cell": cell, "t": values})
    grouped = frame.groupby("cell", sort=True)["t"]
    objective_values = (grouped.median() if aggregate == "median" else grouped.mean()).to_numpy()
    n_repeats = grouped.count().to_numpy().astype(np.int64)
    n_runs = grouped.size().to_numpy().astype(np.int64)
    records = cells.points(runs).copy()
    first = cells.first_rows
    for column in extra:
        records[column] = runs[column].to_numpy()[first]
    records[objective] = objective_values
    ok = n_repeats > 0
    records["status"] = pd.Series(np.where(ok, OK, RUNTIME_ERROR), dtype=object)
    failed_runs = n_runs - n_repeats
    message = np.full(len(records), "", dtype=object)
    some = ok & (failed_runs > 0)
    if some.any():
        message[some] = [
            f"{f} of {r} repeats failed"
            for f, r in zip(failed_runs[some], n_runs[some], strict=True)
        ]
    message[~ok] = "every repeat failed in the recorded data"
    records["message"] = pd.Series(message, dtype=object)
    records["n_repeats"] = n_repeats
    records["n_runs"] = n_runs
    order = np.argsort(cell[good], kind="stable")
    kept = times[good][order]
    offsets = np.concatenate([[0], np.cumsum(n_repeats)]).astype(np.int64)
    return InputTable(
        path=path,
        inputs=inputs,
        design=design,
        objective=objective,
        records=records.reset_index(drop=True),
        times=kept,
        offsets=offsets,
        metadata=dict(metadata or {}),
    )


def load_input_table(
    path: str | os.PathLike[str],
    *,
    input_columns: Sequence[str],
    design_columns: Sequence[str],
    objective: str = "time",
    objective_column: str | None = None,
    failure_values: Sequence[float] = (),
    aggregate: Aggregate = "median",
    format: Literal["csv", "parquet"] | None = None,
) -> InputTable:
    """Load a CSV or Parquet table of measurements over input points.

    Args:
        path: the file (``format`` None: Parquet for ``.parquet`` / ``.pq``, else CSV).
        input_columns: the columns that form the input point (C identifiers: they become the
            header's arguments).
        design_columns: the columns that form the configuration.
        objective: name of the objective in the records.
        objective_column: the column holding the measured objective (default: the column named
            ``objective``, else ``objective``).
        failure_values: objective values that mark a failed run; a missing, non-numeric or
            infinite value is a failure too.
        aggregate: the objective of a cell measured several times: the ``median`` (default) or
            the ``mean`` of its finite repeats.
    """
    path = check_file(path)
    name = path.name
    kind = format or ("parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv")
    frame = _read(path, kind)
    if objective_column is None:
        objective_column = objective if objective in frame.columns else "objective"
    wanted = [*input_columns, *design_columns, objective_column]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ReplayDataError(
            f"{name}: missing column(s) {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    runs = pd.DataFrame({c: typed_column(frame[c]) for c in [*input_columns, *design_columns]})
    times = pd.to_numeric(frame[objective_column], errors="coerce").to_numpy(dtype=np.float64)
    failed = ~np.isfinite(times)
    for marker in failure_values:
        failed |= times == float(marker)
    return cells_from_runs(
        runs,
        path=path,
        input_columns=input_columns,
        design_columns=design_columns,
        times=times,
        failed=failed,
        objective=objective,
        aggregate=aggregate,
    )


def typed_column(column: pd.Series) -> pd.Series:
    """A column as numbers (int64 when every value is integral), bools (``True`` / ``False``
    text) or stripped text."""
    if column.dtype == bool:
        return column.astype(bool)
    if pd.api.types.is_numeric_dtype(column.dtype):
        values = column.to_numpy(dtype=np.float64)
        if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
            return pd.Series(values.astype(np.int64), index=column.index)
        return pd.Series(values, index=column.index)
    # on the distinct values only (a column of a large table holds few)
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    distinct = pd.Series([str(v).strip() for v in uniques], dtype=object)
    numbers = pd.to_numeric(distinct, errors="coerce")
    if len(distinct) and not numbers.isna().any():
        return typed_column(pd.Series(numbers.to_numpy()[codes], index=column.index))
    lowered = distinct.str.lower()
    if len(distinct) and lowered.isin(["true", "false"]).all():
        return pd.Series((lowered == "true").to_numpy()[codes], index=column.index)
    text = pd.Series(distinct.to_numpy(dtype=object)[codes], index=column.index)
    return pd.Series(text.to_numpy(dtype=object), index=column.index, dtype=object)


class TableReplayExecutor(Executor):
    """Executor answering from a table over input points (:class:`InputTable`).

    A (point, configuration) the table does not list is an ``invalid`` result (campaigns never
    ask one: :meth:`listed_rows` tells them what exists); a recorded failure keeps its status.
    The raw times of a result are the cell's repeats.
    """

    def __init__(self, table: InputTable) -> None:
        self.table = table
        self.objective = table.objective
        self.objectives = (table.objective,)
        records = table.records
        self._points = PointIndex(table.inputs, records)
        self._designs = PointIndex(table.design, records)
        self._n_designs = max(1, self._designs.n_points)
        if self._points.n_points * self._n_designs >= 2**62:  # pragma: no cover - enormous
            raise ReplayDataError(f"{table.name}: too many cells to index")
        keys = self._points.row_ids * self._n_designs + self._designs.row_ids
        self._order = np.argsort(keys, kind="stable")
        self._keys = keys[self._order]
        self._values = records[table.objective].to_numpy(dtype=np.float64)
        self._status = records["status"].to_numpy(dtype=object)
        self._message = records["message"].to_numpy(dtype=object)
        self._n_repeats = records["n_repeats"].to_numpy(dtype=np.int64)

    # ----------------------------------------------------------------------------- the space
    def input_parameters(self) -> list[Parameter]:
        """The inputs of the table, in its column order."""
        return list(self.table.inputs)

    def design_parameters(self) -> list[Parameter]:
        """The design parameters of the table, in its column order."""
        return list(self.table.design)

    def listed_rows(self) -> pd.DataFrame:
        """Every (input point, configuration) row of the table (failed cells included:
        measuring one is a real, recorded failure); any other is absent from the data."""
        return self.table.listed_rows()

    # ------------------------------------------------------------------------------- running
    def cells(self, rows: pd.DataFrame) -> np.ndarray:
        """The record index of each row's cell (-1 where the table does not list it)."""
        missing = [c for c in [*self.table.input_names, *self.table.design_names] if c not in rows]
        if missing:
            raise ExecutorError(f"TableReplayExecutor: rows lack column(s) {missing}")
        n = len(rows)
        columns = {
            c: rows[c].to_numpy() for c in [*self.table.input_names, *self.table.design_names]
        }
        point = self._points.ids(columns, n)
        design = self._designs.ids(columns, n)
        key = point * self._n_designs + design
        known = (point >= 0) & (design >= 0)
        if len(self._keys) == 0:
            return np.full(n, -1, dtype=np.int64)
        position = np.clip(np.searchsorted(self._keys, key), 0, len(self._keys) - 1)
        hit = known & (self._keys[position] == key)
        return np.where(hit, self._order[position], -1).astype(np.int64)

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        cell = self.cells(rows)
        hit = cell >= 0
        take = np.where(hit, cell, 0)
        status = np.where(hit, self._status[take], INVALID).astype(object)
        message = np.where(hit, self._message[take], NOT_LISTED).astype(object)
        raw = [
            _encode(self.table.times[self.table.offsets[c] : self.table.offsets[c + 1]])
            if c >= 0
            else "[]"
            for c in cell.tolist()
        ]
        return pd.DataFrame(
            {
                self.objective: np.where(hit, self._values[take], np.nan),
                "status": pd.Series(status, dtype=object),
                "n_repeats": np.where(hit & (status == OK), self._n_repeats[take], 0),
                "raw_times": pd.Series(raw, dtype=object),
                "message": pd.Series(message, dtype=object),
            }
        )

    # ------------------------------------------------------------------------------ truth
    def truth(self) -> pd.DataFrame:
        """Every cell: inputs, design, objective (NaN when failed) and status."""
        table = self.table
        return table.records[[*table.input_names, *table.design_names, table.objective, "status"]]

    def optimum(self, point: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """Best objective at one recorded input point and its configuration (NaN, {} when the
        point is not recorded or every cell there failed)."""
        rows = self._points.ids({n: point[n] for n in self.table.input_names}, 1)
        if rows[0] < 0:
            return math.nan, {}
        mine = self._points.row_ids == rows[0]
        values = np.where(mine & (self._status == OK), self._values, np.nan)
        if not np.isfinite(values).any():
            return math.nan, {}
        best = int(np.nanargmin(values))
        row = self.table.records.iloc[best]
        return float(values[best]), {k: _scalar(row[k]) for k in self.table.design_names}


# ------------------------------------------------------------------------------------ helpers
def _encode(times: np.ndarray) -> str:
    return "[" + ", ".join(repr(float(t)) for t in times) + "]"


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _read(path: Path, kind: str) -> pd.DataFrame:
    if kind == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ReplayDataError(
                f"{path.name}: reading Parquet needs pyarrow (pip install pyarrow), or give a CSV"
            ) from None
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as exc:
            raise ReplayDataError(f"{path.name}: not a readable Parquet table ({exc})") from None
    try:
        return pd.read_csv(path, keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReplayDataError(f"{path.name}: not a readable CSV table ({first})") from None


def _check_names(name: str, inputs: list[str], design: list[str], objective: str) -> None:
    if not inputs:
        raise ReplayDataError(f"{name}: no input columns given")
    if not design:
        raise ReplayDataError(f"{name}: no design columns given")
    for role, columns in (("input column", inputs), ("design column", design)):
        for column in columns:
            try:
                check_identifier(str(column), what=role)
            except (IdentifierError, ValueError) as error:
                raise ReplayDataError(
                    f"{name}: {error} (names end up in a C header: rename the column)"
                ) from None
    both = sorted(set(inputs) & set(design))
    if both:
        raise ReplayDataError(f"{name}: column(s) {both} are both input and design columns")
    if objective in (*inputs, *design, *CELL_COLUMNS):
        raise ReplayDataError(f"{name}: objective name {objective!r} clashes with a column")
    try:
        check_distinct([*inputs, *design], what="column names")
    except ValueError as error:
        raise ReplayDataError(f"{name}: {error}") from None


def _declare(name: str, column: str, values: pd.Series, *, as_input: bool) -> Parameter:
    """The parameter of a column, from its recorded values."""
    distinct = pd.unique(values)
    try:
        if values.dtype == bool:
            return Parameter(column, "bool", values=tuple(sorted(bool(v) for v in distinct)))
        if pd.api.types.is_numeric_dtype(values.dtype):
            kind = "int" if pd.api.types.is_integer_dtype(values.dtype) else "float"
            numbers = sorted(_scalar(v) for v in distinct)
            if not as_input:
                return Parameter(column, kind, values=tuple(numbers))  # type: ignore[arg-type]
            # a range, even for one value: the header clamps an unseen size into it
            low, high = numbers[0], numbers[-1]
            log = low > 0 and high >= _LOG_RATIO * low
            return Parameter(column, kind, low=low, high=high, log=log)  # type: ignore[arg-type]
        return Parameter(column, "categorical", values=tuple(sorted(str(v) for v in distinct)))
    except SpaceError as error:
        raise ReplayDataError(f"{name}: column {column!r}: {error}") from None


def fraction_of_optimum(
    table: InputTable | TableReplayExecutor, answers: pd.DataFrame
) -> pd.DataFrame:
    """Score one answer per recorded input point against the table's truth.

    Args:
        table: the measurements.
        answers: one row per point to score: the input columns and the design columns (e.g.
            what a header answers at every recorded point).

    Returns:
        One row per answer row: ``t_opt`` (the point's best ok time), ``t_answer`` (the
        answer's time; the point's slowest ok time where the answer is not listed there or its
        cell failed), ``listed`` and ``fraction`` (``t_opt / t_answer``, NaN at a point that is
        not recorded or has no ok cell). The geometric mean of ``fraction`` is the usual score.
    """
    if isinstance(table, TableReplayExecutor):
        executor = table
        table = table.table
    else:
        executor = TableReplayExecutor(table)
    values = table.records[table.objective].to_numpy(dtype=np.float64)
    ok = (table.records["status"] == OK).to_numpy()
    good = np.where(ok, values, np.nan)
    point_of_cell = executor._points.row_ids
    frame = pd.DataFrame({"point": point_of_cell, "t": good})
    grouped = frame.groupby("point")["t"]
    best = grouped.min().reindex(range(executor._points.n_points)).to_numpy()
    worst = grouped.max().reindex(range(executor._points.n_points)).to_numpy()
    columns = {c: answers[c].to_numpy() for c in table.input_names}
    point = executor._points.ids(columns, len(answers))
    cell = executor.cells(answers)
    safe = np.maximum(point, 0)
    t_opt = np.where(point >= 0, best[safe], np.nan)
    answered = np.where(cell >= 0, good[np.maximum(cell, 0)], np.nan)
    listed = cell >= 0
    t_answer = np.where(np.isfinite(answered), answered, np.where(point >= 0, worst[safe], np.nan))
    return pd.DataFrame(
        {
            "t_opt": t_opt,
            "t_answer": t_answer,
            "listed": listed,
            "fraction": t_opt / t_answer,
        },
        index=answers.index,
    )
