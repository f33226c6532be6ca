"""Firefly algorithm in the continuous embedding (see ``_embedding``).

Each generation, every firefly moves towards each brighter one (lower fitness), from the
dimmest to the brightest attractor, by ``beta0 exp(-gamma r^2)`` of the distance, then takes a
random step ``alpha (u - 1/2)``; brightness is that of the start of the generation. Evaluation,
the aware / unaware variants and the restart on stalling are as for the particle swarm.
"""

from __future__ import annotations

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._embedding import Embedding
from mlkaps_gpu.search._problem import SearchProblem

_STALLED_GENERATIONS = 3


class Firefly(Strategy):
    """Firefly algorithm (defaults of Kernel Tuner's ``firefly_algorithm``).

    Args:
        population_size: fireflies.
        attractiveness: ``beta0``, attraction at distance 0.
        absorption: ``gamma``, decay of the attraction with the squared distance.
        randomness: ``alpha``, size of the random step.
        constraint_aware: see the particle swarm.
    """

    def __init__(
        self,
        *,
        population_size: int = 20,
        attractiveness: float = 1.0,
        absorption: float = 1.0,
        randomness: float = 0.2,
        constraint_aware: bool = True,
    ) -> None:
        self.population_size = population_size
        self.attractiveness = attractiveness
        self.absorption = absorption
        self.randomness = randomness
        self.constraint_aware = constraint_aware
        self.name = "firefly" + ("" if constraint_aware else "_unaware")

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        embedding = Embedding(problem.sizes)
        size, dims = self.population_size, embedding.dimensions
        if dims == 0:
            problem.evaluate(np.zeros((1, problem.n_design), dtype=np.int64))
            return
        positions = self._scatter(problem, embedding, size, rng)
        stalled = 0
        while True:
            codes = embedding.to_codes(positions)
            if self.constraint_aware:
                codes = problem.repair(codes, rng)
            before = problem.n_evaluations
            fitness = problem.evaluate(codes)
            stalled = stalled + 1 if problem.n_evaluations == before else 0
            if stalled >= _STALLED_GENERATIONS:
                leader = positions[int(np.argmin(fitness))].copy()
                positions = self._scatter(problem, embedding, size, rng)
                positions[0] = leader
                stalled = 0
                continue
            positions = self._move(positions, fitness, rng)

    def _move(
        self, positions: np.ndarray, fitness: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        moved = positions.copy()
        for attractor in np.argsort(-fitness, kind="stable"):  # dimmest attractor first
            dimmer = fitness > fitness[attractor]
            if not dimmer.any():
                continue
            offset = positions[attractor] - moved[dimmer]
            distance = (offset**2).sum(axis=1, keepdims=True)
            moved[dimmer] += self.attractiveness * np.exp(-self.absorption * distance) * offset
        moved += self.randomness * (rng.random(moved.shape) - 0.5)
        return np.clip(moved, 0.0, 1.0)

    def _scatter(
        self, problem: SearchProblem, embedding: Embedding, size: int, rng: np.random.Generator
    ) -> np.ndarray:
        if self.constraint_aware:
            codes = problem.random_valid(size, rng, unseen=True)
            cells = embedding.sizes[embedding.free]
            jitter = (rng.random((size, embedding.dimensions)) - 0.5) / cells
            return np.clip(embedding.to_unit(codes) + jitter, 0.0, 1.0)
        return rng.random((size, embedding.dimensions))
