"""The methodology: the closed-form random-search baseline against brute force, and the
performance score's anchors (random search 0, an oracle 1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mlkaps_gpu.analysis import (
    SpaceReference,
    best_at_budgets,
    budget_range,
    curves,
    expected_best_random_search,
    fraction_of_optimum,
    performance_score,
)

VALUES = np.array([5.0, 3.0, 9.0, 3.0, 7.0, 1.5, 8.0])  # ties included


def test_expected_best_equals_exhaustive_enumeration() -> None:
    """Every k-subset is equally likely without replacement: average their minima."""
    budgets = np.arange(1, len(VALUES) + 1)
    exact = [
        np.mean([min(subset) for subset in itertools.combinations(VALUES, k)]) for k in budgets
    ]
    assert np.allclose(expected_best_random_search(VALUES, budgets), exact)


def test_expected_best_equals_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    values = rng.lognormal(size=40)
    budgets = np.array([1, 3, 10, 25])
    # 40,000 random orders of the list: the first k of each order are k draws without
    # replacement
    orders = rng.random((40_000, len(values))).argsort(axis=1)
    simulated = [values[orders[:, :k]].min(axis=1).mean() for k in budgets]
    closed = expected_best_random_search(values, budgets)
    assert np.allclose(closed, simulated, rtol=0.02)
    assert expected_best_random_search(values, [len(values)])[0] == values.min()


def test_expected_best_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="budgets"):
        expected_best_random_search(VALUES, [0])
    with pytest.raises(ValueError, match="finite"):
        expected_best_random_search(np.array([1.0, np.nan]), [1])


def test_best_at_budgets_counts_failures_and_short_runs() -> None:
    trace = np.array([np.nan, 4.0, np.inf, 2.0])
    assert np.array_equal(best_at_budgets(trace, [1, 2, 4, 10], 9.0), [9.0, 4.0, 2.0, 2.0])
    assert np.array_equal(fraction_of_optimum(np.array([2.0, np.inf]), 1.0), [0.5, 0.0])


def test_random_search_scores_zero_and_an_oracle_one() -> None:
    rng = np.random.default_rng(1)
    reference = SpaceReference("toy", np.append(rng.lognormal(size=300), [np.nan] * 20))
    budgets = budget_range(5, 60)
    runs = [reference.values[rng.permutation(reference.size)] for _ in range(3000)]
    random_curves = curves(runs, reference, budgets)
    assert abs(random_curves.score) < 0.03
    assert np.allclose(random_curves.best, random_curves.baseline, rtol=0.03)
    oracle = curves([np.array([reference.optimum])], reference, budgets)
    assert oracle.score == pytest.approx(1.0)
    assert np.allclose(oracle.fraction, 1.0)
    assert performance_score({"a": oracle, "b": random_curves}) == pytest.approx(
        (1.0 + random_curves.score) / 2
    )
