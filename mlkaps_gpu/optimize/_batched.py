"""NSGA-II advanced for every input grid point at once, vectorised over points and individuals.

MLKAPS runs one time-limited genetic algorithm per grid point in a Python loop and spends most of
it in pymoo's per-individual bookkeeping. Here the populations of all points are one array of
integer design codes, shape ``(points, population, design)``, and each generation is:

1. binary tournament on (rank, crowding), vectorised over points (``_survival.py``);
2. pymoo's SBX crossover and polynomial mutation (``_operators.py``: the same formulas and
   draws, without pymoo's per-call tiling) applied to all matings of all points in one call
   each, then rounded to codes;
3. validity of every child, and invalid children repaired to the nearest valid configuration
   *for their own point* (sum of absolute code differences): by lookup in a
   :class:`~mlkaps_gpu.optimize._repair.RepairTable` where the space is enumerated, with the
   vectorised constraints and ``Space.repair_codes`` otherwise (``_batched_grid.py``);
4. one surrogate prediction for all children of all points, each distinct (point, configuration)
   predicted once, rows grouped by point, children equal to a parent given the parent's values;
5. NSGA-II survival per point: for one objective, rank-and-crowding survival is a sort by the
   objective (vectorised); for several, pymoo's non-dominated sorting and crowding distance
   (``_survival.py``).

Nothing in a generation is a table or a loop over rows: the population stays numpy arrays from
the first generation to the last. A point stops when its best (weighted) objective has not
improved for ``window`` generations; the whole run stops when every point has stopped or at
``generations``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mlkaps_gpu.optimize._batched_grid import DesignCodes, GridContext
from mlkaps_gpu.optimize._operators import polynomial_mutation, simulated_binary_crossover
from mlkaps_gpu.optimize._survival import gather, survive, tournament
from mlkaps_gpu.space import Space

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


@dataclass
class _Populations:
    """The populations of the points that admit a valid configuration, and their progress.

    Every array is indexed by position in ``points`` (grid indices of those points).
    """

    points: np.ndarray
    codes: np.ndarray  # (points, population, design)
    values: np.ndarray  # (points, population, objectives)
    keys: np.ndarray  # (points, population): one integer per (point, configuration)
    #: copies of an earlier individual of the same population (they never survive twice)
    repeated: np.ndarray
    rank: np.ndarray
    crowding: np.ndarray
    best: np.ndarray  # best weighted objective so far
    ideal: np.ndarray  # per-objective minima: the front's extent
    archive_codes: np.ndarray
    archive_values: np.ndarray
    stalled: np.ndarray
    active: np.ndarray


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
        self._objectives = 1  # set by each run from the predictions
        self._codes = DesignCodes(space)

    # --------------------------------------------------------------------------------- run
    def run(self, predict: Predict, grid: pd.DataFrame) -> BatchedResult:
        """Optimise every grid point; ``predict(features) -> (rows, objectives)`` minimised."""
        rng = np.random.default_rng(np.random.SeedSequence(self.seed))
        context = GridContext.prepare(self._codes, grid, self.population)
        codes, alive = context.initial_codes(self.population, rng)
        n_points = len(context.table)
        result = BatchedResult(
            codes=codes, values=np.full((n_points, self.population, 1), np.inf), alive=alive
        )
        points = np.flatnonzero(alive)
        if len(points) == 0:
            result.codes = codes.astype(np.int64)
            return result
        state = self._initial_state(predict, context, codes, points, result, rng)
        for generation in range(self.generations):
            active = np.flatnonzero(state.active)
            if len(active) == 0:
                break
            result.generations = generation + 1
            self._generation(predict, context, state, active, result, rng)
            result.history.append(float(np.mean(state.best)))
            if self.progress:
                self.progress(generation + 1, self.generations)
        return self._finish(state, result)

    # ------------------------------------------------------------------------------ setup
    def _initial_state(
        self,
        predict: Predict,
        context: GridContext,
        codes: np.ndarray,
        points: np.ndarray,
        result: BatchedResult,
        rng: np.random.Generator,
    ) -> _Populations:
        n, n_design = self.population, len(self.space.design)
        population = codes[points]
        flat_points = np.repeat(points, n)
        flat_codes = population.reshape(-1, n_design)
        keys = self._codes.keys(flat_points, flat_codes)
        values, repeated = self._evaluate(predict, context, flat_points, flat_codes, result, keys)
        n_objectives = values.shape[1]
        self._objectives = n_objectives
        values = values.reshape(len(points), n, n_objectives)
        repeated = repeated.reshape(len(points), n)
        _, rank, crowding = survive(values, repeated, self.population, rng)
        extreme = values.argmin(axis=1)  # (points, objectives)
        return _Populations(
            points=points,
            codes=population,
            values=values,
            keys=keys.reshape(len(points), n),
            repeated=repeated,
            rank=rank,
            crowding=crowding,
            best=(values @ self._weights(n_objectives)).min(axis=1),
            ideal=values.min(axis=1),
            archive_codes=np.take_along_axis(population, extreme[..., None], axis=1),
            archive_values=np.take_along_axis(values, extreme[..., None], axis=1),
            stalled=np.zeros(len(points), dtype=np.int64),
            active=np.ones(len(points), dtype=bool),
        )

    def _weights(self, n_objectives: int) -> np.ndarray:
        return self.weights if self.weights is not None else np.ones(n_objectives)

    # ------------------------------------------------------------------------- generation
    def _generation(
        self,
        predict: Predict,
        context: GridContext,
        state: _Populations,
        active: np.ndarray,
        result: BatchedResult,
        rng: np.random.Generator,
    ) -> None:
        """One generation of the active points: offspring, evaluation, survival, convergence."""
        n, n_design = self.population, len(self.space.design)
        # every point active (the first generations): views instead of copies
        take: slice | np.ndarray = slice(None) if len(active) == len(state.points) else active
        child_points = np.repeat(state.points[take], n)
        children = self._offspring(state, take, len(active), rng)
        children, child_keys = context.repair(child_points, children, rng)
        child_values, child_repeated = self._child_values(
            predict, context, state, take, result, (child_points, children, child_keys)
        )
        child_values = child_values.reshape(len(active), n, -1)
        children = children.reshape(len(active), n, n_design)
        if child_values.shape[2] > 1:
            self._update_archive(state, active, children, child_values)
        merged_values = np.concatenate([state.values[take], child_values], axis=1)
        merged_codes = np.concatenate([state.codes[take], children], axis=1)
        merged_keys = np.concatenate([state.keys[take], child_keys.reshape(len(active), n)], 1)
        merged_repeated = np.concatenate(
            [state.repeated[take], child_repeated.reshape(len(active), n)], axis=1
        )
        survivors, rank, crowding = survive(merged_values, merged_repeated, self.population, rng)
        state.codes[take] = gather(merged_codes, survivors)
        state.values[take] = gather(merged_values, survivors)
        state.keys[take] = gather(merged_keys, survivors)
        state.repeated[take] = gather(merged_repeated, survivors)
        if not self._sorted_by_rank:  # one objective: rank is position, crowding zero, always
            state.rank[take], state.crowding[take] = rank, crowding
        self._converge(state, take)

    def _offspring(
        self,
        state: _Populations,
        take: slice | np.ndarray,
        n_active: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Tournament, SBX and polynomial mutation, rounded to codes: ``(active * n, design)``."""
        n, n_design = self.population, len(self.space.design)
        parents = tournament(
            state.rank[take], state.crowding[take], rng, sorted_by_rank=self._sorted_by_rank
        )
        mates = gather(state.codes[take], parents)
        pairs = mates.reshape(n_active * n // 2, 2, n_design).transpose(1, 0, 2)
        upper = self._codes.upper
        children = simulated_binary_crossover(pairs, upper, rng)
        children = children.transpose(1, 0, 2).reshape(n_active * n, n_design)
        children = polynomial_mutation(children, upper, rng)
        return np.rint(children).astype(self._codes.code_type)  # inside [0, upper]: no clipping

    def _child_values(
        self,
        predict: Predict,
        context: GridContext,
        state: _Populations,
        take: slice | np.ndarray,
        result: BatchedResult,
        offspring: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Objective values of the children (their points, codes and keys): a parent's where a
        child equals a parent of its point, the surrogate's for the others; and which children
        repeat a parent or an earlier child."""
        child_points, children, child_keys = offspring
        parent_keys = state.keys[take]
        n_active, n = parent_keys.shape
        known, parent = self._match_parents(context, state.points[take], parent_keys, offspring)
        parent_values = state.values[take].reshape(n_active * n, -1)
        values = np.empty((len(children), parent_values.shape[1]))
        values[known] = parent_values[parent[known]]
        fresh = ~known
        repeated = known.copy()
        if fresh.any():
            values[fresh], repeated[fresh] = self._evaluate(
                predict, context, child_points[fresh], children[fresh], result, child_keys[fresh]
            )
        return values, repeated

    def _match_parents(
        self,
        context: GridContext,
        points: np.ndarray,
        parent_keys: np.ndarray,
        offspring: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which children equal a parent of their point, and (flat index) which one."""
        child_points, _, child_keys = offspring
        n_active, n = parent_keys.shape
        if context.slots is None:  # each child against its point's parents: (points, n, n)
            equal = child_keys.reshape(n_active, n, 1) == parent_keys[:, None, :]
            parent = (np.arange(n_active)[:, None] * n + equal.argmax(axis=2)).ravel()
            return equal.any(axis=2).ravel(), parent
        # the parents' cells marked with their position + 1, read at the children's, cleared
        rows = np.broadcast_to(points[:, None], parent_keys.shape)
        product = self._codes.product
        cells = parent_keys - rows * product
        context.slots[rows, cells] = np.arange(1, n + 1, dtype=np.int16)
        found = context.slots[child_points, child_keys - child_points * product]
        context.slots[rows, cells] = 0
        parent = np.repeat(np.arange(n_active) * n, n) + found - 1
        return found > 0, parent

    def _update_archive(
        self,
        state: _Populations,
        active: np.ndarray,
        children: np.ndarray,
        child_values: np.ndarray,
    ) -> None:
        """Keep, per point and objective, the best configuration ever evaluated."""
        rows = np.arange(len(active))
        for objective in range(child_values.shape[2]):
            index = child_values[..., objective].argmin(axis=1)
            candidate = child_values[rows, index]
            better = candidate[:, objective] < state.archive_values[active, objective, objective]
            state.archive_values[active[better], objective] = candidate[better]
            state.archive_codes[active[better], objective] = children[rows, index][better]

    def _converge(self, state: _Populations, active: slice | np.ndarray) -> None:
        """Count generations without improvement; stop points that reach ``window``."""
        values = state.values[active]
        weighted = values[..., 0] if self.weights is None and values.shape[2] == 1 else None
        current = (values @ self._weights(values.shape[2]) if weighted is None else weighted).min(1)
        best = state.best[active]
        improved = current < best - self.tolerance * np.abs(best)
        state.best[active] = np.minimum(best, current)
        if values.shape[2] > 1:  # a front that still widens has not converged either
            extent = values.min(axis=1)
            ideal = state.ideal[active]
            improved |= (extent < ideal - self.tolerance * np.abs(ideal)).any(axis=1)
            state.ideal[active] = np.minimum(ideal, extent)
        state.stalled[active] = np.where(improved, 0, state.stalled[active] + 1)
        state.active[active] = state.stalled[active] < self.window

    def _finish(self, state: _Populations, result: BatchedResult) -> BatchedResult:
        n_points, n, n_design = result.codes.shape
        n_objectives = state.values.shape[2]
        result.codes = result.codes.astype(np.int64)
        result.codes[state.points] = state.codes
        result.values = np.full((n_points, n, n_objectives), np.inf)
        result.values[state.points] = state.values
        result.archive_codes = np.zeros((n_points, n_objectives, n_design), dtype=np.int64)
        result.archive_values = np.full((n_points, n_objectives, n_objectives), np.inf)
        result.archive_codes[state.points] = state.archive_codes
        result.archive_values[state.points] = state.archive_values
        return result

    # ------------------------------------------------------------------------------ pieces
    def _evaluate(
        self,
        predict: Predict,
        context: GridContext,
        points: np.ndarray,
        codes: np.ndarray,
        result: BatchedResult,
        keys: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Objective values of (point, codes) rows: each distinct row predicted once, the rows
        sent in key order, that is grouped by point (LightGBM predicts such rows faster); and
        which rows repeat an earlier one."""
        keys = self._codes.keys(points, codes) if keys is None else keys
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        features = self._codes.features(context.input_features[points[first]], codes[first])
        started = time.perf_counter()
        predicted = np.asarray(predict(features), dtype=float).reshape(len(unique), -1)
        result.predict_seconds += time.perf_counter() - started
        result.predictions += len(unique)
        repeated = np.ones(len(keys), dtype=bool)
        repeated[first] = False
        return predicted[inverse.ravel()], repeated

    @property
    def _sorted_by_rank(self) -> bool:
        return self._objectives == 1
