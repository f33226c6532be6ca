"""The continuous embedding of the design codes in [0, 1]^N used by the swarm methods.

Each parameter with ``n`` values gets one axis cut into ``n`` equal cells; value ``i`` is the
cell ``[i / n, (i + 1) / n)`` (the same width for every value, as Kernel Tuner's scaling).
Parameters with a single value get no axis.
"""

from __future__ import annotations

import numpy as np


class Embedding:
    """Maps design codes to points of the unit cube and back."""

    def __init__(self, sizes: np.ndarray) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.free = np.flatnonzero(self.sizes > 1)
        self._free_sizes = self.sizes[self.free]

    @property
    def dimensions(self) -> int:
        """Axes of the unit cube: one per parameter with more than one value."""
        return len(self.free)

    def to_unit(self, codes: np.ndarray) -> np.ndarray:
        """Cell centres of the codes (n x dimensions)."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(self.sizes))
        return (codes[:, self.free] + 0.5) / self._free_sizes

    def to_codes(self, points: np.ndarray) -> np.ndarray:
        """Codes of the cells holding the points (clipped into the cube)."""
        points = np.asarray(points, dtype=np.float64).reshape(-1, self.dimensions)
        codes = np.zeros((len(points), len(self.sizes)), dtype=np.int64)
        cells = np.floor(np.clip(points, 0.0, 1.0) * self._free_sizes).astype(np.int64)
        codes[:, self.free] = np.minimum(cells, self._free_sizes - 1)
        return codes
