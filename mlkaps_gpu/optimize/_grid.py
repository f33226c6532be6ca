"""Optimization phase: the best configuration of the surrogate at every input grid point.

Two methods share one interface (:meth:`GridOptimizer.run` -> optima table):

- ``nsga2``: NSGA-II at every grid point, all points advanced together as one array of integer
  design codes (:class:`~mlkaps_gpu.optimize._batched.BatchedNSGA2`): vectorised selection,
  pymoo's SBX and polynomial mutation over all matings at once, repair to the nearest valid
  configuration *for each point's inputs*, one batched surrogate prediction per generation.
- ``exhaustive``: where the valid design set is enumerated, predict every valid configuration at
  every point (the exact optimum of the surrogate); chosen by ``auto`` when that is cheaper than
  the genetic algorithm's evaluations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.optimize._batched import BatchedNSGA2, BatchedResult
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import Surrogate

if TYPE_CHECKING:
    from mlkaps_gpu.optimize._settings import OptimizationSettings

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
        bounds: upper bounds (lower for maximised objectives) on secondary objectives: with
            several objectives, the best primary objective among the configurations within
            them is picked (the weighted rule where none is).
        window: generations without improvement after which NSGA-II stops at a point.
        seed: seed of the genetic algorithms.
        progress: optional callback ``progress(done, total)``.
        chunk_size: grid points per NSGA-II chunk; each chunk has a seed of its own, so the
            result does not depend on how chunks are spread over workers.
        map_chunks: optional ``map_chunks(function, chunks) -> results`` that runs the
            NSGA-II chunks (on Dask workers, say); the built-in ``map`` by default.

    Raises:
        ValueError: an unknown method or direction, weights or directions not one per
            objective, a bound on the primary or an unknown objective, or a ``chunk_size``
            below one.
    """

    @classmethod
    def from_settings(
        cls,
        settings: OptimizationSettings,
        space: Space,
        *,
        objectives: Sequence[str] = ("time",),
        directions: Sequence[str] | None = None,
        seed: int = 0,
        progress: Callable[[int, int], None] | None = None,
    ) -> GridOptimizer:
        """The optimizer of ``[optimization]`` (method, population, generations, weights,
        bounds, window) over ``space``."""
        return cls(
            space,
            objectives=objectives,
            directions=directions,
            method=settings.method,
            population=settings.population,
            generations=settings.generations,
            weights=settings.weights,
            bounds=settings.bounds,
            window=settings.window,
            seed=seed,
            progress=progress,
        )

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
        bounds: Mapping[str, float] | None = None,
        window: int = 10,
        seed: int = 0,
        progress: Callable[[int, int], None] | None = None,
        chunk_size: int = 512,
        map_chunks: MapChunks | None = None,
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
        self.bounds = dict(bounds or {})
        unknown_bounds = set(self.bounds) - set(self.objectives[1:])
        if unknown_bounds:
            raise ValueError(
                f"bounds name {sorted(unknown_bounds)}: only secondary objectives "
                f"{self.objectives[1:]} can be bounded"
            )
        self.window = window
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        #: grid points per NSGA-II chunk; each chunk has its own seed derived from (seed, chunk
        #: index), so the result does not depend on how chunks are spread over workers
        self.chunk_size = chunk_size
        self.map_chunks = map_chunks
        self.seed = seed
        self.progress = progress
        self.fronts_: pd.DataFrame = pd.DataFrame()
        self.statistics_: dict[str, Any] = {}
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
        """The method :meth:`run` will use on ``grid``: ``"nsga2"`` or ``"exhaustive"``.

        ``method`` itself unless it is ``auto``; then ``nsga2`` where the valid designs cannot
        be enumerated, else ``exhaustive`` when a typical point (the first eight grid points'
        mean, where constraints involve inputs) has at most four times as many valid designs
        as NSGA-II would evaluate there (``population x (generations + 1)``), ``nsga2``
        otherwise. Call it before :meth:`run` to prepare what only one method needs (the
        campaign sends NSGA-II chunks to Dask workers this way).
        """
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
        """Index of the configuration to ship among candidates (rows of objective values, all
        minimised): the best primary objective within ``bounds`` on the others when bounds are
        declared (the weighted rule when no candidate meets them), else the lowest weighted sum
        of min-max normalised objectives."""
        if values.shape[1] == 1:
            return int(np.argmin(values[:, 0]))
        if self.bounds:
            within = np.ones(len(values), dtype=bool)
            for name, bound in self.bounds.items():
                index = self.objectives.index(name)
                sign = -1.0 if self.directions[index] == "maximize" else 1.0
                within &= values[:, index] <= sign * bound
            if within.any():
                primary = np.where(within, values[:, 0], np.inf)
                return int(np.argmin(primary))
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
        fronts: list[tuple[int, np.ndarray, np.ndarray]] = []

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
                if len(self.objectives) > 1:
                    for front_codes, front_values in _non_dominated(block, valid):
                        fronts.append((point, front_codes, front_values))
            pending, pending_rows = [], 0

        listed = space.listed_design_codes(grid)
        if listed is not None:  # a table replay: every point's listed designs at once
            owners, all_codes = listed
            bounds = np.searchsorted(owners, np.arange(n_points + 1))
            n_valid[:] = np.diff(bounds)
        for point, row in enumerate(_rows(grid) if listed is None else [{}] * n_points):
            if listed is None:
                valid = space.valid_design_codes(row).astype(np.int64)
            else:
                valid = all_codes[bounds[point] : bounds[point + 1]]
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
        self.fronts_ = self._front_table(grid, fronts)
        return codes, values, n_valid

    def _nsga2(
        self, surrogates: Sequence[Surrogate], grid: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        space = self.space
        starts = list(range(0, len(grid), self.chunk_size))
        tasks = [
            _ChunkTask(self, list(surrogates), grid.iloc[start : start + self.chunk_size], index)
            for index, start in enumerate(starts)
        ]
        mapper = self.map_chunks or (lambda function, items: list(map(function, items)))
        parts = list(mapper(_run_chunk, tasks))
        result = _concatenate(parts)
        if self.progress:
            self.progress(len(tasks), len(tasks))
        self.statistics_ = {
            "generations": max(part.generations for part in parts),
            "predictions": sum(part.predictions for part in parts),
            "predict_seconds": sum(part.predict_seconds for part in parts),
            "chunks": len(parts),
        }
        n_valid = np.where(result.alive, -1, 0).astype(np.int64)
        if space.enumerable:
            for group_values, rows in space._groups(grid):
                n_valid[rows] = len(space.valid_design_codes(group_values))
        codes, values = self._pick(grid, result)
        return codes, values, n_valid

    def _pick(self, grid: pd.DataFrame, result: BatchedResult) -> tuple[np.ndarray, np.ndarray]:
        """The configuration shipped at each point among its final population (and, with several
        objectives, the archive of each objective's best), and the fronts."""
        n_points = len(grid)
        codes = np.zeros((n_points, len(self.space.design)), dtype=np.int64)
        values = np.full((n_points, len(self.objectives)), np.nan)
        alive = np.flatnonzero(result.alive)
        if len(self.objectives) == 1:  # the lowest finite value, first of ties (as _choose)
            scores = result.values[alive, :, 0]
            index = np.where(np.isfinite(scores), scores, np.inf).argmin(axis=1)
            codes[alive] = result.codes[alive, index]
            values[alive] = result.values[alive, index]
            self.fronts_ = pd.DataFrame()
            return codes, values
        fronts = []
        for point in alive:
            candidates, candidate_codes = result.values[point], result.codes[point]
            if len(self.objectives) > 1 and result.archive_values is not None:
                assert result.archive_codes is not None
                candidates = np.concatenate([candidates, result.archive_values[point]])
                candidate_codes = np.concatenate([candidate_codes, result.archive_codes[point]])
            finite = np.isfinite(candidates).all(axis=1)
            index = self._choose(np.where(finite[:, None], candidates, np.inf))
            codes[point], values[point] = candidate_codes[index], candidates[index]
            if len(self.objectives) > 1:
                for front_codes, front_values in _non_dominated(
                    candidates[finite], candidate_codes[finite]
                ):
                    fronts.append((int(point), front_codes, front_values))
        self.fronts_ = self._front_table(grid, fronts)
        return codes, values

    def _front_table(
        self, grid: pd.DataFrame, fronts: list[tuple[int, np.ndarray, np.ndarray]]
    ) -> pd.DataFrame:
        if not fronts:
            return pd.DataFrame()
        points = np.array([f[0] for f in fronts])
        table = self.space.assemble(
            grid.iloc[points].reset_index(drop=True), np.array([f[1] for f in fronts])
        )
        table.insert(0, "point", points)
        for index, name in enumerate(self.objectives):
            sign = -1.0 if self.directions[index] == "maximize" else 1.0
            table[f"predicted_{name}"] = sign * np.array([f[2][index] for f in fronts])
        return table


MapChunks = Callable[[Callable[[Any], Any], list[Any]], list[Any]]


class _ChunkTask:
    """One chunk of grid points, picklable so that Dask workers can run it."""

    def __init__(
        self, owner: GridOptimizer, surrogates: list[Surrogate], grid: pd.DataFrame, index: int
    ) -> None:
        self.space = owner.space
        self.surrogates = surrogates
        self.directions = owner.directions
        self.population = max(4, owner.population + owner.population % 2)
        self.generations = owner.generations
        self.window = owner.window
        self.weights = list(owner.weights) if len(owner.objectives) > 1 else None
        self.seed = int(np.random.SeedSequence([owner.seed, index]).generate_state(1)[0])
        self.grid = grid.reset_index(drop=True)

    def predict(self, features: np.ndarray) -> np.ndarray:
        out = np.empty((len(features), len(self.surrogates)))
        for index, surrogate in enumerate(self.surrogates):
            sign = -1.0 if self.directions[index] == "maximize" else 1.0
            out[:, index] = sign * surrogate.predict(features)
        return out


def _run_chunk(task: _ChunkTask) -> BatchedResult:
    optimizer = BatchedNSGA2(
        task.space,
        population=task.population,
        generations=task.generations,
        window=task.window,
        weights=task.weights,
        seed=task.seed,
    )
    return optimizer.run(task.predict, task.grid)


def _concatenate(parts: list[BatchedResult]) -> BatchedResult:
    objectives = max(part.values.shape[2] for part in parts)
    for part in parts:  # chunks without any valid point keep a one-objective placeholder
        if part.values.shape[2] != objectives or part.archive_values is None:
            points, population, design = part.codes.shape
            part.values = np.full((points, population, objectives), np.inf)
            part.archive_codes = np.zeros((points, objectives, design), dtype=np.int64)
            part.archive_values = np.full((points, objectives, objectives), np.inf)
    archives = [part.archive_values is not None for part in parts]
    result = BatchedResult(
        codes=np.concatenate([part.codes for part in parts]),
        values=np.concatenate([part.values for part in parts]),
        alive=np.concatenate([part.alive for part in parts]),
    )
    if all(archives):
        result.archive_codes = np.concatenate([p.archive_codes for p in parts])  # type: ignore[misc]
        result.archive_values = np.concatenate([p.archive_values for p in parts])  # type: ignore[misc]
    return result


def _non_dominated(values: np.ndarray, codes: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Distinct non-dominated (codes, values) pairs of one population (all minimised)."""
    _, first = np.unique(codes, axis=0, return_index=True)
    values, codes = values[first], codes[first]
    if values.shape[1] == 2:  # sort by the first objective, sweep the second: O(k log k)
        order = np.lexsort((values[:, 1], values[:, 0]))
        best_second = np.minimum.accumulate(values[order, 1])
        previous = np.r_[np.inf, best_second[:-1]]
        chosen = order[values[order, 1] < previous]
        return [(codes[i], values[i]) for i in chosen]
    keep = []
    for index in range(len(values)):
        dominated = np.all(values <= values[index], axis=1) & np.any(values < values[index], axis=1)
        if not dominated.any():
            keep.append(index)
    return [(codes[i], values[i]) for i in keep]


def _rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    return table.to_dict(orient="records")
