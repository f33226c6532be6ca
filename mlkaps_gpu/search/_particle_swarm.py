"""Particle swarm optimization in the continuous embedding (see ``_embedding``).

Standard update ``v = w v + c1 r1 (p - x) + c2 r2 (g - x)``, positions clipped to the unit cube.
A position is evaluated as the design of its cell:

- constraint-aware: repaired to the nearest valid design for the evaluation only (the particle
  keeps its position); particles start on random valid designs;
- constraint-unaware: evaluated as is (static penalty when invalid); particles start anywhere.

When an iteration measures nothing new three times in a row (the swarm converged on memoized
designs), every particle is scattered again; personal and global bests are kept.
"""

from __future__ import annotations

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._embedding import Embedding
from mlkaps_gpu.search._problem import SearchProblem

_STALLED_ITERATIONS = 3


class ParticleSwarm(Strategy):
    """Particle swarm (defaults of Kernel Tuner's ``pso``).

    Args:
        population_size: particles.
        inertia: ``w``.
        cognitive: ``c1``, pull towards the particle's own best.
        social: ``c2``, pull towards the swarm's best.
        constraint_aware: see the module docstring.
    """

    def __init__(
        self,
        *,
        population_size: int = 20,
        inertia: float = 0.5,
        cognitive: float = 2.0,
        social: float = 1.0,
        constraint_aware: bool = True,
    ) -> None:
        self.population_size = population_size
        self.inertia = inertia
        self.cognitive = cognitive
        self.social = social
        self.constraint_aware = constraint_aware
        self.name = "particle_swarm" + ("" if constraint_aware else "_unaware")

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        embedding = Embedding(problem.sizes)
        size, dims = self.population_size, embedding.dimensions
        if dims == 0:
            problem.evaluate(np.zeros((1, problem.n_design), dtype=np.int64))
            return
        positions = self._scatter(problem, embedding, size, rng)
        velocities = rng.uniform(-0.5, 0.5, size=(size, dims)) / embedding.sizes[embedding.free]
        own_best = positions.copy()
        own_fitness = np.full(size, np.inf)
        swarm_best = positions[0].copy()
        swarm_fitness = np.inf
        stalled = 0
        while True:
            codes = embedding.to_codes(positions)
            if self.constraint_aware:
                codes = problem.repair(codes, rng)
            before = problem.n_evaluations
            fitness = problem.evaluate(codes)
            better = fitness < own_fitness
            own_best[better] = positions[better]
            own_fitness[better] = fitness[better]
            leader = int(np.argmin(own_fitness))
            if own_fitness[leader] < swarm_fitness or not np.isfinite(swarm_fitness):
                swarm_best, swarm_fitness = own_best[leader].copy(), float(own_fitness[leader])
            stalled = stalled + 1 if problem.n_evaluations == before else 0
            if stalled >= _STALLED_ITERATIONS:
                positions = self._scatter(problem, embedding, size, rng)
                stalled = 0
                continue
            r1, r2 = rng.random((2, size, dims))
            velocities = (
                self.inertia * velocities
                + self.cognitive * r1 * (own_best - positions)
                + self.social * r2 * (swarm_best - positions)
            )
            positions = np.clip(positions + velocities, 0.0, 1.0)

    def _scatter(
        self, problem: SearchProblem, embedding: Embedding, size: int, rng: np.random.Generator
    ) -> np.ndarray:
        if self.constraint_aware:
            codes = problem.random_valid(size, rng, unseen=True)
            jitter = (rng.random((size, embedding.dimensions)) - 0.5) / embedding.sizes[
                embedding.free
            ]
            return np.clip(embedding.to_unit(codes) + jitter, 0.0, 1.0)
        return rng.random((size, embedding.dimensions))
