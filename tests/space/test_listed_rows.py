"""Space.with_listed_rows (issue 39, Build 1): the (input point, configuration) rows of a table
replay are the only valid ones, over several inputs, and every way of drawing or repairing a
row keeps to them."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.space import Parameter, Space, SpaceError

BLOCKS = (16, 32, 64, 128)
WARPS = (2, 4, 8)


def make_space() -> Space:
    return Space(
        [
            Parameter("m", "int", low=1, high=8192, log=True),
            Parameter("n", "int", low=1, high=8192, log=True),
            Parameter("dtype", "categorical", values=("a", "b")),
        ],
        [Parameter("block", "int", values=BLOCKS), Parameter("warps", "int", values=WARPS)],
        ["block <= 64 or warps >= 4"],
    )


def listed_table(n_points: int, per_point: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    points = pd.DataFrame(
        {
            "m": rng.integers(1, 8192, n_points),
            "n": rng.integers(1, 8192, n_points),
            "dtype": rng.choice(["a", "b"], n_points),
        }
    ).drop_duplicates(ignore_index=True)
    configurations = np.array([(b, w) for b in BLOCKS for w in WARPS])
    chosen = np.concatenate(
        [rng.choice(len(configurations), per_point, replace=False) for _ in range(len(points))]
    )
    rows = points.loc[np.repeat(points.index, per_point)].reset_index(drop=True)
    rows["block"], rows["warps"] = configurations[chosen, 0], configurations[chosen, 1]
    return rows


def keys(table: pd.DataFrame) -> set[tuple]:
    return set(map(tuple, table[["m", "n", "dtype", "block", "warps"]].astype(str).to_numpy()))


def test_listed_rows_are_the_only_valid_ones() -> None:
    table = listed_table(300, 5)
    space = make_space().with_listed_rows(table, ["m", "n", "dtype"])
    constrained = table[(table["block"] <= 64) | (table["warps"] >= 4)]
    assert space.is_valid(constrained).all()
    assert not space.is_valid(table[~table.index.isin(constrained.index)]).any()
    rng = np.random.default_rng(1)
    drawn = space.sample_valid(2000, rng)
    assert keys(drawn) <= keys(constrained)
    # every draw is at a recorded point, and designs are drawn among that point's list
    assert len(keys(drawn)) > 0.5 * len(constrained)
    everything = drawn[["m", "n", "dtype"]].merge(
        pd.DataFrame([(b, w) for b in BLOCKS for w in WARPS], columns=["block", "warps"]),
        how="cross",
    )
    repaired = space.repair(everything)
    assert space.is_valid(repaired).all()
    unit = space.inputs_from_unit(rng.random((500, 3)))
    recorded = set(map(tuple, table[["m", "n", "dtype"]].astype(str).to_numpy()))
    assert set(map(tuple, unit.astype(str).to_numpy())) <= recorded
    grid = space.listed_points()
    assert len(grid) == len(constrained[["m", "n", "dtype"]].drop_duplicates())
    point = grid.iloc[0].to_dict()
    codes = space.valid_design_codes(point)
    here = constrained[
        (constrained["m"] == point["m"])
        & (constrained["n"] == point["n"])
        & (constrained["dtype"] == point["dtype"])
    ]
    assert len(codes) == len(here)
    fixed = space.with_fixed_inputs({"dtype": "a"})
    assert set(fixed.sample_inputs(200, rng)["dtype"]) == {"a"}
    assert set(fixed.listed_points()["dtype"]) == {"a"}


def test_an_unrecorded_point_has_no_valid_design() -> None:
    table = listed_table(50, 3)
    space = make_space().with_listed_rows(table, ["m", "n", "dtype"])
    row = table.iloc[[0]].copy()
    row["m"] = row["m"] % 8191 + 1  # a neighbouring size
    if keys(row) & keys(table):
        pytest.skip("the shifted point happens to be recorded")
    assert not space.is_valid(row).any()
    assert len(space.valid_design_codes(row.iloc[0].to_dict())) == 0


def test_errors() -> None:
    table = listed_table(10, 2)
    with pytest.raises(SpaceError, match="not inputs"):
        make_space().with_listed_rows(table, ["block"])
    with pytest.raises(SpaceError, match="lack columns"):
        make_space().with_listed_rows(table.drop(columns=["warps"]), ["m", "n", "dtype"])


def test_large_tables_are_fast() -> None:
    """6,195 points x 8 configurations: keyed and drawn with vectorised code."""
    table = listed_table(6195, 8)
    started = time.perf_counter()
    space = make_space().with_listed_rows(table, ["m", "n", "dtype"])
    rows = space.sample_valid(5000, np.random.default_rng(0))
    assert space.is_valid(rows).all()
    assert len(space.listed_design_codes(space.listed_points())[0]) > 6195 * 6
    assert time.perf_counter() - started < 10.0  # about 0.2 s on a quiet machine
