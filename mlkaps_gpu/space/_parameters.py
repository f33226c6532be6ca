"""Parameter types of a search space: int, float (optionally log-scaled), categorical, bool.

A parameter is given either as a closed range ``[low, high]`` or as an explicit list of values.
Design parameters are always used through a finite, ordered value list (``domain_values``): the
index of a value in that list is its *code*, which the optimizers, the repair and the neighbour
definitions work on (as Kernel Tuner does). Input parameters may stay continuous.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

ParameterKind = Literal["int", "float", "categorical", "bool"]
KINDS: tuple[str, ...] = ("int", "float", "categorical", "bool")

#: Most values an int range used as a design parameter is enumerated with; wider ranges are
#: thinned to this many distinct integers (geometrically when ``log``).
DEFAULT_MAX_LEVELS = 4096
#: Levels a float range design parameter is discretised to unless ``levels`` says otherwise.
DEFAULT_FLOAT_LEVELS = 32


class SpaceError(ValueError):
    """A search space definition is wrong; the message says which parameter and why."""


@dataclass(frozen=True)
class Parameter:
    """One tunable or input parameter.

    Args:
        name: identifier used in tables, constraints and generated code.
        kind: ``"int"``, ``"float"``, ``"categorical"`` or ``"bool"``.
        values: explicit ordered list of allowed values (exclusive with ``low``/``high``).
        low: lower end of the range (inclusive).
        high: upper end of the range (inclusive).
        log: sample, grid and discretise the range geometrically (needs ``low > 0``).
        levels: for ranges used as design parameters, how many values to discretise to.
    """

    name: str
    kind: ParameterKind
    values: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    levels: int | None = None
    _domain: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"parameter '{self.name}'"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise SpaceError(f"{where}: name must be an identifier (letters, digits, '_')")
        if self.kind not in KINDS:
            raise SpaceError(f"{where}: unknown type '{self.kind}' (allowed: {', '.join(KINDS)})")
        if self.kind == "bool" and self.values is None:
            # a bool is always the list of its values, even when given as a range
            low = False if self.low is None else _coerce(self.low, "bool", where)
            high = True if self.high is None else _coerce(self.high, "bool", where)
            if low > high:
                raise SpaceError(f"{where}: range min {low} > max {high}")
            object.__setattr__(self, "values", tuple(v for v in (False, True) if low <= v <= high))
            object.__setattr__(self, "low", None)
            object.__setattr__(self, "high", None)
        if self.values is not None:
            if self.low is not None or self.high is not None:
                raise SpaceError(f"{where}: give either 'values' or 'range', not both")
            values = tuple(self.values)
            if len(values) == 0:
                raise SpaceError(f"{where}: empty value list")
            values = tuple(_coerce(v, self.kind, where) for v in values)
            if len(set(values)) != len(values):
                raise SpaceError(f"{where}: value list has duplicates")
            if self.log and self.kind in ("int", "float") and min(values) <= 0:
                raise SpaceError(f"{where}: log scale needs positive values")
            object.__setattr__(self, "values", values)
        else:
            if self.kind == "categorical":
                raise SpaceError(f"{where}: a categorical parameter needs 'values'")
            if self.low is None or self.high is None:
                raise SpaceError(f"{where}: needs 'values' or 'range = [min, max]'")
            low, high = _coerce(self.low, self.kind, where), _coerce(self.high, self.kind, where)
            if low > high:
                raise SpaceError(f"{where}: range min {low} > max {high}")
            if self.log and low <= 0:
                raise SpaceError(f"{where}: log scale needs a positive range (min {low})")
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)
        if self.levels is not None and (not isinstance(self.levels, int) or self.levels < 1):
            raise SpaceError(f"{where}: 'levels' must be a positive integer")
        object.__setattr__(self, "_domain", self._make_domain())

    # ----------------------------------------------------------------------------- properties
    @property
    def is_numeric(self) -> bool:
        """True for int, float and bool (bool counts as 0/1)."""
        return self.kind != "categorical"

    @property
    def is_ordinal_list(self) -> bool:
        """True when the parameter is defined by an explicit value list (or is categorical/bool)."""
        return self.values is not None

    @property
    def dtype(self) -> Any:
        """The numpy type of the parameter's column: int64, float64, bool or object
        (categorical)."""
        return {"int": np.int64, "float": np.float64, "bool": np.bool_, "categorical": object}[
            self.kind
        ]

    def bounds(self) -> tuple[float, float] | None:
        """``(low, high)`` of a numeric parameter: its range, or the first and last of its
        value list; None for categorical and bool parameters."""
        if self.kind in ("categorical", "bool"):
            return None
        if self.values is not None:
            domain = self._domain.astype(np.float64)
            return float(domain.min()), float(domain.max())
        assert self.low is not None and self.high is not None
        return float(self.low), float(self.high)

    def domain_values(self) -> np.ndarray:
        """The finite ordered values this parameter takes as a design parameter."""
        return self._domain

    @property
    def n_values(self) -> int:
        """How many values the parameter takes as a design parameter
        (``len(domain_values())``)."""
        return len(self._domain)

    def _make_domain(self) -> np.ndarray:
        if self.values is not None:
            return np.array(self.values, dtype=self.dtype)
        assert self.low is not None and self.high is not None
        low, high = self.low, self.high
        if self.kind == "int":
            count = int(high - low + 1)
            limit = self.levels or DEFAULT_MAX_LEVELS
            if count <= limit:
                return np.arange(int(low), int(high) + 1, dtype=np.int64)
            raw = np.geomspace(low, high, limit) if self.log else np.linspace(low, high, limit)
            return np.unique(np.round(raw).astype(np.int64))
        levels = self.levels or DEFAULT_FLOAT_LEVELS
        if low == high:
            return np.array([low], dtype=np.float64)
        raw = np.geomspace(low, high, levels) if self.log else np.linspace(low, high, levels)
        return raw.astype(np.float64)

    # ------------------------------------------------------------------------------ sampling
    def from_unit(self, u: np.ndarray, *, discrete: bool) -> np.ndarray:
        """Map points of [0, 1) to values (uniformly, or geometrically when ``log``).

        With ``discrete`` (design parameters) the result is one of ``domain_values``; otherwise
        ranges are sampled over their whole extent (ints rounded).
        """
        u = np.clip(np.asarray(u, dtype=np.float64), 0.0, np.nextafter(1.0, 0.0))
        if discrete or self.values is not None:
            codes = np.minimum((u * self.n_values).astype(np.int64), self.n_values - 1)
            return self._domain[codes]
        assert self.low is not None and self.high is not None
        low, high = float(self.low), float(self.high)
        if self.kind == "int":
            low, high = low - 0.5, high + 0.5
            if self.log:
                low = max(low, float(self.low) * 0.5 + 0.25)  # keep positive
        if self.log:
            values = np.exp(np.log(low) + u * (np.log(high) - np.log(low)))
        else:
            values = low + u * (high - low)
        if self.kind == "int":
            return np.clip(np.round(values), self.low, self.high).astype(np.int64)
        # exp(log(...)) and low + u * (high - low) can round one ulp past either end
        return np.clip(values, self.low, self.high)

    def sample(self, n: int, rng: np.random.Generator, *, discrete: bool) -> np.ndarray:
        """``n`` values drawn uniformly: over the domain values with ``discrete`` (or a value
        list), else over the range (log-uniform for ``log``), as :meth:`from_unit` maps
        uniform draws."""
        return self.from_unit(rng.random(n), discrete=discrete)

    def grid(self, size: int) -> np.ndarray:
        """Grid values: regular (geometric when ``log``) over a range; all values of a
        categorical or bool; ``size`` evenly chosen values of an explicit numeric list."""
        if size < 1:
            raise SpaceError(f"parameter '{self.name}': grid size must be >= 1")
        if self.values is not None:
            if self.kind in ("categorical", "bool") or size >= self.n_values:
                return self._domain.copy()
            index = np.unique(np.round(np.linspace(0, self.n_values - 1, size)).astype(int))
            return self._domain[index]
        assert self.low is not None and self.high is not None
        if size == 1:
            mid = math.sqrt(self.low * self.high) if self.log else (self.low + self.high) / 2
            raw = np.array([mid])
        else:
            raw = (np.geomspace if self.log else np.linspace)(self.low, self.high, size)
        if self.kind == "int":
            return np.unique(np.round(raw).astype(np.int64))
        return raw.astype(np.float64)

    # ------------------------------------------------------------------------------- codings
    def codes(self, column: Any) -> np.ndarray:
        """Index of each value in ``domain_values`` (-1 where the value is not in it)."""
        values = np.asarray(column)
        domain = self._domain
        if self.kind == "categorical":
            lookup = {v: i for i, v in enumerate(domain.tolist())}
            return np.array([lookup.get(v, -1) for v in values.tolist()], dtype=np.int64)
        numeric = values.astype(np.float64)
        dom = domain.astype(np.float64)
        order = np.argsort(dom)
        sorted_dom = dom[order]
        pos = np.clip(np.searchsorted(sorted_dom, numeric), 0, len(dom) - 1)
        found = sorted_dom[pos] == numeric
        return np.where(found, order[pos], -1).astype(np.int64)

    def numeric(self, column: Any) -> np.ndarray:
        """Feature value for models: the value for numeric kinds, the category index otherwise."""
        if self.kind == "categorical":
            return self.codes(column).astype(np.float64)
        return np.asarray(column).astype(np.float64)

    def contains(self, column: Any) -> np.ndarray:
        """Whether each value lies in the parameter's domain (range or list)."""
        if self.values is not None or self.kind == "categorical":
            return self.codes(column) >= 0
        values = np.asarray(column).astype(np.float64)
        inside = (values >= float(self.low)) & (values <= float(self.high))  # type: ignore[arg-type]
        if self.kind == "int":
            inside &= values == np.round(values)
        return inside

    def as_column(self, values: Any) -> pd.Series:
        """``values`` as a column named after the parameter, of its :attr:`dtype`."""
        return pd.Series(np.asarray(values, dtype=self.dtype), name=self.name)

    def describe(self) -> dict[str, Any]:
        """A JSON-able description (used in provenance and reports)."""
        out: dict[str, Any] = {"name": self.name, "type": self.kind}
        if self.values is not None:
            out["values"] = [v.item() if hasattr(v, "item") else v for v in self._domain]
        else:
            out["range"] = [self.low, self.high]
        if self.log:
            out["log"] = True
        return out


def _coerce(value: Any, kind: str, where: str) -> Any:
    """Check and convert one literal value to the parameter kind."""
    if kind == "categorical":
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value if isinstance(value, str) else str(value)
        raise SpaceError(f"{where}: categorical values must be strings, got {value!r}")
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)) or value in (0, 1):
            return bool(value)
        raise SpaceError(f"{where}: bool values must be true/false, got {value!r}")
    if kind == "int":
        if isinstance(value, (bool, np.bool_)):
            raise SpaceError(f"{where}: int value expected, got {value!r}")
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        raise SpaceError(f"{where}: int value expected, got {value!r}")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise SpaceError(f"{where}: number expected, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise SpaceError(f"{where}: value must be finite, got {value!r}")
    return number


def parse_value(parameter: Parameter, text: str) -> Any:
    """The value of ``parameter`` written as ``text`` (command line, CSV); SpaceError if it is not
    one of the parameter's values. Integers are parsed exactly (never through float)."""
    try:
        if parameter.kind == "int":
            if re.fullmatch(r"\s*[+-]?\d+\s*", text):
                return int(text)
            number = float(text)  # 1e3, 300.0: exact only where float holds the integer
            if not number.is_integer() or abs(number) > 2**53:
                raise ValueError
            return int(number)
        if parameter.kind == "float":
            return float(text)
        if parameter.kind == "bool":
            lowered = text.lower()
            if lowered not in ("0", "1", "true", "false"):
                raise ValueError
            return lowered in ("1", "true")
    except ValueError:
        raise SpaceError(
            f"input {parameter.name}={text!r}: expected a {parameter.kind} value"
        ) from None
    if text not in parameter.domain_values().tolist():
        raise SpaceError(
            f"input {parameter.name}={text!r}: not one of {parameter.domain_values().tolist()}"
        )
    return text
