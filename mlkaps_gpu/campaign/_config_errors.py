"""Configuration errors: one line that names the file, the section, the key, the value and what
is allowed, e.g. ``lu.toml: [sampling] budget: 0: must be an integer from 1 to 10000000``, built
from a TOML syntax error or from the first problem of a pydantic validation error."""

from __future__ import annotations

import json
import math
import re
import tomllib
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from mlkaps_gpu.space import ParameterSpec, SettingError, describe_allowed


class ConfigError(ValueError):
    """The configuration is wrong; the message is one line naming file, key and problem."""


def describe_toml_error(text: str, error: tomllib.TOMLDecodeError) -> str:
    """Name the line (and, for a repeated key, the key) of a TOML syntax error."""
    match = re.search(r"line (\d+)", str(error))
    if not match:
        return f"invalid TOML ({error})"
    number = int(match.group(1))
    lines = text.split("\n")  # TOML counts lines by newlines only
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    problem = str(error).split(" (at ")[0]
    key = re.match(r"([A-Za-z0-9_\-\.\"']+)\s*=", line)
    if "overwrite" in problem.lower() and key:
        return f"line {number}: key '{key.group(1)}' is defined twice (duplicate parameter name?)"
    return f"line {number}: invalid TOML ({problem}): {line[:80]}"


def show_value(value: Any, limit: int = 80) -> str:
    """A value as TOML would write it, shortened to ``limit`` characters."""

    def render(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, float) and not math.isfinite(item):
            return "nan" if item != item else ("inf" if item > 0 else "-inf")
        if isinstance(item, (int, float)):
            return repr(item)
        if isinstance(item, str):
            return json.dumps(item, ensure_ascii=False)
        if isinstance(item, (list, tuple)):
            return "[" + ", ".join(render(v) for v in item) + "]"
        if isinstance(item, dict):
            return "{ " + ", ".join(f"{k} = {render(v)}" for k, v in item.items()) + " }"
        return repr(item)

    text = " ".join(render(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MISSING = object()


def _walk(loc: Sequence[Any], data: Any, *, missing: bool) -> tuple[list[Any], Any]:
    """The part of ``loc`` that indexes ``data`` (dropping pydantic's union tags), and the value
    there (``_MISSING`` for a missing key)."""
    path: list[Any] = []
    node = data
    for index, item in enumerate(loc):
        if isinstance(node, dict) and item in node:
            node = node[item]
        elif isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
            node = node[item]
        elif missing and index == len(loc) - 1:
            path.append(item)
            return path, _MISSING
        else:
            continue
        path.append(item)
    return path, node


def _field_at(root: type[BaseModel], path: Sequence[Any]) -> Any:
    """The pydantic FieldInfo of ``root`` that governs ``path`` (the deepest one found), or
    None."""
    model: Any = root
    found = None
    for index, item in enumerate(path):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            if model is dict:
                model = ParameterSpec
                continue
            break
        info = model.model_fields.get(item) if isinstance(item, str) else None
        if info is None:
            if model.model_config.get("extra") == "allow":  # [design] parameter tables
                model = ParameterSpec
                continue
            break
        found = info
        annotation = _member_with(info.annotation, path[index + 1 : index + 2])
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif (
            typing.get_origin(annotation) is dict
            and typing.get_args(annotation)[1] is ParameterSpec
        ):
            model = dict
        else:
            break
    return found


def _member_with(annotation: Any, key: Sequence[Any]) -> Any:
    """Of a union of models (``[kernel]``: one model per executor), the first member that has
    ``key``; any other annotation as it is."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else ()
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel) and key:
            if key[0] in member.model_fields:
                return member
    return annotation


def _key_text(path: Sequence[Any]) -> str:
    text = ""
    for item in path:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
    return text


def _split_key(key: str) -> list[str]:
    """``"files.gpu.A100"`` -> ``["files", "gpu", "A100"]`` (``"command[0]"`` stays whole)."""
    return [part for part in key.split(".") if part]


def describe_validation_error(error: ValidationError, data: Any, root: type[BaseModel]) -> str:
    """One line for the first problem of validating ``data`` against ``root`` (the model of
    the whole file): ``[section] key: value: what is allowed``."""
    errors = error.errors(include_url=False)
    first_top = tuple(errors[0]["loc"][:2])
    candidates = [e for e in errors if tuple(e["loc"][:2]) == first_top]
    resolved = [(_walk(e["loc"], data, missing=e["type"] == "missing"), e) for e in candidates]
    (path, value), chosen = max(resolved, key=lambda item: len(item[0][0]))
    cause = (chosen.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        parts = _split_key(cause.key)
        if parts and path and str(path[-1]) == parts[0].split("[")[0]:
            path = path[:-1]
        full = [*path, *parts]
        raw_path, raw = _walk(full, data, missing=False)
        if raw_path == full and parts:
            shown = raw  # the value as written, not as validated
        else:
            shown = cause.value if cause.value is not None else None
        if shown is None and not parts and value is not _MISSING:
            shown = value
        return problem_line(str(full[0]) if full else "", _key_text(full[1:]), shown, cause.message)
    section = str(path[0]) if path else ""
    key = _key_text(path[1:])
    info = _field_at(root, path)
    if chosen["type"] == "missing":
        allowed = f": {describe_allowed(info)}" if info is not None else ""
        return problem_line(section, key, None, f"missing, required{allowed}")
    if info is not None and chosen["type"] not in ("too_long", "too_short"):
        problem = f"must be {describe_allowed(info)}"
    else:
        problem = str(chosen["msg"]).replace("Input should be", "must be")
    return problem_line(section, key, value, problem)


def problem_line(section: str, key: str, value: Any, problem: str) -> str:
    where = f"[{section}]" + (f" {key}" if key else "")
    shown = f" {show_value(value)}:" if value is not None and value is not _MISSING else ""
    return f"{where}:{shown} {problem}"


__all__ = [
    "ConfigError",
    "describe_toml_error",
    "describe_validation_error",
    "problem_line",
    "show_value",
]
