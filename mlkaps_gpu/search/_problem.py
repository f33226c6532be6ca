"""One input point's design space as a strategy sees it: integer design codes, an evaluation
with memoization and a budget, validity, repair, neighbours and random designs.

Budget accounting: every configuration evaluated for the first time costs one evaluation, a
failed measurement included; a configuration seen before is answered from memory for free.
Configurations that violate the constraints are never sent to the objective: they get the
``invalid`` status and an infinite fitness, and cost one evaluation unless ``count_invalid`` is
false (Kernel Tuner's convention).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.executors import INVALID, OK
from mlkaps_gpu.search._objectives import (
    Objective,
    flat_index,
    input_table,
)
from mlkaps_gpu.space import NEIGHBOUR_KINDS, Space, nearest_codes, radix, select_neighbours

NeighbourKind = Literal["strictly_adjacent", "adjacent", "Hamming"]
#: Fitness of a failed or invalid configuration (a static penalty: worse than any value).
FAILED = math.inf
#: Proposals (memoized ones included) per unit of budget after which a search is stopped as
#: stalled; strategies inject fresh configurations long before this in normal operation.
_PROPOSALS_PER_EVALUATION = 1000
_MIN_PROPOSALS = 100_000


class StopSearch(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Ends a strategy's loop: the budget is spent, every valid design is measured, or the
    search stalled. ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SearchProblem:
    """The design space of one input point, with a memoizing, budgeted evaluation.

    Args:
        space: the search space.
        inputs: the input point (one value per input parameter).
        objective: ``objective(designs) -> (values, statuses)``; its ``evaluate_codes(codes)``
            is used instead when it has one.
        budget: evaluations allowed.
        count_invalid: whether a constraint-violating configuration costs an evaluation.
    """

    def __init__(
        self,
        space: Space,
        inputs: Mapping[str, Any],
        objective: Objective,
        budget: int,
        *,
        count_invalid: bool = True,
    ) -> None:
        self.space = space
        self.inputs = dict(inputs)
        self._inputs_row = input_table(space, self.inputs, 1)
        self.objective = objective
        self._evaluate_codes = getattr(objective, "evaluate_codes", None)
        self.budget = int(budget)
        self.count_invalid = count_invalid
        self.sizes = space.design_sizes.astype(np.int64)
        self.n_design = len(self.sizes)
        self._place = radix(self.sizes)
        self.valid_codes: np.ndarray | None = None
        self._valid_mask: np.ndarray | None = None
        self._measured_mask: np.ndarray | None = None
        if space.enumerable:
            self.valid_codes = space.valid_design_codes(self.inputs).astype(np.int64)
            self._valid_mask = np.zeros(space.design_product, dtype=bool)
            self._valid_mask[self.flat(self.valid_codes)] = True
            self._measured_mask = np.zeros(space.design_product, dtype=bool)
            if len(self.valid_codes) == 0:
                raise ValueError(f"no valid configuration for the input point {self.inputs}")
        self._memo: dict[int, float] = {}
        self._codes: list[np.ndarray] = []
        self._values: list[float] = []
        self._statuses: list[str] = []
        self.n_evaluations = 0
        self.n_valid_measured = 0
        self.n_proposals = 0
        self.max_proposals = max(_MIN_PROPOSALS, _PROPOSALS_PER_EVALUATION * self.budget)
        self.best_fitness = FAILED

    # ------------------------------------------------------------------------------ codes
    def flat(self, codes: np.ndarray) -> np.ndarray:
        """Row-major flat index of each row of codes."""
        return flat_index(codes, self._place)

    @property
    def n_valid(self) -> int | None:
        """Number of valid designs (None when the space is not enumerated)."""
        return None if self.valid_codes is None else len(self.valid_codes)

    def is_valid(self, codes: np.ndarray) -> np.ndarray:
        """Whether each row of (in-domain) codes satisfies the constraints."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, self.n_design)
        if self._valid_mask is not None:
            return self._valid_mask[self.flat(codes)]
        rows = self.space.assemble(self._inputs(len(codes)), codes)
        return self.space.satisfies_constraints(rows)

    def is_measured(self, codes: np.ndarray) -> np.ndarray:
        """Whether each row of codes was already evaluated (answered from memory)."""
        keys = self.flat(np.asarray(codes, dtype=np.int64).reshape(-1, self.n_design))
        if self._measured_mask is not None:
            return self._measured_mask[keys]
        return np.array([key in self._memo for key in keys.tolist()], dtype=bool)

    def _inputs(self, n: int) -> pd.DataFrame:
        return self._inputs_row.iloc[np.zeros(n, dtype=np.int64)].reset_index(drop=True)

    # ------------------------------------------------------------------------- evaluation
    def evaluate(self, codes: np.ndarray) -> np.ndarray:
        """Fitness of each row of codes (the objective value; ``inf`` when failed or invalid).

        Rows seen before cost nothing. Raises :class:`StopSearch` once the budget is spent (the
        rows that fitted are recorded first), every valid design is measured, or the search
        proposed far more configurations than its budget without measuring them.
        """
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, self.n_design)
        self.n_proposals += len(codes)
        keys = self.flat(codes).tolist()
        fitness = np.full(len(codes), np.nan)
        pending: dict[int, list[int]] = {}
        for row, key in enumerate(keys):
            known = self._memo.get(key)
            if known is not None:
                fitness[row] = known
            else:
                pending.setdefault(key, []).append(row)
        out_of_budget = False
        if pending:
            firsts = np.array([rows[0] for rows in pending.values()], dtype=np.int64)
            valid = self.is_valid(codes[firsts])
            taken: list[int] = []
            for position, ok in enumerate(valid):
                cost = 1 if (ok or self.count_invalid) else 0
                if self.n_evaluations + cost > self.budget:
                    out_of_budget = True
                    break
                self.n_evaluations += cost
                taken.append(position)
            groups = list(pending.values())
            self._measure(codes, firsts[taken], valid[taken], [groups[p] for p in taken], fitness)
        if out_of_budget or self.n_evaluations >= self.budget:
            raise StopSearch("budget")
        if self.n_valid is not None and self.n_valid_measured >= self.n_valid:
            raise StopSearch("exhausted")
        if self.n_proposals > self.max_proposals:
            raise StopSearch("stalled")
        return fitness

    def _measure(
        self,
        codes: np.ndarray,
        firsts: np.ndarray,
        valid: np.ndarray,
        groups: list[list[int]],
        fitness: np.ndarray,
    ) -> None:
        """Measure the valid ones of the new rows ``firsts`` (one objective call) and record
        all of them; ``groups[i]`` lists the rows of the batch equal to ``firsts[i]``."""
        values = np.full(len(firsts), np.nan)
        statuses = np.full(len(firsts), INVALID, dtype=object)
        if valid.any():
            chosen = codes[firsts[valid]]
            if self._evaluate_codes is not None:
                measured, status = self._evaluate_codes(chosen)
            else:
                measured, status = self.objective(self.space.design_from_codes(chosen))
            status = np.asarray(status, dtype=object)
            values[valid] = np.where(status == OK, np.asarray(measured, dtype=np.float64), np.nan)
            statuses[valid] = status
        keys = self.flat(codes[firsts]).tolist()
        for position, row in enumerate(firsts.tolist()):
            ok = statuses[position] == OK and math.isfinite(values[position])
            score = float(values[position]) if ok else FAILED
            self._memo[keys[position]] = score
            if self._measured_mask is not None:
                self._measured_mask[keys[position]] = True
            fitness[groups[position]] = score
            if valid[position]:
                self.n_valid_measured += 1
            if valid[position] or self.count_invalid:
                self._codes.append(codes[row].copy())
                self._values.append(float(values[position]))
                self._statuses.append(str(statuses[position]))
            self.best_fitness = min(self.best_fitness, score)

    def history(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Codes, values (NaN unless ok) and statuses of the evaluations, in order."""
        codes = (
            np.vstack(self._codes) if self._codes else np.zeros((0, self.n_design), dtype=np.int64)
        )
        return (
            codes,
            np.array(self._values, dtype=np.float64),
            np.array(self._statuses, dtype=object),
        )

    # -------------------------------------------------------------------- random designs
    def random_codes(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform designs of the Cartesian product (valid or not)."""
        return rng.integers(self.sizes, size=(n, self.n_design))

    def random_valid(self, n: int, rng: np.random.Generator, *, unseen: bool = False) -> np.ndarray:
        """``n`` random valid designs (distinct when possible; never measured ones when
        ``unseen`` and some are left)."""
        if self.valid_codes is None:
            inputs = self._inputs(n)
            codes, found = self.space.sample_designs(inputs, rng)
            return codes[found]
        pool = self.valid_codes
        if unseen:
            assert self._measured_mask is not None
            fresh = pool[~self._measured_mask[self.flat(pool)]]
            if len(fresh):
                pool = fresh
        chosen = rng.choice(len(pool), size=n, replace=n > len(pool))
        return pool[chosen].copy()

    def latin_hypercube(self, n: int, rng: np.random.Generator, *, repair: bool) -> np.ndarray:
        """``n`` designs from a Latin hypercube over the codes, repaired to the nearest valid
        design when ``repair``."""
        strata = np.stack([rng.permutation(n) for _ in range(self.n_design)], axis=1)
        unit = (strata + rng.random((n, self.n_design))) / n
        codes = np.minimum((unit * self.sizes).astype(np.int64), self.sizes - 1)
        return self.repair(codes, rng) if repair else codes

    # ------------------------------------------------------------------------------ repair
    def repair(self, codes: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """Each invalid row replaced by the nearest valid design (least L1 distance on codes,
        ties to the first in enumeration order); valid rows unchanged."""
        codes = np.clip(np.asarray(codes, dtype=np.int64), 0, self.sizes - 1)
        codes = codes.reshape(-1, self.n_design)
        invalid = ~self.is_valid(codes)
        if not invalid.any():
            return codes
        out = codes.copy()
        if self.valid_codes is not None:
            out[invalid] = nearest_codes(codes[invalid], self.valid_codes)
        else:
            out[invalid] = self.space.repair_codes(
                self._inputs(int(invalid.sum())), codes[invalid], rng
            )
        return out

    def neighbours(self, here: np.ndarray, kind: NeighbourKind = "Hamming") -> np.ndarray:
        """Valid neighbours of one design (same definitions as ``Space.neighbours``; ``here``
        itself may be invalid)."""
        here = np.asarray(here, dtype=np.int64).reshape(self.n_design)
        if self.valid_codes is None:
            row = self.space.assemble(self._inputs(1), here[None, :]).iloc[0]
            return self.space.design_codes(self.space.neighbours(row, kind))
        if kind not in NEIGHBOUR_KINDS:
            raise ValueError(f"unknown neighbour kind {kind!r}")
        return select_neighbours(self.valid_codes, here, kind)

    def repair_to_neighbour(self, here: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A valid design unchanged; an invalid one replaced by a random neighbour from the first
        non-empty set of strictly-adjacent, adjacent and Hamming neighbours (Willemsen et al.)."""
        here = np.asarray(here, dtype=np.int64)
        if self.is_valid(here[None, :])[0]:
            return here
        for kind in ("strictly_adjacent", "adjacent", "Hamming"):
            found = self.neighbours(here, kind)  # type: ignore[arg-type]
            if len(found):
                return found[rng.integers(len(found))].copy()
        return self.repair(here[None, :], rng)[0]
