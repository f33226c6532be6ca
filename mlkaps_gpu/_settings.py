"""The base of every configuration section model, and what the models share.

Each package owns the model of the TOML section it consumes (``SamplingSettings`` in
``sampling``, ``KernelSettings`` in ``executors``, ``TreesSettings`` in ``trees`` ...);
``campaign`` composes them into the campaign configuration. Every model derives from
:class:`SettingsModel`: unknown keys are refused (with the allowed ones named), values are not
coerced (``log = "no"`` is not a boolean, ``budget = 1e3`` is not an integer; an integer is
accepted where a number is expected), and a check that concerns one key raises
:class:`SettingError` naming that key. :func:`describe_allowed` says in words what a field
accepts (error messages and the configuration reference).

It sits outside the layers, beside ``_numbers`` and ``_files``: every package may import it, and
it imports no other module of ``mlkaps_gpu``.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: An integer that fits in int64 (every integer of a configuration does).
Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
#: A finite number (not NaN, not infinite).
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class SettingError(ValueError):
    """A check of one key failed.

    Args:
        key: the key, relative to the model that raises (``"grid.n"``, ``"files"``).
        message: what is wrong and what is allowed.
        value: the offending value (shown in the message).
    """

    def __init__(self, key: str, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.key = key
        self.message = message
        self.value = value


class SettingsModel(BaseModel):
    """Base of the configuration models: strict types, unknown keys refused."""

    #: Shown after "must be a table" when a section or parameter is not one.
    _table_hint: typing.ClassVar[str] = ""

    model_config = ConfigDict(
        extra="forbid", strict=True, validate_default=False, arbitrary_types_allowed=False
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise SettingError("", f"must be a table{cls._table_hint}", data)
        if cls.model_config.get("extra") == "forbid":
            allowed = list(cls.model_fields)
            for key, value in data.items():
                if key not in allowed:
                    raise SettingError(
                        str(key), f"unknown key (allowed: {', '.join(allowed)})", value
                    )
        return data

    def given(self, name: str) -> bool:
        """Whether the configuration set ``name`` explicitly (not its default)."""
        return name in self.model_fields_set


def describe_allowed(field: FieldInfo) -> str:
    """What a field accepts, in words (for error messages and the config reference)."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("allowed"), str):
        return str(extra["allowed"])
    return _describe_type(field.annotation, field.metadata)


def _bounds_text(metadata: list[Any]) -> str:
    low = high = None
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"from {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            low = f"above {item.gt}"
        elif isinstance(item, annotated_types.Le):
            high = f"to {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f"below {item.lt}"
    return " ".join(part for part in (low, high) if part)


def _describe_type(annotation: Any, metadata: list[Any]) -> str:
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "true or false"
    if annotation is int:
        bounds = _bounds_text(metadata)
        return f"an integer {bounds}".strip()
    if annotation is float:
        bounds = _bounds_text(metadata)
        return f"a finite number {bounds}".strip()
    if annotation is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(f'"{v}"' for v in typing.get_args(annotation))
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(_describe_type(a, metadata) for a in args)
    if origin is Annotated:
        base, *more = typing.get_args(annotation)
        extra = [m for item in more for m in getattr(item, "metadata", [item])]
        return _describe_type(base, [*metadata, *extra])
    if origin is list:
        (item,) = typing.get_args(annotation)
        return f"a list of {_plural(_describe_type(item, []))}"
    if origin is dict:
        _, item = typing.get_args(annotation)
        return f"a table of {_plural(_describe_type(item, []))}"
    return "see the configuration reference"


def _plural(description: str) -> str:
    """``"an integer from 1 to 9"`` -> ``"integers from 1 to 9"``."""
    article, _, rest = description.partition(" ")
    if article not in ("a", "an") or not rest:
        return f"({description})"
    noun, _, tail = rest.partition(" ")
    return f"{noun}s {tail}".strip()


def is_finite_number(value: Any) -> bool:
    """An int or float (not a bool) that is finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else True


__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "FiniteFloat",
    "Int64",
    "SettingError",
    "SettingsModel",
    "describe_allowed",
    "is_finite_number",
]
