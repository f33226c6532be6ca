"""Search spaces: parameters, the safe constraint language, valid sampling, repair, grids.

The settings base (``SettingsModel``, ``SettingError`` ...) lives in ``mlkaps_gpu._settings``
and is re-exported here, where the section models have always imported it.
"""

from mlkaps_gpu._settings import (
    INT64_MAX,
    INT64_MIN,
    FiniteFloat,
    Int64,
    SettingError,
    SettingsModel,
    describe_allowed,
    is_finite_number,
)
from mlkaps_gpu.space._constraint_tree import ConstraintWalker, is_string_constant, left_chain
from mlkaps_gpu.space._constraints import (
    Constraint,
    ConstraintError,
    operator_symbol,
    parse_constraint,
)
from mlkaps_gpu.space._grid import validity_edges
from mlkaps_gpu.space._identifiers import (
    MAX_IDENTIFIER_LENGTH,
    RESERVED_C_NAMES,
    IdentifierError,
    check_c_text,
    check_distinct,
    check_identifier,
)
from mlkaps_gpu.space._listed import ListedRows, PointIndex
from mlkaps_gpu.space._neighbours import NEIGHBOUR_KINDS, nearest_codes, select_neighbours
from mlkaps_gpu.space._parameter_spec import MAX_LEVELS, MAX_VALUES, ParameterSpec, Scalar
from mlkaps_gpu.space._parameters import KINDS, Parameter, SpaceError, parse_value
from mlkaps_gpu.space._space import Space, radix
from mlkaps_gpu.space._t1 import T1SearchSpace, load_t1

__all__ = [
    "nearest_codes",
    "radix",
    "select_neighbours",
    "validity_edges",
    "KINDS",
    "NEIGHBOUR_KINDS",
    "Constraint",
    "ConstraintError",
    "ConstraintWalker",
    "is_string_constant",
    "left_chain",
    "operator_symbol",
    "ListedRows",
    "Parameter",
    "PointIndex",
    "Space",
    "SpaceError",
    "T1SearchSpace",
    "load_t1",
    "parse_constraint",
    "parse_value",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_LEVELS",
    "MAX_VALUES",
    "MAX_IDENTIFIER_LENGTH",
    "RESERVED_C_NAMES",
    "FiniteFloat",
    "IdentifierError",
    "Int64",
    "ParameterSpec",
    "Scalar",
    "SettingError",
    "SettingsModel",
    "check_c_text",
    "check_distinct",
    "check_identifier",
    "describe_allowed",
    "is_finite_number",
]
