"""Cheap, deterministic cost models of the shipped kernels, and their exhaustive optima.

The headers in ``generated/`` must be reproducible by a script in seconds on any machine, so their
trees are not fitted to measurements (a real campaign takes minutes to hours and its timings
differ between machines and runs) but to these analytic models of each kernel's run time. They
capture the effects that make the best configuration depend on the inputs (fork/join and
synchronisation overheads against parallel work, cache footprint of the tiles, BLAS-2 panel
work against BLAS-3 updates) with plausible constants; they are not calibrated on a machine.
Only ``+ - * /``, ``min``/``max`` and ``ceil`` are used, which IEEE 754 rounds identically
everywhere, so the optima and hence the headers are the same on every machine.

The thread parameters are fixed to ``1..CORES`` (``load_builtin`` sizes them to the machine it
runs on, which would make the headers machine-dependent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlkaps_gpu.kernels import load_builtin
from mlkaps_gpu.space import Parameter, Space

#: Threads of the shipped headers' thread parameters (1..CORES).
CORES = 8
#: Input grid size per kernel (points per input) on which the optima are computed.
GRID_SIZES = {"matsum": 32, "lu": 32, "gemm": 10}
_L1_BYTES = 32 * 1024.0

#: A table of parameter columns: a DataFrame, or a mapping of names to numpy arrays.
Table = pd.DataFrame | Mapping[str, np.ndarray]
Cost = Callable[[Table], np.ndarray]


def _threads_parameter(name: str) -> Parameter:
    return Parameter(name, "int", values=tuple(range(1, CORES + 1)))


def kernel_space(name: str) -> Space:
    """The space of a shipped kernel, with its thread parameter fixed to ``1..CORES``."""
    kernel = load_builtin(name)
    threads = kernel.executor_options.get("threads")
    design = [_threads_parameter(p.name) if p.name == threads else p for p in kernel.design]
    return Space(kernel.inputs, design, kernel.constraints)


def _column(table: Table, name: str) -> np.ndarray:
    return np.asarray(table[name], dtype=np.float64)


def _text(table: Table, name: str) -> np.ndarray:
    return np.asarray(table[name]).astype(str)


def _speedup(threads: np.ndarray, work_items: np.ndarray) -> np.ndarray:
    """Parallel speed-up of ``threads`` threads over ``work_items`` independent items."""
    useful = np.minimum(threads, np.maximum(work_items, 1.0))
    return useful / (1.0 + 0.04 * (useful - 1.0))


def matsum_time(table: Table) -> np.ndarray:
    """Sum of an n x m matrix with T threads: bandwidth per thread higher while the matrix fits
    in cache (1 MiB), saturating at ~3 threads beyond; a fork/join cost growing with T."""
    n, m, t = _column(table, "n"), _column(table, "m"), _column(table, "T")
    size = 8.0 * n * m
    bandwidth = np.where(size <= 1048576.0, t * 15.0e9, np.minimum(t * 7.0e9, 20.0e9))
    return 2.0e-6 + 1.5e-6 * t + size / bandwidth


def _cache_efficiency(footprint: np.ndarray) -> np.ndarray:
    """1 while the working set fits in L1 (32 KiB), decreasing beyond."""
    return 1.0 / (1.0 + np.maximum(footprint - _L1_BYTES, 0.0) / (4.0 * _L1_BYTES))


def lu_time(table: Table) -> np.ndarray:
    """Blocked LU: BLAS-2 panels (recursive faster but with a per-panel cost), BLAS-3 trailing
    updates whose arithmetic intensity grows with nb (tile footprint against loop overhead,
    threads over the tiles), one synchronisation per block column and thread."""
    m, n = _column(table, "m"), _column(table, "n")
    nb, threads = _column(table, "nb"), _column(table, "threads")
    tile_m, tile_n = _column(table, "tile_m"), _column(table, "tile_n")
    recursive = _text(table, "panel") == "recursive"
    k = np.minimum(m, n)
    panels = np.ceil(k / nb)
    panel_time = m * k * nb / 2.0 / np.where(recursive, 3.0e9 * nb / (nb + 16.0), 1.5e9)
    panel_time += panels * np.where(recursive, 4.0e-6, 0.5e-6)
    update_flops = np.maximum(m * n * k - (m + n) * k * k / 2.0 + k * k * k / 3.0, 0.0)
    footprint = 8.0 * (tile_m * tile_n + (tile_m + tile_n) * np.minimum(nb, 48.0))
    intensity = nb / (nb + 96.0)
    overhead = tile_m * tile_n / (tile_m * tile_n + 512.0)
    tiles = np.ceil(m / tile_m) * np.ceil(n / tile_n)
    rate = 8.0e9 * intensity * _cache_efficiency(footprint) * overhead
    rate *= _speedup(threads, tiles / 4.0)
    synchronisation = panels * threads * 8.0e-6
    return 5.0e-6 + panel_time + 2.0 * update_flops / rate + synchronisation


_UNROLL = {1.0: 0.7, 2.0: 0.85, 4.0: 0.95, 8.0: 1.0}


def gemm_time(table: Table) -> np.ndarray:
    """Tiled GEMM: tile footprint against loop overhead, wasted work at ragged edges, loop order
    (by shape), unrolling (spills when unroll * 16 > tile_n), threads over the output tiles with
    a fork/join cost."""
    m, n, k = _column(table, "m"), _column(table, "n"), _column(table, "k")
    tile_m, tile_n, tile_k = (_column(table, c) for c in ("tile_m", "tile_n", "tile_k"))
    threads, unroll = _column(table, "threads"), _column(table, "unroll")
    order = _text(table, "loop_order")
    padded = (
        np.ceil(m / tile_m) * tile_m * np.ceil(n / tile_n) * tile_n * np.ceil(k / tile_k) * tile_k
    )
    footprint = 8.0 * (tile_m * tile_k + tile_k * tile_n + tile_m * tile_n)
    overhead = tile_m * tile_n / (tile_m * tile_n + 1024.0) * tile_k / (tile_k + 24.0)
    order_efficiency = np.select(
        [order == "ikj", order == "kij"],
        [np.where(n >= 96.0, 1.0, 0.75), np.where(k <= 64.0, 1.05, 0.85)],
        np.where(m <= 48.0, 0.95, 0.6),
    )
    unrolled = np.select([unroll == u for u in _UNROLL], list(_UNROLL.values()), np.nan)
    unrolled = np.where(unroll * 16.0 > tile_n, 0.75 * unrolled, unrolled)
    tiles = np.ceil(m / tile_m) * np.ceil(n / tile_n)
    rate = 6.0e9 * _cache_efficiency(footprint) * overhead * order_efficiency * unrolled
    rate *= _speedup(threads, tiles)
    return 3.0e-6 + 2.5e-6 * threads + 2.0 * padded / rate


COSTS: dict[str, Cost] = {"matsum": matsum_time, "lu": lu_time, "gemm": gemm_time}


@dataclass(frozen=True)
class KernelModel:
    """A shipped kernel's space, its cost model and the exhaustive optima on a grid."""

    name: str
    space: Space
    cost: Cost
    optima: pd.DataFrame


def exhaustive_optima(
    space: Space, cost: Cost, grid: pd.DataFrame, *, chunk: int = 1 << 19
) -> pd.DataFrame:
    """The configuration of least cost at every grid point (first in enumeration order on
    ties), with its ``predicted_time``; points admitting no valid configuration are dropped."""
    grid = grid[space.input_names].reset_index(drop=True)
    inputs = {name: grid[name].to_numpy() for name in space.input_names}
    domains = [
        p.domain_values().astype(str) if p.kind == "categorical" else p.domain_values()
        for p in space.design
    ]
    best_codes = np.zeros((len(grid), len(space.design)), dtype=np.int64)
    best_time = np.full(len(grid), np.nan)
    pending: list[tuple[int, np.ndarray]] = []

    def flush() -> None:
        owners = np.concatenate([np.full(len(v), p) for p, v in pending])
        codes = np.concatenate([v for _, v in pending]).astype(np.int64)
        columns = {name: values[owners] for name, values in inputs.items()}
        for index, parameter in enumerate(space.design):
            columns[parameter.name] = domains[index][codes[:, index]]
        times = cost(columns)
        lengths = np.array([len(v) for _, v in pending])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        lowest = np.minimum.reduceat(times, starts)
        # the first row of each point's block that reaches its minimum
        hits = np.flatnonzero(times == np.repeat(lowest, lengths))
        block_of_hit = np.searchsorted(starts, hits, side="right") - 1
        first = hits[np.unique(block_of_hit, return_index=True)[1]]
        points = np.array([p for p, _ in pending])
        best_codes[points], best_time[points] = codes[first], times[first]
        pending.clear()

    size = 0
    for point in range(len(grid)):
        values = {name: grid[name].iloc[point] for name in space.constrained_inputs}
        valid = space.valid_design_codes(values)
        if len(valid):
            pending.append((point, valid))
            size += len(valid)
        if size >= chunk:
            flush()
            size = 0
    if pending:
        flush()
    keep = ~np.isnan(best_time)
    optima = space.assemble(grid[keep], best_codes[keep])
    optima["predicted_time"] = best_time[keep]
    return optima


def kernel_model(name: str) -> KernelModel:
    """Space, cost model and optima (on a ``GRID_SIZES[name]``-per-input grid) of a kernel."""
    space = kernel_space(name)
    cost = COSTS[name]
    optima = exhaustive_optima(space, cost, space.grid(GRID_SIZES[name]))
    return KernelModel(name, space, cost, optima)
