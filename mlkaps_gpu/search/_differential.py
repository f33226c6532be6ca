"""Differential evolution on design codes, constraint-aware after Willemsen et al.

Population of integer code vectors; each generation builds one trial per member with
``best1bin`` (``best + F (x_r1 - x_r2)``) or ``rand1bin`` (``x_r0 + F (x_r1 - x_r2)``) and
binomial crossover (rate ``CR``, one forced parameter), rounds and clips it to the codes, and keeps
it when it is at least as good as the member.

- constraint-aware: the initial population is a Latin hypercube repaired to valid designs, and
  every trial is repaired to the nearest valid design (least L1 distance on codes);
- constraint-unaware: neither; invalid trials get the static penalty.

When the best member has not improved for ``stall_generations`` generations, or a generation
measured nothing new, every member but the best is reinitialised from a fresh hypercube.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._problem import SearchProblem

Method = Literal["best1bin", "rand1bin"]
DE_METHODS: tuple[str, ...] = ("best1bin", "rand1bin")


class DifferentialEvolution(Strategy):
    """Differential evolution.

    Args:
        population_size: members (at least 4).
        method: ``best1bin`` or ``rand1bin``.
        mutation: the differential weight ``F``.
        recombination: the crossover rate ``CR``.
        stall_generations: generations without improvement before reinitialisation.
        constraint_aware: see the module docstring.
    """

    def __init__(
        self,
        *,
        population_size: int = 20,
        method: Method = "best1bin",
        mutation: float = 0.8,
        recombination: float = 0.9,
        stall_generations: int = 10,
        constraint_aware: bool = True,
    ) -> None:
        if method not in DE_METHODS:
            raise ValueError(f"unknown method {method!r} (allowed: {DE_METHODS})")
        if population_size < 4:
            raise ValueError("population_size must be at least 4")
        self.population_size = population_size
        self.method = method
        self.mutation = mutation
        self.recombination = recombination
        self.stall_generations = stall_generations
        self.constraint_aware = constraint_aware
        self.name = "differential_evolution" + ("" if constraint_aware else "_unaware")

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        size = self.population_size
        free = np.flatnonzero(problem.sizes > 1)
        if len(free) == 0:
            problem.evaluate(np.zeros((1, problem.n_design), dtype=np.int64))
            return
        population = problem.latin_hypercube(size, rng, repair=self.constraint_aware)
        fitness = problem.evaluate(population)
        best = float(fitness.min())
        stalled = 0
        while True:
            trials = self._trials(problem, population, fitness, free, rng)
            before = problem.n_evaluations
            trial_fitness = problem.evaluate(trials)
            keep = trial_fitness <= fitness
            population[keep] = trials[keep]
            fitness[keep] = trial_fitness[keep]
            if fitness.min() < best:
                best, stalled = float(fitness.min()), 0
            else:
                stalled += 1
            if stalled >= self.stall_generations or problem.n_evaluations == before:
                leader = int(np.argmin(fitness))
                fresh = problem.latin_hypercube(size, rng, repair=self.constraint_aware)
                fresh[0] = population[leader]
                population = fresh
                fitness = problem.evaluate(population)
                stalled = 0

    def _trials(
        self,
        problem: SearchProblem,
        population: np.ndarray,
        fitness: np.ndarray,
        free: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray:
        size, n = population.shape
        members = np.arange(size)
        others = np.array([rng.choice(np.delete(members, i), 3, replace=False) for i in members])
        positions = population.astype(np.float64)
        if self.method == "best1bin":
            base = np.broadcast_to(positions[int(np.argmin(fitness))], positions.shape)
        else:
            base = positions[others[:, 2]]
        mutant = base + self.mutation * (positions[others[:, 0]] - positions[others[:, 1]])
        cross = rng.random((size, n)) < self.recombination
        forced = free[rng.integers(len(free), size=size)]
        cross[np.arange(size), forced] = True
        trial = np.where(cross, mutant, positions)
        codes = np.clip(np.rint(trial).astype(np.int64), 0, problem.sizes - 1)
        return problem.repair(codes, rng) if self.constraint_aware else codes
