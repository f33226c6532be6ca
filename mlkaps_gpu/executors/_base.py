"""The executor extension point: measure a batch of configurations.

Life cycle: the campaign builds an executor once, then calls :meth:`Executor.run` with batches of
rows (one column per input and design parameter); each call returns one result row per input row,
in the same order. A failed measurement is a *result* (a status other than ``ok``), never an
exception: it is stored like any other and never retried silently. ``close`` releases worker
processes, compiled modules or devices.

A result that cannot be a measurement (an objective that is NaN or infinite, or a duration that
is zero or negative) is stored with the status ``invalid_measurement`` and no objective values,
whatever the executor said: such a value would otherwise reach the model (and a log-scale target
would break on it).
"""

from __future__ import annotations

import abc
import json
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import pandas as pd

#: Allowed values of the ``status`` column.
STATUSES: tuple[str, ...] = (
    "ok",
    "invalid",
    "compile_error",
    "runtime_error",
    "timeout",
    "invalid_measurement",
)
OK = "ok"
INVALID = "invalid"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
INVALID_MEASUREMENT = "invalid_measurement"

#: Bookkeeping columns every result table has, besides one column per objective.
RESULT_COLUMNS: tuple[str, ...] = ("status", "n_repeats", "raw_times", "message")


class ExecutorError(RuntimeError):
    """The executor itself cannot work (bad setup); distinct from a failed measurement."""


class Executor(abc.ABC):
    """Base class of every executor.

    Subclasses implement :meth:`_run`, which receives the validated batch and returns a table
    with the objective columns and ``status``; the public :meth:`run` fills in the bookkeeping
    columns, checks the shape and keeps row order.

    Attributes:
        objectives: names of the objective columns this executor produces.
        timed_objectives: the objectives that are measured durations (must be > 0); None:
            those named ``time``.
    """

    objectives: tuple[str, ...] = ("time",)
    timed_objectives: tuple[str, ...] | None = None

    def run(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Measure every row; returns one result row per input row, same order and index."""
        rows = rows.reset_index(drop=True)
        if len(rows) == 0:
            return empty_results(self.objectives)
        result = self._run(rows).reset_index(drop=True)
        if len(result) != len(rows):
            raise ExecutorError(
                f"{type(self).__name__} returned {len(result)} results for {len(rows)} rows"
            )
        for column in self.objectives:
            if column not in result:
                result[column] = np.nan
        if "status" not in result:
            raise ExecutorError(f"{type(self).__name__} returned no 'status' column")
        unknown = set(result["status"]) - set(STATUSES)
        if unknown:
            raise ExecutorError(f"{type(self).__name__} returned unknown status {sorted(unknown)}")
        if "n_repeats" not in result:
            result["n_repeats"] = (result["status"] == OK).astype(np.int64)
        if "raw_times" not in result:
            result["raw_times"] = "[]"
        if "message" not in result:
            result["message"] = ""
        for column in self.objectives:
            result[column] = result[column].astype(np.float64)
        self._screen(result)
        failed = result["status"] != OK
        for column in self.objectives:
            result.loc[failed, column] = np.nan
        return result[[*self.objectives, *RESULT_COLUMNS]]

    def _screen(self, result: pd.DataFrame) -> None:
        """Mark ``ok`` rows whose values cannot be measurements ``invalid_measurement``."""
        timed = (
            self.timed_objectives
            if self.timed_objectives is not None
            else tuple(o for o in self.objectives if o == "time")
        )
        ok = (result["status"] == OK).to_numpy().copy()
        for column in self.objectives:
            values = result[column].to_numpy(dtype=np.float64)
            bad = ok & ~np.isfinite(values)
            if column in timed:
                bad |= ok & (values <= 0)
            if bad.any():
                texts = [
                    f"{column} = {value!r} is not a possible measurement "
                    + ("(a duration must be finite and > 0)" if column in timed else "(not finite)")
                    for value in values[bad].tolist()
                ]
                result.loc[bad, "status"] = INVALID_MEASUREMENT
                result.loc[bad, "message"] = texts
                result.loc[bad, "n_repeats"] = 0
                ok &= ~bad

    @abc.abstractmethod
    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Measure ``rows``; return objectives and ``status`` (optionally the other columns)."""

    def known_designs(self) -> tuple[str | None, dict[Any, pd.DataFrame]] | None:
        """The only design configurations that exist, where the executor knows them before
        measuring (a replay's data): ``(input_name, {input value: design table})``, the input
        that selects the set (None: one set for every input point, under the key None); None
        (the default): any configuration the constraints allow may be measured."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (worker processes, devices). Safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def empty_results(objectives: Sequence[str]) -> pd.DataFrame:
    """A result table with no rows: a float column per objective, then ``status``,
    ``n_repeats``, ``raw_times`` and ``message``, in the dtypes :meth:`Executor.run` returns."""
    columns: dict[str, Any] = {name: pd.Series(dtype=np.float64) for name in objectives}
    columns["status"] = pd.Series(dtype=object)
    columns["n_repeats"] = pd.Series(dtype=np.int64)
    columns["raw_times"] = pd.Series(dtype=object)
    columns["message"] = pd.Series(dtype=object)
    return pd.DataFrame(columns)


def encode_times(times: Sequence[float]) -> str:
    """Raw repeat times as the compact JSON text the store keeps."""
    return json.dumps([float(t) for t in times])
