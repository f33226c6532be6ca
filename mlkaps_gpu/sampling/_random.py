"""Constraint-aware random and Latin hypercube samplers."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import qmc

from mlkaps_gpu.sampling._base import Sampler


class RandomSampler(Sampler):
    """Uniform inputs, and a design drawn uniformly from the valid set of each input."""

    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        return self.space.sample_valid(n, rng)


class LHSSampler(Sampler):
    """Latin hypercube over inputs and design codes; invalid rows keep their LHS inputs and get
    a valid random design (or, if their input admits none, a new valid random row)."""

    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        space = self.space
        dimensions = len(space.inputs) + len(space.design)
        unit = qmc.LatinHypercube(d=dimensions, rng=rng).random(n)
        # (a table replay's space snaps each point to the nearest recorded input point)
        inputs = space.inputs_from_unit(unit[:, : len(space.inputs)])
        offset = len(space.inputs)
        design = pd.DataFrame(
            {
                p.name: p.from_unit(unit[:, offset + i], discrete=True)
                for i, p in enumerate(space.design)
            }
        )
        table = pd.concat([inputs, design], axis=1)
        valid = space.is_valid(table)
        if valid.all():
            return space.assemble(inputs, space.design_codes(table))
        invalid = np.flatnonzero(~valid)
        codes = space.design_codes(table)
        replacement, found = space.sample_designs(inputs.iloc[invalid], rng)
        codes[invalid[found]] = replacement[found]
        result = space.assemble(inputs, codes)
        if not found.all():
            # inputs admitting no valid design: replace the whole row by a fresh valid one
            replaced = invalid[~found]
            fresh = space.sample_valid(len(replaced), rng).set_axis(replaced)
            result = pd.concat([result.drop(index=replaced), fresh]).sort_index()
        return result.reset_index(drop=True)
