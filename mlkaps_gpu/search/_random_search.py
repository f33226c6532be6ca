"""Random search without replacement over the valid designs (the baseline of the methodology)."""

from __future__ import annotations

import numpy as np

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._problem import SearchProblem

_CHUNK = 64


class RandomSearch(Strategy):
    """Valid designs in a uniformly random order, each measured once."""

    name = "random_search"

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        if problem.valid_codes is not None:
            order = problem.valid_codes[rng.permutation(len(problem.valid_codes))]
            for start in range(0, len(order), _CHUNK):
                problem.evaluate(order[start : start + _CHUNK])
            return
        while True:  # not enumerated: draws with rejection, repeats are free
            problem.evaluate(problem.random_valid(_CHUNK, rng))
