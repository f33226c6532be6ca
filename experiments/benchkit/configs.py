"""Config tables of a benchmark case: stripped to the problem, overridden from the command line,
written back as TOML."""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

#: what a campaign config keeps (the problem); everything else is a method choice and is stripped
KEEP: dict[str, tuple[str, ...] | None] = {
    "campaign": ("name", "seed"),
    "kernel": None,  # all of it: executor, files, format, objective, columns...
    "inputs": None,
    "design": None,  # constraints (and parameter specs, for non-replay kernels)
    "objectives": None,
    "sampling": ("budget",),
    "trees": ("prefix",),
}


def strip_config(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Keep only what defines the problem (:data:`KEEP`); returns the stripped table and the
    dotted names of what was removed."""
    kept: dict[str, Any] = {}
    removed: list[str] = []
    for section, table in data.items():
        if section not in KEEP:
            removed.append(section)
            continue
        allowed = KEEP[section]
        if allowed is None:
            kept[section] = copy.deepcopy(dict(table))
            continue
        part = {k: copy.deepcopy(v) for k, v in table.items() if k in allowed}
        removed.extend(f"{section}.{k}" for k in table if k not in allowed)
        if part:
            kept[section] = part
    return kept, removed


def parse_value(text: str) -> Any:
    """A ``--set`` value: a TOML value (number, true/false, "string", [list], {table}), else
    the text itself."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """Apply ``section.key=value`` (dots go deeper: ``optimization.grid.gpu=5``)."""
    if "=" not in assignment:
        raise ValueError(f"--set {assignment!r}: expected KEY=VALUE, e.g. sampling.method=random")
    key, _, text = assignment.partition("=")
    path = [part.strip() for part in key.strip().split(".")]
    if len(path) < 2 or not all(path):
        raise ValueError(f"--set {assignment!r}: the key must be section.key")
    table = data
    for part in path[:-1]:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ValueError(f"--set {assignment!r}: {part} is not a table")
    table[path[-1]] = parse_value(text.strip())


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``base`` (tables key by key, other values copied); returns ``base``."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def toml_value(value: Any) -> str:
    """One TOML value (tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def to_toml(data: Mapping[str, Any]) -> str:
    """TOML text of a ``{section: {key: value}}`` table (what :func:`tomllib.loads` reads back)."""
    lines: list[str] = []
    for section, table in data.items():
        lines.append(f"[{_toml_key(section)}]")
        for key, value in table.items():
            lines.append(f"{_toml_key(str(key))} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)
