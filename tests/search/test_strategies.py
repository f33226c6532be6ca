"""Contract suite every per-input strategy must pass, on a small synthetic space whose optimum
is known: valid designs only (constraint-aware ones), the budget, memoization, determinism,
finding the optimum at a generous budget."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors import PythonExecutor
from mlkaps_gpu.search import (
    STRATEGIES,
    ExecutorObjective,
    SearchProblem,
    StopSearch,
    SurrogateObjective,
    make_strategy,
)
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import Surrogate

VARIANT = {"x": 1.0, "y": 0.0, "z": 2.0}
INPUTS = {"n": 9}
OPTIMUM = {"a": 5, "b": 3, "variant": "y", "unroll": 4}


def make_space() -> Space:
    return Space(
        [Parameter("n", "int", low=4, high=16)],
        [
            Parameter("a", "int", values=tuple(range(8))),
            Parameter("b", "int", values=tuple(range(6))),
            Parameter("variant", "categorical", values=("x", "y", "z")),
            Parameter("unroll", "int", values=(4,)),  # a constant: no axis in the embedding
        ],
        ["a + b <= n", "variant != 'z' or a >= 2"],
    )


def kernel_time(row: dict[str, Any]) -> float:
    """Best at a=5, b=3, variant y (value 1); a=b=0 fails."""
    if row["a"] == 0 and row["b"] == 0:
        raise RuntimeError("launch failure")
    return (row["a"] - 5) ** 2 + (row["b"] - 3) ** 2 + VARIANT[row["variant"]] + 1.0


class CountingObjective:
    """A table objective that records every design it is asked to measure."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def __call__(self, designs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        values, statuses = [], []
        for row in designs.to_dict(orient="records"):
            self.seen.append((row["a"], row["b"], row["variant"], row["unroll"]))
            try:
                values.append(kernel_time(row))
                statuses.append("ok")
            except RuntimeError:
                values.append(np.nan)
                statuses.append("runtime_error")
        return np.array(values), np.array(statuses, dtype=object)


@pytest.fixture(scope="module")
def space() -> Space:
    return make_space()


@pytest.fixture(scope="module")
def n_valid(space: Space) -> int:
    return len(space.valid_design_codes(INPUTS))


def run(name: str, space: Space, budget: int, seed: int = 0, **options: Any) -> Any:
    objective = CountingObjective()
    result = make_strategy(name).run(
        objective, space, INPUTS, budget, np.random.default_rng(seed), **options
    )
    return result, objective


def full_table(space: Space, designs: pd.DataFrame) -> pd.DataFrame:
    inputs = pd.DataFrame({"n": np.full(len(designs), INPUTS["n"])})
    return space.assemble(inputs, space.design_codes(designs))


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_budget_validity_and_memoization(name: str, space: Space) -> None:
    budget = 30
    result, objective = run(name, space, budget)
    assert result.n_evaluations == budget
    assert result.stop_reason == "budget"
    valid = space.is_valid(full_table(space, result.designs))
    if make_strategy(name).constraint_aware:
        assert valid.all(), f"{name} evaluated invalid designs"
    # invalid designs are never sent to the objective and are marked as such
    assert np.array_equal(result.statuses == "invalid", ~valid)
    # memoization: the objective never measures a design twice, and measured each valid one
    assert len(objective.seen) == len(set(objective.seen)) == int(valid.sum())
    keys = {tuple(row) for row in result.codes.tolist()}
    assert len(keys) == result.n_evaluations
    # failures count as evaluations and have no value
    failed = result.statuses == "runtime_error"
    assert np.isnan(result.values[failed]).all()
    assert np.isfinite(result.values[result.statuses == "ok"]).all()


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_same_seed_same_run(name: str, space: Space) -> None:
    first, _ = run(name, space, 25, seed=3)
    second, _ = run(name, space, 25, seed=3)
    assert np.array_equal(first.codes, second.codes)
    assert np.array_equal(first.values, second.values, equal_nan=True)


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_finds_the_known_optimum(name: str, space: Space, n_valid: int) -> None:
    budget = int(0.8 * n_valid)
    if not make_strategy(name).constraint_aware:
        budget = int(0.8 * space.design_product)
    result, _ = run(name, space, budget, seed=1)
    assert result.best_value == pytest.approx(1.0)
    assert result.best == OPTIMUM


@pytest.mark.parametrize("name", ["genetic_algorithm_unaware", "particle_swarm_unaware"])
def test_invalid_designs_can_be_free(name: str, space: Space) -> None:
    """Kernel Tuner's convention: constraint violations do not consume the budget."""
    result, _ = run(name, space, 30, count_invalid=False)
    assert result.n_evaluations == 30
    assert (result.statuses != "invalid").all()


def test_exhausting_the_space_stops(space: Space, n_valid: int) -> None:
    result, objective = run("genetic_algorithm", space, 10 * n_valid)
    assert result.stop_reason == "exhausted"
    assert result.n_evaluations == n_valid == len(objective.seen)


def test_executor_and_surrogate_objectives(space: Space) -> None:
    executor = PythonExecutor(kernel_time)
    objective = ExecutorObjective(executor, space, INPUTS)
    result = make_strategy("iterated_local_search").run(
        objective, space, INPUTS, 60, np.random.default_rng(0)
    )
    assert result.best == OPTIMUM

    class Bowl(Surrogate):
        def _fit(self, features: np.ndarray, target: np.ndarray) -> None:
            raise AssertionError("not fitted")

        def _predict(self, features: np.ndarray) -> np.ndarray:
            _, a, b, variant, _ = features.T  # columns n, a, b, variant (index), unroll
            return (a - 2) ** 2 + (b - 1) ** 2 + variant

    surrogate = SurrogateObjective(Bowl(), space, INPUTS)
    result = make_strategy("genetic_algorithm").run(
        surrogate, space, pd.DataFrame([INPUTS]), 80, np.random.default_rng(0)
    )
    assert result.best == {"a": 2, "b": 1, "variant": "x", "unroll": 4}


def test_problem_budget_is_exact_within_a_batch(space: Space) -> None:
    objective = CountingObjective()
    problem = SearchProblem(space, INPUTS, objective, 5)
    codes = problem.valid_codes
    assert codes is not None
    batch = np.vstack([codes[:3], codes[:3], codes[3:10]])  # repeats inside the batch
    with pytest.raises(StopSearch, match="budget"):
        problem.evaluate(batch)
    recorded, _, _ = problem.history()
    assert np.array_equal(recorded, codes[:5])
    assert len(objective.seen) == 5


def test_bad_arguments(space: Space) -> None:
    strategy = make_strategy("random_search")
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="budget"):
        strategy.run(CountingObjective(), space, INPUTS, 0, rng)
    with pytest.raises(ValueError, match="input parameter"):
        strategy.run(CountingObjective(), space, {}, 10, rng)
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("hill_climbing")


@pytest.mark.parametrize(
    "name",
    ["genetic_algorithm", "differential_evolution", "firefly", "iterated_local_search", "bo_ei"],
)
def test_spaces_too_large_to_enumerate(name: str) -> None:
    """Without enumeration: rejection sampling, local repair and table-based neighbours."""
    big = make_space()
    big.enumerate_limit = 10  # as if the Cartesian product were too large
    assert not big.enumerable
    result, objective = run(name, big, 20)
    assert result.n_evaluations == 20
    assert big.is_valid(full_table(big, result.designs)).all()
    assert len(objective.seen) == len(set(objective.seen)) == 20
