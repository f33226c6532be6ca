"""Strategies on the replayed convolution (skipped without MLKAPS_GPU_DATA): the tabulated
objective answers like the executor, and a run measures only configurations of the data."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.executors import ReplayExecutor
from mlkaps_gpu.search import ExecutorObjective, TabulatedObjective, make_strategy
from mlkaps_gpu.space import Space

CONSTRAINTS = [
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or ((block_size_x*tile_size_x+(filter_width-1))"
    "*(block_size_y*tile_size_y+(filter_height-1))) < 12*1024",
]


@pytest.fixture(scope="module")
def replay() -> tuple[ReplayExecutor, Space]:
    root = os.environ.get("MLKAPS_GPU_DATA")
    path = Path(root or ".") / "convolution_6gpu" / "A100.json.gz"
    if not root or not path.is_file():
        pytest.skip("MLKAPS_GPU_DATA is not set or lacks convolution_6gpu")
    executor = ReplayExecutor.from_files({"gpu": {"A100": path}})
    gpu = executor.input_parameter()
    assert gpu is not None
    return executor, Space([gpu], executor.design_parameters(), CONSTRAINTS)


def test_tabulated_objective_matches_the_executor(replay: tuple[ReplayExecutor, Space]) -> None:
    executor, space = replay
    inputs = {"gpu": "A100"}
    table = TabulatedObjective.from_replay(executor, space, inputs)
    valid = space.valid_design_codes(inputs)
    sample = valid[np.random.default_rng(0).choice(len(valid), 300, replace=False)]
    designs = space.design_from_codes(sample)
    fast_values, fast_status = table(designs)
    slow_values, slow_status = ExecutorObjective(executor, space, inputs)(designs)
    assert np.array_equal(fast_status, slow_status)
    assert np.array_equal(fast_values, slow_values, equal_nan=True)
    assert np.nanmin(table.values) == pytest.approx(executor.optimum("A100")[0])


@pytest.mark.parametrize("name", ["genetic_algorithm", "differential_evolution", "bo_ei"])
def test_runs_measure_only_valid_configurations(
    name: str, replay: tuple[ReplayExecutor, Space]
) -> None:
    executor, space = replay
    objective = TabulatedObjective.from_replay(executor, space, {"gpu": "A100"})
    result = make_strategy(name).run(
        objective, space, {"gpu": "A100"}, 60, np.random.default_rng(0)
    )
    assert result.n_evaluations == 60
    assert set(result.statuses) <= {"ok", "runtime_error", "compile_error"}
    assert result.best_value >= executor.optimum("A100")[0]
