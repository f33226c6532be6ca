"""The batched NSGA-II's operators give pymoo's SBX and polynomial mutation children to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from pymoo.core.problem import Problem
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM

from mlkaps_gpu.optimize._operators import polynomial_mutation, simulated_binary_crossover


def _parents(upper: np.ndarray, n_matings: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, upper.astype(int) + 1, size=(2, n_matings, len(upper)))
    codes[1, ::5] = codes[0, ::5]  # identical parents: nothing to cross there
    return codes.astype(np.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_crossover_and_mutation_match_pymoo(seed: int) -> None:
    upper = np.array([5.0, 0.0, 3.0, 31.0, 1.0, 2.0, 7.0])  # a one-value parameter too
    problem = Problem(n_var=len(upper), n_obj=1, xl=np.zeros(len(upper)), xu=upper)
    parents = _parents(upper, 400, seed)

    expected = SBX(prob_var=0.5, eta=3.0)._do(
        problem, parents.copy(), random_state=np.random.default_rng(seed)
    )
    got = simulated_binary_crossover(parents.copy(), upper, np.random.default_rng(seed))
    np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(got, parents)  # it did cross

    rows = got.reshape(-1, len(upper))
    expected = PM(eta=3.0, prob=1.0)._do(
        problem, rows.copy(), random_state=np.random.default_rng(seed + 10)
    )
    mutated = polynomial_mutation(rows.copy(), upper, np.random.default_rng(seed + 10))
    np.testing.assert_array_equal(mutated, expected)
    assert not np.array_equal(mutated, rows)
    assert ((mutated >= 0) & (mutated <= upper)).all()
