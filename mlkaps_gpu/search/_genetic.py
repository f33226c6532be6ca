"""Genetic algorithm, constraint-aware after Willemsen et al., "Constraint-aware Optimization in
Auto-Tuning" (Kernel Tuner's ``genetic_algorithm``).

Each generation is evaluated as one batch and sorted by fitness; parents are drawn at ranks
``floor(Beta(1, 2.5) * population)`` (better ranks more often); crossover is single-point,
two-point or uniform; a child mutates with probability ``1 / mutation_chance``.

- constraint-aware: the initial population is valid, a mutation moves to a random valid Hamming
  neighbour, and an invalid child is repaired to a random neighbour from the first non-empty set
  of strictly-adjacent, adjacent and Hamming neighbours;
- constraint-unaware: the initial population is drawn from the Cartesian product, a mutation
  sets one parameter to a random other value, invalid children stay (static penalty).

A generation that measures nothing new (every child memoized) would stall the budget, so after
two such generations half the population is replaced by fresh random designs.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._problem import SearchProblem

Crossover = Literal["single_point", "two_point", "uniform"]
CROSSOVERS: tuple[str, ...] = ("single_point", "two_point", "uniform")
_STALLED_GENERATIONS = 2


class GeneticAlgorithm(Strategy):
    """Genetic algorithm on design codes.

    Args:
        population_size: individuals per generation.
        crossover: ``single_point``, ``two_point`` or ``uniform``.
        mutation_chance: a child mutates with probability ``1 / mutation_chance``.
        selection_beta: the ``b`` of the Beta(1, b) rank selection.
        constraint_aware: see the module docstring.
    """

    def __init__(
        self,
        *,
        population_size: int = 20,
        crossover: Crossover = "uniform",
        mutation_chance: int = 10,
        selection_beta: float = 2.5,
        constraint_aware: bool = True,
    ) -> None:
        if crossover not in CROSSOVERS:
            raise ValueError(f"unknown crossover {crossover!r} (allowed: {CROSSOVERS})")
        if population_size < 2:
            raise ValueError("population_size must be at least 2")
        self.population_size = population_size
        self.crossover = crossover
        self.mutation_chance = mutation_chance
        self.selection_beta = selection_beta
        self.constraint_aware = constraint_aware
        self.name = "genetic_algorithm" + ("" if constraint_aware else "_unaware")

    def _initial(self, problem: SearchProblem, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.constraint_aware:
            return problem.random_valid(n, rng, unseen=True)
        return problem.random_codes(n, rng)

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        size = self.population_size
        if problem.n_valid is not None and self.constraint_aware:
            size = max(2, min(size, problem.n_valid))
        population = self._initial(problem, size, rng)
        stalled = 0
        while True:
            before = problem.n_evaluations
            fitness = problem.evaluate(population)
            stalled = stalled + 1 if problem.n_evaluations == before else 0
            ranked = population[np.argsort(fitness, kind="stable")]
            if stalled >= _STALLED_GENERATIONS:
                half = len(ranked) // 2
                ranked[half:] = self._initial(problem, len(ranked) - half, rng)
                stalled = 0
            population = self._offspring(problem, ranked, rng)

    def _offspring(
        self, problem: SearchProblem, ranked: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        size = len(ranked)
        children: list[np.ndarray] = []
        seen: set[bytes] = set()
        for _ in range(50 * size):
            if len(children) >= size:
                break
            first, second = self._parents(size, rng)
            for child in self._cross(ranked[first], ranked[second], rng):
                child = self._mutate(problem, child, rng)
                if self.constraint_aware:
                    child = problem.repair_to_neighbour(child, rng)
                key = child.tobytes()
                if key not in seen and len(children) < size:
                    seen.add(key)
                    children.append(child)
        while len(children) < size:  # a tiny space: duplicates are free (memoized)
            children.append(ranked[len(children) % size].copy())
        return np.array(children, dtype=np.int64)

    def _parents(self, size: int, rng: np.random.Generator) -> tuple[int, int]:
        first = min(int(rng.beta(1.0, self.selection_beta) * size), size - 1)
        second = first
        while second == first:
            second = min(int(rng.beta(1.0, self.selection_beta) * size), size - 1)
        return first, second

    def _cross(
        self, mother: np.ndarray, father: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(mother)
        if self.crossover == "uniform":
            take = rng.random(n) < 0.5
        elif self.crossover == "single_point":
            take = np.arange(n) < rng.integers(1, n) if n > 1 else np.zeros(n, dtype=bool)
        else:
            low, high = np.sort(rng.choice(n + 1, size=2, replace=False))
            take = (np.arange(n) >= low) & (np.arange(n) < high)
        return np.where(take, father, mother), np.where(take, mother, father)

    def _mutate(
        self, problem: SearchProblem, child: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        if rng.integers(self.mutation_chance) != 0:
            return child
        if self.constraint_aware:
            neighbours = problem.neighbours(child, "Hamming")
            if len(neighbours):
                return neighbours[rng.integers(len(neighbours))].copy()
            return child
        free = np.flatnonzero(problem.sizes > 1)
        if len(free) == 0:
            return child
        index = int(free[rng.integers(len(free))])
        mutated = child.copy()
        shift = rng.integers(1, problem.sizes[index])
        mutated[index] = (child[index] + shift) % problem.sizes[index]
        return mutated
