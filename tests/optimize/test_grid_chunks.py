"""Grid chunks: the NSGA-II result does not depend on how chunks are mapped (threads, Dask)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import Surrogate


class Bowl(Surrogate):
    def _fit(self, features: np.ndarray, target: np.ndarray) -> None:  # pragma: no cover
        pass

    def _predict(self, features: np.ndarray) -> np.ndarray:
        n, block, tile = features.T
        return np.log(block / np.sqrt(n)) ** 2 + (tile - 3) ** 2 / 4


def _space() -> Space:
    return Space(
        [Parameter("n", "int", low=8, high=4096, log=True)],
        [
            Parameter("block", "int", values=(1, 2, 4, 8, 16, 32, 64)),
            Parameter("tile", "int", low=1, high=8),
        ],
        ["block <= n"],
    )


def _run(map_chunks=None) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    optimizer = GridOptimizer(
        _space(),
        method="nsga2",
        population=12,
        generations=10,
        seed=5,
        chunk_size=7,
        map_chunks=map_chunks,
    )
    return optimizer.run([Bowl()], _space().grid(30))


def test_chunk_mapping_does_not_change_the_result() -> None:
    sequential = _run()

    def reversed_threads(function, items):  # type: ignore[no-untyped-def]
        with ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(function, item) for item in reversed(items)]
        return [f.result() for f in reversed(futures)]

    assert sequential.equals(_run(reversed_threads))
    assert _space().is_valid(sequential[_space().names]).all()


def test_dask_workers_give_the_single_process_result() -> None:
    distributed = pytest.importorskip("distributed")
    sequential = _run()
    with (
        distributed.LocalCluster(
            n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        result = _run(
            lambda function, items: client.gather(client.map(function, items, pure=False))
        )
    assert sequential.equals(result)
