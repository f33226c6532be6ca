"""The argument-builder contract shared by the C (cffi) and CUDA (CuPy) executors.

A kernel executor is given a **builder**, ``build_arguments(inputs, rng) -> KernelCall``:

* ``inputs`` is a ``dict`` of the row's input-parameter values (every column that is not a
  design parameter of the executor), as plain Python numbers / strings;
* ``rng`` is a ``numpy.random.Generator`` seeded from the executor's ``seed`` and the input
  values, so the same inputs always get the same data (in any process, in any order);
* it returns a :class:`KernelCall` whose ``args`` hold **one entry per parameter of the entry
  function, in the order of its prototype**:

  - a numpy array for a pointer parameter (C-contiguous, dtype matching the pointed-to type:
    ``double*`` <-> float64, ``float*`` <-> float32, ``int*`` <-> int32, ``long*`` <-> int64 ...);
    CuPy executors copy it to the device;
  - a Python or numpy number for a scalar parameter;
  - ``None`` for a NULL pointer;
  - :class:`Design` ``("name")`` where a *run-time* design parameter goes; the executor puts the
    row's value there (categorical values through ``Design(name, codes={...})``).

``KernelCall.overwritten`` names the array arguments (by prototype parameter name or position)
that the kernel modifies *and reads*: the executor keeps a pristine copy and restores it before
every run, outside the timed region. Arrays only written (a pure output such as ``C`` of
``C = A*B``) need not be listed.

The optional **check** is ``check(inputs, outputs) -> bool``, called after the first run and
after the last timed run: both are ``dict`` keyed by the prototype's parameter names;
``inputs`` holds what the kernel received (for overwritten arrays the pristine copy, otherwise
the very array), ``outputs`` what it left (arrays after the run; ``outputs["return"]`` is the
return value, ``None`` for ``void``). ``False`` (or an exception) gives the row the status
``invalid`` and no time.

Builders and checks run in the worker process, so they must be picklable: module-level
functions (or ``functools.partial`` of them) in an importable module.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlkaps_gpu._numbers import plain


@dataclass(frozen=True)
class Design:
    """Placeholder for the value of a run-time design parameter in ``KernelCall.args``.

    Args:
        name: the design parameter.
        codes: for categorical values: the number passed for each value.
    """

    name: str
    codes: Mapping[Any, int | float] | None = None

    def resolve(self, design: Mapping[str, Any]) -> Any:
        """The value passed to the kernel for this row's ``design`` values: the parameter's
        value, or its code.

        Raises:
            KeyError: the parameter is not in the row, or its value has no code.
            TypeError: a text value without ``codes``.
        """
        if self.name not in design:
            raise KeyError(f"design parameter '{self.name}' is not in the row")
        value = design[self.name]
        if self.codes is not None:
            if value not in self.codes:
                raise KeyError(f"design parameter '{self.name}': no code for value {value!r}")
            return self.codes[value]
        if isinstance(value, str):
            raise TypeError(
                f"design parameter '{self.name}' has the text value {value!r}: give "
                "Design(name, codes={value: number, ...})"
            )
        return value


@dataclass
class KernelCall:
    """What a builder returns: the arguments of one kernel call (see the module docstring).

    Attributes:
        args: one entry per parameter of the entry prototype, in order.
        overwritten: array arguments (names or positions) restored before every run.
    """

    args: list[Any]
    overwritten: Sequence[str | int] = field(default_factory=tuple)


_TYPE_WORDS = frozenset(
    (
        *("void", "char", "short", "int", "long", "float", "double", "signed", "unsigned"),
        *("const", "volatile", "restrict", "__restrict", "__restrict__", "_Bool", "bool"),
        *("size_t", "ptrdiff_t", "int8_t", "int16_t", "int32_t", "int64_t"),
        *("uint8_t", "uint16_t", "uint32_t", "uint64_t"),
    )
)
_PARAM_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\[\s*\])?\s*$")


def split_prototype(prototype: str) -> tuple[str, list[str]]:
    """``(function name, parameter names)`` of a C prototype such as
    ``"void lu(int m, int n, double *a)"`` (unnamed parameters get ``arg<i>``)."""
    text = prototype.strip().rstrip(";").strip()
    open_paren = text.find("(")
    if open_paren < 0 or not text.endswith(")"):
        raise ValueError(f"not a C function prototype: {prototype!r}")
    head = text[:open_paren].rstrip()
    match = re.search(r"([A-Za-z_][A-Za-z0-9_]*)$", head)
    if match is None:
        raise ValueError(f"no function name in prototype {prototype!r}")
    inner = text[open_paren + 1 : -1].strip()
    names: list[str] = []
    if inner and inner != "void":
        for i, part in enumerate(_split_top_level(inner)):
            found = _PARAM_NAME.search(part.strip())
            words = part.replace("*", " ").split()
            if found is None or len(words) < 2 or found.group(1) in _TYPE_WORDS:
                names.append(f"arg{i}")
            else:
                names.append(found.group(1))
    return match.group(1), names


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def overwritten_positions(call: KernelCall, names: Sequence[str]) -> list[int]:
    """Positions of ``call.overwritten`` (names or positions) in the argument list."""
    positions = []
    for item in call.overwritten:
        if isinstance(item, str):
            if item not in names:
                raise ValueError(f"overwritten argument '{item}' is not a parameter name")
            positions.append(list(names).index(item))
        else:
            if not 0 <= int(item) < len(call.args):
                raise ValueError(f"overwritten argument position {item} is out of range")
            positions.append(int(item))
    return positions


def input_seed(seed: int, inputs: Mapping[str, Any]) -> int:
    """A seed derived from the executor seed and the input values (stable across processes)."""
    text = json.dumps(
        [seed, sorted((k, repr(plain(v))) for k, v in inputs.items())], sort_keys=True
    )
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
