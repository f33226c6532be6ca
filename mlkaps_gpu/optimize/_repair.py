"""Validity and nearest-valid repair of design codes by table lookup, for enumerable spaces.

The genetic algorithm asks two questions of every child, every generation: is this
configuration valid at its grid point, and if not, which valid configuration is nearest (least
sum of absolute code differences, ties to the first in enumeration order, as
:func:`~mlkaps_gpu.space.nearest_codes`)? Grid points that share the inputs constraints mention
share the answers, so a table per such group over the whole design product answers both in one
indexing operation: ``nearest[group, code]`` is the code itself where it is valid, the repaired
code once some child asked, -1 before.

Where the table is small, every group's answers are computed when it is built, by a distance
transform: the L1 distance is a sum over parameters, so the nearest valid code follows from one
pass per parameter (each cell takes the best of its line along that parameter, plus the step),
from the last parameter to the first, which also settles ties the way enumeration order does.
Elsewhere an unknown repair is searched outward, vectorised over all the children that need
one: every code at distance 1, then at distance 2 (the lowest code index among the valid ones
at the least distance is exactly ``nearest_codes``' answer); a group with a child farther
still gets its whole table by the transform.
"""

from __future__ import annotations

import itertools

import numpy as np

from mlkaps_gpu.space import Space

#: Most cells (groups x design product) of one table; larger runs check constraints instead.
TABLE_LIMIT = 1 << 23
#: Most cell-steps (cells x largest parameter size) of the transforms done when a table is
#: built (and of one transform's working arrays).
EAGER_LIMIT = 1 << 22
_UNKNOWN = -1
_FAR = 1 << 28


class RepairTable:
    """Validity and nearest valid code of every (group, design code) pair.

    Args:
        space: the (enumerable) search space.
        valid_sets: per group of grid points, the codes of its valid configurations.
    """

    def __init__(self, space: Space, valid_sets: list[np.ndarray]) -> None:
        sizes = space.design_sizes.astype(np.int64)
        self.sizes = sizes
        #: enumeration order (the last parameter fastest), as ``Space.valid_design_codes``
        self.strides = np.r_[np.cumprod(sizes[::-1])[::-1][1:], 1].astype(np.int64)
        self.product = int(np.prod(sizes))
        self.valid_sets = valid_sets
        self.nearest = np.full((len(valid_sets), self.product), _UNKNOWN, dtype=np.int32)
        self.complete = np.zeros(len(valid_sets), dtype=bool)
        for group, valid in enumerate(valid_sets):
            index = valid @ self.strides
            self.nearest[group, index] = index
        per_transform = max(1, int(EAGER_LIMIT // (self.product * float(sizes.max(initial=1)))))
        self._batch = per_transform
        if len(valid_sets) <= per_transform:
            self._transform(np.arange(len(valid_sets)))
        self._rings = [_ring(len(sizes), 1), _ring(len(sizes), 2)]

    @staticmethod
    def fits(space: Space, n_groups: int) -> bool:
        """Whether a table for ``n_groups`` groups stays within :data:`TABLE_LIMIT` cells."""
        return space.enumerable and n_groups * float(space.design_product) <= TABLE_LIMIT

    def index(self, codes: np.ndarray) -> np.ndarray:
        """Position of each code row in the design product (enumeration order)."""
        return codes @ self.strides

    def decode(self, index: np.ndarray) -> np.ndarray:
        return (index[:, None] // self.strides) % self.sizes

    def is_valid(self, groups: np.ndarray, index: np.ndarray) -> np.ndarray:
        return self.nearest[groups, index] == index

    def repair(self, groups: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Each row's code if valid for its group, else the nearest valid one."""
        return self.repair_with_index(groups, codes)[0]

    def repair_with_index(
        self, groups: np.ndarray, codes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`repair`, and the position of each repaired code in the design product."""
        index = self.index(codes)
        repaired = self.nearest[groups, index].astype(np.int64)
        unknown = repaired == _UNKNOWN
        if unknown.any():
            cells, inverse = np.unique(
                groups[unknown] * self.product + index[unknown], return_inverse=True
            )
            found = self._search(cells // self.product, cells % self.product)
            self.nearest[cells // self.product, cells % self.product] = found
            repaired[unknown] = found[inverse.ravel()]
        changed = np.flatnonzero(repaired != index)
        if len(changed) == 0:
            return codes, index
        codes = codes.copy()
        codes[changed] = self.decode(repaired[changed])
        return codes, repaired

    def _search(self, groups: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Nearest valid code index of invalid cells: rings of distance 1 and 2, then all."""
        found = np.full(len(index), _UNKNOWN, dtype=np.int64)
        codes = self.decode(index)
        pending = np.arange(len(index))
        for ring in self._rings:
            if len(pending) == 0:
                break
            candidates = codes[pending, None, :] + ring[None, :, :]
            inside = ((candidates >= 0) & (candidates < self.sizes)).all(axis=2)
            candidate_index = np.where(inside, candidates @ self.strides, 0)
            valid = inside & (
                self.nearest[groups[pending, None], candidate_index] == candidate_index
            )
            best = np.where(valid, candidate_index, np.iinfo(np.int64).max).min(axis=1)
            hit = valid.any(axis=1)
            found[pending[hit]] = best[hit]
            pending = pending[~hit]
        far = np.unique(groups[pending])
        for start in range(0, len(far), self._batch):
            self._transform(far[start : start + self._batch])
        found[pending] = self.nearest[groups[pending], index[pending]]
        return found

    def _transform(self, groups: np.ndarray) -> None:
        """Every cell's nearest valid code of some groups (a distance transform, see above)."""
        groups = groups[~self.complete[groups]]
        if len(groups) == 0:
            return
        self.complete[groups] = True
        shape = (len(groups), *(int(s) for s in self.sizes))
        cells = np.arange(self.product, dtype=np.int32)
        valid = self.nearest[groups] == cells  # (a repaired cell points elsewhere)
        cost = np.where(valid, 0, _FAR).astype(np.int32)
        nearest = np.where(valid, cells, _UNKNOWN)
        cost, nearest = cost.reshape(shape), nearest.reshape(shape)
        for axis in reversed(range(1, len(shape))):  # the first parameter last: it ranks first
            _sweep(np.moveaxis(cost, axis, 0), np.moveaxis(nearest, axis, 0))
        cost, nearest = cost.reshape(len(groups), -1), nearest.reshape(len(groups), -1)
        self.nearest[groups] = np.where(cost < _FAR, nearest, _UNKNOWN)


def _sweep(cost: np.ndarray, owner: np.ndarray) -> None:
    """One parameter's pass of the transform, in place along axis 0: each cell takes the least
    of its cost and a neighbour's plus one, and that cell's owner. Forward, a tie keeps the
    lower neighbour's owner; backward, a tie keeps the cell's own: the lowest code wins."""
    for here in range(1, len(cost)):
        step = cost[here - 1] + 1
        take = step <= cost[here]
        cost[here] = np.where(take, step, cost[here])
        owner[here] = np.where(take, owner[here - 1], owner[here])
    for here in range(len(cost) - 2, -1, -1):
        step = cost[here + 1] + 1
        take = step < cost[here]
        cost[here] = np.where(take, step, cost[here])
        owner[here] = np.where(take, owner[here + 1], owner[here])


def _ring(dimensions: int, distance: int) -> np.ndarray:
    """Every integer offset vector of L1 norm exactly ``distance`` (1 or 2)."""
    offsets = []
    for axis in range(dimensions):
        for step in (-distance, distance):
            offset = np.zeros(dimensions, dtype=np.int64)
            offset[axis] = step
            offsets.append(offset)
    if distance == 2:
        for first, second in itertools.combinations(range(dimensions), 2):
            for a, b in itertools.product((-1, 1), repeat=2):
                offset = np.zeros(dimensions, dtype=np.int64)
                offset[first], offset[second] = a, b
                offsets.append(offset)
    return np.array(offsets, dtype=np.int64).reshape(-1, dimensions)
