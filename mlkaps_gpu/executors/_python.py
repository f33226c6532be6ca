"""Python callable executor: a cheap model kernel, or a Python routine timed by the executor.

Two modes:

* model (default): ``function(row: dict) -> float | dict[str, float]`` returns the objective
  values itself (a synthetic or analytical kernel). With ``repeats > 1`` it is called that many
  times and each objective is the median.
* ``measure=True``: ``function(**row)`` is the routine to time; the executor calls it ``warmup``
  times untimed then ``repeats`` times timed, and the objective (seconds) is the median.

An exception raised by the function, or a missing objective, is a ``runtime_error`` result with
the reason as message; a value that cannot be a measurement is ``invalid_measurement`` (see
:class:`~mlkaps_gpu.executors.Executor`); neither is ever raised.

**Isolation.** A function given by reference (``"module:function"`` or ``"kernels.py:function"``,
the form a configuration uses) runs in a worker process (the measurement worker of the C
kernels), never in the campaign's process: a kernel that segfaults, calls ``os._exit``, hangs
past ``timeout_s`` per call or allocates past ``memory_limit_mib`` ends that worker only; its row
is stored as ``runtime_error`` or ``timeout`` and the next row gets a fresh worker. The worker is
the leader of its own process group, so processes the kernel forked are killed with it. A
callable object runs in-process unless ``isolate=True`` (then it must be picklable: a
module-level function).
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import plain
from mlkaps_gpu.executors._base import OK, RUNTIME_ERROR, Executor, ExecutorError, encode_times
from mlkaps_gpu.executors._python_function import (
    TIMERS,
    Failure,
    RowEvaluator,
    summarize_samples,
)
from mlkaps_gpu.executors._python_loader import load_function, resolve_reference

#: Seconds one call of an isolated Python kernel may take before it is killed (``timeout``).
DEFAULT_TIMEOUT_S = 60.0


class PythonExecutor(Executor):
    """Evaluate rows with a Python callable.

    Args:
        function: the model (``function(row) -> value or {objective: value}``) or, with
            ``measure``, the routine called as ``function(**row)``; a callable, or a reference
            ``"module:function"`` / ``"path/to/file.py:function"``.
        objectives: names of the objective columns (``measure`` allows exactly one).
        repeats: calls per row whose results are kept (the objective is their median).
        warmup: untimed calls before the kept ones (``measure`` mode).
        timer: ``"wall"`` (``time.perf_counter``) or ``"cpu"`` (``time.process_time``).
        measure: time ``function(**row)`` instead of asking it for the objectives.
        base: folder a relative file reference is relative to (the configuration's folder).
        isolate: run the function in a worker process; default: yes for a reference, no for
            a callable object.
        timeout_s: seconds one call may take in the worker (None: no limit).
        memory_limit_mib: MiB the worker may map beyond what it maps once started (None: no
            cap).
    """

    def __init__(
        self,
        function: Callable[..., Any] | str,
        *,
        objectives: Sequence[str] = ("time",),
        repeats: int = 1,
        warmup: int = 0,
        timer: Literal["wall", "cpu"] = "wall",
        measure: bool = False,
        base: str | Path | None = None,
        isolate: bool | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        memory_limit_mib: float | None = None,
    ) -> None:
        self.objectives = tuple(objectives)
        self._check(repeats, warmup, timer, measure)
        self.repeats, self.warmup, self.timer, self.measure = repeats, warmup, timer, measure
        if measure:
            self.timed_objectives = self.objectives
        if timeout_s is not None and not timeout_s > 0:
            raise ExecutorError(f"PythonExecutor: timeout_s must be > 0, got {timeout_s!r}")
        if memory_limit_mib is not None and not memory_limit_mib > 0:
            raise ExecutorError(
                f"PythonExecutor: memory_limit_mib must be > 0, got {memory_limit_mib!r}"
            )
        self.timeout_s = timeout_s
        self.memory_limit_mib = memory_limit_mib
        base_folder = Path(base) if base is not None else None
        self.reference = (
            resolve_reference(function, base_folder) if isinstance(function, str) else None
        )
        self.function = (
            load_function(function, base_folder) if isinstance(function, str) else function
        )
        if not callable(self.function):
            raise ExecutorError(f"PythonExecutor: {function!r} is not callable")
        self.isolate = isinstance(function, str) if isolate is None else bool(isolate)
        self._evaluator = RowEvaluator(
            self.function,
            objectives=self.objectives,
            repeats=repeats,
            warmup=warmup,
            timer=timer,
            measure=measure,
        )
        self._workers: dict[int, Any] = {}
        self._closed_starts = 0
        self._lock = threading.Lock()
        if self.isolate and self.reference is None:
            self.reference = _reference_of(self.function)

    def _check(self, repeats: int, warmup: int, timer: str, measure: bool) -> None:
        if not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise ExecutorError("PythonExecutor: objectives must be distinct names, at least one")
        if measure and len(self.objectives) != 1:
            raise ExecutorError("PythonExecutor: measure=True produces exactly one objective")
        if not isinstance(repeats, int) or repeats < 1:
            raise ExecutorError(f"PythonExecutor: repeats must be an integer >= 1, got {repeats!r}")
        if not isinstance(warmup, int) or warmup < 0:
            raise ExecutorError(f"PythonExecutor: warmup must be an integer >= 0, got {warmup!r}")
        if timer not in TIMERS:
            raise ExecutorError(f"PythonExecutor: timer must be one of {sorted(TIMERS)}")

    # ------------------------------------------------------------------------------ rows
    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        values = {name: np.full(len(rows), np.nan) for name in self.objectives}
        status = np.full(len(rows), OK, dtype=object)
        message = np.full(len(rows), "", dtype=object)
        raw_times = np.full(len(rows), "[]", dtype=object)
        n_repeats = np.zeros(len(rows), dtype=np.int64)
        evaluate = self._in_worker if self.isolate else self._in_process
        for i, row in enumerate(rows.to_dict("records")):
            result = evaluate({str(k): plain(v) for k, v in row.items()})
            status[i], message[i] = result["status"], result.get("message", "")
            if result["status"] != OK:
                continue
            for name in self.objectives:
                values[name][i] = result["values"][name]
            raw_times[i] = encode_times(result["times"])
            n_repeats[i] = len(result["times"])
        return pd.DataFrame(
            {
                **values,
                "status": pd.Series(status, dtype=object),
                "n_repeats": n_repeats,
                "raw_times": pd.Series(raw_times, dtype=object),
                "message": pd.Series(message, dtype=object),
            }
        )

    def _in_process(self, row: dict[str, Any]) -> dict[str, Any]:
        try:
            samples = self._evaluator.evaluate(row)
        except Failure as failure:
            return {"status": RUNTIME_ERROR, "message": str(failure)}
        first = self.objectives[0]
        return {"status": OK, "values": summarize_samples(samples), "times": samples[first]}

    def _in_worker(self, row: dict[str, Any]) -> dict[str, Any]:
        # one worker per calling thread (Dask runs tasks of one executor in several threads)
        thread = threading.get_ident()
        with self._lock:
            worker = self._workers.get(thread)
            if worker is None:
                from mlkaps_gpu.executors._worker_handle import WorkerHandle

                worker = WorkerHandle(
                    "mlkaps_gpu.executors._python_runner:make_runner", self._runner_config()
                )
                self._workers[thread] = worker
        timeout = self.timeout_s if self.timeout_s is not None else float("inf")
        return dict(worker.measure({"row": row}, timeout))

    def _runner_config(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "objectives": list(self.objectives),
            "repeats": self.repeats,
            "warmup": self.warmup,
            "timer": self.timer,
            "measure": self.measure,
            "memory_limit_mib": self.memory_limit_mib,
        }

    @property
    def worker_starts(self) -> int:
        """Worker processes started so far (1 + restarts after crashes and timeouts)."""
        with self._lock:
            live = sum(int(worker.starts) for worker in self._workers.values())
            return self._closed_starts + live

    def close(self) -> None:
        """Stop the worker processes (one per thread that ran rows). Safe to call twice; a
        later :meth:`run` starts new ones."""
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
            self._closed_starts += sum(int(worker.starts) for worker in workers)
        for worker in workers:
            worker.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # workers belong to the process that started them
        del state["_workers"], state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._workers = {}
        self._lock = threading.Lock()


def _reference_of(function: Callable[..., Any]) -> str:
    """``module:qualname`` of a module-level function, for the worker to import."""
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", "")
    try:
        pickle.dumps(function)
    except Exception as error:  # noqa: BLE001 - any pickling failure means the same
        raise ExecutorError(
            f"PythonExecutor: {function!r} cannot run in a worker process ({error}); give a "
            "module-level function or a reference 'module:function'"
        ) from None
    if not module or "." in name or "<" in name:
        raise ExecutorError(
            f"PythonExecutor: {function!r} cannot run in a worker process; give a module-level "
            "function or a reference 'module:function'"
        )
    return f"{module}:{name}"
