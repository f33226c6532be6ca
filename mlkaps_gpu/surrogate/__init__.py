"""Surrogate models of the objectives."""

from mlkaps_gpu.surrogate._base import Surrogate
from mlkaps_gpu.surrogate._lightgbm import DEFAULT_PARAMS, LightGBMSurrogate, accuracy

__all__ = ["DEFAULT_PARAMS", "LightGBMSurrogate", "Surrogate", "accuracy"]
