"""First-improvement iterated local search (after Kernel Tuner's ``greedy_ils``).

Hill climbing: the valid neighbours of the current design are measured in random order and the
search moves to the first better one, until none is better (a local optimum). The best local
optimum so far is the *home*; the search then perturbs home by a random walk of
``ceil(perturbation * parameters)`` neighbour steps and climbs again. After ``restart_after``
climbs without a better home it restarts from a random unmeasured valid design.
"""

from __future__ import annotations

import math

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._problem import NeighbourKind, SearchProblem


class IteratedLocalSearch(Strategy):
    """First-improvement iterated local search.

    Args:
        neighbourhood: ``Hamming``, ``adjacent`` or ``strictly_adjacent``.
        perturbation: fraction of the (non-constant) parameters the random walk changes.
        restart_after: climbs without improving home before a random restart.
    """

    name = "iterated_local_search"

    def __init__(
        self,
        *,
        neighbourhood: NeighbourKind = "Hamming",
        perturbation: float = 0.3,
        restart_after: int = 50,
    ) -> None:
        self.neighbourhood = neighbourhood
        self.perturbation = perturbation
        self.restart_after = restart_after

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        free = int((problem.sizes > 1).sum())
        steps = max(1, math.ceil(self.perturbation * free))
        current = problem.random_valid(1, rng, unseen=True)[0]
        energy = float(problem.evaluate(current[None, :])[0])
        home, home_energy = current, energy
        climbs_without_gain = 0
        while True:
            current, energy = self._climb(problem, current, energy, rng)
            if energy < home_energy:
                home, home_energy = current, energy
                climbs_without_gain = 0
            else:
                climbs_without_gain += 1
            if climbs_without_gain >= self.restart_after:
                home = problem.random_valid(1, rng, unseen=True)[0]
                home_energy = float(problem.evaluate(home[None, :])[0])
                climbs_without_gain = 0
            current = home
            for _ in range(steps):
                neighbours = problem.neighbours(current, self.neighbourhood)
                if len(neighbours) == 0:
                    break
                current = neighbours[rng.integers(len(neighbours))]
            energy = float(problem.evaluate(current[None, :])[0])

    def _climb(
        self,
        problem: SearchProblem,
        current: np.ndarray,
        energy: float,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, float]:
        improved = True
        while improved:
            improved = False
            neighbours = problem.neighbours(current, self.neighbourhood)
            for candidate in neighbours[rng.permutation(len(neighbours))]:
                value = float(problem.evaluate(candidate[None, :])[0])
                if value < energy:
                    current, energy, improved = candidate, value, True
                    break
        return current, energy
