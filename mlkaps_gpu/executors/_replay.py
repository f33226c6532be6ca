"""Replay executor: looks measured objectives up in recorded tables instead of running a kernel.

Built from one table (Kernel Tuner cache, CSV table or T4 results file, see
``_kernel_tuner_cache``, ``_replay_data`` and ``_t4``), or from a mapping
``{input_name: {input_value: table}}`` in which one input parameter selects the table (e.g.
``{"gpu": {"A100": cache_a100, "W6600": cache_w6600}}``). A configuration absent from the data
is an ``invalid`` result (it still counts as an evaluation; campaigns never propose one, since
:meth:`ReplayExecutor.known_designs` tells them what exists); recorded failures keep their
status. Since the tables are exhaustive, the true optimum of each input is known
(:meth:`ReplayExecutor.optimum`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import INVALID, OK, Executor, ExecutorError
from mlkaps_gpu.executors._kernel_tuner_cache import load_kernel_tuner_cache
from mlkaps_gpu.executors._replay_data import (
    ReplayDataError,
    ReplayTable,
    load_replay_csv,
    normalise_values,
    value_kind,
)
from mlkaps_gpu.executors._t4 import load_t4_results
from mlkaps_gpu.space import Parameter

#: Message of a result whose configuration the replay data does not contain.
NOT_IN_DATA = "configuration not in the replay data"

TableSource = ReplayTable | str | os.PathLike[str]


class ReplayExecutor(Executor):
    """Executor answering from recorded measurements.

    Args:
        tables: one :class:`ReplayTable` (e.g. a ``KernelTunerCache``), or a mapping with exactly
            one input parameter name whose value maps input values to tables, in the order the
            input parameter lists them. All tables must have the same design parameter names.
        objective: objective column to report (default: the first table's objective).
    """

    def __init__(
        self,
        tables: ReplayTable | Mapping[str, Mapping[Any, ReplayTable]],
        *,
        objective: str | None = None,
    ) -> None:
        members = self._members(tables)
        first = members[0][1]
        self.objective = objective or first.objective
        self.objectives = (self.objective,)
        self.keys: tuple[str, ...] = first.keys
        self._check_members(members)
        self.tables: dict[Any, ReplayTable] = dict(members)
        self._parameters, self._input = self._declare_parameters(members)
        self._index_records(members)

    def _members(
        self, tables: ReplayTable | Mapping[str, Mapping[Any, ReplayTable]]
    ) -> list[tuple[Any, ReplayTable]]:
        """``(input value or None, table)`` pairs; sets :attr:`input_name`."""
        self.input_name: str | None = None
        if isinstance(tables, ReplayTable):
            return [(None, tables)]
        if not isinstance(tables, Mapping):
            raise ExecutorError(f"ReplayExecutor: cannot replay a {type(tables).__name__}")
        if len(tables) != 1:
            raise ExecutorError(
                "ReplayExecutor: give one table or {input_name: {input_value: table}} with "
                f"exactly one input name (got {len(tables)})"
            )
        ((self.input_name, by_value),) = tables.items()
        if not isinstance(self.input_name, str) or not isinstance(by_value, Mapping):
            raise ExecutorError("ReplayExecutor: expected {input_name: {input_value: table}}")
        if not by_value:
            raise ExecutorError(f"ReplayExecutor: no tables for input '{self.input_name}'")
        members = list(by_value.items())
        for value, table in members:
            if not isinstance(table, ReplayTable):
                raise ExecutorError(
                    f"ReplayExecutor: {self.input_name}={value!r} is not a loaded table "
                    f"(got {type(table).__name__}); use ReplayExecutor.from_files for paths"
                )
        return members

    def _check_members(self, members: list[tuple[Any, ReplayTable]]) -> None:
        first = members[0][1]
        for _, table in members:
            if set(table.keys) != set(self.keys):
                only_here = sorted(set(table.keys) - set(self.keys))
                only_first = sorted(set(self.keys) - set(table.keys))
                raise ReplayDataError(
                    f"{table.name}: design parameters differ from {first.name} "
                    f"(extra {only_here}, missing {only_first}); a key_suffix may align them"
                )
            if self.objective not in table.records:
                raise ReplayDataError(f"{table.name}: no objective column '{self.objective}'")
        if self.input_name is not None and self.input_name in self.keys:
            raise ExecutorError(
                f"ReplayExecutor: input name '{self.input_name}' is also a design parameter"
            )

    def _declare_parameters(
        self, members: list[tuple[Any, ReplayTable]]
    ) -> tuple[list[Parameter], Parameter | None]:
        """Design parameters (values and order from the first table, then any new ones of the
        others) and the input that selects the table."""
        parameters: list[Parameter] = []
        for key in self.keys:
            merged: list[Any] = []
            for _, table in members:
                for value in [*table.tune_params.get(key, []), *pd.unique(table.records[key])]:
                    value = value.item() if hasattr(value, "item") else value
                    if value not in merged:
                        merged.append(value)
            kind = value_kind(merged)
            parameters.append(Parameter(key, kind, values=tuple(normalise_values(merged, kind))))
        selector: Parameter | None = None
        if self.input_name is not None:
            inputs = [value for value, _ in members]
            kind = value_kind(inputs)
            selector = Parameter(
                self.input_name, kind, values=tuple(normalise_values(inputs, kind))
            )
        return parameters, selector

    def _index_records(self, members: list[tuple[Any, ReplayTable]]) -> None:
        """One combined table; each configuration gets an integer key from per-column codes."""
        frames = []
        for position, (_, table) in enumerate(members):
            frame = table.records[[*self.keys, self.objective, "status", "message", "raw_times"]]
            frame = frame.reset_index(drop=True).copy()
            frame["_input"] = position
            frames.append(frame)
        combined = pd.concat(frames, ignore_index=True)
        self._levels: list[pd.Index] = [
            pd.Index(_as_lookup(pd.Series(p.domain_values()), p.kind)) for p in self._parameters
        ]
        self._input_level: pd.Index | None = None
        if self._input is not None:
            domain = pd.Series(self._input.domain_values())
            self._input_level = pd.Index(_as_lookup(domain, self._input.kind))
        position = combined["_input"].to_numpy(dtype=np.int64)
        index = pd.Index(self._codes(position, combined))
        if (index < 0).any():  # pragma: no cover - levels are built from these very values
            raise ExecutorError("ReplayExecutor: internal error coding the replay data")
        if not index.is_unique:
            first_duplicate = int(np.flatnonzero(index.duplicated())[0])
            name = members[int(position[first_duplicate])][1].name
            raise ReplayDataError(f"{name}: a configuration appears more than once")
        self._index = index
        self._values = combined[self.objective].to_numpy(dtype=np.float64)
        self._status = combined["status"].to_numpy(dtype=object)
        self._message = combined["message"].to_numpy(dtype=object)
        self._raw_times = combined["raw_times"].to_numpy(dtype=object)
        self._n_repeats = np.array(
            [
                _count(raw) if st == OK else 0
                for raw, st in zip(self._raw_times, self._status, strict=True)
            ],
            dtype=np.int64,
        )

    # -------------------------------------------------------------------------- construction
    @classmethod
    def from_files(
        cls,
        files: str | os.PathLike[str] | Mapping[str, Mapping[Any, TableSource]],
        *,
        format: Literal["kernel_tuner", "csv", "t4"] = "kernel_tuner",
        objective: str = "time",
        **loader_options: Any,
    ) -> ReplayExecutor:
        """Load the file(s) and build the executor.

        Args:
            files: one path, or ``{input_name: {input_value: path_or_loaded_table}}``.
            format: ``"kernel_tuner"`` (cache files), ``"csv"`` (:func:`load_replay_csv`) or
                ``"t4"`` (T4 results files, :func:`load_t4_results`).
            objective: objective name (cache field; for CSV, the name given to the measured
                column, which ``objective_column`` names in the file).
            **loader_options: passed to the loader of every file (``key_suffix``,
                ``suffix_keys`` for caches; ``design_columns``, ``objective_column``,
                ``failure_values``, ``duplicates`` for CSV; ``duplicates`` for T4).
        """

        def load(source: TableSource) -> ReplayTable:
            if isinstance(source, ReplayTable):
                return source
            if format == "kernel_tuner":
                return load_kernel_tuner_cache(source, objective=objective, **loader_options)
            if format == "csv":
                if "design_columns" not in loader_options:
                    raise ExecutorError("ReplayExecutor.from_files: csv needs design_columns=")
                return load_replay_csv(source, objective=objective, **loader_options)
            if format == "t4":
                return load_t4_results(source, objective=objective, **loader_options)
            raise ExecutorError(f"ReplayExecutor.from_files: unknown format {format!r}")

        if isinstance(files, Mapping):
            tables = {
                name: {value: load(source) for value, source in by_value.items()}
                for name, by_value in files.items()
            }
            return cls(tables, objective=objective)
        return cls(load(files), objective=objective)

    # ----------------------------------------------------------------------------- the space
    def design_parameters(self) -> list[Parameter]:
        """Design parameters of the data, in the tables' key order and value order."""
        return list(self._parameters)

    def input_parameter(self) -> Parameter | None:
        """The parameter selecting the table (categorical over the mapping keys), if any."""
        return self._input

    @property
    def inputs(self) -> list[Any]:
        """Input values in order (``[None]`` for a single table)."""
        return list(self.tables)

    # ------------------------------------------------------------------------------- running
    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        missing = [key for key in self.keys if key not in rows]
        if self.input_name is not None and self.input_name not in rows:
            missing.insert(0, self.input_name)
        if missing:
            raise ExecutorError(f"ReplayExecutor: rows lack column(s) {missing}")
        n = len(rows)
        if self._input is None or self._input_level is None:
            position = np.zeros(n, dtype=np.int64)
        else:
            values = _as_lookup(rows[self._input.name], self._input.kind)
            position = self._input_level.get_indexer(values)
        codes = self._codes(position, rows)
        found = np.full(n, -1, dtype=np.int64)
        known = codes >= 0
        found[known] = self._index.get_indexer(codes[known])
        hit = found >= 0
        take = np.where(hit, found, 0)

        status = np.where(hit, self._status[take], INVALID).astype(object)
        message = np.where(hit, self._message[take], NOT_IN_DATA).astype(object)
        unknown_input = position < 0
        if unknown_input.any():
            message[unknown_input] = f"{NOT_IN_DATA} (unknown {self.input_name})"
        result = pd.DataFrame(
            {
                self.objective: np.where(hit, self._values[take], np.nan),
                "status": pd.Series(status, dtype=object),
                "n_repeats": np.where(hit, self._n_repeats[take], 0),
                "raw_times": pd.Series(
                    np.where(hit, self._raw_times[take], "[]").astype(object), dtype=object
                ),
                "message": pd.Series(message, dtype=object),
            }
        )
        return result

    def _codes(self, position: np.ndarray, frame: pd.DataFrame) -> np.ndarray:
        """Mixed-radix integer key of each row (input position, then the design values);
        -1 where a value is not in the data."""
        key = position.astype(np.int64)
        valid = key >= 0
        radix = len(self.tables)
        for parameter, level in zip(self._parameters, self._levels, strict=True):
            code = level.get_indexer(_as_lookup(frame[parameter.name], parameter.kind))
            valid &= code >= 0
            key = key * len(level) + np.maximum(code, 0)
            radix *= len(level)
        if radix >= 2**62:  # pragma: no cover - would need an enormous space
            raise ExecutorError("ReplayExecutor: design space too large to index")
        return np.where(valid, key, -1)

    # --------------------------------------------------------------------------- the optimum
    def _table(self, input_value: Any) -> ReplayTable:
        if self.input_name is None:
            if input_value is not None:
                raise ExecutorError("ReplayExecutor: this replay has no input parameter")
            return self.tables[None]
        if input_value is None:
            raise ExecutorError(
                f"ReplayExecutor: give the input value ({self.input_name} in {self.inputs})"
            )
        for value, table in self.tables.items():
            if value == input_value or str(value) == str(input_value):
                return table
        raise ExecutorError(f"ReplayExecutor: no table for {self.input_name}={input_value!r}")

    def optimum(self, input_value: Any = None) -> tuple[float, dict[str, Any]]:
        """Best objective value of ``input_value``'s table and its configuration."""
        table = self._table(input_value)
        ok = table.records[table.records["status"] == OK]
        values = ok[self.objective].to_numpy(dtype=np.float64)
        if len(values) == 0 or not np.isfinite(values).any():
            return math.nan, {}
        best = int(np.nanargmin(values))
        row = ok.iloc[best]
        configuration = {key: _scalar(row[key]) for key in self.keys}
        return float(values[best]), configuration

    def known_designs(self) -> tuple[str | None, dict[Any, pd.DataFrame]]:
        """Every recorded configuration (failed ones included: measuring them is a real,
        recorded failure) per input value: any other is absent from the data, an invalid
        result that would cost an evaluation and teach nothing."""
        designs = {
            value: table.records[list(self.keys)].reset_index(drop=True)
            for value, table in self.tables.items()
        }
        return self.input_name, designs

    def valid_configurations(self, input_value: Any = None) -> pd.DataFrame:
        """The ok records (design columns and objective) of one input, or of all inputs (with
        the input column) when ``input_value`` is None and the replay has an input."""
        if self.input_name is not None and input_value is None:
            frames = []
            for value, table in self.tables.items():
                frame = _ok_rows(table, self.keys, self.objective)
                frame.insert(0, self.input_name, value)
                frames.append(frame)
            return pd.concat(frames, ignore_index=True)
        return _ok_rows(self._table(input_value), self.keys, self.objective)


# ------------------------------------------------------------------------------------ helpers
def _as_lookup(column: pd.Series, kind: str) -> np.ndarray:
    """Values in the form the lookup index holds: float64 for numbers, str for categories."""
    if kind in ("int", "float", "bool"):
        series = pd.Series(column)
        if series.dtype == bool:
            series = series.astype(np.float64)
        numbers = pd.to_numeric(series, errors="coerce")
        return np.asarray(numbers, dtype=np.float64)
    values = pd.Series(column).to_numpy(dtype=object)
    return np.array(
        [v if isinstance(v, str) else (None if _missing(v) else str(v)) for v in values],
        dtype=object,
    )


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _count(raw: Any) -> int:
    """Number of times in a raw_times JSON list of numbers (at least 1 for a measured row)."""
    text = str(raw).strip()
    return text.count(",") + 1 if text not in ("", "[]") else 1


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _ok_rows(table: ReplayTable, keys: Sequence[str], objective: str) -> pd.DataFrame:
    records = table.records
    return records.loc[records["status"] == OK, [*keys, objective]].reset_index(drop=True)
