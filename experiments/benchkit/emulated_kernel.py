"""A kernel emulated from a measured table, for campaigns that sample the inputs' whole range
as a live campaign does, in seconds (``pass_replays.py --emulate``).

The table holds one time per (input point, configuration) over a grid of points (a live pass
that ``bench_inputs.py`` keeps). A call at any input point returns the table's log time
interpolated linearly in the logs of the numeric inputs between the grid's neighbouring
points (exact at the grid's points; corners where the configuration is not in the table are
left out), times ``exp(e)`` with ``e`` drawn from a measured noise sample (the differences
between two passes of a truth): a measurement's noise, fresh at each call (a cell measured
again reads differently), the same for the same call in the same run (seeded by the run's
seed, the cell and how many times this process measured it).

With ``drift = [sd, rho]`` in the specification (default ``[0, 0]``: none), each call is also
slowed by the positive part of an AR(1) series in the log time, stepped once per call of this
process: ``d = rho d + sqrt(1 - rho^2) sd z``, ``z`` standard normal, the time multiplied by
``exp(max(0, d))``. Slow moments of a shared machine come so: they add time, never take it,
and last over several measurements in a row (what ``pass_replays.py --drift`` emulates).

Loaded by the project's Python executor as ``emulated_kernel.py:time``, copied beside its
specification ``emulated_kernel.json`` (``table``, ``inputs``, ``design``, ``noise``: a
``.npy`` file of log-time noise values, ``seed``, optional ``drift``); it needs NumPy and
pandas only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_SPEC = json.loads(Path(__file__).with_suffix(".json").read_text())
_INPUTS: list[str] = list(_SPEC["inputs"])
_DESIGN: list[str] = list(_SPEC["design"])
_NOISE = np.load(_SPEC["noise"])
_SEED = int(_SPEC["seed"])
_DRIFT_SD, _DRIFT_RHO = (float(v) for v in _SPEC.get("drift", (0.0, 0.0)))


def _cubes(table: pd.DataFrame) -> tuple[list[np.ndarray], dict[tuple[str, ...], np.ndarray]]:
    """The grid's log axes and, per configuration, its log times over the grid (inf where
    the table has no such cell)."""
    axes = [np.log(np.sort(table[name].unique()).astype(np.float64)) for name in _INPUTS]
    cubes = {}
    for key, group in table.groupby(_DESIGN, sort=False):
        cube = np.full([len(axis) for axis in axes], np.inf)
        index = tuple(
            np.searchsorted(axis, np.log(group[name].to_numpy(np.float64)))
            for axis, name in zip(axes, _INPUTS, strict=True)
        )
        cube[index] = np.log(group["time"].to_numpy(np.float64))
        cubes[tuple(str(k) for k in (key if isinstance(key, tuple) else (key,)))] = cube
    return axes, cubes


_AXES, _CUBES = _cubes(pd.read_csv(_SPEC["table"], comment="#"))
_CALLS: dict[str, int] = {}
_DRIFT = {"step": 0, "level": 0.0}


def _drift() -> float:
    """This call's slowdown in the log time (module docstring); 0 without drift."""
    if _DRIFT_SD <= 0:
        return 0.0
    step = int(_DRIFT["step"])
    _DRIFT["step"] = step + 1
    z = float(np.random.default_rng([_SEED, 7919, step]).standard_normal())
    level = _DRIFT_RHO * _DRIFT["level"] + np.sqrt(1.0 - _DRIFT_RHO**2) * _DRIFT_SD * z
    _DRIFT["level"] = level
    return max(0.0, level)


def _interpolated(cube: np.ndarray, row: dict[str, Any]) -> float:
    corners = []
    for axis, name in zip(_AXES, _INPUTS, strict=True):
        x = float(np.log(float(row[name])))
        low = int(np.clip(np.searchsorted(axis, x) - 1, 0, max(len(axis) - 2, 0)))
        if len(axis) == 1:
            corners.append([(0, 1.0)])
            continue
        weight = float(np.clip((x - axis[low]) / (axis[low + 1] - axis[low]), 0.0, 1.0))
        corners.append([(low, 1.0 - weight), (low + 1, weight)])
    total = weight_sum = 0.0
    for combination in itertools.product(*corners):
        weight = float(np.prod([w for _, w in combination]))
        value = cube[tuple(i for i, _ in combination)]
        if weight > 0 and np.isfinite(value):
            total += weight * value
            weight_sum += weight
    if weight_sum == 0:
        raise RuntimeError(f"no measured neighbour of {row} for this configuration")
    return total / weight_sum


def time(row: dict[str, Any]) -> float:
    """The emulated time of ``row`` (inputs and design)."""
    key = tuple(str(row[name]) for name in _DESIGN)
    if key not in _CUBES:
        raise RuntimeError(f"configuration {key} is not in the table")
    cell = json.dumps([str(row[name]) for name in (*_INPUTS, *_DESIGN)])
    count = _CALLS.get(cell, 0)
    _CALLS[cell] = count + 1
    digest = hashlib.sha256(f"{_SEED}|{cell}|{count}".encode()).hexdigest()
    noise = float(_NOISE[int(digest[:12], 16) % len(_NOISE)]) if len(_NOISE) else 0.0
    return float(np.exp(_interpolated(_CUBES[key], row) + noise + _drift()))
