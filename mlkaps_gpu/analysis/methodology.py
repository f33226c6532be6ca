"""Comparing optimization algorithms on exhaustive data (after Willemsen et al., "A methodology
for comparing optimization algorithms for auto-tuning").

For one search space whose every configuration was measured:

- the **baseline** is random search without replacement; its expected best value after ``k``
  evaluations has the closed form ``E_k = sum_i v_(i) [S_k(i - 1) - S_k(i)]`` over the values
  sorted best first, with ``S_k(i) = C(N - i, k) / C(N, k)`` the probability that all ``k``
  draws miss the ``i`` best (the exact expectation of the value; the reference implementation
  uses the value at the expected rank instead);
- an algorithm's curve is its best value found after ``k`` evaluations, averaged over runs;
- the **standardised curve** ``(baseline_k - best_k) / (baseline_k - optimum)`` is 0 for random
  search, 1 at the optimum and negative below random search;
- the **performance score** is the standardised curve averaged over every budget of the range,
  then over the search spaces.

Failed configurations (and, for an algorithm, evaluations of invalid ones) count as evaluations
with the space's worst successful value, so random search drawing a failure gains nothing.
Objectives are minimised. The fraction of optimum of a best value ``b`` is ``optimum / b``
(positive objectives such as times).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from mlkaps_gpu._numbers import geometric_mean


def expected_best_random_search(
    values: np.ndarray, budgets: np.ndarray | Sequence[int]
) -> np.ndarray:
    """Expected best (minimum) of ``k`` draws without replacement from ``values``, per ``k``.

    Args:
        values: the value of every configuration (finite; replace failures first).
        budgets: numbers of draws, each in ``1 .. len(values)``.
    """
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if len(ordered) == 0 or not np.isfinite(ordered).all():
        raise ValueError("expected_best_random_search: needs finite values")
    size = len(ordered)
    draws = np.asarray(budgets, dtype=np.int64)
    if (draws < 1).any() or (draws > size).any():
        raise ValueError(f"budgets must lie in 1..{size}")
    missed = np.arange(size + 1)  # i = 0..N: how many of the best values all draws miss
    out = np.empty(len(draws))
    for position, k in enumerate(draws.tolist()):
        # log S_k(i) = log C(N - i, k) - log C(N, k), -inf where N - i < k
        remaining = size - missed
        feasible = remaining >= k
        log_survival = np.full(size + 1, -np.inf)
        log_survival[feasible] = (
            gammaln(remaining[feasible] + 1)
            - gammaln(remaining[feasible] - k + 1)
            - gammaln(size + 1)
            + gammaln(size - k + 1)
        )
        survival = np.exp(log_survival)
        out[position] = float(ordered @ (survival[:-1] - survival[1:]))
    return out


def best_at_budgets(
    trace: np.ndarray, budgets: np.ndarray | Sequence[int], failure_value: float
) -> np.ndarray:
    """Best value among the first ``k`` evaluations of a run, per ``k``.

    Non-finite values (failed or invalid evaluations) count as ``failure_value``; a run shorter
    than ``k`` (it stopped early, e.g. having measured every configuration) keeps its last best.
    """
    trace = np.asarray(trace, dtype=np.float64)
    clean = np.where(np.isfinite(trace), trace, failure_value)
    running = np.minimum.accumulate(clean) if len(clean) else np.array([failure_value])
    index = np.minimum(np.asarray(budgets, dtype=np.int64), len(running)) - 1
    return np.minimum(running[np.maximum(index, 0)], failure_value)


def fraction_of_optimum(best: np.ndarray, optimum: float) -> np.ndarray:
    """``optimum / best`` (0 where nothing was found)."""
    best = np.asarray(best, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(best) & (best > 0), optimum / best, 0.0)


def geometric_mean_fraction(fractions: Iterable[float]) -> float:
    """The score of one tuning run over several input values: the geometric mean of its
    fractions of optimum; 0 as soon as one is 0 (a failed choice), NaN for none or a non-finite
    one."""
    array = np.asarray(list(fractions), dtype=np.float64)
    if array.size == 0 or not np.isfinite(array).all():
        return float("nan")
    if (array <= 0).any():
        return 0.0
    return geometric_mean(array)


def expected_fraction_random_search(
    times: np.ndarray | Sequence[float], budgets: np.ndarray | Sequence[int]
) -> np.ndarray:
    """Exact expected fraction of optimum of random search, ``E[max_i t_opt / t_i]`` over ``k``
    distinct uniform draws among ``times`` (every configuration of one space), per ``k``.

    A missing, non-finite or non-positive time is a failure: fraction 0, and a draw all the same.
    This is the expectation of the fraction (not ``t_opt / E[min t]``); all zeros when nothing
    succeeded.
    """
    values = np.asarray(times, dtype=np.float64)
    succeeded = np.isfinite(values) & (values > 0)
    if not succeeded.any():
        return np.zeros(len(budgets))
    fractions = fraction_of_optimum(values, float(values[succeeded].min()))
    return -expected_best_random_search(-fractions, budgets)


def standardised_curve(best: np.ndarray, baseline: np.ndarray, optimum: float) -> np.ndarray:
    """``(baseline - best) / (baseline - optimum)``; 0 where the baseline is at the optimum."""
    best = np.asarray(best, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    gap = baseline - optimum
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, (baseline - best) / gap, 0.0)


@dataclass(frozen=True)
class SpaceReference:
    """The exhaustive data of one search space.

    Attributes:
        name: label of the space.
        values: objective of every configuration random search may draw (NaN for failures).
    """

    name: str
    values: np.ndarray

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64)
        if not np.isfinite(values).any():
            raise ValueError(f"{self.name}: no successful configuration")
        object.__setattr__(self, "values", values)

    @property
    def optimum(self) -> float:
        """The best (lowest) successful value of the space."""
        return float(np.nanmin(np.where(np.isfinite(self.values), self.values, np.nan)))

    @property
    def failure_value(self) -> float:
        """What a failure is worth: the worst successful value."""
        return float(np.nanmax(np.where(np.isfinite(self.values), self.values, np.nan)))

    @property
    def size(self) -> int:
        """Configurations of the space (failures included)."""
        return len(self.values)

    def baseline(self, budgets: np.ndarray | Sequence[int]) -> np.ndarray:
        """Expected best of random search without replacement, per budget."""
        filled = np.where(np.isfinite(self.values), self.values, self.failure_value)
        return expected_best_random_search(filled, budgets)


@dataclass(frozen=True)
class Curves:
    """An algorithm's curves on one space over a budget range (means over runs).

    Attributes:
        budgets: the budgets.
        best: mean best value found.
        fraction: mean fraction of optimum.
        standardised: standardised curve of the mean best value.
        baseline: the random-search baseline.
    """

    budgets: np.ndarray
    best: np.ndarray
    fraction: np.ndarray
    standardised: np.ndarray
    baseline: np.ndarray

    @property
    def score(self) -> float:
        """The standardised curve averaged over the budget range."""
        return float(np.mean(self.standardised))


def curves(
    traces: Sequence[np.ndarray],
    reference: SpaceReference,
    budgets: np.ndarray | Sequence[int],
) -> Curves:
    """Curves of the runs ``traces`` (objective value of each evaluation, in order)."""
    if not traces:
        raise ValueError("curves: no runs")
    budgets = np.asarray(budgets, dtype=np.int64)
    failure = reference.failure_value
    best = np.array([best_at_budgets(trace, budgets, failure) for trace in traces])
    fraction = fraction_of_optimum(best, reference.optimum).mean(axis=0)
    mean_best = best.mean(axis=0)
    baseline = reference.baseline(budgets)
    return Curves(
        budgets=budgets,
        best=mean_best,
        fraction=fraction,
        standardised=standardised_curve(mean_best, baseline, reference.optimum),
        baseline=baseline,
    )


def performance_score(per_space: Mapping[str, Curves] | Sequence[Curves]) -> float:
    """Mean over the spaces of each space's score (its standardised curve averaged over the
    budget range)."""
    items = list(per_space.values()) if isinstance(per_space, Mapping) else list(per_space)
    if not items:
        raise ValueError("performance_score: no search spaces")
    return float(np.mean([item.score for item in items]))


def budget_range(low: int, high: int) -> np.ndarray:
    """Every budget from ``low`` to ``high`` inclusive (the range a score averages over)."""
    if low < 1 or high < low:
        raise ValueError(f"budget range [{low}, {high}] is empty or starts below 1")
    return np.arange(low, high + 1)
