"""Input grids of a space: the Cartesian grid over the inputs (regular, geometric for log
parameters, every value of categoricals; fixed inputs held), without the points that the
constraints on inputs only exclude. :class:`~mlkaps_gpu.space.Space` answers ``grid``,
``grid_size`` and ``check_grid`` through these functions.

An integer input that a constraint with a design parameter mentions (``block <= n``) also gets
the values where the set of valid configurations changes along it, with the value before each:
the best configuration often jumps where a larger tile becomes legal, and a grid that brackets
the change lets the trees split exactly there (decision 0029).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlkaps_gpu.space._parameters import SpaceError

if TYPE_CHECKING:
    from mlkaps_gpu.space._space import Space

#: Most (grid point, design configuration) pairs: the optimizer keys each with one int64, with
#: room to spare.
MAX_GRID_KEYS = 2**62
#: Most constraint evaluations (input values x design configurations, per line of the grid)
#: spent finding where the valid configurations change along an integer input.
MAX_BREAK_EVALUATIONS = 4_000_000
#: Most values a grid axis gains at such changes.
MAX_BREAK_VALUES = 64


def grid(space: Space, sizes: int | Mapping[str, int]) -> pd.DataFrame:
    """``Space.grid`` (its docstring says what it does)."""
    check_grid(space, sizes)
    table = cartesian_grid(space, sizes, breaks=True)
    if space.input_constraints:
        table = table[space.satisfies_input_constraints(table)].reset_index(drop=True)
        if table.empty:
            raise SpaceError(
                "no grid point satisfies the constraints on inputs only ("
                + "; ".join(c.source for c in space.input_constraints)
                + "): refine the grid"
            )
    return table


def grid_size(space: Space, sizes: int | Mapping[str, int]) -> int:
    """``Space.grid_size`` (its docstring says what it does)."""
    if isinstance(sizes, Mapping):
        unknown = set(sizes) - set(space.input_names)
        if unknown:
            raise SpaceError(f"grid names unknown inputs {sorted(unknown)}")
    total = 1
    for parameter in space.inputs:
        if parameter.name in space.fixed_inputs:
            continue
        size = sizes.get(parameter.name, 8) if isinstance(sizes, Mapping) else sizes
        total *= len(parameter.grid(int(size)))
    return total


def check_grid(space: Space, sizes: int | Mapping[str, int]) -> None:
    """``Space.check_grid`` (its docstring says what it does)."""
    points = grid_size(space, sizes)
    if points * space.design_product > MAX_GRID_KEYS:
        raise SpaceError(
            f"a grid of {points:,} points x {space.design_product:,} design configurations "
            f"is more than 2**62 (point, configuration) pairs; use a coarser grid or fewer "
            "design values"
        )


def cartesian_grid(
    space: Space, sizes: int | Mapping[str, int], *, breaks: bool = False
) -> pd.DataFrame:
    """The Cartesian grid of ``sizes`` (with ``breaks``, each axis also holds its
    :func:`validity_breaks`)."""
    if isinstance(sizes, Mapping):
        unknown = set(sizes) - set(space.input_names)
        if unknown:
            raise SpaceError(f"grid names unknown inputs {sorted(unknown)}")
    axes = []
    for parameter in space.inputs:
        if parameter.name in space.fixed_inputs:
            axes.append(np.array([space.fixed_inputs[parameter.name]], dtype=parameter.dtype))
            continue
        size = sizes.get(parameter.name, 8) if isinstance(sizes, Mapping) else sizes
        axes.append(parameter.grid(int(size)))
    if not axes:
        return pd.DataFrame(index=range(1))
    for index, extra in enumerate(validity_breaks(space, axes) if breaks else []):
        if len(extra):
            axes[index] = np.union1d(axes[index], extra).astype(axes[index].dtype)
    mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    return pd.DataFrame(
        {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(space.inputs)}
    ).astype({p.name: p.dtype for p in space.inputs})


def validity_breaks(space: Space, axes: list[np.ndarray]) -> list[np.ndarray]:
    """Per input (aligned with ``space.inputs``): values of an integer range input at which
    the set of valid design configurations changes along it (the other inputs at their values
    in ``axes``), each with the value before it, so that the grid brackets the change; empty for
    every other input, for a space that is not enumerated, and where finding them would take
    more than :data:`MAX_BREAK_EVALUATIONS` evaluations per line. An axis of ``k`` values gains
    at most ``max(2, k // 2)`` (and :data:`MAX_BREAK_VALUES`): the changes that flip the most
    configurations, then those farthest from the axis's values, first."""
    out = [np.zeros(0, dtype=np.int64) for _ in space.inputs]
    if not space.mask_inputs or not space.enumerable or space.listed_rows is not None:
        return out
    position = {p.name: i for i, p in enumerate(space.inputs)}
    codes, columns = space._product()
    for name in space.mask_inputs:
        parameter = space.parameters[name]
        if parameter.kind != "int" or parameter.values is not None:
            continue
        if name in space.fixed_inputs or parameter.low is None or parameter.high is None:
            continue
        values = np.arange(int(parameter.low), int(parameter.high) + 1, dtype=np.int64)
        if len(values) < 3 or len(values) * len(codes) > MAX_BREAK_EVALUATIONS:
            continue
        others = [n for n in space.mask_inputs if n != name]
        lines = (
            np.array(np.meshgrid(*[axes[position[n]] for n in others], indexing="ij")).reshape(
                len(others), -1
            )
            if others
            else np.zeros((0, 1))
        )
        flips = np.zeros(len(values), dtype=np.int64)  # most configurations flipped at a value
        # every (value, configuration) pair once; each line sets only the other inputs
        base: dict[str, object] = {
            key: np.tile(column, len(values)) for key, column in columns.items()
        }
        base[name] = np.repeat(values.astype(np.float64), len(codes))
        for line in range(lines.shape[1]):
            scope = dict(base)
            for j, other in enumerate(others):
                value = lines[j, line]
                categorical = space.parameters[other].kind == "categorical"
                scope[other] = value if categorical else np.float64(value)
            valid = _design_valid(space, scope, len(values) * len(codes))
            valid = valid.reshape(len(values), len(codes))
            flips[1:] = np.maximum(flips[1:], (valid[1:] != valid[:-1]).sum(axis=1))
        changed = np.flatnonzero(flips)
        if not len(changed):
            continue
        axis = np.asarray(axes[position[name]], dtype=np.float64)
        scale = np.log if parameter.log else (lambda x: x)
        at = values[changed].astype(np.float64)
        gap = np.min(np.abs(scale(at)[:, None] - scale(axis)[None, :]), axis=1)
        order = np.lexsort((-gap, -flips[changed]))
        room = min(MAX_BREAK_VALUES, max(2, len(axis) // 2)) // 2
        kept = np.sort(values[changed[order[:room]]])
        out[position[name]] = np.unique(np.concatenate([kept - 1, kept]))
    return out


def _design_valid(space: Space, scope: Mapping[str, object], n: int) -> np.ndarray:
    """Whether each of the ``n`` rows of ``scope`` (columns by name) meets every design
    constraint."""
    mask = np.ones(n, dtype=bool)
    for constraint in space.design_constraints:
        mask &= constraint.evaluate(scope, n)
    return mask


def validity_edges(space: Space, points: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Cells (inputs and design) where a configuration becomes valid along an integer input:
    for each configuration, input and value ``v`` of that input among ``points`` where a
    design constraint holds at ``v`` and not at ``v - 1`` (``block <= n`` at ``n = block``,
    the range's low end included), one of those points, drawn with ``seed``. A configuration
    is often the fastest exactly where it becomes valid (one block, no remainder) and is
    learnt only from the sizes beyond, where it is not: these cells measure it there.
    Nothing for a space that is not enumerated, a table of listed rows, or inputs that no
    design constraint mentions."""
    empty = space.empty_table()
    if not space.mask_inputs or not space.enumerable or space.listed_rows is not None:
        return empty
    points = points[space.input_names].drop_duplicates().reset_index(drop=True)
    codes, columns = space._product()
    n_points, n_codes = len(points), len(codes)
    if not n_points or n_points * n_codes > MAX_BREAK_EVALUATIONS:
        return empty
    scope: dict[str, object] = {k: np.tile(c, n_points) for k, c in columns.items()}
    for name in space.input_names:
        categorical = space.parameters[name].kind == "categorical"
        values = np.repeat(points[name].to_numpy(), n_codes)
        scope[name] = values if categorical else values.astype(np.float64)

    here = _design_valid(space, scope, n_points * n_codes)
    found = []
    for name in space.mask_inputs:
        parameter = space.parameters[name]
        if parameter.kind != "int" or parameter.values is not None or name in space.fixed_inputs:
            continue
        before = dict(scope)
        before[name] = np.asarray(scope[name], dtype=np.float64) - 1.0
        rows = np.flatnonzero(here & ~_design_valid(space, before, len(here)))
        if len(rows):
            found.append(
                pd.DataFrame(
                    {
                        "_point": rows // n_codes,
                        "_code": rows % n_codes,
                        "_input": name,
                        "_value": np.asarray(scope[name])[rows],
                    }
                )
            )
    if not found:
        return empty
    table = pd.concat(found, ignore_index=True)
    rng = np.random.default_rng([seed, 31])
    table = table.iloc[rng.permutation(len(table))]
    table = table.drop_duplicates(["_code", "_input", "_value"]).sort_index(kind="stable")
    table = table.drop_duplicates(["_point", "_code"])
    cells = space.assemble(points.iloc[table["_point"].to_numpy()], codes[table["_code"]])
    return cells.reset_index(drop=True)


__all__ = [
    "MAX_BREAK_EVALUATIONS",
    "MAX_BREAK_VALUES",
    "MAX_GRID_KEYS",
    "cartesian_grid",
    "check_grid",
    "grid",
    "grid_size",
    "validity_breaks",
    "validity_edges",
]
