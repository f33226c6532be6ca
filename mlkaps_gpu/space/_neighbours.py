"""Designs near a design, over codes: repair (the nearest valid design of an input point) and
neighbours (the valid designs around one). :class:`~mlkaps_gpu.space.Space` answers
``repair_codes`` and ``neighbour_codes`` through these functions.

Distance between designs is over their codes (the index of each value in its parameter's
domain): L1 for repair (as Kernel Tuner), Hamming or Chebyshev for neighbours.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.space._parameters import SpaceError

if TYPE_CHECKING:
    from mlkaps_gpu.space._space import Space

NeighbourKind = Literal["strictly_adjacent", "adjacent", "Hamming"]
NEIGHBOUR_KINDS: tuple[str, ...] = ("strictly_adjacent", "adjacent", "Hamming")
#: Most candidates one Chebyshev ring of a non-enumerated space is searched with.
_RING_LIMIT = 1 << 20


def repair_codes(
    space: Space,
    inputs: pd.DataFrame,
    codes: np.ndarray,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """``Space.repair_codes`` (its docstring says what it does)."""
    codes = np.clip(np.asarray(codes, dtype=np.int64), 0, space.design_sizes - 1)
    out = codes.copy()
    if space.listed_rows is not None and space._listed_fast:
        listed = space.listed_rows
        points = listed.point_ids({c: inputs[c].to_numpy() for c in listed.names}, len(codes))
        return listed.nearest(points, codes)[0]
    if space.enumerable:
        for values, rows in space._groups(inputs):
            valid = space.valid_design_codes(values)
            if len(valid) == 0:
                continue
            out[rows] = nearest_codes(codes[rows], valid)
        return out
    rng = rng if rng is not None else np.random.default_rng(0)
    scope = {**space.columns(inputs), **space._design_columns(codes)}
    invalid = np.flatnonzero(~space._satisfies(scope, len(codes)))
    for row in invalid:
        out[row] = _local_repair(space, inputs.iloc[[row]], codes[row], rng)
    return out


def _local_repair(
    space: Space, inputs: pd.DataFrame, codes: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Nearest valid design found among growing random perturbations (large spaces)."""
    input_columns = space.columns(inputs)  # one row: broadcast against the candidates
    for radius in (1, 2, 4, 8, 16, 64, 256):
        offsets = rng.integers(-radius, radius + 1, size=(2048, len(space.design)))
        trial = np.clip(codes + offsets, 0, space.design_sizes - 1)
        ok = space._satisfies({**input_columns, **space._design_columns(trial)}, len(trial))
        if ok.any():
            candidates = trial[ok]
            distance = np.abs(candidates - codes).sum(axis=1)
            return candidates[int(np.argmin(distance))]
    fallback, found = space.sample_designs(inputs, rng)
    if not found[0]:
        raise SpaceError("no valid configuration for input " + str(inputs.iloc[0].to_dict()))
    return fallback[0]


def neighbour_codes(
    space: Space, inputs: Mapping[str, Any], here: np.ndarray, kind: NeighbourKind = "Hamming"
) -> np.ndarray:
    """``Space.neighbour_codes`` (its docstring says what it does)."""
    if kind not in NEIGHBOUR_KINDS:
        raise SpaceError(f"unknown neighbour kind '{kind}' (allowed: {NEIGHBOUR_KINDS})")
    here = np.asarray(here, dtype=np.int64).reshape(len(space.design))
    if space.enumerable:
        valid = space.valid_design_codes({n: inputs[n] for n in space.constrained_inputs})
        return select_neighbours(valid.astype(np.int64), here, kind)
    point = pd.DataFrame({n: [inputs[n]] for n in space.input_names}, index=range(1))
    if kind == "adjacent":
        # grow Chebyshev rings until one holds a valid configuration
        for radius in range(1, int(space.design_sizes.max())):
            ring = _ring(space.design_sizes, here, radius)
            if ring is None:
                break
            chosen = ring[_satisfied(space, point, ring)]
            if len(chosen):
                return chosen
        return np.zeros((0, len(space.design)), dtype=np.int64)
    candidates = _candidate_neighbours(space.design_sizes, here, kind)
    return candidates[_satisfied(space, point, candidates)]


def _satisfied(space: Space, inputs: pd.DataFrame, codes: np.ndarray) -> np.ndarray:
    """Which designs (codes) satisfy the constraints for one input row."""
    if len(codes) == 0:
        return np.zeros(0, dtype=bool)
    return space._satisfies({**space.columns(inputs), **space._design_columns(codes)}, len(codes))


def _ring(sizes: np.ndarray, here: np.ndarray, radius: int) -> np.ndarray | None:
    """In-domain codes at Chebyshev distance exactly ``radius`` (None: too many)."""
    low = np.maximum(here - radius, 0)
    high = np.minimum(here + radius, sizes - 1)
    spans = high - low + 1
    if float(np.prod(spans.astype(float))) > _RING_LIMIT:
        return None
    box = np.indices(tuple(int(s) for s in spans)).reshape(len(spans), -1).T + low
    return box[np.abs(box - here).max(axis=1) == radius]


def _candidate_neighbours(sizes: np.ndarray, here: np.ndarray, kind: str) -> np.ndarray:
    candidates = []
    if kind == "Hamming":
        for index, size in enumerate(sizes):
            for code in range(int(size)):
                if code != here[index]:
                    trial = here.copy()
                    trial[index] = code
                    candidates.append(trial)
    else:
        steps = [(-1, 0, 1)] * len(sizes)
        for offset in itertools.product(*steps):
            if any(offset):
                trial = here + np.array(offset)
                if (trial >= 0).all() and (trial < sizes).all():
                    candidates.append(trial)
    return np.array(candidates, dtype=np.int64).reshape(-1, len(sizes))


def select_neighbours(valid: np.ndarray, here: np.ndarray, kind: str) -> np.ndarray:
    """The neighbours of ``here`` among the valid codes ``valid`` (see ``Space.neighbours``;
    ``here`` need not be valid itself)."""
    delta = np.abs(valid - here)
    if kind == "Hamming":
        return valid[(delta > 0).sum(axis=1) == 1]
    chebyshev = delta.max(axis=1) if len(delta) else np.zeros(0, dtype=np.int64)
    if kind == "strictly_adjacent":
        return valid[chebyshev == 1]
    ring = chebyshev[chebyshev > 0]
    return valid[chebyshev == ring.min()] if len(ring) else valid[:0]


def nearest_codes(codes: np.ndarray, valid: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """For each row of ``codes``, the row of ``valid`` with the least L1 distance."""
    valid64 = valid.astype(np.int64)
    out = np.empty_like(codes)
    rows_per_chunk = max(1, chunk // max(1, len(valid)))
    for start in range(0, len(codes), rows_per_chunk):
        block = codes[start : start + rows_per_chunk]
        distance = np.abs(block[:, None, :] - valid64[None, :, :]).sum(axis=2)
        out[start : start + rows_per_chunk] = valid64[np.argmin(distance, axis=1)]
    return out


__all__ = [
    "NEIGHBOUR_KINDS",
    "NeighbourKind",
    "nearest_codes",
    "neighbour_codes",
    "repair_codes",
    "select_neighbours",
]
