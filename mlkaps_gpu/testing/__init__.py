"""Helpers that tests (and experiments) share: random configurations and constraint strings for
fuzzing the config loader, mutated constraint strings over :data:`PARAMETERS`, and constraints
compiled to C (:class:`CompiledConstraints`) to compare with numpy (:func:`same_values`), and the
toy campaign tests tune (:func:`write_toy_kernel`, :func:`write_config`)."""

from mlkaps_gpu.testing._constraint_c import CompiledConstraints, same_values
from mlkaps_gpu.testing._constraint_fuzz import PARAMETERS, mutated_constraint
from mlkaps_gpu.testing._fuzz import random_config, random_constraint
from mlkaps_gpu.testing._toy import (
    TOY_CONFIG,
    TOY_KERNEL_MODULE,
    TWO_OBJECTIVE_MODULE,
    write_config,
    write_toy_kernel,
)

__all__ = [
    "PARAMETERS",
    "TOY_CONFIG",
    "TOY_KERNEL_MODULE",
    "TWO_OBJECTIVE_MODULE",
    "CompiledConstraints",
    "mutated_constraint",
    "random_config",
    "random_constraint",
    "same_values",
    "write_config",
    "write_toy_kernel",
]
