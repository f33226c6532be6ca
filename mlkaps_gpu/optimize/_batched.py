"""NSGA-II advanced for every input grid point at once, vectorised over points and individuals.

MLKAPS runs one time-limited genetic algorithm per grid point in a Python loop and spends most of
it in pymoo's per-individual bookkeeping. Here the populations of all points are one array of
integer design codes, shape ``(points, population, design)``, and each generation is:

1. binary tournament on (rank, crowding), vectorised over points;
2. pymoo's SBX crossover and polynomial mutation applied to all matings of all points in one call
   each (they are array operators over the code ranges), then rounded to codes;
3. validity of every child checked with the vectorised constraints, and invalid children repaired
   to the nearest valid configuration *for their own point* (sum of absolute code differences);
4. one surrogate prediction for all children of all points, each distinct (point, configuration)
   predicted once and children equal to a parent given the parent's values;
5. NSGA-II survival per point: for one objective, rank-and-crowding survival is a sort by the
   objective (vectorised); for several, pymoo's non-dominated sorting and crowding distance.

A point stops when its best (weighted) objective has not improved for ``window`` generations; the
whole run stops when every point has stopped or at ``generations``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pymoo.core.problem import Problem
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.survival.rank_and_crowding.metrics import get_crowding_function
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from mlkaps_gpu.space import Space, nearest_codes

Predict = Callable[[np.ndarray], np.ndarray]


@dataclass
class BatchedResult:
    """Final populations and statistics of a batched run.

    Attributes:
        codes: final population codes, ``(points, population, design)``.
        values: their objective values (all minimised), ``(points, population, objectives)``.
        alive: points that admit at least one valid configuration.
        generations: generations run.
        predictions: rows sent to the surrogate.
        predict_seconds: time spent inside ``predict``.
    """

    codes: np.ndarray
    values: np.ndarray
    alive: np.ndarray
    generations: int = 0
    predictions: int = 0
    predict_seconds: float = 0.0
    history: list[float] = field(default_factory=list)
    #: per point, the best configuration ever evaluated for each objective (extremes of the
    #: front, kept even if crowding later drops them): ``(points, objectives, design)``
    archive_codes: np.ndarray | None = None
    archive_values: np.ndarray | None = None


class BatchedNSGA2:
    """NSGA-II over integer design codes for many input points at once.

    Args:
        space: the search space (constraints may involve inputs).
        population: individuals per point.
        generations: generation cap.
        window: generations without improvement after which a point stops.
        tolerance: relative improvement below which a generation does not count as one.
        weights: weights of the objectives for the convergence test (several objectives).
        seed: random seed.
        progress: optional ``progress(generation, generations)`` callback.
    """

    def __init__(
        self,
        space: Space,
        *,
        population: int = 32,
        generations: int = 60,
        window: int = 10,
        tolerance: float = 1e-9,
        weights: Sequence[float] | None = None,
        seed: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if population < 4 or population % 2:
            raise ValueError(f"population must be an even number >= 4, got {population}")
        self.space = space
        self.population = population
        self.generations = generations
        self.window = window
        self.tolerance = tolerance
        self.weights = None if weights is None else np.asarray(weights, dtype=float)
        self.seed = seed
        self.progress = progress
        sizes = space.design_sizes.astype(float)
        self._problem = Problem(n_var=len(sizes), n_obj=1, xl=np.zeros(len(sizes)), xu=sizes - 1)
        self._crossover = SBX(prob_var=0.5, eta=3.0)  # pymoo's setting for integer codes
        self._mutation = PM(eta=3.0, prob=1.0)
        self._strides = np.cumprod(np.r_[1, space.design_sizes[:-1]]).astype(np.int64)
        self._product = int(np.prod(space.design_sizes.astype(float)))
        self._design_numeric = [p.numeric(p.domain_values()) for p in space.design]
        self._design_columns = [
            p.domain_values().astype(object)
            if p.kind == "categorical"
            else p.domain_values().astype(np.float64)
            for p in space.design
        ]

    # ------------------------------------------------------------------------------ pieces
    def _keys(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        return points.astype(np.int64) * self._product + codes @ self._strides

    def _features(self, inputs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        columns = [inputs] + [
            self._design_numeric[d][codes[:, d]][:, None] for d in range(codes.shape[1])
        ]
        return np.hstack(columns)

    def _valid_mask(self, input_columns: dict[str, np.ndarray], codes: np.ndarray) -> np.ndarray:
        """Which rows (inputs given per row) satisfy every constraint."""
        n = len(codes)
        columns = dict(input_columns)
        for d, parameter in enumerate(self.space.design):
            columns[parameter.name] = self._design_columns[d][codes[:, d]]
        mask = np.ones(n, dtype=bool)
        for constraint in self.space.constraints:
            mask &= constraint.evaluate(columns, n)
        return mask

    def _repair(
        self,
        grid: pd.DataFrame,
        groups: list[tuple[dict[str, Any], np.ndarray]],
        point_group: np.ndarray,
        points: np.ndarray,
        codes: np.ndarray,
        input_columns: dict[str, np.ndarray],
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Nearest valid configuration for each invalid row, for its own point."""
        invalid = np.flatnonzero(~self._valid_mask(input_columns, codes))
        if len(invalid) == 0:
            return codes
        codes = codes.copy()
        if self.space.enumerable:
            row_groups = point_group[points[invalid]]
            for group in np.unique(row_groups):
                rows = invalid[row_groups == group]
                valid = self._valid_sets[group]
                if len(valid):
                    codes[rows] = nearest_codes(codes[rows], valid)
            return codes
        inputs = grid.iloc[points[invalid]].reset_index(drop=True)
        codes[invalid] = self.space.repair_codes(inputs, codes[invalid], rng)
        return codes

    def _survive(
        self, values: np.ndarray, keys: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Indices of survivors per point, with their rank and crowding (2N -> N)."""
        n_points, merged, n_objectives = values.shape
        # duplicates of an individual in the same population never survive twice
        order = np.argsort(keys, axis=1, kind="stable")
        sorted_keys = np.take_along_axis(keys, order, axis=1)
        repeated = np.zeros_like(keys, dtype=bool)
        repeated_sorted = np.zeros_like(sorted_keys, dtype=bool)
        repeated_sorted[:, 1:] = sorted_keys[:, 1:] == sorted_keys[:, :-1]
        np.put_along_axis(repeated, order, repeated_sorted, axis=1)
        penalised = np.where(repeated[..., None], np.inf, values)
        n = self.population
        if n_objectives == 1:
            noise = rng.random((n_points, merged))  # random tie-break, as pymoo's
            order = np.lexsort((noise, penalised[..., 0]), axis=1)[:, :n]
            rank = np.broadcast_to(np.arange(n), (n_points, n)).astype(float)
            return order, rank, np.zeros((n_points, n))
        survivors = np.empty((n_points, n), dtype=np.int64)
        rank = np.empty((n_points, n))
        crowding = np.empty((n_points, n))
        sorting = NonDominatedSorting()
        crowd = get_crowding_function("cd")
        for point in range(n_points):
            chosen: list[int] = []
            ranks: list[int] = []
            crowds: list[float] = []
            scores = np.nan_to_num(penalised[point], posinf=np.finfo(float).max)
            for k, front in enumerate(sorting.do(scores, n_stop_if_ranked=n)):
                distance = crowd.do(scores[front], n_remove=0)
                if len(chosen) + len(front) > n:
                    keep = np.argsort(-distance, kind="stable")[: n - len(chosen)]
                    front, distance = front[keep], distance[keep]
                chosen.extend(front)
                ranks.extend([k] * len(front))
                crowds.extend(distance)
                if len(chosen) >= n:
                    break
            survivors[point], rank[point], crowding[point] = chosen, ranks, crowds
        return survivors, rank, crowding

    def _tournament(
        self, rank: np.ndarray, crowding: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Parent indices per point, ``(points, population)``, by binary tournament."""
        n_points, n = rank.shape
        a = rng.integers(n, size=(n_points, n))
        b = rng.integers(n, size=(n_points, n))
        rank_a, rank_b = np.take_along_axis(rank, a, 1), np.take_along_axis(rank, b, 1)
        crowd_a, crowd_b = np.take_along_axis(crowding, a, 1), np.take_along_axis(crowding, b, 1)
        a_wins = (rank_a < rank_b) | ((rank_a == rank_b) & (crowd_a >= crowd_b))
        return np.where(a_wins, a, b)

    # --------------------------------------------------------------------------------- run
    def run(self, predict: Predict, grid: pd.DataFrame) -> BatchedResult:
        """Optimise every grid point; ``predict(features) -> (rows, objectives)`` minimised."""
        space, n = self.space, self.population
        rng = np.random.default_rng(np.random.SeedSequence(self.seed))
        grid = grid[space.input_names].reset_index(drop=True)
        n_points, n_design = len(grid), len(space.design)
        input_features = space.features(grid, space.input_names)
        all_inputs = space.columns(grid)
        # valid design sets per group of points sharing the constrained inputs
        self._valid_sets: list[np.ndarray] = []
        point_group = np.zeros(n_points, dtype=np.int64)
        groups = space._groups(grid) if space.enumerable else []
        for index, (values, rows) in enumerate(groups):
            self._valid_sets.append(space.valid_design_codes(values).astype(np.int64))
            point_group[rows] = index
        # initial populations: valid configurations drawn per point
        codes = np.zeros((n_points, n, n_design), dtype=np.int64)
        alive = np.ones(n_points, dtype=bool)
        if space.enumerable:
            for index, (_, rows) in enumerate(groups):
                valid = self._valid_sets[index]
                if len(valid) == 0:
                    alive[rows] = False
                    continue
                for row in rows:
                    take = rng.choice(len(valid), size=n, replace=len(valid) < n)
                    codes[row] = valid[take]
        else:
            repeated = grid.loc[grid.index.repeat(n)].reset_index(drop=True)
            drawn, found = space.sample_designs(repeated, rng)
            codes = drawn.reshape(n_points, n, n_design)
            alive = np.asarray(found.reshape(n_points, n).any(axis=1), dtype=bool)
        result = BatchedResult(codes=codes, values=np.full((n_points, n, 1), np.inf), alive=alive)
        points = np.flatnonzero(alive)
        if len(points) == 0:
            return result

        def evaluate(point_index: np.ndarray, child_codes: np.ndarray) -> np.ndarray:
            keys = self._keys(point_index, child_codes)
            unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            features = self._features(input_features[point_index[first]], child_codes[first])
            started = time.perf_counter()
            predicted = np.asarray(predict(features), dtype=float).reshape(len(unique), -1)
            result.predict_seconds += time.perf_counter() - started
            result.predictions += len(unique)
            return predicted[inverse.ravel()]

        flat_points = np.repeat(points, n)
        initial_values = evaluate(flat_points, codes[points].reshape(-1, n_design))
        n_objectives = initial_values.shape[1]
        weights = self.weights if self.weights is not None else np.ones(n_objectives)
        population = codes[points]
        population_values = initial_values.reshape(len(points), n, n_objectives)
        population_keys = self._keys(flat_points, population.reshape(-1, n_design)).reshape(
            len(points), n
        )
        _, rank, crowding = self._survive(population_values, population_keys, rng)
        order = np.argsort(rank, axis=1, kind="stable")  # survivors' order is rank order here
        best = (population_values @ weights).min(axis=1)
        ideal = population_values.min(axis=1)  # per-objective minima: the front's extent
        extreme = population_values.argmin(axis=1)  # (points, objectives)
        archive_codes = np.take_along_axis(population, extreme[..., None], axis=1)
        archive_values = np.take_along_axis(population_values, extreme[..., None], axis=1)
        stalled = np.zeros(len(points), dtype=np.int64)
        active = np.ones(len(points), dtype=bool)
        del order
        for generation in range(self.generations):
            act = np.flatnonzero(active)
            if len(act) == 0:
                break
            result.generations = generation + 1
            parents = self._tournament(rank[act], crowding[act], rng)
            mates = np.take_along_axis(population[act], parents[..., None], axis=1)
            pairs = mates.reshape(len(act) * n // 2, 2, n_design).transpose(1, 0, 2)
            children = self._crossover._do(self._problem, pairs.astype(float), random_state=rng)
            children = children.transpose(1, 0, 2).reshape(len(act) * n, n_design)
            children = self._mutation._do(self._problem, children, random_state=rng)
            children = np.clip(np.rint(children), 0, space.design_sizes - 1).astype(np.int64)
            child_points = np.repeat(points[act], n)
            inputs = {k: v[child_points] for k, v in all_inputs.items()}
            children = self._repair(grid, groups, point_group, child_points, children, inputs, rng)
            # children identical to a parent of their point take the parent's values
            child_keys = self._keys(child_points, children).reshape(len(act), n)
            merged_keys = np.concatenate([population_keys[act], child_keys], axis=1)
            child_values = np.empty((len(act) * n, n_objectives))
            parent_keys = population_keys[act].ravel()
            unique, inverse = np.unique(
                np.concatenate([parent_keys, child_keys.ravel()]), return_inverse=True
            )
            inverse = inverse.ravel()
            known_value = np.empty((len(unique), n_objectives))
            has_parent = np.zeros(len(unique), dtype=bool)
            has_parent[inverse[: len(parent_keys)]] = True
            known_value[inverse[: len(parent_keys)]] = population_values[act].reshape(
                -1, n_objectives
            )
            child_slot = inverse[len(parent_keys) :]
            known = has_parent[child_slot]
            child_values[known] = known_value[child_slot[known]]
            fresh = ~known
            if fresh.any():
                child_values[fresh] = evaluate(child_points[fresh], children[fresh])
            merged_values = np.concatenate(
                [population_values[act], child_values.reshape(len(act), n, n_objectives)], axis=1
            )
            merged_codes = np.concatenate(
                [population[act], children.reshape(len(act), n, n_design)], axis=1
            )
            if n_objectives > 1:
                shaped = child_values.reshape(len(act), n, n_objectives)
                shaped_codes = children.reshape(len(act), n, n_design)
                for objective in range(n_objectives):
                    index = shaped[..., objective].argmin(axis=1)
                    rows = np.arange(len(act))
                    candidate = shaped[rows, index]
                    better = candidate[:, objective] < archive_values[act, objective, objective]
                    archive_values[act[better], objective] = candidate[better]
                    archive_codes[act[better], objective] = shaped_codes[rows, index][better]
            survivors, new_rank, new_crowding = self._survive(merged_values, merged_keys, rng)
            population[act] = np.take_along_axis(merged_codes, survivors[..., None], axis=1)
            population_values[act] = np.take_along_axis(merged_values, survivors[..., None], axis=1)
            population_keys[act] = np.take_along_axis(merged_keys, survivors, axis=1)
            rank[act], crowding[act] = new_rank, new_crowding
            current = (population_values[act] @ weights).min(axis=1)
            improved = current < best[act] - self.tolerance * np.abs(best[act])
            best[act] = np.minimum(best[act], current)
            if n_objectives > 1:  # a front that still widens has not converged either
                extent = population_values[act].min(axis=1)
                margin = self.tolerance * np.abs(ideal[act])
                improved |= (extent < ideal[act] - margin).any(axis=1)
                ideal[act] = np.minimum(ideal[act], extent)
            stalled[act] = np.where(improved, 0, stalled[act] + 1)
            active[act] = stalled[act] < self.window
            result.history.append(float(np.mean(best)))
            if self.progress:
                self.progress(generation + 1, self.generations)
        result.codes = codes
        result.codes[points] = population
        full_values = np.full((n_points, n, n_objectives), np.inf)
        full_values[points] = population_values
        result.values = full_values
        result.archive_codes = np.zeros((n_points, n_objectives, n_design), dtype=np.int64)
        result.archive_values = np.full((n_points, n_objectives, n_objectives), np.inf)
        result.archive_codes[points] = archive_codes
        result.archive_values[points] = archive_values
        return result
