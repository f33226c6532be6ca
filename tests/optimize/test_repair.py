"""The lookup repair gives ``nearest_codes``' answer (nearest valid, first in enumeration order)."""

from __future__ import annotations

import numpy as np
import pytest

from mlkaps_gpu.optimize import _repair
from mlkaps_gpu.optimize._repair import RepairTable
from mlkaps_gpu.space import Parameter, Space, nearest_codes


def _space() -> Space:
    return Space(
        [Parameter("n", "int", low=4, high=64)],
        [
            Parameter("bx", "int", values=tuple(range(1, 13))),
            Parameter("by", "int", low=1, high=6),
            Parameter("variant", "categorical", values=("a", "b", "c")),
            Parameter("unroll", "int", values=(1, 2, 4, 8)),
        ],
        [
            "bx * by <= n",
            "variant != 'b' or unroll >= 4",
            "(bx + unroll) % 3 != 0 or variant == 'c'",
        ],
    )


@pytest.mark.parametrize("eager", [True, False], ids=["transform", "rings-then-transform"])
def test_lookup_repair_equals_nearest_codes(eager: bool, monkeypatch) -> None:
    if not eager:  # no table built up front: rings first, the transform on far misses
        monkeypatch.setattr(_repair, "EAGER_LIMIT", 1)
    space = _space()
    inputs = [{"n": n} for n in (4, 9, 17, 40, 64)]
    valid_sets = [space.valid_design_codes(row).astype(np.int64) for row in inputs]
    table = RepairTable(space, valid_sets)
    assert table.complete.all() == eager
    rng = np.random.default_rng(0)
    sizes = space.design_sizes
    for _ in range(3):  # the memo answers later rounds
        groups = rng.integers(0, len(inputs), 3000)
        codes = rng.integers(0, sizes, size=(3000, len(sizes)))
        repaired = table.repair(groups, codes)
        for group in range(len(inputs)):
            rows = groups == group
            expected = nearest_codes(codes[rows], valid_sets[group])
            np.testing.assert_array_equal(repaired[rows], expected)
            index = table.index(codes[rows])
            valid_index = set((valid_sets[group] @ table.strides).tolist())
            assert table.is_valid(np.full(rows.sum(), group), index).tolist() == [
                i in valid_index for i in index.tolist()
            ]
    assert not eager or table.complete.all()


def test_far_misses_use_the_transform(monkeypatch) -> None:
    monkeypatch.setattr(_repair, "EAGER_LIMIT", 1)
    space = Space(
        [],
        [Parameter(f"p{i}", "int", values=tuple(range(6))) for i in range(4)],
        ["p0 + p1 + p2 + p3 >= 20"],  # only corner configurations: most codes are far
    )
    valid = [space.valid_design_codes({}).astype(np.int64)]
    table = RepairTable(space, valid)
    codes = np.zeros((1, 4), dtype=np.int64)
    np.testing.assert_array_equal(
        table.repair(np.zeros(1, int), codes), nearest_codes(codes, valid[0])
    )
    assert table.complete[0]


def test_nsga2_with_and_without_tables_gives_the_same_run(monkeypatch) -> None:
    """The lookup repair and the constraint repair are the same function: same run, bit for bit."""
    from mlkaps_gpu.optimize._batched import BatchedNSGA2

    space = _space()
    grid = space.grid({"n": 9})

    def predict(features: np.ndarray) -> np.ndarray:
        n, bx, by, variant, unroll = features.T
        time = (bx - np.sqrt(n)) ** 2 + (by - 3) ** 2 + variant + 0.1 * unroll
        return np.column_stack([time, bx * by])

    def run() -> object:
        return BatchedNSGA2(space, population=12, generations=15, seed=4).run(predict, grid)

    with_tables = run()
    monkeypatch.setattr(_repair, "TABLE_LIMIT", 0)
    without = run()
    for name in ("codes", "values", "archive_codes", "archive_values"):
        np.testing.assert_array_equal(getattr(with_tables, name), getattr(without, name))
    assert with_tables.predictions == without.predictions > 0
