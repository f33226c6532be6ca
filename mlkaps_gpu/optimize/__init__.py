"""Optimization phase: best surrogate configuration per input grid point."""

from mlkaps_gpu.optimize._grid import METHODS, GridOptimizer

__all__ = ["METHODS", "GridOptimizer"]
