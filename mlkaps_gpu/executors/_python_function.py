"""Python kernels: evaluating one row (the references are loaded by
:mod:`~mlkaps_gpu.executors._python_loader`).

Used in the campaign's process (by an executor that runs in-process) and in the measurement
worker (:mod:`~mlkaps_gpu.executors._python_runner`), so both evaluate a row the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mlkaps_gpu.executors._timing import TimingPolicy, collect_times

TIMERS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


class Failure(Exception):  # noqa: N818 - a failed row, never escapes the executor
    """A row's evaluation failed; the message is the reason.

    Attributes:
        restart: the process that evaluated it should be replaced (memory exhausted).
    """

    def __init__(self, message: str, *, restart: bool = False) -> None:
        super().__init__(message)
        self.restart = restart


class RowEvaluator:
    """Evaluates one row with a Python function (see :class:`PythonExecutor` for the modes).

    Args:
        function: the model or the routine to time.
        objectives, repeats, warmup, timer, measure: as :class:`PythonExecutor`.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        objectives: Sequence[str],
        repeats: int,
        warmup: int,
        timer: str,
        measure: bool,
    ) -> None:
        self.function = function
        self.objectives = tuple(objectives)
        self.repeats = repeats
        self.warmup = warmup
        self.timer = timer
        self.measure = measure

    def evaluate(
        self, row: Mapping[str, Any], before_call: Callable[[str], None] | None = None
    ) -> dict[str, list[float]]:
        """Samples per objective (one per kept call).

        Args:
            row: parameter values.
            before_call: told ``"warm-up call i"`` / ``"call i of n"`` before each call.

        Raises:
            Failure: the function raised, or returned no usable value.
        """
        announce = before_call or (lambda _what: None)
        if self.measure:
            return self._time(dict(row), announce)
        return self._model(dict(row), announce)

    def _model(
        self, row: dict[str, Any], announce: Callable[[str], None]
    ) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {name: [] for name in self.objectives}
        for index in range(self.repeats):
            announce(f"call {index + 1} of {self.repeats}")
            try:
                result = self.function(dict(row))
            except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
                raise _failure(exc) from None
            for name, value in self._objective_values(result).items():
                samples[name].append(value)
        return samples

    def _objective_values(self, result: Any) -> dict[str, float]:
        if isinstance(result, Mapping):
            missing = [name for name in self.objectives if name not in result]
            if missing:
                raise Failure(f"function returned no value for {missing}")
            raw = {name: result[name] for name in self.objectives}
        elif len(self.objectives) == 1:
            raw = {self.objectives[0]: result}
        else:
            raise Failure(
                f"function returned {type(result).__name__}; expected a dict with "
                f"{list(self.objectives)}"
            )
        out = {}
        for name, value in raw.items():
            try:
                out[name] = float(value)
            except (TypeError, ValueError):
                raise Failure(f"'{name}' is not a number: {value!r}") from None
        return out

    def _time(self, row: dict[str, Any], announce: Callable[[str], None]) -> dict[str, list[float]]:
        clock = TIMERS[self.timer]
        calls = [0, 0]  # warm-up calls, timed calls

        def run_once(index: int, timed: bool) -> float:
            calls[timed] += 1
            if timed:
                announce(f"call {calls[1]} of {self.repeats}")
            else:
                announce(f"warm-up call {calls[0]}")
            start = clock()
            self.function(**row)
            return clock() - start

        policy = TimingPolicy(warmup=self.warmup, repeats=self.repeats)
        try:
            times = collect_times(run_once, policy)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
            raise _failure(exc) from None
        return {self.objectives[0]: times}


def summarize_samples(samples: Mapping[str, list[float]]) -> dict[str, float]:
    """The objective values of a row: the median of its samples (NaN kept: the executor marks
    a non-finite value as an impossible measurement)."""
    out = {}
    for name, values in samples.items():
        array = np.asarray(values, dtype=np.float64)
        out[name] = math.nan if np.isnan(array).any() else float(np.median(array))
    return out


def _failure(exc: BaseException) -> Failure:
    if isinstance(exc, MemoryError):
        return Failure(f"out of memory ({describe(exc)})", restart=True)
    return Failure(describe(exc))


def one_line(exc: BaseException) -> str:
    """An exception's text on one line."""
    return " ".join(str(exc).split())


def describe(exc: BaseException) -> str:
    """One-line ``Type: text`` of an exception."""
    text = one_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
