"""The input grid brackets the values where the valid configurations change along an integer
input (``block <= n``): the best configuration often jumps there, and the trees can split
exactly there only if the grid holds both sides."""

from __future__ import annotations

import numpy as np

from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.space._grid import cartesian_grid, validity_breaks

DESIGN = [
    Parameter("block", "int", values=(8, 16, 32, 64, 128, 256, 512)),
    Parameter("order", "categorical", values=("ijk", "ikj", "jki")),
]


def demo_space(kind: str = "int") -> Space:
    return Space(
        [Parameter("n", kind, low=32, high=512, log=True)],
        DESIGN,
        ["block <= n", "(n // block) ** 3 <= 32768"],
    )


def test_the_grid_brackets_where_a_larger_block_becomes_valid() -> None:
    space = demo_space()
    plain = space.parameters["n"].grid(16)
    grid = space.grid(16)["n"].to_numpy()
    added = sorted(set(grid.tolist()) - set(plain.tolist()))
    # blocks 64, 128, 256 become valid at n = 64, 128, 256; block 8 stops at n = 264 (9 ** 3 >
    # 32768 from 8 * 33); block 512 at 512 is already a grid value (no gap to close)
    assert added == [63, 64, 127, 128, 255, 256, 263, 264]
    valid = [{tuple(c) for c in space.valid_design_codes({"n": int(n)}).tolist()} for n in added]
    for before, after in zip(valid[::2], valid[1::2], strict=True):
        assert before != after


def test_no_breaks_without_a_constraint_linking_an_integer_input_to_the_design() -> None:
    free = Space([Parameter("n", "int", low=32, high=512, log=True)], DESIGN, [])
    assert np.array_equal(free.grid(16)["n"], free.parameters["n"].grid(16))
    real = demo_space("float")  # a float input: no integer steps to find
    assert np.array_equal(real.grid(16)["n"], real.parameters["n"].grid(16))
    assert all(len(b) == 0 for b in validity_breaks(real, [real.parameters["n"].grid(16)]))


def test_an_axis_gains_at_most_half_its_size() -> None:
    space = Space(
        [Parameter("n", "int", low=8, high=64)],
        [Parameter("bx", "int", values=tuple(range(1, 17))), Parameter("by", "int", low=1, high=8)],
        ["bx * by <= n"],  # the valid set changes at almost every n
    )
    for size in (3, 8, 16):
        axis = space.parameters["n"].grid(size)
        (extra,) = validity_breaks(space, [axis])
        assert 0 < len(extra) <= max(2, size // 2)
        assert len(cartesian_grid(space, size, breaks=True)) <= size + len(extra)


def test_breaks_follow_the_other_inputs_of_the_constraint() -> None:
    space = Space(
        [
            Parameter("m", "int", low=64, high=512, log=True),
            Parameter("n", "int", low=64, high=512),
        ],
        [Parameter("nb", "int", values=(8, 16, 32, 64, 128, 256))],
        ["nb <= min(m, n)"],
    )
    grid = space.grid(8)
    # nb 128 and 256 become valid at m = 128 and 256 (where n allows), and along n the same
    for name in ("m", "n"):
        values = set(grid[name].tolist())
        assert {127, 128, 255, 256} <= values


def test_validity_edges_measure_each_configuration_where_it_becomes_valid() -> None:
    """One cell per configuration and value where a constraint starts to hold along the input
    (``block <= n`` at ``n = block``, the range's low end included); none where it stops
    holding (block 8 past n = 263) or where it held already (blocks 8 and 16 at n = 32)."""
    from mlkaps_gpu.space import validity_edges

    space = demo_space()
    grid = space.grid(16)
    edges = validity_edges(space, grid, seed=0)
    found = {(int(n), int(b), o) for n, b, o in edges[["n", "block", "order"]].to_numpy()}
    expected = {(b, b, o) for b in (32, 64, 128, 256, 512) for o in ("ijk", "ikj", "jki")}
    assert found == expected
    assert space.is_valid(edges).all()
    before = edges.assign(n=edges["n"] - 1)
    assert not space.is_valid(before[before["n"] >= 32]).any()
    assert validity_edges(space, grid, seed=1).equals(edges)  # one point per edge in 1-D


def test_validity_edges_pick_one_point_of_each_edge_line() -> None:
    """Two inputs (``nb <= min(m, n)``): each configuration's edge along m and along n is a
    line of grid points; one of them is measured, drawn with the seed."""
    from mlkaps_gpu.space import validity_edges

    space = Space(
        [
            Parameter("m", "int", low=64, high=512, log=True),
            Parameter("n", "int", low=64, high=512, log=True),
        ],
        [Parameter("nb", "int", values=(8, 64, 256))],
        ["nb <= min(m, n)"],
    )
    grid = space.grid(8)
    edges = validity_edges(space, grid, seed=0)
    # nb 64 at m = 64 and at n = 64, nb 256 at m = 256 and at n = 256; nb 8 is valid at 63
    assert sorted(edges["nb"].tolist()) == [64, 64, 256, 256]
    for nb in (64, 256):
        rows = edges[edges["nb"] == nb]
        assert sorted(np.minimum(rows["m"], rows["n"]).tolist()) == [nb, nb]
    assert len(validity_edges(space, grid, seed=5)) == 4


def test_no_validity_edges_without_a_constraint_linking_an_input_to_the_design() -> None:
    from mlkaps_gpu.space import validity_edges

    free = Space([Parameter("n", "int", low=32, high=512, log=True)], DESIGN, [])
    assert validity_edges(free, free.grid(16), seed=0).empty
