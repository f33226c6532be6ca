"""Run-time validity of a selected configuration: the constraints and the fallback.

A :class:`Validity` travels with a :class:`~mlkaps_gpu.trees._model.DecisionModel` and says what
the Python ``predict`` and the generated header both do after the trees have answered:

1. *Clamp.* Every input with a numeric range (or numeric value list) is clamped to
   ``[low, high]`` (``[min, max]`` of the list); a NaN float input becomes ``low``. Categorical
   and bool inputs are used as given. The trees themselves see the unclamped inputs (their
   thresholds lie inside the domain, so a value past an end takes the same path as the end).
2. *Check.* The tree configuration is checked against every constraint at the clamped inputs
   (float64 arithmetic, as :class:`~mlkaps_gpu.space.Constraint` evaluates it).
3. *Fall back.* An invalid configuration is replaced by the nearest valid one at the clamped
   inputs: only the design parameters some constraint mentions change, the distance is the sum
   of absolute differences of their value codes, and ties go to the first candidate in
   enumeration order (first parameter slowest). The candidates are every combination of those
   parameters' values when there are at most ``search_limit`` of them (so the fallback finds a
   valid configuration whenever one exists), otherwise the distinct combinations found in the
   training optima. Where no candidate is valid the tree configuration is returned unchanged.

Inside the declared domain a configuration is therefore never invalid unless the constraints
admit none at that point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Constraint, Parameter, parse_constraint

#: Largest number of combinations of the constrained design parameters searched exhaustively.
SEARCH_LIMIT = 1 << 16
#: Candidate x row pairs evaluated per vectorised block of the fallback search.
_BLOCK = 1 << 20


def clamp_bounds(parameter: Parameter) -> tuple[float, float] | None:
    """``(low, high)`` an input is clamped to, or None (categorical and bool inputs)."""
    return parameter.bounds()


def clamp_column(parameter: Parameter, values: np.ndarray) -> np.ndarray:
    """Numeric input values clamped into the domain, NaN mapped to the low end."""
    bounds = clamp_bounds(parameter)
    values = np.asarray(values, dtype=np.float64)
    if bounds is None:
        return values
    low, high = bounds
    return np.where(np.isnan(values), low, np.clip(values, low, high))


@dataclass(frozen=True, eq=False)
class Validity:
    """Constraints of a space and the fallback search of a decision model.

    Attributes:
        inputs: input parameters (the model's feature order).
        design: design parameters (the model's output order).
        constraints: constraint sources, in the constraint language.
        candidates: value codes of the constrained design parameters (one row per candidate,
            columns in :attr:`constrained_design` order), or None for every combination.
    """

    inputs: tuple[Parameter, ...]
    design: tuple[Parameter, ...]
    constraints: tuple[str, ...]
    candidates: np.ndarray | None = None
    _parsed: list[Constraint] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "design", tuple(self.design))
        object.__setattr__(self, "constraints", tuple(str(c) for c in self.constraints))
        self.parsed()  # fail early on a bad constraint
        if self.candidates is not None:
            candidates = np.asarray(self.candidates, dtype=np.int64)
            sizes = np.array([self.design[i].n_values for i in self.constrained_design])
            if (
                candidates.ndim != 2
                or candidates.shape[1] != len(sizes)
                or len(candidates) == 0
                or np.any(candidates < 0)
                or np.any(candidates >= sizes)
            ):
                raise ValueError(
                    "fallback candidates must be a non-empty matrix of value codes of the "
                    f"constrained design parameters {[p.name for p in self.constrained_params]}"
                )
            candidates.setflags(write=False)
            object.__setattr__(self, "candidates", candidates)

    @classmethod
    def build(
        cls,
        inputs: Sequence[Parameter],
        design: Sequence[Parameter],
        constraints: Sequence[str],
        *,
        optima_codes: np.ndarray | None = None,
        search_limit: int = SEARCH_LIMIT,
    ) -> Validity:
        """A validity whose candidates are every combination when there are at most
        ``search_limit``, else the distinct rows of ``optima_codes`` (full design codes)."""
        validity = cls(tuple(inputs), tuple(design), tuple(constraints))
        if validity.product_size <= search_limit:
            return validity
        if optima_codes is None:
            raise ValueError(
                f"{validity.product_size} combinations of the constrained design parameters "
                f"exceed the search limit {search_limit}: give the optima's codes"
            )
        subset = np.asarray(optima_codes, dtype=np.int64)[:, list(validity.constrained_design)]
        return cls(
            validity.inputs, validity.design, validity.constraints, np.unique(subset, axis=0)
        )

    # ------------------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_parsed"] = []  # closures do not pickle; parsed again on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # ---------------------------------------------------------------------------- structure
    def parsed(self) -> list[Constraint]:
        """The parsed constraints (parsed once per object)."""
        if len(self._parsed) != len(self.constraints):
            parameters = {p.name: p for p in (*self.inputs, *self.design)}
            self._parsed[:] = [parse_constraint(text, parameters) for text in self.constraints]
        return self._parsed

    @property
    def mentioned(self) -> frozenset[str]:
        """Names of the parameters (inputs and design) some constraint mentions."""
        return frozenset().union(*(c.names for c in self.parsed()))

    @property
    def constrained_inputs(self) -> tuple[int, ...]:
        """Positions of the inputs some constraint mentions."""
        return tuple(i for i, p in enumerate(self.inputs) if p.name in self.mentioned)

    @property
    def constrained_design(self) -> tuple[int, ...]:
        """Positions of the design parameters some constraint mentions (the fallback varies
        these only)."""
        return tuple(i for i, p in enumerate(self.design) if p.name in self.mentioned)

    @property
    def constrained_params(self) -> tuple[Parameter, ...]:
        """The design parameters some constraint mentions (see :attr:`constrained_design`)."""
        return tuple(self.design[i] for i in self.constrained_design)

    @property
    def product_size(self) -> int:
        """Combinations of the constrained design parameters' values (what the fallback
        would search)."""
        return int(np.prod([p.n_values for p in self.constrained_params], dtype=np.float64))

    @property
    def searches_product(self) -> bool:
        """Whether the fallback searches every combination (else the candidate list)."""
        return self.candidates is None

    def candidate_codes(self) -> np.ndarray:
        """Fallback candidates in search order (rows of codes of the constrained parameters)."""
        if self.candidates is not None:
            return self.candidates
        sizes = tuple(p.n_values for p in self.constrained_params)
        if not sizes:  # constraints on inputs only: the one (empty) combination
            return np.zeros((1, 0), dtype=np.int64)
        return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)

    # ---------------------------------------------------------------------------- evaluation
    def clamped_inputs(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """The constrained inputs, clamped, as the constraint evaluator wants them."""
        columns: dict[str, np.ndarray] = {}
        for index in self.constrained_inputs:
            parameter = self.inputs[index]
            column = table[parameter.name].to_numpy()
            if parameter.kind == "categorical":
                columns[parameter.name] = column.astype(object)
            else:
                columns[parameter.name] = clamp_column(parameter, parameter.numeric(column))
        return columns

    def _design_columns(self, codes: np.ndarray, positions: Sequence[int]) -> dict[str, Any]:
        columns: dict[str, Any] = {}
        for column, index in enumerate(positions):
            parameter = self.design[index]
            values = parameter.domain_values()[codes[:, column]]
            kind = object if parameter.kind == "categorical" else np.float64
            columns[parameter.name] = values.astype(kind)
        return columns

    def _satisfied(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        result = np.ones(n_rows, dtype=bool)
        for constraint in self.parsed():
            result &= constraint.evaluate(columns, n_rows)
        return result

    def satisfied(self, clamped: Mapping[str, np.ndarray], codes: np.ndarray) -> np.ndarray:
        """Which rows' configurations (full design codes) satisfy every constraint."""
        codes = np.asarray(codes, dtype=np.int64)
        if not self.constraints:
            return np.ones(len(codes), dtype=bool)
        positions = self.constrained_design
        columns = {**clamped, **self._design_columns(codes[:, list(positions)], positions)}
        return self._satisfied(columns, len(codes))

    def apply(self, table: pd.DataFrame, codes: np.ndarray) -> np.ndarray:
        """The design codes after the check and the fallback (``codes``: the trees' answer)."""
        codes = np.array(codes, dtype=np.int64)
        if not self.constraints or len(codes) == 0:
            return codes
        clamped = self.clamped_inputs(table)
        invalid = np.flatnonzero(~self.satisfied(clamped, codes))
        if len(invalid):
            rows = {name: column[invalid] for name, column in clamped.items()}
            codes[invalid] = self.nearest_valid(rows, codes[invalid])
        return codes

    def nearest_valid(self, clamped: Mapping[str, np.ndarray], codes: np.ndarray) -> np.ndarray:
        """Per row, the nearest valid candidate (see the module docstring); rows without a
        valid candidate keep their codes."""
        positions = list(self.constrained_design)
        candidates = self.candidate_codes()
        out = np.array(codes, dtype=np.int64)
        per_block = max(1, _BLOCK // len(candidates))
        candidate_columns = self._design_columns(candidates, positions)
        for start in range(0, len(out), per_block):
            rows = np.arange(start, min(start + per_block, len(out)))
            owner = np.repeat(rows, len(candidates))
            columns: dict[str, Any] = {
                name: np.tile(column, len(rows)) for name, column in candidate_columns.items()
            }
            columns.update({name: column[owner] for name, column in clamped.items()})
            valid = self._satisfied(columns, len(owner)).reshape(len(rows), len(candidates))
            distance = np.abs(candidates[None, :, :] - out[rows][:, None, positions]).sum(axis=2)
            distance = np.where(valid, distance, np.iinfo(np.int64).max)
            best = np.argmin(distance, axis=1)
            found = valid[np.arange(len(rows)), best]
            chosen = out[rows]
            chosen[np.ix_(found, positions)] = candidates[best[found]]
            out[rows] = chosen
        return out
