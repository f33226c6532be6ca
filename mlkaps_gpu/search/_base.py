"""The strategy extension point: optimize the design of ONE input point within a budget.

Life cycle: ``strategy = SomeStrategy(**hyperparameters)`` stores its hyperparameters only; each
``strategy.run(objective, space, inputs, budget, rng)``

1. validates the arguments and builds a :class:`SearchProblem` (memoization, budget, validity,
   repair and neighbours on integer design codes);
2. calls the subclass's ``_run(problem, rng)``, which evaluates batches of codes through
   ``problem.evaluate`` until that raises :class:`StopSearch` (budget spent, space exhausted,
   search stalled) or the algorithm ends on its own;
3. returns a :class:`Result` holding every evaluation in order.

A strategy object holds no state between runs: the same seed gives the same result.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.search._objectives import Objective
from mlkaps_gpu.search._problem import SearchProblem, StopSearch
from mlkaps_gpu.space import Space


@dataclass(frozen=True)
class Result:
    """Every evaluation of one run, in order.

    Attributes:
        strategy: name of the strategy.
        designs: the evaluated designs (one column per design parameter).
        codes: their integer codes.
        values: objective values (NaN where the measurement failed or the design was invalid).
        statuses: executor statuses (``invalid`` for a constraint violation).
        stop_reason: ``budget``, ``exhausted``, ``stalled`` or ``finished``.
        n_proposals: configurations proposed, memoized repeats included.
    """

    strategy: str
    designs: pd.DataFrame
    codes: np.ndarray
    values: np.ndarray
    statuses: np.ndarray
    stop_reason: str
    n_proposals: int

    @property
    def n_evaluations(self) -> int:
        """Evaluations of the run (a memoized repeat is not evaluated again; see
        ``n_proposals``)."""
        return len(self.values)

    @property
    def best_index(self) -> int | None:
        """Position of the best ok evaluation (None when none succeeded)."""
        finite = np.isfinite(self.values)
        if not finite.any():
            return None
        return int(np.nanargmin(np.where(finite, self.values, np.inf)))

    @property
    def best_value(self) -> float:
        """The best (lowest) successful value; NaN when no evaluation succeeded."""
        index = self.best_index
        return float("nan") if index is None else float(self.values[index])

    @property
    def best(self) -> dict[str, Any]:
        """The best design as ``{parameter: value}`` (empty when nothing succeeded)."""
        index = self.best_index
        if index is None:
            return {}
        row = self.designs.iloc[index]
        return {name: _scalar(row[name]) for name in self.designs.columns}

    def best_so_far(self) -> np.ndarray:
        """Best value after each evaluation (``inf`` until the first success)."""
        return np.minimum.accumulate(np.where(np.isfinite(self.values), self.values, np.inf))


class Strategy(abc.ABC):
    """Base class of every per-input strategy.

    Attributes:
        name: registry name, used in results.
        constraint_aware: whether the strategy uses the constraints (sampling valid designs,
            repairing); an unaware one sees the Cartesian product and the static penalty only.
    """

    name: str = "strategy"
    constraint_aware: bool = True

    def run(
        self,
        objective: Objective,
        space: Space,
        inputs: Mapping[str, Any] | pd.Series | pd.DataFrame | None,
        budget: int,
        rng: np.random.Generator,
        *,
        count_invalid: bool = True,
    ) -> Result:
        """Optimize the design of one input point.

        Args:
            objective: ``objective(designs) -> (values, statuses)``, values to minimise.
            space: the search space.
            inputs: the input point (a mapping, a Series or a one-row table; None or ``{}``
                when the space has no inputs).
            budget: evaluations allowed (new configurations; repeats are free).
            rng: the random generator, the only source of randomness.
            count_invalid: whether a constraint-violating design costs an evaluation.
        """
        if isinstance(budget, bool) or int(budget) != budget or budget < 1:
            raise ValueError(f"{self.name}: budget must be a positive integer, got {budget!r}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"{self.name}: rng must be a numpy.random.Generator")
        point = _input_point(space, inputs)
        problem = SearchProblem(space, point, objective, int(budget), count_invalid=count_invalid)
        reason = "finished"
        try:
            self._run(problem, rng)
        except StopSearch as stop:
            reason = stop.reason
        codes, values, statuses = problem.history()
        return Result(
            strategy=self.name,
            designs=space.design_from_codes(codes),
            codes=codes,
            values=values,
            statuses=statuses,
            stop_reason=reason,
            n_proposals=problem.n_proposals,
        )

    @abc.abstractmethod
    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        """Search by calling ``problem.evaluate``; return or let StopSearch end the run."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _input_point(
    space: Space, inputs: Mapping[str, Any] | pd.Series | pd.DataFrame | None
) -> dict[str, Any]:
    if inputs is None:
        point: dict[str, Any] = {}
    elif isinstance(inputs, pd.DataFrame):
        if len(inputs) != 1:
            raise ValueError(f"inputs: one input point expected, got a table of {len(inputs)}")
        point = {name: _scalar(value) for name, value in inputs.iloc[0].items()}
    else:
        point = {str(name): _scalar(value) for name, value in dict(inputs).items()}
    missing = [name for name in space.input_names if name not in point]
    if missing:
        raise ValueError(f"inputs: no value for input parameter(s) {missing}")
    return {name: point[name] for name in space.input_names}


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
