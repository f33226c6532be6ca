"""Optimization phase: the best configuration of the surrogate at every input grid point.

Two methods share one interface (:meth:`GridOptimizer.run` -> optima table):

- ``nsga2``: one pymoo NSGA-II per grid point, over integer design codes, with a pymoo ``Repair``
  that maps every candidate to the nearest valid configuration *for that point's inputs*. All
  points advance together through pymoo's ask/tell interface, so each generation costs one
  batched surrogate prediction for the whole grid.
- ``exhaustive``: where the valid design set is enumerated, predict every valid configuration at
  every point (the exact optimum of the surrogate); chosen by ``auto`` when that is cheaper than
  the genetic algorithm's evaluations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from pymoo.algorithms.moo.nsga2 import NSGA2, binary_tournament
from pymoo.core.duplicate import DefaultDuplicateElimination
from pymoo.core.evaluator import Evaluator
from pymoo.core.mating import Mating
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.operators.selection.tournament import TournamentSelection
from pymoo.problems.static import StaticProblem

from mlkaps_gpu.space import Space
from mlkaps_gpu.space._space import nearest_codes
from mlkaps_gpu.surrogate import Surrogate

Method = Literal["auto", "nsga2", "exhaustive"]
METHODS: tuple[str, ...] = ("auto", "nsga2", "exhaustive")
#: Rows of one batched prediction in exhaustive mode.
_CHUNK = 1 << 20


class GridOptimizer:
    """Find the surrogate's best configuration at every input grid point.

    Args:
        space: the search space.
        objectives: objective names, in the order of ``surrogates``.
        directions: ``"minimize"`` or ``"maximize"`` per objective.
        method: ``auto``, ``nsga2`` or ``exhaustive``.
        population: NSGA-II population per grid point.
        generations: NSGA-II generations.
        weights: weights of the (min-max normalised) objectives used to pick one configuration
            per point when there are several objectives.
        seed: seed of the genetic algorithms.
        progress: optional callback ``progress(done, total)``.
    """

    def __init__(
        self,
        space: Space,
        *,
        objectives: Sequence[str] = ("time",),
        directions: Sequence[str] | None = None,
        method: Method = "auto",
        population: int = 40,
        generations: int = 40,
        weights: Sequence[float] | None = None,
        seed: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown optimization method '{method}' (allowed: {METHODS})")
        self.space = space
        self.objectives = list(objectives)
        self.directions = list(directions or ["minimize"] * len(self.objectives))
        if len(self.directions) != len(self.objectives):
            raise ValueError(
                f"{len(self.directions)} directions for {len(self.objectives)} objectives"
            )
        unknown = [d for d in self.directions if d not in ("minimize", "maximize")]
        if unknown:
            raise ValueError(f"unknown directions {unknown} (allowed: minimize, maximize)")
        if weights is not None and len(weights) != len(self.objectives):
            raise ValueError(f"{len(weights)} weights for {len(self.objectives)} objectives")
        self.method = method
        self.population = population
        self.generations = generations
        self.weights = np.asarray(weights if weights is not None else [1.0] * len(objectives))
        self.seed = seed
        self.progress = progress
        self._design_numeric = [p.numeric(p.domain_values()) for p in space.design]

    # --------------------------------------------------------------------------- features
    def _features(self, inputs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Features for rows given input features (n x n_inputs) and design codes."""
        columns = [inputs] + [
            self._design_numeric[i][codes[:, i]][:, None] for i in range(codes.shape[1])
        ]
        return np.hstack(columns)

    def _predict(self, surrogates: Sequence[Surrogate], features: np.ndarray) -> np.ndarray:
        """Objective matrix, all to be minimised (maximised ones negated)."""
        out = np.empty((len(features), len(surrogates)))
        for index, surrogate in enumerate(surrogates):
            sign = -1.0 if self.directions[index] == "maximize" else 1.0
            out[:, index] = sign * surrogate.predict(features)
        return out

    def chosen_method(self, grid: pd.DataFrame) -> str:
        if self.method != "auto":
            return self.method
        if not self.space.enumerable:
            return "nsga2"
        ga_evaluations = self.population * (self.generations + 1)
        if self.space.constrained_inputs:
            sizes = [len(self.space.valid_design_codes(row)) for row in _rows(grid.head(8))]
            typical = float(np.mean(sizes)) if sizes else 0.0
        else:
            typical = float(len(self.space.valid_design_codes({})))
        return "exhaustive" if typical <= 4 * ga_evaluations else "nsga2"

    # -------------------------------------------------------------------------------- run
    def run(self, surrogates: Sequence[Surrogate], grid: pd.DataFrame) -> pd.DataFrame:
        """Optima table: the grid's input columns, the chosen design, predicted objectives,
        and ``n_valid`` (0 where the point admits no valid configuration)."""
        if len(surrogates) != len(self.objectives):
            raise ValueError("one surrogate per objective is needed")
        grid = grid[self.space.input_names].reset_index(drop=True)
        method = self.chosen_method(grid)
        if method == "exhaustive":
            codes, values, n_valid = self._exhaustive(surrogates, grid)
        else:
            codes, values, n_valid = self._nsga2(surrogates, grid)
        table = self.space.assemble(grid, codes)
        for index, name in enumerate(self.objectives):
            sign = -1.0 if self.directions[index] == "maximize" else 1.0
            table[f"predicted_{name}"] = sign * values[:, index]
        table["n_valid"] = n_valid
        table.attrs["method"] = method
        return table

    def _choose(self, values: np.ndarray) -> int:
        """Index of the configuration to ship among candidates (rows of objective values)."""
        if values.shape[1] == 1:
            return int(np.argmin(values[:, 0]))
        low, high = values.min(axis=0), values.max(axis=0)
        scale = np.where(high > low, high - low, 1.0)
        score = ((values - low) / scale) @ self.weights
        return int(np.argmin(score))

    def _exhaustive(
        self, surrogates: Sequence[Surrogate], grid: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        space = self.space
        input_features = space.features(grid, space.input_names)
        n_points = len(grid)
        codes = np.zeros((n_points, len(space.design)), dtype=np.int64)
        values = np.full((n_points, len(self.objectives)), np.nan)
        n_valid = np.zeros(n_points, dtype=np.int64)
        pending: list[tuple[int, np.ndarray]] = []
        pending_rows = 0

        def flush() -> None:
            nonlocal pending, pending_rows
            if not pending:
                return
            features = np.vstack(
                [
                    self._features(np.repeat(input_features[[p]], len(v), axis=0), v)
                    for p, v in pending
                ]
            )
            predicted = self._predict(surrogates, features)
            start = 0
            for point, valid in pending:
                block = predicted[start : start + len(valid)]
                best = self._choose(block)
                codes[point], values[point] = valid[best], block[best]
                start += len(valid)
            pending, pending_rows = [], 0

        for point, row in enumerate(_rows(grid)):
            valid = space.valid_design_codes(row).astype(np.int64)
            n_valid[point] = len(valid)
            if len(valid) == 0:
                continue
            pending.append((point, valid))
            pending_rows += len(valid)
            if pending_rows >= _CHUNK:
                flush()
            if self.progress:
                self.progress(point + 1, n_points)
        flush()
        return codes, values, n_valid

    def _nsga2(
        self, surrogates: Sequence[Surrogate], grid: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        space = self.space
        input_features = space.features(grid, space.input_names)
        n_points = len(grid)
        n_design = len(space.design)
        upper = (space.design_sizes - 1).astype(float)
        problem = Problem(
            n_var=n_design,
            n_obj=len(self.objectives),
            xl=np.zeros(n_design),
            xu=upper,
            vtype=int,
        )
        codes = np.zeros((n_points, n_design), dtype=np.int64)
        values = np.full((n_points, len(self.objectives)), np.nan)
        n_valid = np.zeros(n_points, dtype=np.int64)
        algorithms: list[tuple[int, Any]] = []
        small: list[tuple[int, np.ndarray]] = []
        root = np.random.SeedSequence(self.seed)
        for point, seq in enumerate(root.spawn(n_points)):
            rng = np.random.default_rng(seq)
            point_inputs = grid.iloc[[point]].reset_index(drop=True)
            valid = None
            if space.enumerable:
                valid = space.valid_design_codes(point_inputs.iloc[0].to_dict()).astype(np.int64)
                n_valid[point] = len(valid)
                if len(valid) == 0:
                    continue
                if len(valid) <= self.population:
                    # fewer valid configurations than one population: predicting them all is
                    # exact and cheaper than a genetic algorithm that cannot fill a population
                    small.append((point, valid))
                    continue
                initial = valid[rng.choice(len(valid), size=self.population, replace=False)]
            else:
                repeated = pd.concat([point_inputs] * self.population, ignore_index=True)
                initial, found = space.sample_designs(repeated, rng)
                if not found.any():
                    continue
                n_valid[point] = -1  # unknown count, but at least one valid configuration
                initial = initial[found]
            repair = _PointRepair(space, point_inputs, valid)
            algorithm = NSGA2(
                pop_size=self.population,
                sampling=initial.astype(float),
                mating=Mating(
                    selection=TournamentSelection(func_comp=binary_tournament),
                    crossover=SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair()),
                    mutation=PM(eta=20, vtype=float, repair=RoundingRepair()),
                    repair=repair,
                    eliminate_duplicates=DefaultDuplicateElimination(),
                    n_max_iterations=10,
                ),
                repair=repair,
                eliminate_duplicates=True,
            )
            algorithm.setup(
                problem,
                termination=("n_gen", self.generations),
                seed=int(rng.integers(2**31 - 1)),
                verbose=False,
            )
            algorithms.append((point, algorithm))
        for point, valid in small:
            block = self._predict(
                surrogates, self._features(np.repeat(input_features[[point]], len(valid), 0), valid)
            )
            index = self._choose(block)
            codes[point], values[point] = valid[index], block[index]
        # every evaluated candidate per point: the choice among them is made once, at the end,
        # with the same (normalised, weighted) rule as the exhaustive method
        evaluated: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        evaluator = Evaluator()
        for generation in range(self.generations):
            active = [(p, a) for p, a in algorithms if a.has_next()]
            if not active:
                break
            asked = [(p, a, a.ask()) for p, a in active]
            # an algorithm that can no longer produce new offspring terminates itself
            active = [(p, a) for p, a, pop in asked if pop is not None and len(pop)]
            populations = [pop for _, _, pop in asked if pop is not None and len(pop)]
            if not active:
                break
            blocks = []
            for (point, _), population in zip(active, populations, strict=True):
                x = np.round(population.get("X")).astype(np.int64)
                blocks.append(self._features(np.repeat(input_features[[point]], len(x), axis=0), x))
            predicted = self._predict(surrogates, np.vstack(blocks))
            start = 0
            for (point, algorithm), population in zip(active, populations, strict=True):
                block = predicted[start : start + len(population)]
                start += len(population)
                evaluator.eval(StaticProblem(problem, F=block), population)
                algorithm.tell(infills=population)
                x = np.round(population.get("X")).astype(np.int64)
                evaluated.setdefault(point, []).append((x, block))
            if self.progress:
                self.progress(generation + 1, self.generations)
        for point, parts in evaluated.items():
            x = np.vstack([part[0] for part in parts])
            block = np.vstack([part[1] for part in parts])
            _, first = np.unique(x, axis=0, return_index=True)
            first = np.sort(first)  # keep the first evaluation of each configuration, in order
            index = first[self._choose(block[first])]
            codes[point], values[point] = x[index], block[index]
        return codes, values, n_valid


class _PointRepair(Repair):
    """pymoo repair: round to codes, then nearest valid configuration for one input point."""

    def __init__(self, space: Space, inputs: pd.DataFrame, valid: np.ndarray | None) -> None:
        super().__init__()
        self.space = space
        self.inputs = inputs
        self.valid = valid

    def _do(self, problem: Any, X: np.ndarray, **kwargs: Any) -> np.ndarray:
        codes = np.round(X).astype(np.int64)
        if self.valid is not None:
            return nearest_codes(codes, self.valid).astype(float)
        repeated = pd.concat([self.inputs] * len(codes), ignore_index=True)
        return self.space.repair_codes(repeated, codes).astype(float)


def _rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    return table.to_dict(orient="records")
