"""Measurements written as a Kernel Tuner cache file (the format ``KernelTunerCache`` reads).

One cache holds one device and one problem: the rows of a single input point. Keys join the
design values (``str``) in ``tune_params_keys`` order, as Kernel Tuner does; an entry holds the
parameters, the objective (its measured value, or Kernel Tuner's failure marker
``RuntimeFailedConfig`` / ``CompilationFailedConfig`` / ``InvalidConfig`` for failed rows), the
raw repeat times as ``times`` and zero compile / verification / benchmark times (unknown to the
campaign). Kernel Tuner's simulation mode replays such a file when it holds every configuration
of the space it is given; a partial one still serves as the cache of a real Kernel Tuner run,
which then measures only what is missing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from mlkaps_gpu._numbers import plain
from mlkaps_gpu.executors._base import COMPILE_ERROR, INVALID, OK

_FAILURE_MARKERS = {COMPILE_ERROR: "CompilationFailedConfig", INVALID: "InvalidConfig"}


def _key(values: Sequence[Any]) -> str:
    return ",".join(str(plain(v)) for v in values)


def _times(text: Any) -> list[float]:
    if not isinstance(text, str) or not text:
        return []
    try:
        return [float(t) for t in json.loads(text)]
    except (ValueError, TypeError):
        return []


def kernel_tuner_cache(
    rows: pd.DataFrame,
    tune_params: Mapping[str, Sequence[Any]],
    objective: str,
    *,
    device_name: str,
    kernel_name: str,
    problem_size: Sequence[int] | str = (),
) -> dict[str, Any]:
    """The cache document of ``rows`` (design columns, ``objective``, ``status``, ``raw_times``).

    When a configuration was measured several times, its last measurement wins, as when Kernel
    Tuner appends to a cache.
    """
    keys = list(tune_params)
    cache: dict[str, Any] = {}
    for record in rows.to_dict("records"):
        values = [plain(record[name]) for name in keys]
        entry: dict[str, Any] = dict(zip(keys, values, strict=True))
        value = record.get(objective)
        status = record.get("status", OK)
        if status == OK and value is not None and math.isfinite(float(value)):
            entry[objective] = float(value)
        else:
            entry[objective] = _FAILURE_MARKERS.get(str(status), "RuntimeFailedConfig")
        entry["times"] = _times(record.get("raw_times"))
        entry.update({"compile_time": 0.0, "verification_time": 0.0, "benchmark_time": 0.0})
        cache[_key(values)] = entry
    return {
        "device_name": device_name,
        "kernel_name": kernel_name,
        "problem_size": list(problem_size) if not isinstance(problem_size, str) else problem_size,
        "tune_params_keys": keys,
        "tune_params": {name: [plain(v) for v in values] for name, values in tune_params.items()},
        "objective": objective,
        "cache": cache,
    }
