"""NSGA-II advanced for every input grid point at once, vectorised over points and individuals.

MLKAPS runs one time-limited genetic algorithm per grid point in a Python loop and spends most of
it in pymoo's per-individual bookkeeping. Here the populations of all points are one array of
integer design codes, shape ``(points, population, design)``, and each generation is:

1. binary tournament on (rank, crowding), vectorised over points;
2. pymoo's SBX crossover and polynomial mutation (``_operators.py``: the same formulas and
   draws, without pymoo's per-call tiling) applied to all matings of all points in one call
   each, then rounded to codes;
3. validity of every child, and invalid children repaired to the nearest valid configuration
   *for their own point* (sum of absolute code differences): by lookup in a
   :class:`~mlkaps_gpu.optimize._repair.RepairTable` where the space is enumerated, with the
   vectorised constraints and ``Space.repair_codes`` otherwise;
4. one surrogate prediction for all children of all points, each distinct (point, configuration)
   predicted once, rows grouped by point, children equal to a parent given the parent's values;
5. NSGA-II survival per point: for one objective, rank-and-crowding survival is a sort by the
   objective (vectorised); for several, pymoo's non-dominated sorting and crowding distance.

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
from pymoo.operators.survival.rank_and_crowding.metrics import get_crowding_function
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from mlkaps_gpu.optimize._operators import polynomial_mutation, simulated_binary_crossover
from mlkaps_gpu.optimize._repair import TABLE_LIMIT, RepairTable
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


@dataclass
class _Grid:
    """What a run knows of its grid: inputs, groups of points sharing a valid set, lookups."""

    table: pd.DataFrame
    input_features: np.ndarray
    point_group: np.ndarray
    valid_sets: list[np.ndarray]
    repair: RepairTable | None
    #: constraint columns of the inputs, for spaces checked without a table
    input_columns: dict[str, np.ndarray]
    #: (points, design product), zero but while a generation marks its parents' positions
    slots: np.ndarray | None = None


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
        #: largest code of each design parameter (the operators' upper bounds)
        self._upper = space.design_sizes.astype(np.float64) - 1
        self._product = int(np.prod(space.design_sizes.astype(float)))
        #: code -> position in the design product (enumeration order); keys are built on it
        self._strides = np.r_[np.cumprod(space.design_sizes[::-1])[::-1][1:], 1].astype(np.int64)
        #: codes travel as 16-bit integers where every parameter fits (less memory to move)
        self._code_type = np.int16 if space.design_sizes.max(initial=1) < 2**15 else np.int64
        self._design_numeric = [p.numeric(p.domain_values()) for p in space.design]
        self._design_columns = [
            p.domain_values().astype(object)
            if p.kind == "categorical"
            else p.domain_values().astype(np.float64)
            for p in space.design
        ]

    # --------------------------------------------------------------------------------- run
    def run(self, predict: Predict, grid: pd.DataFrame) -> BatchedResult:
        """Optimise every grid point; ``predict(features) -> (rows, objectives)`` minimised."""
        rng = np.random.default_rng(np.random.SeedSequence(self.seed))
        context = self._prepare(grid)
        codes, alive = self._initial_codes(context, rng)
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
    def _prepare(self, grid: pd.DataFrame) -> _Grid:
        """Inputs as features, groups of points sharing a valid set, and their lookup table."""
        space = self.space
        table = grid[space.input_names].reset_index(drop=True)
        point_group = np.zeros(len(table), dtype=np.int64)
        valid_sets: list[np.ndarray] = []
        groups = space._groups(table) if space.enumerable else []
        for index, (values, rows) in enumerate(groups):
            valid_sets.append(space.valid_design_codes(values).astype(np.int64))
            point_group[rows] = index
        repair = RepairTable(space, valid_sets) if RepairTable.fits(space, len(groups)) else None
        cells = len(table) * float(self._product)
        small = repair is not None and cells <= TABLE_LIMIT and self.population < 2**15
        return _Grid(
            slots=np.zeros((len(table), self._product), dtype=np.int16) if small else None,
            table=table,
            input_features=space.features(table, space.input_names),
            point_group=point_group,
            valid_sets=valid_sets,
            repair=repair,
            input_columns=space.columns(table) if repair is None else {},
        )

    def _initial_codes(
        self, context: _Grid, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Valid configurations drawn per point, and which points admit any."""
        space, n = self.space, self.population
        n_points, n_design = len(context.table), len(space.design)
        if not space.enumerable:
            repeated = context.table.loc[context.table.index.repeat(n)].reset_index(drop=True)
            drawn, found = space.sample_designs(repeated, rng)
            alive = np.asarray(found.reshape(n_points, n).any(axis=1), dtype=bool)
            return drawn.reshape(n_points, n, n_design).astype(self._code_type), alive
        codes = np.zeros((n_points, n, n_design), dtype=self._code_type)
        alive = np.ones(n_points, dtype=bool)
        for group, valid in enumerate(context.valid_sets):
            rows = np.flatnonzero(context.point_group == group)
            if len(valid) == 0:
                alive[rows] = False
                continue
            for row in rows:
                codes[row] = valid[rng.choice(len(valid), size=n, replace=len(valid) < n)]
        return codes, alive

    def _initial_state(
        self,
        predict: Predict,
        context: _Grid,
        codes: np.ndarray,
        points: np.ndarray,
        result: BatchedResult,
        rng: np.random.Generator,
    ) -> _Populations:
        n, n_design = self.population, len(self.space.design)
        population = codes[points]
        flat_points = np.repeat(points, n)
        flat_codes = population.reshape(-1, n_design)
        keys = self._keys(flat_points, flat_codes)
        values, repeated = self._evaluate(predict, context, flat_points, flat_codes, result, keys)
        n_objectives = values.shape[1]
        self._objectives = n_objectives
        values = values.reshape(len(points), n, n_objectives)
        repeated = repeated.reshape(len(points), n)
        _, rank, crowding = self._survive(values, repeated, rng)
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
        context: _Grid,
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
        children, child_keys = self._repair(context, child_points, children, rng)
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
        survivors, rank, crowding = self._survive(merged_values, merged_repeated, rng)
        state.codes[take] = _gather(merged_codes, survivors)
        state.values[take] = _gather(merged_values, survivors)
        state.keys[take] = _gather(merged_keys, survivors)
        state.repeated[take] = _gather(merged_repeated, survivors)
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
        parents = self._tournament(state.rank[take], state.crowding[take], rng)
        mates = _gather(state.codes[take], parents)
        pairs = mates.reshape(n_active * n // 2, 2, n_design).transpose(1, 0, 2)
        children = simulated_binary_crossover(pairs, self._upper, rng)
        children = children.transpose(1, 0, 2).reshape(n_active * n, n_design)
        children = polynomial_mutation(children, self._upper, rng)
        return np.rint(children).astype(self._code_type)  # inside [0, upper]: no clipping

    def _child_values(
        self,
        predict: Predict,
        context: _Grid,
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
        context: _Grid,
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
        cells = parent_keys - rows * self._product
        context.slots[rows, cells] = np.arange(1, n + 1, dtype=np.int16)
        found = context.slots[child_points, child_keys - child_points * self._product]
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
    def _keys(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        return points.astype(np.int64) * self._product + codes @ self._strides

    def _features(self, inputs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        out = np.empty((len(codes), inputs.shape[1] + codes.shape[1]))
        out[:, : inputs.shape[1]] = inputs
        for d in range(codes.shape[1]):
            out[:, inputs.shape[1] + d] = self._design_numeric[d][codes[:, d]]
        return out

    def _evaluate(
        self,
        predict: Predict,
        context: _Grid,
        points: np.ndarray,
        codes: np.ndarray,
        result: BatchedResult,
        keys: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Objective values of (point, codes) rows: each distinct row predicted once, the rows
        sent in key order, that is grouped by point (LightGBM predicts such rows faster); and
        which rows repeat an earlier one."""
        keys = self._keys(points, codes) if keys is None else keys
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        features = self._features(context.input_features[points[first]], codes[first])
        started = time.perf_counter()
        predicted = np.asarray(predict(features), dtype=float).reshape(len(unique), -1)
        result.predict_seconds += time.perf_counter() - started
        result.predictions += len(unique)
        repeated = np.ones(len(keys), dtype=bool)
        repeated[first] = False
        return predicted[inverse.ravel()], repeated

    def _repair(
        self,
        context: _Grid,
        points: np.ndarray,
        codes: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Nearest valid configuration for each invalid row, for its own point; and the rows'
        keys."""
        groups = context.point_group[points]
        if context.repair is not None:
            codes, index = context.repair.repair_with_index(groups, codes)
            return codes, points.astype(np.int64) * self._product + index
        repaired = self._repair_by_constraints(context, points, codes, rng)
        return repaired, self._keys(points, repaired)

    def _repair_by_constraints(
        self,
        context: _Grid,
        points: np.ndarray,
        codes: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Repair where there is no table: the constraints, then the nearest valid design."""
        groups = context.point_group[points]
        inputs = {name: column[points] for name, column in context.input_columns.items()}
        invalid = np.flatnonzero(~self._valid_mask(inputs, codes))
        if len(invalid) == 0:
            return codes
        codes = codes.copy()
        if self.space.enumerable:
            for group in np.unique(groups[invalid]):
                rows = invalid[groups[invalid] == group]
                valid = context.valid_sets[group]
                if len(valid):
                    codes[rows] = nearest_codes(codes[rows], valid)
            return codes
        table = context.table.iloc[points[invalid]].reset_index(drop=True)
        codes[invalid] = self.space.repair_codes(table, codes[invalid], rng)
        return codes

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

    def _survive(
        self, values: np.ndarray, repeated: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Indices of survivors per point, with their rank and crowding (2N -> N); copies of an
        earlier individual (``repeated``) never survive twice."""
        n_points, merged, n_objectives = values.shape
        penalised = np.where(repeated[..., None], np.inf, values)
        n = self.population
        if n_objectives == 1:
            # by value, ties broken at random as pymoo's: sorting by the noise, then stably by
            # the value, is the lexicographic order of (value, noise)
            by_noise = np.argsort(rng.random((n_points, merged)), axis=1)
            value = np.take_along_axis(penalised[..., 0], by_noise, axis=1)
            by_value = np.argsort(value, axis=1, kind="stable")[:, :n]
            order = np.take_along_axis(by_noise, by_value, axis=1)
            rank = np.broadcast_to(np.arange(n), (n_points, n)).astype(float)
            return order, rank, np.zeros((n_points, n))
        return self._survive_fronts(penalised)

    def _survive_fronts(self, penalised: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Several objectives: pymoo's non-dominated sorting and crowding distance per point."""
        n_points, n = len(penalised), self.population
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

    @property
    def _sorted_by_rank(self) -> bool:
        return self._objectives == 1

    def _tournament(
        self, rank: np.ndarray, crowding: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Parent indices per point, ``(points, population)``, by binary tournament."""
        n_points, n = rank.shape
        a = rng.integers(n, size=(n_points, n))
        b = rng.integers(n, size=(n_points, n))
        if self._sorted_by_rank:
            # one objective: survivors are sorted, their rank is their position and their
            # crowding zero, so the lower position wins (ties: a)
            return np.minimum(a, b)
        rank_a, rank_b = np.take_along_axis(rank, a, 1), np.take_along_axis(rank, b, 1)
        crowd_a, crowd_b = np.take_along_axis(crowding, a, 1), np.take_along_axis(crowding, b, 1)
        a_wins = (rank_a < rank_b) | ((rank_a == rank_b) & (crowd_a >= crowd_b))
        return np.where(a_wins, a, b)


def _gather(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``take_along_axis(table, index, axis=1)`` (rows of ``index`` pick entries of each point's
    row of ``table``), as one take of whole entries along a flattened first axis."""
    points, width = table.shape[:2]
    flat = (np.arange(points)[:, None] * width + index).ravel()
    picked = np.take(table.reshape(points * width, *table.shape[2:]), flat, axis=0)
    return picked.reshape(*index.shape, *table.shape[2:])
