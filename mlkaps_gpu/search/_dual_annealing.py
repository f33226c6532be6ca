"""Dual annealing: ``scipy.optimize.dual_annealing`` on the continuous embedding.

The annealer works in the unit cube (see ``_embedding``); each point it evaluates is mapped to
its cell's design and repaired to the nearest valid design, so only valid designs are measured.
Failed measurements are reported to SciPy as a large finite penalty (its local search needs
finite values). When SciPy finishes before the budget is spent it restarts from a new random
valid design with a new seed.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import dual_annealing

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._embedding import Embedding
from mlkaps_gpu.search._problem import SearchProblem

#: Value SciPy sees for a failed measurement.
PENALTY = 1e20
#: SciPy function calls allowed per unit of budget in one annealing run (memoized calls are
#: free for the budget but not for SciPy).
_CALLS_PER_EVALUATION = 20


class DualAnnealing(Strategy):
    """Dual annealing (constraint-aware through repair).

    Args:
        initial_temperature: SciPy's ``initial_temp``.
        visit: SciPy's ``visit`` (tail of the visiting distribution).
        accept: SciPy's ``accept``.
        local_search: run SciPy's local search (L-BFGS-B) after annealing steps.
    """

    name = "dual_annealing"

    def __init__(
        self,
        *,
        initial_temperature: float = 5230.0,
        visit: float = 2.62,
        accept: float = -5.0,
        local_search: bool = True,
    ) -> None:
        self.initial_temperature = initial_temperature
        self.visit = visit
        self.accept = accept
        self.local_search = local_search

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        embedding = Embedding(problem.sizes)
        if embedding.dimensions == 0:
            problem.evaluate(np.zeros((1, problem.n_design), dtype=np.int64))
            return

        def energy(point: np.ndarray) -> float:
            codes = problem.repair(embedding.to_codes(point), rng)
            return float(min(problem.evaluate(codes)[0], PENALTY))

        bounds = [(0.0, 1.0)] * embedding.dimensions
        while True:  # ends by StopSearch from problem.evaluate
            start = embedding.to_unit(problem.random_valid(1, rng, unseen=True))[0]
            dual_annealing(
                energy,
                bounds,
                maxfun=_CALLS_PER_EVALUATION * problem.budget,
                initial_temp=self.initial_temperature,
                visit=self.visit,
                accept=self.accept,
                no_local_search=not self.local_search,
                seed=np.random.default_rng(rng.integers(2**63)),
                x0=start,
            )
