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


class RegretOracle:
    """Scores configurations at the points of an optima table, caching whole columns.

    A *column* is the regret of one configuration at every point; columns asked for with
    :meth:`columns` are kept, so that selectors fitted one after the other on the same optima
    (a depth sweep) score each configuration once. Other requests are scored in one batch.

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
        self._cache: dict[bytes, np.ndarray] = {}
        self.reference = self._score(np.arange(len(self.inputs)), self.codes)

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

    def columns(self, configurations: np.ndarray) -> np.ndarray:
        """Regret of each configuration at every point (points x configs), kept for reuse."""
        configurations = np.asarray(configurations, dtype=np.int64)
        missing = [c for c in configurations if self._key(c) not in self._cache]
        if missing:
            points = np.arange(self.n_points)
            block = np.array(missing, dtype=np.int64)
            owner = np.repeat(points, len(block))
            values = self._score(owner, np.tile(block, (len(points), 1)))
            regret = self._relative(values, owner).reshape(len(points), -1)
            for index, configuration in enumerate(block):
                self._cache[self._key(configuration)] = regret[:, index]
        return np.column_stack([self._cache[self._key(c)] for c in configurations])

    def regret(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Relative regret of configuration ``codes[i]`` at point ``points[i]``."""
        points = np.asarray(points, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64).reshape(len(points), -1)
        out = np.empty(len(points))
        unknown = np.ones(len(points), dtype=bool)
        if self._cache and len(points):
            configurations, inverse = np.unique(codes, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            for index, configuration in enumerate(configurations):
                column = self._cache.get(self._key(configuration))
                if column is not None:
                    rows = inverse == index
                    out[rows] = column[points[rows]]
                    unknown[rows] = False
        if unknown.any():
            values = self._score(points[unknown], codes[unknown])
            out[unknown] = self._relative(values, points[unknown])
        return out

    def matrix(self, points: np.ndarray, configurations: np.ndarray) -> np.ndarray:
        """Regret of every configuration (rows of codes) at every point: points x configs."""
        points = np.asarray(points, dtype=np.int64)
        configurations = np.asarray(configurations, dtype=np.int64)
        out = np.empty((len(points), len(configurations)))
        cached = [self._cache.get(self._key(c)) for c in configurations]
        missing = [i for i, column in enumerate(cached) if column is None]
        for index, column in enumerate(cached):
            if column is not None:
                out[:, index] = column[points]
        if missing:
            block = configurations[missing]
            owner = np.repeat(points, len(block))
            values = self._score(owner, np.tile(block, (len(points), 1)))
            regret = self._relative(values, owner)
            out[:, missing] = regret.reshape(len(points), len(block))
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
