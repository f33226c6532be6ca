"""The (input point, configuration) rows that exist: a table replay over several inputs.

A table of measurements over input *points* (a shape of several dimensions) lists, for each
recorded point, the few configurations that were measured there. :class:`PointIndex` gives every
distinct tuple of values of some columns an integer id (per-column codes combined in a
mixed-radix integer, looked up with one sorted search: no Python loop over rows);
:class:`ListedRows` keeps, per point id, the sorted flat indices of its listed designs (CSR
layout), so that "is this (point, design) listed", "draw a listed design at these points" and
"the nearest listed design" are vectorised over rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space._parameters import Parameter, SpaceError

#: Largest mixed-radix key (the product of the distinct values of every keyed column).
_MAX_KEY = 2**62


def lookup_values(values: Any, kind: str, n_rows: int | None = None) -> np.ndarray:
    """``values`` in the form the index compares: float64 for numbers and bools, text for
    categories (so that 130, 130.0 and "130" of a categorical are one value)."""
    array = np.atleast_1d(np.asarray(values, dtype=object if kind == "categorical" else None))
    if n_rows is not None and len(array) != n_rows:
        array = np.broadcast_to(array, n_rows)
    if kind == "categorical":
        return np.asarray([str(v) for v in array.tolist()], dtype=object)
    return np.asarray(array, dtype=np.float64)


class PointIndex:
    """Integer ids of the distinct value tuples of some columns.

    Args:
        parameters: the keyed columns' parameters (their kinds say how values compare).
        table: rows holding a column per parameter; each distinct tuple becomes a point.

    Attributes:
        names: the keyed column names.
        row_ids: the point id of each row of ``table``.
        n_points: the number of distinct points; ids run from 0 to ``n_points - 1``.
    """

    def __init__(self, parameters: Sequence[Parameter], table: pd.DataFrame) -> None:
        self.parameters = list(parameters)
        self.names = [p.name for p in self.parameters]
        n_rows = len(table)
        self._levels: list[pd.Index] = []
        codes = np.zeros((n_rows, len(self.parameters)), dtype=np.int64)
        for index, parameter in enumerate(self.parameters):
            values = lookup_values(table[parameter.name].to_numpy(), parameter.kind, n_rows)
            level = pd.Index(pd.unique(values))
            self._levels.append(level)
            codes[:, index] = level.get_indexer(values)
        sizes = [max(1, len(level)) for level in self._levels]
        total = 1
        for size in sizes:
            total *= size
        if total >= _MAX_KEY:
            raise SpaceError(
                f"too many distinct input values to key the points ({' x '.join(map(str, sizes))})"
            )
        self._place = np.ones(len(sizes), dtype=np.int64)
        for index in range(len(sizes) - 2, -1, -1):
            self._place[index] = self._place[index + 1] * sizes[index + 1]
        keys = codes @ self._place if len(sizes) else np.zeros(n_rows, dtype=np.int64)
        self._keys, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        self.row_ids = inverse.astype(np.int64).reshape(-1)
        self.n_points = len(self._keys)
        #: the first row of ``table`` at each point, in id order
        self.first_rows = first.astype(np.int64)

    def points(self, table: pd.DataFrame) -> pd.DataFrame:
        """One row per point (the keyed columns of the first row of ``table`` with that point,
        ``table`` being the one the index was built from), in id order."""
        return table[self.names].iloc[self.first_rows].reset_index(drop=True)

    def ids(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """The point id of each row (-1 where its values are not a point of the index);
        ``columns`` maps each keyed name to a column (or a scalar, broadcast)."""
        key = np.zeros(n_rows, dtype=np.int64)
        known = np.ones(n_rows, dtype=bool)
        for parameter, level, place in zip(self.parameters, self._levels, self._place, strict=True):
            values = lookup_values(columns[parameter.name], parameter.kind, n_rows)
            code = level.get_indexer(values)
            known &= code >= 0
            key += np.maximum(code, 0) * place
        if self.n_points == 0:
            return np.full(n_rows, -1, dtype=np.int64)
        position = np.clip(np.searchsorted(self._keys, key), 0, self.n_points - 1)
        found = known & (self._keys[position] == key)
        return np.where(found, position, -1).astype(np.int64)


class ListedRows:
    """The listed design configurations of every recorded input point.

    Args:
        index: the points (over some or all of the space's inputs).
        points: one row per point, in id order (:meth:`PointIndex.points`).
        point_ids: the point id of each listed row.
        codes: the design codes of each listed row (n_rows x n_design, all >= 0).
        design_place: place values of the design codes (``Space`` radix), for flat indices.
    """

    def __init__(
        self,
        index: PointIndex,
        points: pd.DataFrame,
        point_ids: np.ndarray,
        codes: np.ndarray,
        design_place: np.ndarray,
        design_product: int,
    ) -> None:
        self.index = index
        self.names = list(index.names)
        self.points = points.reset_index(drop=True)
        self.design_product = int(design_product)
        if index.n_points * self.design_product >= _MAX_KEY:
            raise SpaceError(
                f"{index.n_points:,} input points x {self.design_product:,} configurations are "
                "too many (point, configuration) pairs to key"
            )
        flat = np.asarray(codes, dtype=np.int64) @ design_place
        pair = np.unique(np.asarray(point_ids, dtype=np.int64) * self.design_product + flat)
        #: sorted (point id x design product + flat design index) of every listed row
        self.pairs = pair
        owners = pair // self.design_product
        #: CSR: the listed designs of point p are ``flat[offsets[p]:offsets[p + 1]]``
        self.offsets = np.searchsorted(owners, np.arange(index.n_points + 1)).astype(np.int64)
        self.flat = pair % self.design_product
        self.counts = np.diff(self.offsets)
        sizes = np.asarray(design_place, dtype=np.int64)
        self._design_place = sizes
        self.codes = _unflatten(self.flat, sizes, len(sizes))
        self._tree: Any = None

    @property
    def n_points(self) -> int:
        return self.index.n_points

    def point_ids(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """The point id of each row (-1: not a recorded point)."""
        return self.index.ids(columns, n_rows)

    def contains(self, point_ids: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """Whether each (point, flat design index) pair is listed (False for ids or indices
        below zero)."""
        point_ids = np.asarray(point_ids, dtype=np.int64)
        flat = np.asarray(flat, dtype=np.int64)
        key = point_ids * self.design_product + flat
        if len(self.pairs) == 0:
            return np.zeros(len(key), dtype=bool)
        position = np.clip(np.searchsorted(self.pairs, key), 0, len(self.pairs) - 1)
        return (point_ids >= 0) & (flat >= 0) & (self.pairs[position] == key)

    def designs_of(self, point_id: int) -> np.ndarray:
        """Flat design indices listed at one point (empty for -1)."""
        if point_id < 0:
            return self.flat[:0]
        return self.flat[self.offsets[point_id] : self.offsets[point_id + 1]]

    def draw(
        self, point_ids: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """A listed design drawn uniformly at each point: ``(codes, found)``."""
        point_ids = np.asarray(point_ids, dtype=np.int64)
        safe = np.maximum(point_ids, 0)
        counts = np.where(point_ids >= 0, self.counts[safe], 0)
        found = counts > 0
        pick = self.offsets[safe] + np.floor(rng.random(len(point_ids)) * np.maximum(counts, 1))
        pick = np.where(found, pick.astype(np.int64), 0)
        codes = (
            self.codes[np.minimum(pick, max(len(self.codes) - 1, 0))]
            if len(self.codes)
            else (np.zeros((len(point_ids), len(self._design_place)), dtype=np.int64))
        )
        return np.asarray(codes, dtype=np.int64), found

    def nearest(self, point_ids: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the listed design of its point with the least L1 code distance to
        ``codes`` (first listed on ties): ``(codes, found)``; rows at no point keep theirs."""
        point_ids = np.asarray(point_ids, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.int64)
        out = codes.copy()
        safe = np.maximum(point_ids, 0)
        counts = np.where(point_ids >= 0, self.counts[safe], 0)
        found = counts > 0
        rows = np.flatnonzero(found)
        if len(rows) == 0:
            return out, found
        width = int(counts[rows].max())
        slot = np.arange(width)
        take = self.offsets[safe[rows]][:, None] + slot[None, :]
        inside = slot[None, :] < counts[rows][:, None]
        candidates = self.codes[np.where(inside, take, 0)]  # rows x width x n_design
        distance = np.abs(candidates - codes[rows][:, None, :]).sum(axis=2)
        distance = np.where(inside, distance, np.iinfo(np.int64).max)
        best = np.argmin(distance, axis=1)
        out[rows] = candidates[np.arange(len(rows)), best]
        return out, found

    def draw_points(
        self, n: int, rng: np.random.Generator, allowed: np.ndarray | None = None
    ) -> np.ndarray:
        """``n`` point ids drawn uniformly among the points with a listed design (and, with
        ``allowed``, among those it marks)."""
        _, choices = self._usable(allowed)
        return choices[rng.integers(len(choices), size=n)]

    def _usable(self, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The mask of points with a listed design (within ``allowed``) and their ids."""
        usable = self.counts > 0
        if allowed is not None:
            usable &= allowed
        choices = np.flatnonzero(usable)
        if len(choices) == 0:
            raise SpaceError("no recorded input point has a listed configuration")
        return usable, choices

    def nearest_points(
        self, unit: np.ndarray, parameters: Sequence[Parameter], allowed: np.ndarray | None = None
    ) -> np.ndarray:
        """The recorded point nearest (Euclidean, in the unit cube the samplers map with
        ``Parameter.from_unit``) to each row of ``unit`` (columns in ``parameters`` order)."""
        from scipy.spatial import cKDTree

        usable, choices = self._usable(allowed)
        key = hash(usable.tobytes())  # the tree over these points is built once
        if self._tree is None or self._tree[0] != (key, len(choices)):
            coordinates = np.column_stack(
                [to_unit(p, self.points[p.name].to_numpy()) for p in parameters]
            )[choices]
            self._tree = ((key, len(choices)), cKDTree(coordinates))
        _, nearest = self._tree[1].query(np.asarray(unit, dtype=np.float64))
        return choices[np.asarray(nearest, dtype=np.int64).reshape(-1)]


def to_unit(parameter: Parameter, values: np.ndarray) -> np.ndarray:
    """Where ``Parameter.from_unit`` puts each value in [0, 1) (its inverse, middle of a
    value's interval for value lists and categories)."""
    if parameter.values is not None or parameter.kind == "categorical":
        codes = parameter.codes(values)
        return (np.maximum(codes, 0) + 0.5) / max(1, parameter.n_values)
    low, high = float(parameter.low), float(parameter.high)  # type: ignore[arg-type]
    numbers = np.asarray(values, dtype=np.float64)
    if high <= low:
        return np.full(len(numbers), 0.5)
    if parameter.log:
        return (np.log(numbers) - np.log(low)) / (np.log(high) - np.log(low))
    return (numbers - low) / (high - low)


def _unflatten(flat: np.ndarray, place: np.ndarray, n_design: int) -> np.ndarray:
    """Design codes from flat indices (the inverse of ``codes @ place``)."""
    out = np.empty((len(flat), n_design), dtype=np.int64)
    rest = np.asarray(flat, dtype=np.int64).copy()
    for index in range(n_design):
        out[:, index] = rest // place[index]
        rest = rest % place[index]
    return out
