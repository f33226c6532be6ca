"""DaskExecutor: measure on Dask workers, one executor per worker, failures as results."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors import (
    RESULT_COLUMNS,
    RUNTIME_ERROR,
    Executor,
    ExecutorError,
    PythonExecutor,
)
from mlkaps_gpu.executors._dask import (
    DaskExecutor,
    close_worker_executors,
    lost_worker_results,
    worker_executor,
)

distributed = pytest.importorskip("distributed")

BUILDS: dict[str, int] = {}
CLOSED: list[str] = []


def _model(row: dict[str, Any]) -> float:
    return math.log(row["block"] / math.sqrt(row["n"])) ** 2


class _CountingExecutor(PythonExecutor):
    def __init__(self, key: str) -> None:
        super().__init__(_model)
        self.key = key

    def close(self) -> None:
        CLOSED.append(self.key)


@dataclass
class CountingFactory:
    """Builds a PythonExecutor and counts the builds (in-process workers share this module)."""

    key: str

    def __call__(self) -> Executor:
        BUILDS[self.key] = BUILDS.get(self.key, 0) + 1
        return _CountingExecutor(self.key)


@dataclass
class BrokenFactory:
    key: str

    def __call__(self) -> Executor:
        BUILDS[self.key] = BUILDS.get(self.key, 0) + 1
        raise ExecutorError("cannot build the kernel (test)")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    )
    with distributed.Client(cluster) as connected:
        yield connected
    cluster.close()


def _rows(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"n": rng.integers(16, 4096, n), "block": rng.choice([4, 8, 16, 32], n)})


def test_run_matches_the_local_executor_in_row_order(client: Any) -> None:
    rows = _rows(23)
    executor = DaskExecutor(CountingFactory("order"), client=client, objectives=["time"], chunks=4)
    assert [len(part) for part in executor.split(rows)] == [6, 6, 6, 5]
    results = executor.run(rows)
    expected = PythonExecutor(_model).run(rows)
    pd.testing.assert_frame_equal(results, expected)
    # one executor per worker process (both in-process workers share one cache)
    assert BUILDS["order"] == 1
    executor.run(rows.iloc[:3])
    assert BUILDS["order"] == 1
    assert executor.executor_seconds > 0
    executor.close()
    assert "order" in CLOSED
    assert client.run(close_worker_executors, "order") == {
        address: 0 for address in client.nthreads()
    }


def test_split_never_makes_empty_parts(client: Any) -> None:
    executor = DaskExecutor(CountingFactory("split"), client=client, objectives=["time"], chunks=8)
    assert [len(p) for p in executor.split(_rows(3))] == [1, 1, 1]
    assert executor.split(_rows(0)) == []
    with pytest.raises(ValueError, match="chunks"):
        DaskExecutor(CountingFactory("x"), client=client, objectives=["time"], chunks=0)


def test_an_executor_that_cannot_be_built_is_retried_once_then_raised(client: Any) -> None:
    executor = DaskExecutor(BrokenFactory("broken"), client=client, objectives=["time"], retries=1)
    with pytest.raises(ExecutorError, match="cannot build"):
        executor.run(_rows(4))
    assert BUILDS["broken"] == 2  # the first attempt and one Dask retry


class _KilledFuture:
    """A finished future whose workers all died (what the scheduler reports)."""

    def result(self) -> Any:
        worker = SimpleNamespace(address="tcp://10.0.0.7:4242")
        raise distributed.KilledWorker("measure-123", worker, 1)


def test_a_task_whose_workers_died_comes_back_as_runtime_error_rows(client: Any) -> None:
    executor = DaskExecutor(CountingFactory("lost"), client=client, objectives=["time", "energy"])
    results = executor.collect(_KilledFuture(), _rows(3))  # type: ignore[arg-type]
    assert list(results["status"]) == [RUNTIME_ERROR] * 3
    assert results["time"].isna().all() and results["energy"].isna().all()
    assert list(results["n_repeats"]) == [0, 0, 0]
    assert all("lost worker tcp://10.0.0.7:4242" in m for m in results["message"])
    assert all("2 attempts" in m for m in results["message"])
    # the rows are valid executor results (what the store expects)
    assert list(results.columns) == ["time", "energy", *RESULT_COLUMNS]


def test_lost_worker_results_without_worker_details() -> None:
    results = lost_worker_results(("time",), 2, RuntimeError("boom"))
    assert list(results["status"]) == [RUNTIME_ERROR] * 2
    assert results["message"].str.contains("lost worker unknown").all()


def test_worker_executor_is_cached_per_key() -> None:
    first = worker_executor(CountingFactory("cache"))
    assert worker_executor(CountingFactory("cache")) is first
    assert worker_executor(CountingFactory("cache-2")) is not first
    assert close_worker_executors() >= 2
    assert worker_executor(CountingFactory("cache")) is not first
    close_worker_executors()


def test_importing_the_package_does_not_import_dask() -> None:
    code = (
        "import sys\n"
        "import mlkaps_gpu, mlkaps_gpu.executors, mlkaps_gpu.executors._dask\n"
        "import mlkaps_gpu.campaign, mlkaps_gpu.campaign._distributed\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m.split('.')[0] in ('dask', 'distributed', 'dask_jobqueue'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
