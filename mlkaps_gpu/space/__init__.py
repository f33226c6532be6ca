"""Search spaces: parameters, the safe constraint language, valid sampling, repair, grids."""

from mlkaps_gpu.space._constraints import Constraint, ConstraintError, parse_constraint
from mlkaps_gpu.space._parameters import KINDS, Parameter, SpaceError, parse_value
from mlkaps_gpu.space._space import NEIGHBOUR_KINDS, Space, nearest_codes

__all__ = [
    "nearest_codes",
    "KINDS",
    "NEIGHBOUR_KINDS",
    "Constraint",
    "ConstraintError",
    "Parameter",
    "Space",
    "SpaceError",
    "parse_constraint",
    "parse_value",
]
