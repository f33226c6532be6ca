"""Input grids of a space: the Cartesian grid over the inputs (regular, geometric for log
parameters, every value of categoricals; fixed inputs held), without the points that the
constraints on inputs only exclude. :class:`~mlkaps_gpu.space.Space` answers ``grid``,
``grid_size`` and ``check_grid`` through these functions.
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


def grid(space: Space, sizes: int | Mapping[str, int]) -> pd.DataFrame:
    """``Space.grid`` (its docstring says what it does)."""
    check_grid(space, sizes)
    table = cartesian_grid(space, sizes)
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


def cartesian_grid(space: Space, sizes: int | Mapping[str, int]) -> pd.DataFrame:
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
    mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    return pd.DataFrame(
        {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(space.inputs)}
    ).astype({p.name: p.dtype for p in space.inputs})


__all__ = ["MAX_GRID_KEYS", "cartesian_grid", "check_grid", "grid", "grid_size"]
