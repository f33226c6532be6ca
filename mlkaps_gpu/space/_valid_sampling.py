"""Valid sampling: random input points (uniform over the input domain the constraints on inputs
only leave, or over a table replay's recorded points) and, per input row, a design drawn
uniformly from its valid set (from the enumerated valid set where the space is enumerable, by
rejection otherwise). :class:`~mlkaps_gpu.space.Space` answers ``sample_inputs``,
``sample_designs``, ``complete_with_valid_designs`` and ``check_satisfiable`` through these
functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlkaps_gpu.space._parameters import SpaceError
from mlkaps_gpu.space._restrictions import usable_points

if TYPE_CHECKING:
    from mlkaps_gpu.space._space import Space

#: Rejection sampling: candidates evaluated per round, and at most per pending row.
_REJECTION_BATCH = 4096
_REJECTION_PER_ROW = 1024
#: Rejection rounds for redrawn inputs (the first draw has ``max_rounds``).
_REDRAW_ROUNDS = 10
#: Rejection rounds when drawing inputs that satisfy the constraints on inputs only.
_INPUT_ROUNDS = 1000


def sample_inputs(space: Space, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """``Space.sample_inputs`` (its docstring says what it does)."""
    table = draw_inputs(space, n, rng)
    if space.listed_rows is not None and n > 0:
        # only recorded points exist: uniform over those (constraints were applied to them)
        listed = space.listed_rows
        chosen = listed.draw_points(n, rng, allowed=usable_points(space))
        for name in listed.names:
            table[name] = listed.points[name].to_numpy()[chosen]
        return table.astype({p.name: p.dtype for p in space.inputs})
    if not space.input_constraints or n == 0:
        return table
    accepted = [table[space.satisfies_input_constraints(table)]]
    count = len(accepted[0])
    for _ in range(_INPUT_ROUNDS):
        if count >= n:
            return pd.concat(accepted, ignore_index=True).head(n)
        fresh = draw_inputs(space, max(2 * (n - count), 64), rng)
        fresh = fresh[space.satisfies_input_constraints(fresh)]
        accepted.append(fresh)
        count += len(fresh)
    raise SpaceError(
        "no input point satisfies the constraints on inputs only: "
        + "; ".join(c.source for c in space.input_constraints)
    )


def draw_inputs(space: Space, n: int, rng: np.random.Generator) -> pd.DataFrame:
    table = pd.DataFrame(
        {p.name: p.sample(n, rng, discrete=False) for p in space.inputs}, index=range(n)
    )
    return space.apply_fixed(table) if space.fixed_inputs else table


def sample_designs(
    space: Space, inputs: pd.DataFrame, rng: np.random.Generator, *, max_rounds: int = 1000
) -> tuple[np.ndarray, np.ndarray]:
    """``Space.sample_designs`` (its docstring says what it does)."""
    n = len(inputs)
    if space.listed_rows is not None and space._listed_fast:
        listed = space.listed_rows
        points = listed.point_ids({c: inputs[c].to_numpy() for c in listed.names}, n)
        return listed.draw(points, rng)
    codes = np.zeros((n, len(space.design)), dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    if space.enumerable:
        for values, rows in space._groups(inputs):
            valid = space.valid_design_codes(values)
            if len(valid) == 0:
                continue
            codes[rows] = valid[rng.integers(len(valid), size=len(rows))]
            found[rows] = True
        return codes, found
    # rejection: several candidates per pending row and round, evaluated on plain columns;
    # the first valid candidate of a row is uniform over its valid set
    input_columns = space.columns(inputs)
    pending = np.arange(n)
    for _ in range(max_rounds):
        if len(pending) == 0:
            break
        per_row = int(np.clip(_REJECTION_BATCH // len(pending), 1, _REJECTION_PER_ROW))
        owners = np.repeat(pending, per_row)
        trial = rng.integers(space.design_sizes, size=(len(owners), len(space.design)))
        scope = {name: column[owners] for name, column in input_columns.items()}
        scope.update(space._design_columns(trial))
        ok = np.flatnonzero(space._satisfies(scope, len(owners), space.constraints))
        if len(ok):
            rows, first = np.unique(owners[ok], return_index=True)
            codes[rows] = trial[ok[first]]
            found[rows] = True
            pending = pending[~found[pending]]
    return codes, found


def complete_with_valid_designs(
    space: Space, inputs: pd.DataFrame, rng: np.random.Generator, *, max_redraws: int = 100
) -> pd.DataFrame:
    """``Space.complete_with_valid_designs`` (its docstring says what it does)."""
    inputs = inputs[space.input_names].reset_index(drop=True).copy()
    codes, found = sample_designs(space, inputs, rng)
    # new inputs only help when the valid design set depends on them
    redraws = max_redraws if space.constrained_inputs else 0
    for _ in range(redraws):
        if found.all():
            break
        missing = np.flatnonzero(~found)
        fresh = sample_inputs(space, len(missing), rng)
        for column, name in enumerate(space.input_names):
            inputs.iloc[missing, column] = fresh[name].to_numpy()
        codes[missing], found[missing] = sample_designs(
            space, inputs.iloc[missing], rng, max_rounds=_REDRAW_ROUNDS
        )
    if not found.all():
        raise SpaceError(
            "no configuration satisfies the constraints: "
            + "; ".join(c.source for c in space.constraints)
        )
    return space.assemble(inputs, codes)


def check_satisfiable(space: Space, rng: np.random.Generator, *, trials: int = 64) -> None:
    """``Space.check_satisfiable`` (its docstring says what it does)."""
    if not space.constraints:
        return
    if space.inputs:
        corners = space._cartesian_grid(2)
        corners = corners[space.satisfies_input_constraints(corners)]
        inputs = pd.concat([corners, sample_inputs(space, trials, rng)], ignore_index=True)
    else:
        inputs = pd.DataFrame(index=range(1))
    _, found = sample_designs(space, inputs, rng, max_rounds=200)
    if not found.any():
        raise SpaceError(
            "no configuration satisfies the constraints: "
            + "; ".join(c.source for c in space.constraints)
        )


__all__ = [
    "check_satisfiable",
    "complete_with_valid_designs",
    "draw_inputs",
    "sample_designs",
    "sample_inputs",
]
