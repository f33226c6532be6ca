"""Predicted regret of configurations at the optima's input points.

The *relative regret* of configuration ``c`` at point ``p`` is
``(score(p, c) - score(p, o_p)) / |score(p, o_p)|``, where ``o_p`` is the optimum found at
``p`` and ``score`` the predicted objective (minimised). For a positive objective such as a
time it is ``score(p, c) / score(p, o_p) - 1``; a negated throughput (a maximised objective)
gives the relative loss of throughput. Where ``score(p, o_p)`` is 0 the plain difference is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space

Score = Callable[[pd.DataFrame], np.ndarray]


def relative_regret(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``(values - reference) / |reference|`` (plain difference where ``reference`` is 0)."""
    values = np.asarray(values, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    scale = np.abs(reference)
    return np.where(
        scale > 0, (values - reference) / np.where(scale > 0, scale, 1.0), values - reference
    )


def _by_configuration(codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct rows of ``codes`` and, for each, the indices of the rows equal to it."""
    configurations, inverse = np.unique(codes, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    return configurations, np.split(order, np.cumsum(np.bincount(inverse))[:-1])


class RegretOracle:
    """Scores configurations at the points of an optima table, caching what it scored.

    Every request (:meth:`columns`, :meth:`matrix`, :meth:`regret`) scores only the
    (point, configuration) pairs never scored before, in one batch, and keeps them: selectors
    fitted one after the other on the same optima (a depth sweep, whose leaves at one depth
    split those of the depth before) score each pair once. The score must be a function of
    each row alone (the same row scores the same in any batch).

    Args:
        optima: one row per input point with its optimal configuration.
        space: the search space (its input and design columns are read from ``optima``).
        score: predicted objective (minimised) of rows of inputs + design.
        clip: clip regrets at zero: the optima are the decisions to reproduce, a
            configuration scored better than a point's decision is worth no more than it
            (a decision made from measurements outranks a prediction below it).

    Attributes:
        inputs: the input columns of the points (index 0..n-1).
        codes: the design codes of the optima (n x n_design).
        reference: the predicted objective of each point's own optimum.
        n_scored: rows scored so far.
    """

    def __init__(
        self, optima: pd.DataFrame, space: Space, score: Score, *, clip: bool = False
    ) -> None:
        self.space = space
        self.score = score
        self.clip = clip
        self.inputs = optima[space.input_names].reset_index(drop=True)
        self.codes = space.design_codes(optima)
        if np.any(self.codes < 0):
            raise ValueError("the optima hold design values outside their domains")
        self.n_scored = 0
        # per configuration: its regret at every point and which of them are known
        self._cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        points = np.arange(len(self.inputs))
        self.reference = self._score(points, self.codes)
        self._keep(points, self.codes, self._relative(self.reference, points))

    @property
    def n_points(self) -> int:
        """Input points of the optima table."""
        return len(self.inputs)

    def _score(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        if len(points) == 0:
            return np.empty(0)
        table = self.space.assemble(self.inputs.iloc[points], codes)
        values = np.asarray(self.score(table), dtype=np.float64).reshape(-1)
        if len(values) != len(points):
            raise ValueError(f"score returned {len(values)} values for {len(points)} rows")
        self.n_scored += len(points)
        return values

    def _relative(self, values: np.ndarray, points: np.ndarray) -> np.ndarray:
        regret = relative_regret(values, self.reference[points])
        return np.maximum(regret, 0.0) if self.clip else regret

    @staticmethod
    def _key(codes: np.ndarray) -> bytes:
        return np.ascontiguousarray(codes, dtype=np.int64).tobytes()

    def _entry(self, configuration: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = self._key(configuration)
        entry = self._cache.get(key)
        if entry is None:
            entry = (np.zeros(self.n_points), np.zeros(self.n_points, dtype=bool))
            self._cache[key] = entry
        return entry

    def columns(self, configurations: np.ndarray) -> np.ndarray:
        """Regret of each configuration at every point (points x configs)."""
        return self.matrix(np.arange(self.n_points), configurations)

    def regret(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Relative regret of configuration ``codes[i]`` at point ``points[i]``."""
        points = np.asarray(points, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64).reshape(len(points), -1)
        out = np.empty(len(points))
        if len(points) == 0:
            return out
        configurations, groups = _by_configuration(codes)
        entries = [self._entry(c) for c in configurations]
        unknown = np.zeros(len(points), dtype=bool)
        for (values, known), rows in zip(entries, groups, strict=True):
            at = points[rows]
            hit = known[at]
            out[rows[hit]] = values[at[hit]]
            unknown[rows[~hit]] = True
        if unknown.any():
            rows = np.flatnonzero(unknown)
            out[rows] = self._relative(self._score(points[rows], codes[rows]), points[rows])
            self._keep(points[rows], codes[rows], out[rows])
        return out

    def _keep(self, points: np.ndarray, codes: np.ndarray, regret: np.ndarray) -> None:
        """Remember the regret of configuration ``codes[i]`` at point ``points[i]``."""
        configurations, groups = _by_configuration(codes)
        for configuration, rows in zip(configurations, groups, strict=True):
            values, known = self._entry(configuration)
            values[points[rows]] = regret[rows]
            known[points[rows]] = True

    def matrix(self, points: np.ndarray, configurations: np.ndarray) -> np.ndarray:
        """Regret of every configuration (rows of codes) at every point: points x configs."""
        points = np.asarray(points, dtype=np.int64)
        configurations = np.asarray(configurations, dtype=np.int64).reshape(len(configurations), -1)
        out = np.empty((len(points), len(configurations)))
        if out.size == 0:
            return out
        entries = [self._entry(c) for c in configurations]
        missing = np.column_stack([~known[points] for _, known in entries])
        if missing.any():
            at, which = np.nonzero(missing)
            regret = self._relative(self._score(points[at], configurations[which]), points[at])
            for index in np.unique(which):
                values, known = entries[index]
                values[points[at[which == index]]] = regret[which == index]
                known[points[at[which == index]]] = True
        for index, (values, _) in enumerate(entries):
            out[:, index] = values[points]
        return out

    def valid(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Whether configuration ``codes[i]`` satisfies the constraints at ``points[i]``."""
        table = self.space.assemble(self.inputs.iloc[np.asarray(points)], codes)
        return self.space.satisfies_constraints(table)


@dataclass(frozen=True)
class RegretSummary:
    """Predicted regret of a selector over the optima's points."""

    mean: float
    p90: float
    max: float
    n_points: int
    n_invalid: int  # points whose selected configuration violates a constraint

    def as_dict(self) -> dict[str, float | int]:
        """JSON-ready: ``mean_regret``, ``p90_regret``, ``max_regret``, ``points`` and
        ``invalid``."""
        return {
            "mean_regret": self.mean,
            "p90_regret": self.p90,
            "max_regret": self.max,
            "points": self.n_points,
            "invalid": self.n_invalid,
        }


def summarize(regret: np.ndarray, invalid: np.ndarray) -> RegretSummary:
    regret = np.asarray(regret, dtype=np.float64)
    if len(regret) == 0:
        return RegretSummary(0.0, 0.0, 0.0, 0, 0)
    return RegretSummary(
        mean=float(np.mean(regret)),
        p90=float(np.quantile(regret, 0.9)),
        max=float(np.max(regret)),
        n_points=len(regret),
        n_invalid=int(np.count_nonzero(invalid)),
    )
