"""Python callable executor: a cheap model kernel, or a Python routine timed by the executor.

Two modes:

* model (default): ``function(row: dict) -> float | dict[str, float]`` returns the objective
  values itself (a synthetic or analytical kernel). With ``repeats > 1`` it is called that many
  times and each objective is the median.
* ``measure=True``: ``function(**row)`` is the routine to time; the executor calls it ``warmup``
  times untimed then ``repeats`` times timed, and the objective (seconds) is the median.

An exception raised by the function, a missing objective or a non-finite value is a
``runtime_error`` result with the reason as message; it is never raised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import OK, RUNTIME_ERROR, Executor, ExecutorError, encode_times

_TIMERS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


class _Failure(Exception):  # noqa: N818 - internal signal, never escapes
    """A row's measurement failed; the message is the reason."""


class PythonExecutor(Executor):
    """Evaluate rows with a Python callable.

    Args:
        function: the model (``function(row) -> value or {objective: value}``) or, with
            ``measure``, the routine called as ``function(**row)``.
        objectives: names of the objective columns (``measure`` allows exactly one).
        repeats: calls per row whose results are kept (the objective is their median).
        warmup: untimed calls before the kept ones (``measure`` mode).
        timer: ``"wall"`` (``time.perf_counter``) or ``"cpu"`` (``time.process_time``).
        measure: time ``function(**row)`` instead of asking it for the objectives.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        objectives: Sequence[str] = ("time",),
        repeats: int = 1,
        warmup: int = 0,
        timer: Literal["wall", "cpu"] = "wall",
        measure: bool = False,
    ) -> None:
        if not callable(function):
            raise ExecutorError(f"PythonExecutor: {function!r} is not callable")
        self.objectives = tuple(objectives)
        if not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise ExecutorError("PythonExecutor: objectives must be distinct names, at least one")
        if measure and len(self.objectives) != 1:
            raise ExecutorError("PythonExecutor: measure=True produces exactly one objective")
        if not isinstance(repeats, int) or repeats < 1:
            raise ExecutorError(f"PythonExecutor: repeats must be an integer >= 1, got {repeats!r}")
        if not isinstance(warmup, int) or warmup < 0:
            raise ExecutorError(f"PythonExecutor: warmup must be an integer >= 0, got {warmup!r}")
        if timer not in _TIMERS:
            raise ExecutorError(f"PythonExecutor: timer must be one of {sorted(_TIMERS)}")
        self.function = function
        self.repeats = repeats
        self.warmup = warmup
        self.timer = timer
        self.measure = measure

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        values = {name: np.full(len(rows), np.nan) for name in self.objectives}
        status = np.full(len(rows), OK, dtype=object)
        message = np.full(len(rows), "", dtype=object)
        raw_times = np.full(len(rows), "[]", dtype=object)
        n_repeats = np.zeros(len(rows), dtype=np.int64)
        evaluate = self._time if self.measure else self._model
        for i, row in enumerate(rows.to_dict("records")):
            try:
                samples = evaluate({str(k): v for k, v in row.items()})
            except _Failure as failure:
                status[i], message[i] = RUNTIME_ERROR, str(failure)
                continue
            for name in self.objectives:
                values[name][i] = float(np.median(samples[name]))
            raw_times[i] = encode_times(samples[self.objectives[0]])
            n_repeats[i] = len(samples[self.objectives[0]])
        return pd.DataFrame(
            {
                **values,
                "status": pd.Series(status, dtype=object),
                "n_repeats": n_repeats,
                "raw_times": pd.Series(raw_times, dtype=object),
                "message": pd.Series(message, dtype=object),
            }
        )

    def _model(self, row: dict[str, Any]) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {name: [] for name in self.objectives}
        for _ in range(self.repeats):
            try:
                result = self.function(dict(row))
            except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
                raise _Failure(_describe(exc)) from None
            for name, value in self._objective_values(result).items():
                samples[name].append(value)
        return samples

    def _objective_values(self, result: Any) -> dict[str, float]:
        if isinstance(result, Mapping):
            missing = [name for name in self.objectives if name not in result]
            if missing:
                raise _Failure(f"function returned no value for {missing}")
            raw = {name: result[name] for name in self.objectives}
        elif len(self.objectives) == 1:
            raw = {self.objectives[0]: result}
        else:
            raise _Failure(
                f"function returned {type(result).__name__}; expected a dict with "
                f"{list(self.objectives)}"
            )
        out = {}
        for name, value in raw.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise _Failure(f"'{name}' is not a number: {value!r}") from None
            if not math.isfinite(number):
                raise _Failure(f"'{name}' is not finite: {number}")
            out[name] = number
        return out

    def _time(self, row: dict[str, Any]) -> dict[str, list[float]]:
        clock = _TIMERS[self.timer]
        times: list[float] = []
        try:
            for _ in range(self.warmup):
                self.function(**row)
            for _ in range(self.repeats):
                start = clock()
                self.function(**row)
                times.append(clock() - start)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
            raise _Failure(_describe(exc)) from None
        return {self.objectives[0]: times}


def _describe(exc: BaseException) -> str:
    """One-line ``Type: text`` of an exception."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
