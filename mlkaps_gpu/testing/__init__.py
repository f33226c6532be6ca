"""Helpers that tests (and experiments) share: random configurations and constraint strings for
fuzzing the config loader."""

from mlkaps_gpu.testing._fuzz import random_config, random_constraint

__all__ = ["random_config", "random_constraint"]
