"""Simulated annealing over valid neighbours (after Kernel Tuner's ``simulated_annealing``).

From a random valid design, each step proposes a random valid neighbour and accepts it with
probability 1 when better, else ``exp(-(f_new - f_old) / f_old / T)`` (relative worsening, so
the temperature scale does not depend on the objective's unit); a failed design is never
accepted over a successful one. ``T`` is multiplied by ``cooling`` each step; below
``final_temperature`` the search restarts from a random unmeasured valid design at the initial
temperature. The schedule does not depend on the budget, so a run of budget ``b`` is the prefix
of a run of a larger budget.
"""

from __future__ import annotations

import math

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._problem import NeighbourKind, SearchProblem


class SimulatedAnnealing(Strategy):
    """Simulated annealing.

    Args:
        initial_temperature: temperature at the start and after each restart.
        final_temperature: temperature below which the search restarts.
        cooling: factor applied to the temperature each step.
        neighbourhood: ``Hamming``, ``adjacent`` or ``strictly_adjacent``.
    """

    name = "simulated_annealing"

    def __init__(
        self,
        *,
        initial_temperature: float = 1.0,
        final_temperature: float = 1e-3,
        cooling: float = 0.99,
        neighbourhood: NeighbourKind = "Hamming",
    ) -> None:
        if not 0.0 < cooling < 1.0:
            raise ValueError("cooling must lie in (0, 1)")
        self.initial_temperature = initial_temperature
        self.final_temperature = final_temperature
        self.cooling = cooling
        self.neighbourhood = neighbourhood

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        while True:  # one annealing cycle per pass; ends by StopSearch
            current = problem.random_valid(1, rng, unseen=True)[0]
            energy = float(problem.evaluate(current[None, :])[0])
            temperature = self.initial_temperature
            while temperature >= self.final_temperature:
                neighbours = problem.neighbours(current, self.neighbourhood)
                if len(neighbours) == 0:
                    break
                candidate = neighbours[rng.integers(len(neighbours))]
                new_energy = float(problem.evaluate(candidate[None, :])[0])
                if rng.random() < acceptance(energy, new_energy, temperature):
                    current, energy = candidate, new_energy
                temperature *= self.cooling


def acceptance(old: float, new: float, temperature: float) -> float:
    """Probability of moving from energy ``old`` to ``new`` (minimisation)."""
    if not math.isfinite(old):
        return 1.0
    if not math.isfinite(new):
        return 0.0
    if new < old:
        return 1.0
    scale = abs(old) if old != 0 else 1.0
    return math.exp(-(new - old) / scale / temperature)
