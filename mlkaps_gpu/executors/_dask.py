"""Measure batches on Dask workers.

Life cycle: the client process holds a :class:`DaskExecutor` bound to a ``distributed.Client``
and a picklable *executor factory* (never a live executor: C and CUDA executors hold worker
processes and devices). Each task carries the factory; the worker builds its executor on its
first task and keeps it in a per-process cache keyed by ``factory.key``, so every later task on
that worker reuses it. :meth:`DaskExecutor.close` closes the cached executors on every worker.

Failures:

* a task whose worker dies is rescheduled by the scheduler until it has been involved in more
  worker deaths than the scheduler's ``distributed.scheduler.allowed-failures`` (the campaign's
  own clusters use 1: retried once); it then comes back as ``runtime_error`` rows whose message
  names the lost worker (:meth:`DaskExecutor.collect`);
* an exception raised by the task itself (the executor cannot be built, a broken executor) is
  retried once by Dask (``retries``) and then raised in the client, like a sequential
  ``Executor.run`` would raise it.

Dask is imported only when a :class:`DaskExecutor` is used: importing this module does not
need it.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import RUNTIME_ERROR, Executor, empty_results

if TYPE_CHECKING:
    from distributed import Client, Future


class ExecutorFactory(Protocol):
    """A picklable recipe for an executor, built once per worker process.

    Attributes:
        key: identifies the executor the factory builds (equal keys, same executor): the
            worker-side cache key.
    """

    @property
    def key(self) -> str: ...

    def __call__(self) -> Executor: ...


@dataclass
class Measured:
    """What a worker sends back for one task."""

    results: pd.DataFrame
    seconds: float
    worker: str


class DaskExecutor(Executor):
    """An executor that measures on Dask workers.

    :meth:`run` (synchronous) splits the rows into ``chunks`` tasks, waits for all of them and
    returns the results in row order; :meth:`submit` and :meth:`collect` let a loop keep several
    tasks in flight.

    Args:
        factory: builds the real executor on each worker.
        client: a connected ``distributed.Client``.
        objectives: the objective columns of the real executor.
        chunks: how many tasks one :meth:`run` call is split into (usually the worker count).
        retries: Dask retries of a task that raised an exception.
    """

    def __init__(
        self,
        factory: ExecutorFactory,
        *,
        client: Client,
        objectives: Sequence[str],
        chunks: int = 1,
        retries: int = 1,
    ) -> None:
        if chunks < 1:
            raise ValueError(f"DaskExecutor: chunks must be >= 1, got {chunks}")
        self.factory = factory
        self.client = client
        self.objectives = tuple(objectives)
        self.chunks = int(chunks)
        self.retries = int(retries)
        self.executor_seconds = 0.0

    # ------------------------------------------------------------------ asynchronous API
    def split(self, rows: pd.DataFrame) -> list[pd.DataFrame]:
        """``rows`` cut into at most ``chunks`` contiguous, nearly equal parts."""
        rows = rows.reset_index(drop=True)
        parts = np.array_split(np.arange(len(rows)), min(self.chunks, max(1, len(rows))))
        return [rows.iloc[part].reset_index(drop=True) for part in parts if len(part)]

    def submit(self, rows: pd.DataFrame) -> Future:
        """Start measuring ``rows`` on one worker; returns the Dask future."""
        return self.client.submit(
            measure_on_worker,
            self.factory,
            rows.reset_index(drop=True),
            retries=self.retries,
            pure=False,
        )

    def collect(self, future: Future, rows: pd.DataFrame) -> pd.DataFrame:
        """The results of a finished task; ``runtime_error`` rows when its workers died.

        Raises:
            Exception: whatever the task raised (after its Dask retries).
        """
        from distributed import KilledWorker

        try:
            measured: Measured = future.result()
        except KilledWorker as error:
            return lost_worker_results(self.objectives, len(rows), error)
        self.executor_seconds += measured.seconds
        return measured.results

    def capacity(self) -> int:
        """Threads the cluster has now (at least 1): how many tasks can run at once."""
        return max(1, sum(self.client.nthreads().values()))

    # ------------------------------------------------------------------- Executor API
    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        parts = self.split(rows)
        futures = [self.submit(part) for part in parts]
        try:
            results = [self.collect(f, part) for f, part in zip(futures, parts, strict=True)]
        except BaseException:
            self.client.cancel(futures)
            raise
        return pd.concat(results, ignore_index=True)

    def close(self) -> None:
        """Close the executors the workers built for this factory (best effort)."""
        try:
            self.client.run(close_worker_executors, self.factory.key)
        except (OSError, RuntimeError, ValueError):  # a closed client or cluster: nothing to do
            pass


def lost_worker_results(objectives: Sequence[str], n: int, error: BaseException) -> pd.DataFrame:
    """``n`` ``runtime_error`` results naming the worker whose death failed the task."""
    worker = getattr(getattr(error, "last_worker", None), "address", None) or "unknown"
    attempts = int(getattr(error, "allowed_failures", 0)) + 1
    message = (
        f"lost worker {worker}: the worker measuring these rows died "
        f"({attempts} attempt{'s' if attempts > 1 else ''})"
    )
    results = empty_results(objectives).reindex(range(n))
    results["status"] = RUNTIME_ERROR
    results["n_repeats"] = 0
    results["raw_times"] = "[]"
    results["message"] = message
    for name in objectives:
        results[name] = np.nan
    return results.astype({"n_repeats": np.int64, "status": object, "message": object})


# ------------------------------------------------------------------------- worker side
_EXECUTORS: dict[str, Executor] = {}
_LOCK = threading.Lock()
_CLEANUP_REGISTERED = False


def worker_executor(factory: ExecutorFactory) -> Executor:
    """This process's executor for ``factory`` (built on first use, then reused)."""
    global _CLEANUP_REGISTERED
    with _LOCK:
        executor = _EXECUTORS.get(factory.key)
        if executor is None:
            executor = factory()
            _EXECUTORS[factory.key] = executor
            if not _CLEANUP_REGISTERED:
                atexit.register(close_worker_executors)
                _CLEANUP_REGISTERED = True
        return executor


def measure_on_worker(factory: ExecutorFactory, rows: pd.DataFrame) -> Measured:
    """The Dask task: measure ``rows`` with this worker's executor."""
    from distributed import get_worker

    executor = worker_executor(factory)
    started = time.perf_counter()
    results = executor.run(rows)
    seconds = time.perf_counter() - started
    try:
        address = get_worker().address
    except ValueError:  # not on a worker (a synchronous test scheduler)
        address = "local"
    return Measured(results, seconds, address)


def close_worker_executors(key: str | None = None) -> int:
    """Close and forget this process's cached executors (all, or the one for ``key``)."""
    with _LOCK:
        keys = [key] if key is not None else list(_EXECUTORS)
        closing: list[Callable[[], None]] = [
            _EXECUTORS.pop(k).close for k in keys if k in _EXECUTORS
        ]
    for close in closing:
        close()
    return len(closing)
