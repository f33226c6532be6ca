"""T1 search-space descriptions: the auto-tuning community's input format.

A T1 file (``*.json``, or gzip-compressed) describes a kernel's search space the way shared
benchmark collections publish it beside their measurements::

    {"ConfigurationSpace": {
        "TuningParameters": [{"Name": "block_size_x", "Type": "int", "Values": "[16, 32, 64]"},
                             ...],
        "Conditions": [{"Expression": "block_size_x*block_size_y<=1024",
                        "Parameters": ["block_size_x", "block_size_y"]}, ...]},
     "General": {...}, "KernelSpecification": {...}}

``Values`` is a JSON list or the text of a Python list literal (read with
``ast.literal_eval``, which evaluates literals only, never code). ``Conditions`` are Kernel Tuner
restriction expressions: each is translated into the safe constraint language and checked
against the file's parameters as :func:`~mlkaps_gpu.space.space_from_kernel_tuner` does, so a
condition the language cannot express is refused with its index, never evaluated.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlkaps_gpu.space._kernel_tuner import _parameter, checked_restriction
from mlkaps_gpu.space._parameters import Parameter, SpaceError
from mlkaps_gpu.space._space import Space


@dataclass(frozen=True)
class T1SearchSpace:
    """A loaded T1 description.

    Attributes:
        path: the file.
        parameters: the tuning parameters (design parameters), in the file's order.
        constraints: the conditions, translated into the constraint language.
    """

    path: Path
    parameters: tuple[Parameter, ...]
    constraints: tuple[str, ...]

    def space(self) -> Space:
        """The design space the file describes (no inputs)."""
        return Space([], list(self.parameters), list(self.constraints))


def load_t1(path: str | os.PathLike[str]) -> T1SearchSpace:
    """Read a T1 file's tuning parameters and conditions.

    Raises:
        SpaceError: the file is missing or unreadable, or a parameter or condition cannot be
            used; the one-line message names the file and the entry.
    """
    file = Path(path)
    name = file.name
    document = _read(file)
    space = document.get("ConfigurationSpace") if isinstance(document, dict) else None
    if not isinstance(space, dict):
        raise SpaceError(f"{name}: not a T1 description (no 'ConfigurationSpace' object)")
    entries = space.get("TuningParameters")
    if not isinstance(entries, list) or not entries:
        raise SpaceError(f"{name}: ConfigurationSpace.TuningParameters is not a non-empty list")
    parameters: list[Parameter] = []
    for index, entry in enumerate(entries):
        where = f"{name}: ConfigurationSpace.TuningParameters[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("Name"), str):
            raise SpaceError(f"{where}: needs a 'Name' string")
        try:
            parameters.append(_parameter(entry["Name"], _values(entry.get("Values"))))
        except (SpaceError, ValueError) as error:
            raise SpaceError(f"{where} ({entry['Name']}): {error}") from None
    names = [p.name for p in parameters]
    if len(set(names)) != len(names):
        raise SpaceError(f"{name}: ConfigurationSpace.TuningParameters repeat a name")
    known = {p.name: p for p in parameters}
    conditions = space.get("Conditions", [])
    if not isinstance(conditions, list):
        raise SpaceError(f"{name}: ConfigurationSpace.Conditions is not a list")
    constraints: list[str] = []
    for index, entry in enumerate(conditions):
        where = f"{name}: ConfigurationSpace.Conditions[{index}]"
        text = entry.get("Expression") if isinstance(entry, dict) else None
        if not isinstance(text, str):
            raise SpaceError(f"{where}: needs an 'Expression' string")
        constraints.append(checked_restriction(text, known, where))
    return T1SearchSpace(path=file, parameters=tuple(parameters), constraints=tuple(constraints))


def _read(file: Path) -> Any:
    if not file.is_file():
        raise SpaceError(f"{file}: no such file")
    raw = file.read_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise SpaceError(f"{file.name}: not readable JSON ({error})") from None


def _values(raw: Any) -> list[Any]:
    """A parameter's value list: a JSON list, or the text of a Python list literal."""
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw.strip())
        except (SyntaxError, ValueError):
            raise ValueError(f"'Values' {raw!r} is not a list literal") from None
    if not isinstance(raw, list | tuple):
        raise ValueError(f"'Values' must be a list, got {raw!r}")
    return list(raw)
