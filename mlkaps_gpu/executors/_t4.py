"""Reader of T4 results files, the auto-tuning community's common results format.

Kernel Tuner writes it (``store_output_file``) and the benchmark collections of the auto-tuning
community publish their measurements in it (``*.json``, or gzip-compressed ``*.json.gz``)::

    {"schema_version": "1.0.0",
     "metadata": {"timeunit": "milliseconds"},            (optional)
     "results": [
        {"configuration": {"block_size_x": 16, ...},
         "invalidity": "correct",     (or "compile", "runtime", "timeout", "correctness",
                                       "constraints")
         "correctness": 1,            (0: the result was wrong)
         "measurements": [{"name": "time", "value": 3.87, "unit": "ms"}, ...],
         "times": {"runtimes": [3.97, 3.88, ...], "compilation": ..., ...},
         "objectives": ["time"], "timestamp": "..."},
        ...]}

One entry per measured configuration. The objective is the measurement of that name; a
configuration is a failure when its ``invalidity`` is not ``correct`` (``compile`` ->
``compile_error``, ``runtime`` -> ``runtime_error``, ``timeout`` -> ``timeout``, ``correctness``
and ``constraints`` -> ``invalid``), when its
``correctness`` is 0 (``invalid``: a wrong answer), or when the measurement is missing or not a
finite number below Kernel Tuner's old failure marker ``1e20`` (Kernel Tuner writes its error
string, e.g. ``"RuntimeFailedConfig"``, there).
The parameters are the ``configuration`` keys (every entry must have the same ones); their values
are sorted (numbers ascending, text alphabetically), as for a CSV table. An unfinished file
(written by appending) is repaired as a Kernel Tuner cache is.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Literal

from mlkaps_gpu.executors._base import COMPILE_ERROR, INVALID, OK, RUNTIME_ERROR, TIMEOUT
from mlkaps_gpu.executors._kernel_tuner_cache import (
    empty_result_columns,
    parameter_columns,
    parse_json_bytes,
    raw_times_text,
    value_outcome,
)
from mlkaps_gpu.executors._replay_data import (
    RECORD_COLUMNS,
    ReplayDataError,
    ReplayTable,
    check_file,
    drop_duplicates,
    make_records,
)

#: ``invalidity`` values and the status each maps to.
INVALIDITY_STATUSES: dict[str, str] = {
    "correct": OK,
    "compile": COMPILE_ERROR,
    "runtime": RUNTIME_ERROR,
    "constraints": INVALID,
    "correctness": INVALID,
    "timeout": TIMEOUT,
}
#: The schema major version this reader understands.
SCHEMA_MAJOR = "1"


def is_t4_document(data: Any) -> bool:
    """Whether a parsed JSON document looks like T4 results (a ``results`` list, no ``cache``)."""
    return isinstance(data, dict) and isinstance(data.get("results"), list) and "cache" not in data


def replay_format(path: str | os.PathLike[str]) -> Literal["kernel_tuner", "csv", "t4"]:
    """The replay format of a data file: ``csv`` for ``*.csv``, else ``t4`` for a JSON document
    holding a ``results`` list and ``kernel_tuner`` for any other (its loader says what is
    wrong with it)."""
    file = check_file(path)
    if file.suffix.lower() == ".csv":
        return "csv"
    try:
        data = parse_json_bytes(file.read_bytes(), file.name)
    except ReplayDataError:
        return "kernel_tuner"
    return "t4" if is_t4_document(data) else "kernel_tuner"


def load_t4_results(
    path: str | os.PathLike[str],
    *,
    objective: str = "time",
    duplicates: Literal["error", "first"] = "error",
) -> ReplayTable:
    """Load a T4 results file (gzip detected by its magic bytes, else plain JSON).

    Args:
        path: the results file.
        objective: the measurement used as objective (``time`` by default).
        duplicates: what to do with a configuration measured twice: raise, or keep the first.

    Raises:
        ReplayDataError: the file is missing, corrupt or not T4 results; the one-line message
            names the file, the entry and the problem.
    """
    file = check_file(path)
    name = file.name
    data = parse_json_bytes(file.read_bytes(), name)
    results = _results(data, name)
    keys = _keys(results, name)
    clash = {objective, *RECORD_COLUMNS} & set(keys)
    if clash:
        raise ReplayDataError(
            f"{name}: parameter name(s) {sorted(clash)} clash with result columns"
        )
    n = len(results)
    values: dict[str, list[Any]] = {key: [None] * n for key in keys}
    times, status, message, raw_times = empty_result_columns(n)
    for i, entry in enumerate(results):
        configuration = entry["configuration"]
        for key in keys:
            values[key][i] = configuration[key]
        status[i], message[i], value = _outcome(entry, objective, name, i)
        if status[i] == OK:
            times[i] = value
            measured = entry.get("times")
            runs = measured.get("runtimes") if isinstance(measured, Mapping) else None
            raw_times[i] = raw_times_text(runs, value)
    columns, observed = parameter_columns(values, {}, {}, n, name)
    tune_params = {key: sorted(listed) for key, listed in observed.items()}
    columns.update({objective: times, "status": status, "message": message})
    columns["raw_times"] = raw_times
    records = drop_duplicates(
        make_records(columns), keys, name, duplicates, lambda index: f"results[{index}]"
    )
    return ReplayTable(
        path=file, keys=keys, tune_params=tune_params, objective=objective, records=records
    )


def _results(data: Any, name: str) -> list[dict[str, Any]]:
    """The checked ``results`` list of a parsed document."""
    if not isinstance(data, dict):
        raise ReplayDataError(
            f"{name}: not T4 results (top level is {type(data).__name__}, not an object)"
        )
    if "results" not in data:
        hint = ' (a Kernel Tuner cache: use format = "kernel_tuner")' if "cache" in data else ""
        raise ReplayDataError(f"{name}: not T4 results (missing key 'results'){hint}")
    version = data.get("schema_version")
    if version is not None and str(version).split(".")[0] != SCHEMA_MAJOR:
        raise ReplayDataError(
            f"{name}: T4 schema_version {version!r} is not supported (versions "
            f"{SCHEMA_MAJOR}.x are)"
        )
    results = data["results"]
    if not isinstance(results, list) or not results:
        raise ReplayDataError(f"{name}: 'results' is not a non-empty list")
    for i, entry in enumerate(results):
        if not isinstance(entry, dict):
            raise ReplayDataError(f"{name}: results[{i}] is not an object")
        configuration = entry.get("configuration")
        if not isinstance(configuration, dict) or not configuration:
            raise ReplayDataError(f"{name}: results[{i}] has no 'configuration' object")
    return results


def _keys(results: list[dict[str, Any]], name: str) -> tuple[str, ...]:
    """The parameter names, the same in every entry."""
    keys = tuple(str(k) for k in results[0]["configuration"])
    expected = set(keys)
    for i, entry in enumerate(results):
        found = set(entry["configuration"])
        if found != expected:
            missing = sorted(expected - found)
            extra = sorted(found - expected)
            raise ReplayDataError(
                f"{name}: results[{i}] has other parameters than results[0] (missing "
                f"{missing}, extra {extra})"
            )
    return keys


def _outcome(
    entry: Mapping[str, Any], objective: str, name: str, index: int
) -> tuple[str, str, float]:
    """(status, message, objective value) of one result entry."""
    invalidity = entry.get("invalidity", "correct")
    if invalidity not in INVALIDITY_STATUSES:
        raise ReplayDataError(
            f"{name}: results[{index}] has invalidity {invalidity!r} (allowed: "
            f"{', '.join(INVALIDITY_STATUSES)})"
        )
    if INVALIDITY_STATUSES[invalidity] != OK:
        return INVALIDITY_STATUSES[invalidity], f"invalidity: {invalidity}", math.nan
    if entry.get("correctness", 1) in (0, False):
        return INVALID, "correctness: 0 (wrong result)", math.nan
    measurements = entry.get("measurements")
    if not isinstance(measurements, list):
        raise ReplayDataError(f"{name}: results[{index}] has no 'measurements' list")
    found = [m for m in measurements if isinstance(m, Mapping) and m.get("name") == objective]
    if not found:
        names = sorted(str(m.get("name")) for m in measurements if isinstance(m, Mapping))
        return RUNTIME_ERROR, f"no {objective!r} measurement (has: {', '.join(names)})", math.nan
    return value_outcome(found[0].get("value"), objective)
