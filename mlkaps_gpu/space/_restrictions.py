"""Spaces restricted to the designs that exist: per value of one input (a replay's recorded
configurations, ``Space.with_allowed_designs``) or per recorded input point (a table replay's
listed rows, ``Space.with_listed_rows``). Domains, codes and features stay those of the full
space; only validity, sampling and repair see the restriction. :class:`~mlkaps_gpu.space.Space`
answers its restriction methods through these functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space._listed import ListedRows, PointIndex, lookup_values
from mlkaps_gpu.space._parameters import SpaceError

if TYPE_CHECKING:
    from mlkaps_gpu.space._space import Space

#: No design codes (flat): what an input value without allowed designs allows.
NO_CODES = np.zeros(0, dtype=np.int64)


def with_allowed_designs(
    space: Space, input_name: str | None, designs: Mapping[Any, pd.DataFrame]
) -> Space:
    """``Space.with_allowed_designs`` (its docstring says what it does)."""
    if input_name is not None and input_name not in space.input_names:
        raise SpaceError(f"cannot restrict designs by '{input_name}': not an input")
    allowed: dict[str | None, np.ndarray] = {}
    for value, table in designs.items():
        codes = space.design_codes(table[space.design_names])
        known = np.all(codes >= 0, axis=1)
        allowed[allowed_key(value)] = np.unique(codes[known] @ space._place)
    copy = space._copy(allowed=False)
    copy.allowed_designs = (input_name, allowed)
    if input_name is not None:  # the valid design set now depends on this input
        for attribute in ("constrained_inputs", "mask_inputs"):
            names = set(getattr(copy, attribute)) | {input_name}
            setattr(copy, attribute, [n for n in copy.input_names if n in names])
    return copy


def with_listed_rows(space: Space, table: pd.DataFrame, names: Sequence[str]) -> Space:
    """``Space.with_listed_rows`` (its docstring says what it does)."""
    names = list(names)
    unknown = [n for n in names if n not in space.input_names]
    if unknown or not names:
        raise SpaceError(
            f"cannot key listed rows by {unknown or names}: not inputs "
            f"(inputs: {space.input_names})"
        )
    missing = [n for n in [*names, *space.design_names] if n not in table]
    if missing:
        raise SpaceError(f"listed rows lack columns {missing}")
    rows = table[[*names, *space.design_names]].reset_index(drop=True)
    codes = space.design_codes(rows)
    inside = np.all(codes >= 0, axis=1)
    for name in names:
        inside &= space.parameters[name].contains(rows[name].to_numpy())
    plain = space._copy(allowed=False)
    keyed = set(names) | set(space.design_names)
    checked = [c for c in space.constraints if c.names <= keyed]
    if inside.any() and checked:
        inside &= plain._satisfies(plain.columns(rows), len(rows), checked)
    rows, codes = rows[inside].reset_index(drop=True), codes[inside]
    if rows.empty:
        raise SpaceError("no listed row lies in the space's domains and constraints")
    index = PointIndex([space.parameters[n] for n in names], rows)
    listed = ListedRows(
        index, index.points(rows), index.row_ids, codes, space._place, space.design_product
    )
    copy = plain
    copy.listed_rows = listed
    copy._listed_fast = all(c.names <= keyed for c in copy.design_constraints)
    for attribute in ("constrained_inputs", "mask_inputs"):
        chosen = set(getattr(copy, attribute)) | set(names)
        setattr(copy, attribute, [n for n in copy.input_names if n in chosen])
    return copy


def listed_points(space: Space) -> pd.DataFrame:
    """``Space.listed_points`` (its docstring says what it does)."""
    listed = space.listed_rows
    if listed is None:
        raise SpaceError("the space has no listed rows (see with_listed_rows)")
    chosen = np.flatnonzero(usable_points(space))
    points = listed.points.iloc[chosen].reset_index(drop=True)
    table = pd.DataFrame(index=range(len(points)))
    for parameter in space.inputs:
        name = parameter.name
        if name in points:
            table[name] = points[name].to_numpy()
        elif name in space.fixed_inputs:
            table[name] = space.fixed_inputs[name]
        else:
            table[name] = parameter.grid(1)[0]
    return table.astype({p.name: p.dtype for p in space.inputs})


def listed_design_codes(space: Space, inputs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """``Space.listed_design_codes`` (its docstring says what it does)."""
    listed = space.listed_rows
    if listed is None or not space._listed_fast:
        return None
    points = listed.point_ids({n: inputs[n].to_numpy() for n in listed.names}, len(inputs))
    safe = np.maximum(points, 0)
    counts = np.where(points >= 0, listed.counts[safe], 0)
    owners = np.repeat(np.arange(len(inputs), dtype=np.int64), counts)
    starts = np.repeat(listed.offsets[safe] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    take = starts + np.arange(len(owners), dtype=np.int64)
    return owners, listed.codes[take]


def usable_points(space: Space) -> np.ndarray:
    """Which recorded points have a listed design and agree with the fixed inputs."""
    listed = space.listed_rows
    assert listed is not None
    usable = listed.counts > 0
    for name, value in space.fixed_inputs.items():
        if name in listed.names:
            kind = space.parameters[name].kind
            column = lookup_values(listed.points[name].to_numpy(), kind)
            usable &= column == lookup_values([value], kind)[0]
    return usable


def allowed_designs_restrict(space: Space) -> bool:
    """``Space.allowed_designs_restrict`` (its docstring says what it does)."""
    if space.listed_rows is not None:
        return True
    if space.allowed_designs is None:
        return False
    name, allowed = space.allowed_designs
    plain = space._copy(allowed=False)
    if not plain.enumerable or plain.mask_inputs:
        return True
    valid = plain.valid_design_codes().astype(np.int64) @ space._place
    if name is None:
        keys: list[str | None] = [None]
    else:
        parameter = space.parameters[name]
        if parameter.values is None and parameter.kind not in ("categorical", "bool"):
            return True
        keys = [allowed_key(v) for v in parameter.domain_values().tolist()]
    return any(not np.isin(valid, allowed.get(key, NO_CODES)).all() for key in keys)


def allowed_rows(space: Space, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
    """Which rows' designs are among the allowed ones (all rows without a restriction)."""
    if space.allowed_designs is None and space.listed_rows is None:
        return np.ones(n_rows, dtype=bool)
    codes = np.column_stack(
        [np.broadcast_to(p.codes(np.atleast_1d(columns[p.name])), n_rows) for p in space.design]
    )
    flat = np.where(np.all(codes >= 0, axis=1), codes @ space._place, -1)
    if space.listed_rows is not None:
        points = space.listed_rows.point_ids(columns, n_rows)
        return space.listed_rows.contains(points, flat)
    assert space.allowed_designs is not None
    name, allowed = space.allowed_designs
    if name is None:
        return np.isin(flat, allowed.get(None, NO_CODES))
    values = np.broadcast_to(np.atleast_1d(np.asarray(columns[name], dtype=object)), n_rows)
    keys = np.array([allowed_key(v) for v in values.tolist()], dtype=object)
    result = np.zeros(n_rows, dtype=bool)
    for key in set(keys.tolist()):
        rows = keys == key
        result[rows] = np.isin(flat[rows], allowed.get(key, NO_CODES))
    return result


def allowed_key(value: Any) -> str | None:
    """Key of an input value in the allowed designs (text: "130", 130 and 130.0 are one)."""
    if value is None:
        return None
    value = scalar_value(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def scalar_value(value: Any) -> Any:
    """A numpy scalar (or anything with ``item``) as the Python value it holds."""
    return value.item() if hasattr(value, "item") else value


__all__ = [
    "NO_CODES",
    "allowed_key",
    "scalar_value",
    "allowed_designs_restrict",
    "allowed_rows",
    "listed_design_codes",
    "listed_points",
    "usable_points",
    "with_allowed_designs",
    "with_listed_rows",
]
