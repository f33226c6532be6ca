"""Optimization phase: best surrogate configuration per input grid point."""

from mlkaps_gpu.optimize._grid import METHODS, GridOptimizer
from mlkaps_gpu.optimize._settings import MAX_GRID_POINTS, MAX_GRID_SIZE, OptimizationSettings

__all__ = [
    "MAX_GRID_POINTS",
    "MAX_GRID_SIZE",
    "METHODS",
    "GridOptimizer",
    "OptimizationSettings",
]
