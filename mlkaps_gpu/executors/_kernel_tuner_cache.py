"""Reader of Kernel Tuner cache files (``*.json`` or gzip-compressed ``*.json.gz``).

Format: ``{"device_name", "kernel_name", "problem_size", "tune_params_keys", "tune_params",
"objective", "cache": {"v1,v2,...": {<param>: value, ..., "time": ms, "times": [...], ...}}}``;
a cache key joins the parameter values (as ``str``) in ``tune_params_keys`` order.

Failed configurations are marked in one of three ways, all accepted: an error string in the
objective (``"RuntimeFailedConfig"``, ``"CompilationFailedConfig"``, ``"InvalidConfig"``), an
``"__error__"`` key (newer Kernel Tuner), or ``time >= 1e20`` (older Kernel Tuner). Kernel Tuner
writes a cache by appending entries, so an unfinished file may lack its closing braces and end
with a comma; such a file is repaired.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlkaps_gpu.executors._base import (
    COMPILE_ERROR,
    INVALID,
    OK,
    RUNTIME_ERROR,
    encode_times,
)
from mlkaps_gpu.executors._replay_data import (
    RECORD_COLUMNS,
    ReplayDataError,
    ReplayTable,
    check_file,
    column_of,
    make_records,
    normalise_values,
    unique_in_order,
    value_kind,
)

#: Error strings Kernel Tuner stores in place of the objective, and the status each maps to.
ERROR_STATUSES: dict[str, str] = {
    "RuntimeFailedConfig": RUNTIME_ERROR,
    "CompilationFailedConfig": COMPILE_ERROR,
    "InvalidConfig": INVALID,
}
#: Objective values at or above this mark a failed run (older Kernel Tuner versions).
FAILURE_TIME = 1e20

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class KernelTunerCache(ReplayTable):
    """A loaded Kernel Tuner cache file.

    Attributes (besides :class:`ReplayTable`'s ``path``, ``keys``, ``tune_params``,
    ``objective``, ``records``):
        device_name: the GPU the measurements were taken on (may be empty).
        kernel_name: the tuned kernel.
    """

    device_name: str = ""
    kernel_name: str = ""


def load_kernel_tuner_cache(
    path: str | os.PathLike[str],
    *,
    objective: str = "time",
    key_suffix: str | None = None,
    suffix_keys: Sequence[str] | None = None,
) -> KernelTunerCache:
    """Load a Kernel Tuner cache file (gzip detected by its magic bytes, else plain JSON).

    Args:
        path: the cache file.
        objective: the entry field used as objective (``time``, in ms, by default).
        key_suffix: text appended to every cache key, e.g. ``",1,1,15,15"``, to align a file
            measured over fewer parameters with others (those parameters were held constant).
        suffix_keys: names of the parameters the suffix adds, in order (needed with
            ``key_suffix``).

    Raises:
        ReplayDataError: the file is missing, corrupt or not a Kernel Tuner cache; the one-line
            message names the file and the problem.
    """
    file = check_file(path)
    name = file.name
    data = parse_json_bytes(file.read_bytes(), name)
    cache, file_keys, raw_params = _layout(data, name)
    suffix_values = _suffix(name, key_suffix, suffix_keys, file_keys)
    keys = tuple(file_keys) + tuple(suffix_values)
    clash = {objective, *RECORD_COLUMNS} & set(keys)
    if clash:
        raise ReplayDataError(
            f"{name}: parameter name(s) {sorted(clash)} clash with result columns"
        )
    values, results = _entries(cache, file_keys, raw_params, objective, name)
    columns, tune_params = parameter_columns(values, raw_params, suffix_values, len(cache), name)
    columns.update({objective: results.pop("time"), **results})
    return KernelTunerCache(
        path=file,
        keys=keys,
        tune_params=tune_params,
        objective=objective,
        records=make_records(columns),
        device_name=str(data.get("device_name") or ""),
        kernel_name=str(data.get("kernel_name") or ""),
    )


def _layout(data: Any, name: str) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The ``cache``, ``tune_params_keys`` and ``tune_params`` of a parsed file, checked."""
    if not isinstance(data, dict):
        raise ReplayDataError(
            f"{name}: not a Kernel Tuner cache (top level is {type(data).__name__}, not an object)"
        )
    for required in ("cache", "tune_params_keys"):
        if required not in data:
            raise ReplayDataError(f"{name}: not a Kernel Tuner cache (missing key {required!r})")
    cache = data["cache"]
    if not isinstance(cache, dict):
        raise ReplayDataError(f"{name}: 'cache' is not an object")
    file_keys = data["tune_params_keys"]
    if not isinstance(file_keys, list) or not all(isinstance(k, str) for k in file_keys):
        raise ReplayDataError(f"{name}: 'tune_params_keys' is not a list of names")
    if len(set(file_keys)) != len(file_keys):
        raise ReplayDataError(f"{name}: 'tune_params_keys' has duplicate names")
    raw_params = data.get("tune_params") or {}
    if not isinstance(raw_params, dict):
        raise ReplayDataError(f"{name}: 'tune_params' is not an object")
    return cache, file_keys, raw_params


def _entries(
    cache: dict[str, Any],
    file_keys: list[str],
    raw_params: dict[str, Any],
    objective: str,
    name: str,
) -> tuple[dict[str, list[Any]], dict[str, np.ndarray]]:
    """Parameter values per key, and the ``time``, ``status``, ``message`` and ``raw_times``
    columns of every cache entry."""
    # per-parameter lookup from the text of a value (as in the key) to the value itself
    by_text: dict[str, dict[str, Any]] = {
        key: {str(v): v for v in raw_params.get(key, []) if not isinstance(v, (list, dict))}
        for key in file_keys
    }
    n = len(cache)
    values: dict[str, list[Any]] = {key: [None] * n for key in file_keys}
    times, status, message, raw_times = empty_result_columns(n)
    for i, (cache_key, entry) in enumerate(cache.items()):
        if not isinstance(entry, dict):
            raise ReplayDataError(f"{name}: cache entry {cache_key!r} is not an object")
        tokens: list[str] | None = None
        for j, key in enumerate(file_keys):
            if key in entry:
                values[key][i] = entry[key]
                continue
            if tokens is None:
                tokens = str(cache_key).split(",")
                if len(tokens) != len(file_keys):
                    raise ReplayDataError(
                        f"{name}: cache key {cache_key!r} has {len(tokens)} values but "
                        f"tune_params_keys has {len(file_keys)}"
                    )
            values[key][i] = by_text[key].get(tokens[j], _parse_token(tokens[j]))
        status[i], message[i], value = _outcome(entry, objective)
        if status[i] == OK:
            times[i] = value
            raw_times[i] = raw_times_text(entry.get("times"), value)
    results = {"time": times, "status": status, "message": message, "raw_times": raw_times}
    return values, results


def empty_result_columns(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The objective (NaN), ``status`` (ok), ``message`` and ``raw_times`` columns of ``n``
    entries, to be filled in."""
    times = np.full(n, np.nan)
    status = np.full(n, OK, dtype=object)
    message = np.full(n, "", dtype=object)
    raw_times = np.full(n, "[]", dtype=object)
    return times, status, message, raw_times


def raw_times_text(measured: Any, value: float) -> str:
    if isinstance(measured, list) and measured:
        try:
            return encode_times(measured)
        except (TypeError, ValueError):
            pass
    return encode_times([value])


def parameter_columns(
    values: dict[str, list[Any]],
    raw_params: dict[str, Any],
    suffix_values: dict[str, Any],
    n: int,
    name: str,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Typed parameter columns and each parameter's value list (declared, then observed)."""
    columns: dict[str, Any] = {}
    tune_params: dict[str, list[Any]] = {}
    for key, column in values.items():
        if any(v is None or isinstance(v, (list, dict)) for v in column):
            raise ReplayDataError(f"{name}: parameter {key!r} has missing or non-scalar values")
        declared = [v for v in raw_params.get(key, []) if not isinstance(v, (list, dict))]
        observed = unique_in_order(column)
        kind = value_kind(declared + observed)
        columns[key] = column_of(column, kind)
        listed = normalise_values(declared, kind)
        extra = [v for v in normalise_values(observed, kind) if v not in set(listed)]
        tune_params[key] = listed + extra
    for key, value in suffix_values.items():
        kind = value_kind([value])
        columns[key] = column_of([value] * n, kind)
        tune_params[key] = normalise_values([value], kind)
    return columns, tune_params


# ------------------------------------------------------------------------------------ helpers
def parse_json_bytes(raw: bytes, name: str) -> Any:
    """Decompress (when gzip) and parse, repairing an unfinished (appended-to) file."""
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise ReplayDataError(f"{name}: corrupt gzip data") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayDataError(f"{name}: not UTF-8 text (neither JSON nor gzip)") from None
    if not text.strip():
        raise ReplayDataError(f"{name}: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as first_error:
        repaired = repair_truncated_json(text)
        if repaired is not None:
            try:
                return json.loads(repaired)
            except json.JSONDecodeError:
                pass
        raise ReplayDataError(
            f"{name}: not valid JSON ({first_error.msg} at line {first_error.lineno} "
            f"column {first_error.colno}) and not repairable by closing brackets"
        ) from None


def repair_truncated_json(text: str) -> str | None:
    """Close an unfinished JSON document: drop a trailing comma, append the missing ``}``/``]``.

    Returns ``None`` when the text ends inside a string or has unbalanced closers.
    """
    stack: list[str] = []
    in_string = False
    escaped = False
    closers = {"{": "}", "[": "]"}
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in closers:
            stack.append(closers[char])
        elif char in "}]" and (not stack or stack.pop() != char):
            return None
    if in_string or not stack:
        return None
    return text.rstrip().removesuffix(",") + "".join(reversed(stack))


def _outcome(entry: Mapping[str, Any], objective: str) -> tuple[str, str, float]:
    """(status, message, objective value) of one cache entry."""
    if "__error__" in entry:
        error = entry["__error__"]
        text = error if isinstance(error, str) else json.dumps(error)
        return ERROR_STATUSES.get(text, RUNTIME_ERROR), one_line(text), math.nan
    for field in dict.fromkeys((objective, "time")):
        value = entry.get(field)
        if isinstance(value, str):
            return ERROR_STATUSES.get(value, RUNTIME_ERROR), one_line(value), math.nan
    value = entry.get(objective)
    if value is None:
        return RUNTIME_ERROR, f"no {objective!r} value recorded", math.nan
    return value_outcome(value, objective)


def value_outcome(value: Any, objective: str) -> tuple[str, str, float]:
    """(status, message, objective value) of one recorded value: Kernel Tuner's error strings,
    non-numbers, non-finite numbers and its old failure marker are failures."""
    if isinstance(value, str):
        return ERROR_STATUSES.get(value, RUNTIME_ERROR), one_line(value), math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return RUNTIME_ERROR, f"{objective!r} is not a number ({value!r})", math.nan
    number = float(value)
    if not math.isfinite(number):
        return RUNTIME_ERROR, f"{objective!r} is {number}", math.nan
    if number >= FAILURE_TIME:
        return RUNTIME_ERROR, f"{objective!r} = {number:g} (Kernel Tuner failure marker)", math.nan
    return OK, "", number


def _suffix(
    name: str,
    key_suffix: str | None,
    suffix_keys: Sequence[str] | None,
    file_keys: Sequence[str],
) -> dict[str, Any]:
    """The constant parameters a key suffix adds, by name."""
    if key_suffix is None:
        if suffix_keys:
            raise ReplayDataError(f"{name}: suffix_keys given without key_suffix")
        return {}
    tokens = key_suffix.removeprefix(",").split(",")
    if suffix_keys is None:
        raise ReplayDataError(
            f"{name}: key_suffix {key_suffix!r} adds {len(tokens)} value(s); name them with "
            "suffix_keys"
        )
    names = list(suffix_keys)
    if len(names) != len(tokens):
        raise ReplayDataError(
            f"{name}: key_suffix {key_suffix!r} has {len(tokens)} value(s) but suffix_keys "
            f"names {len(names)}"
        )
    overlap = set(names) & set(file_keys)
    if overlap or len(set(names)) != len(names):
        raise ReplayDataError(f"{name}: suffix_keys {names} repeat a parameter name")
    return {key: _parse_token(token) for key, token in zip(names, tokens, strict=True)}


def _parse_token(token: str) -> Any:
    """A key token as int, float or (failing both) string."""
    text = token.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def one_line(text: str) -> str:
    return " ".join(str(text).split())
