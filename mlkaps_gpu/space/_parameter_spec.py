"""The model of one parameter table of ``[inputs]`` or ``[design]`` (:class:`ParameterSpec`),
and :data:`Scalar`, one value of a parameter.

The base of every section model (``SettingsModel``, ``SettingError``, ``describe_allowed``) is
``mlkaps_gpu._settings``; ``mlkaps_gpu.space`` re-exports it, so that names imported from the
space keep working.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, field_validator

from mlkaps_gpu._settings import FiniteFloat, Int64, SettingError, SettingsModel
from mlkaps_gpu.space._identifiers import check_c_text

#: Most values one parameter's ``values`` list may hold.
MAX_VALUES = 100_000
#: Most levels a range design parameter may be discretised to.
MAX_LEVELS = 65_536


def _not_an_integer(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError("an integer outside int64")  # Int64 refused it: no float fallback
    return value


#: One value of a parameter: a boolean, an int64 integer, a finite number or a string (an
#: integer beyond int64 is refused, not turned into a float).
Scalar = Union[  # noqa: UP007 - order matters to pydantic
    bool, Int64, Annotated[FiniteFloat, BeforeValidator(_not_an_integer)], str
]


class ParameterSpec(SettingsModel):
    """One parameter table of ``[inputs]`` or ``[design]``, e.g.
    ``block = { type = "int", values = [8, 16, 32] }``."""

    _table_hint: typing.ClassVar[str] = ' like { type = "int", range = [1, 8] }'

    type: Literal["int", "float", "categorical", "bool"] = Field(
        description="The parameter's type."
    )
    range: list[Scalar] | None = Field(
        default=None,
        description=(
            "Closed range `[min, max]` (int, float, bool); exclusive with `values`. Integers "
            "fit in int64, numbers are finite."
        ),
        json_schema_extra={"allowed": "[min, max]: two finite numbers (integers within int64)"},
    )
    values: list[Scalar] | None = Field(
        default=None,
        description=(
            "Explicit ordered list of the allowed values; exclusive with `range`. Strings may "
            "not contain trigraphs (`??/` ...) or control characters."
        ),
        max_length=MAX_VALUES,
        json_schema_extra={
            "allowed": f"a list of up to {MAX_VALUES} values (finite numbers, int64 "
            "integers, strings without trigraphs, booleans)"
        },
    )
    log: bool = Field(
        default=False, description="Sample, grid and discretise the range geometrically (min > 0)."
    )
    levels: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LEVELS,
        description=(
            "How many values a range used as a design parameter is discretised to (default: "
            "every integer up to 4096 of them, 32 for floats)."
        ),
    )

    @field_validator("range")
    @classmethod
    def _two_ends(cls, value: list[Any] | None) -> list[Any] | None:
        if value is not None and len(value) != 2:
            raise SettingError("range", "'range' must be [min, max]", value)
        return value

    @field_validator("values")
    @classmethod
    def _printable_strings(cls, value: list[Any] | None) -> list[Any] | None:
        for index, item in enumerate(value or []):
            if isinstance(item, str):
                try:
                    check_c_text(item, what="value")
                except ValueError as error:
                    raise SettingError(f"values[{index}]", str(error), item) from None
        return value


__all__ = ["MAX_LEVELS", "MAX_VALUES", "ParameterSpec", "Scalar"]
