"""C literals and types of parameter values, shared by the header writers."""

from __future__ import annotations

import math

from mlkaps_gpu.codegen._names import InputNames, OutputNames
from mlkaps_gpu.space import Parameter

INDENT = "    "
_C_TYPES = {"int": "long long", "float": "double", "bool": "int"}
_INT64_MIN = -(2**63)


def double_literal(value: float) -> str:
    """A C double literal that reads back as exactly ``value`` (Python's shortest repr)."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"cannot write the non-finite value {number!r} as a C constant")
    text = repr(number)
    return text if any(c in text for c in ".e") else text + ".0"


def long_long_literal(value: int) -> str:
    """A C ``long long`` literal; INT64_MIN has no literal form and is written as an expression."""
    number = int(value)
    if number == _INT64_MIN:
        return "(-9223372036854775807LL - 1)"
    if not _INT64_MIN < number < 2**63:
        raise ValueError(f"{number} does not fit in a C long long")
    return f"{number}LL"


def comment_text(text: str) -> str:
    """Text safe inside a ``/* */`` comment on one line."""
    return " ".join(str(text).replace("*/", "* /").replace("/*", "/ *").split())


def c_type(parameter: Parameter, names: InputNames | OutputNames) -> str:
    """The C type of a parameter: long long, double, int (bool) or its enum type."""
    if parameter.kind == "categorical":
        assert names.enum_type is not None
        return names.enum_type
    return _C_TYPES[parameter.kind]


def value_literal(parameter: Parameter, names: OutputNames, code: int) -> str:
    """The C expression of the domain value with index ``code``."""
    if parameter.kind == "categorical":
        return names.enum_constants[code]
    value = parameter.domain_values()[code]
    if parameter.kind == "bool":
        return "1" if bool(value) else "0"
    if parameter.kind == "int":
        return long_long_literal(int(value))
    return double_literal(float(value))
