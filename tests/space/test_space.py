"""The joint space: validity, valid sampling, repair, neighbours and grids, against brute force."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.space import NEIGHBOUR_KINDS, Parameter, Space, SpaceError
from mlkaps_gpu.space._grid import cartesian_grid
from mlkaps_gpu.space._space import DEFAULT_ENUMERATE_LIMIT

INPUTS = [
    Parameter("n", "int", low=1, high=20),
    Parameter("gpu", "categorical", values=("A", "B")),
]
DESIGN = [
    Parameter("tile", "int", values=(1, 2, 4, 8)),
    Parameter("unroll", "int", low=1, high=4),
    Parameter("variant", "categorical", values=("a", "b", "c")),
]
CONSTRAINTS = ["tile <= n", "gpu == 'A' or variant != 'c'", "tile * unroll <= 16"]


def is_valid_by_hand(row: dict[str, Any]) -> bool:
    """The three constraints above, written in plain Python."""
    return (
        row["tile"] <= row["n"]
        and (row["gpu"] == "A" or row["variant"] != "c")
        and row["tile"] * row["unroll"] <= 16
    )


def make_space(enumerate_limit: int | None = None) -> Space:
    if enumerate_limit is None:
        return Space(INPUTS, DESIGN, CONSTRAINTS)
    return Space(INPUTS, DESIGN, CONSTRAINTS, enumerate_limit=enumerate_limit)


@pytest.fixture(params=["enumerated", "rejection"])
def space(request: pytest.FixtureRequest) -> Space:
    built = make_space(None if request.param == "enumerated" else 1)
    assert built.enumerable == (request.param == "enumerated")
    return built


def all_codes(space: Space) -> list[tuple[int, ...]]:
    """Every design code vector, in enumeration order (first parameter slowest)."""
    return list(itertools.product(*[range(p.n_values) for p in space.design]))


def row_of(space: Space, inputs: dict[str, Any], codes: tuple[int, ...]) -> dict[str, Any]:
    design = {p.name: p.domain_values()[c] for p, c in zip(space.design, codes, strict=True)}
    return {**inputs, **design}


def valid_codes_by_hand(
    space: Space, inputs: dict[str, Any], check: Callable[[dict[str, Any]], bool]
) -> list[tuple[int, ...]]:
    return [c for c in all_codes(space) if check(row_of(space, inputs, c))]


def codes_of(space: Space, table: pd.DataFrame) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row) for row in space.design_codes(table)]


# ---------------------------------------------------------------------------------- validity


def test_is_valid_checks_domains_and_constraints() -> None:
    space = make_space()
    table = pd.DataFrame(
        {
            "n": [8, 3, 8, 0, 8, 8, 8],
            "gpu": ["B", "B", "B", "B", "B", "A", "B"],
            "tile": [8, 4, 3, 1, 8, 8, 1],
            "unroll": [2, 1, 1, 1, 4, 1, 1],
            "variant": ["a", "a", "a", "a", "a", "c", "c"],
        }
    )
    # ok | tile > n | 3 not a tile | n below its range | 8 * 4 > 16 | 'c' allowed on A | not on B
    expected = [True, False, False, False, False, True, False]
    assert space.is_valid(table).tolist() == expected
    assert [is_valid_by_hand(r) for r in table.to_dict("records")][:2] == expected[:2]


def test_is_valid_refuses_fractional_int_inputs_and_unknown_categories() -> None:
    space = make_space()
    table = pd.DataFrame(
        {"n": [8.5, 8.0], "gpu": ["A", "C"], "tile": [1, 1], "unroll": [1, 1], "variant": "a"}
    )
    assert space.is_valid(table).tolist() == [False, False]


def test_is_valid_needs_every_column() -> None:
    with pytest.raises(SpaceError, match="variant"):
        make_space().is_valid(pd.DataFrame({"n": [1], "gpu": ["A"], "tile": [1], "unroll": [1]}))


def test_valid_design_codes_match_brute_force() -> None:
    space = make_space()
    for n, gpu in [(1, "A"), (3, "B"), (20, "A"), (20, "B")]:
        inputs = {"n": n, "gpu": gpu}
        expected = valid_codes_by_hand(space, inputs, is_valid_by_hand)
        got = [tuple(int(v) for v in row) for row in space.valid_design_codes(inputs)]
        assert got == expected
        assert space.valid_design_codes(inputs) is space.valid_design_codes(inputs)  # cached


# ---------------------------------------------------------------------------------- sampling


def test_sample_valid_rows_are_all_valid(space: Space) -> None:
    rows = space.sample_valid(400, np.random.default_rng(1))
    assert len(rows) == 400
    assert list(rows.columns) == space.names
    assert space.is_valid(rows).all()
    assert all(is_valid_by_hand(r) for r in rows.to_dict("records"))
    assert rows["n"].dtype == np.int64 and rows["tile"].dtype == np.int64
    # input-dependent constraint: small n forces small tiles, and small n is still sampled
    assert (rows["tile"] <= rows["n"]).all()
    assert (rows["n"] <= 2).any()
    assert set(rows.loc[rows["gpu"] == "B", "variant"]) <= {"a", "b"}


def test_sample_valid_same_seed_same_rows(space: Space) -> None:
    first = space.sample_valid(60, np.random.default_rng(7))
    again = space.sample_valid(60, np.random.default_rng(7))
    other = space.sample_valid(60, np.random.default_rng(8))
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)


def test_sample_valid_draws_designs_uniformly_over_the_valid_set(space: Space) -> None:
    rng = np.random.default_rng(3)
    inputs = pd.DataFrame({"n": [2] * 3000, "gpu": ["B"] * 3000})
    codes, found = space.sample_designs(inputs, rng)
    assert found.all()
    valid = valid_codes_by_hand(space, {"n": 2, "gpu": "B"}, is_valid_by_hand)
    counts = pd.Series([tuple(c) for c in codes]).value_counts()
    assert set(counts.index) == set(valid)  # 2 tiles x 4 unrolls x 2 variants = 16
    assert counts.min() > 3000 / len(valid) * 0.6


def test_inputs_admitting_no_design_are_redrawn(space: Space) -> None:
    strict = Space(space.inputs, space.design, [*CONSTRAINTS, "tile >= 4"])
    rows = strict.sample_valid(200, np.random.default_rng(0))
    assert strict.is_valid(rows).all()
    assert rows["n"].min() >= 4


def test_sample_valid_without_inputs() -> None:
    space = Space([], DESIGN, ["tile * unroll <= 4"])
    rows = space.sample_valid(30, np.random.default_rng(0))
    assert len(rows) == 30
    assert ((rows["tile"] * rows["unroll"]) <= 4).all()


def test_sample_valid_of_nothing_is_an_empty_typed_table() -> None:
    rows = make_space().sample_valid(0, np.random.default_rng(0))
    assert len(rows) == 0 and list(rows.columns) == make_space().names


# ---------------------------------------------------------------------------- satisfiability


@pytest.mark.parametrize(
    ("constraints", "limit"),
    [
        (["tile > 8"], DEFAULT_ENUMERATE_LIMIT),
        (["tile > 8"], 1),
        (["tile > n + 100"], DEFAULT_ENUMERATE_LIMIT),
        (["tile > n + 100"], 1),
        ([*CONSTRAINTS, "variant == 'c'", "gpu == 'B'"], DEFAULT_ENUMERATE_LIMIT),
    ],
)
def test_unsatisfiable_constraints_are_reported(constraints: list[str], limit: int) -> None:
    space = Space(INPUTS, DESIGN, constraints, enumerate_limit=limit)
    with pytest.raises(SpaceError, match="no configuration satisfies"):
        space.check_satisfiable(np.random.default_rng(0))
    with pytest.raises(SpaceError, match="no configuration satisfies"):
        space.sample_valid(5, np.random.default_rng(0))


def test_satisfiable_constraints_pass_the_check(space: Space) -> None:
    space.check_satisfiable(np.random.default_rng(0))
    Space(INPUTS, DESIGN, ["tile >= n"]).check_satisfiable(np.random.default_rng(0))


# ------------------------------------------------------------------------------------ repair


def nearest_by_hand(
    space: Space, inputs: dict[str, Any], codes: tuple[int, ...]
) -> tuple[tuple[int, ...], int]:
    """First valid design (enumeration order) at the least L1 code distance, and the distance."""
    valid = valid_codes_by_hand(space, inputs, is_valid_by_hand)
    distances = [sum(abs(a - b) for a, b in zip(v, codes, strict=True)) for v in valid]
    best = int(np.argmin(distances))
    return valid[best], distances[best]


def random_rows(space: Space, n: int, seed: int) -> pd.DataFrame:
    """Rows with random inputs and random (often invalid) designs."""
    rng = np.random.default_rng(seed)
    inputs = space.sample_inputs(n, rng)
    codes = np.column_stack([rng.integers(p.n_values, size=n) for p in space.design])
    return space.assemble(inputs, codes)


def test_repair_gives_the_nearest_valid_rows() -> None:
    space = make_space()
    table = random_rows(space, 150, seed=5)
    valid_before = space.is_valid(table)
    assert (~valid_before).sum() > 30
    repaired = space.repair(table)
    assert space.is_valid(repaired).all()
    pd.testing.assert_frame_equal(repaired[space.input_names], table[space.input_names])
    for index, (before, after) in enumerate(
        zip(codes_of(space, table), codes_of(space, repaired), strict=True)
    ):
        inputs = {name: table[name].iloc[index] for name in space.input_names}
        expected, distance = nearest_by_hand(space, inputs, before)
        assert after == expected, (inputs, before)
        assert distance == (0 if valid_before[index] else distance)


def test_repair_leaves_valid_rows_unchanged(space: Space) -> None:
    rows = space.sample_valid(80, np.random.default_rng(2))
    pd.testing.assert_frame_equal(space.repair(rows, np.random.default_rng(0)), rows)


def test_repair_by_local_search_gives_valid_nearby_rows() -> None:
    space = make_space(enumerate_limit=1)
    table = random_rows(space, 60, seed=9)
    valid_before = space.is_valid(table)
    repaired = space.repair(table, np.random.default_rng(0))
    assert space.is_valid(repaired).all()
    before, after = codes_of(space, table), codes_of(space, repaired)
    for index in range(len(table)):
        inputs = {name: table[name].iloc[index] for name in space.input_names}
        _, nearest = nearest_by_hand(space, inputs, before[index])
        moved = sum(abs(a - b) for a, b in zip(before[index], after[index], strict=True))
        if valid_before[index]:
            assert moved == 0
        else:
            assert moved == nearest  # radius-1 perturbations already reach the nearest here


def test_repair_codes_clips_out_of_range_codes() -> None:
    space = make_space()
    inputs = pd.DataFrame({"n": [20], "gpu": ["A"]})
    repaired = space.repair_codes(inputs, np.array([[9, -3, 1]]))
    assert repaired.tolist() == [[3, 0, 1]]  # tile 8, unroll 1, variant b


# -------------------------------------------------------------------------------- neighbours


HOLE_DESIGN = [Parameter("x", "int", low=0, high=6), Parameter("y", "int", low=0, high=6)]
#: no valid configuration at Chebyshev distance 1 of (3, 3), and (5, 0) is invalid too
HOLE_CONSTRAINTS = ["max(abs(x - 3), abs(y - 3)) != 1", "not (x == 5 and y == 0)"]


def hole_by_hand(row: dict[str, Any]) -> bool:
    return max(abs(row["x"] - 3), abs(row["y"] - 3)) != 1 and not (row["x"] == 5 and row["y"] == 0)


def neighbours_by_hand(
    space: Space,
    inputs: dict[str, Any],
    here: tuple[int, ...],
    kind: str,
    check: Callable[[dict[str, Any]], bool],
) -> set[tuple[int, ...]]:
    valid = valid_codes_by_hand(space, inputs, check)
    deltas = {v: [abs(a - b) for a, b in zip(v, here, strict=True)] for v in valid}
    if kind == "Hamming":
        return {v for v, d in deltas.items() if sum(x > 0 for x in d) == 1}
    if kind == "strictly_adjacent":
        return {v for v, d in deltas.items() if max(d) == 1}
    rings = [max(d) for d in deltas.values() if max(d) > 0]
    return {v for v, d in deltas.items() if rings and max(d) == min(rings)}


@pytest.mark.parametrize("kind", NEIGHBOUR_KINDS)
@pytest.mark.parametrize("limit", [None, 1], ids=["enumerated", "rejection"])
def test_neighbours_match_brute_force(kind: str, limit: int | None) -> None:
    space = make_space(limit)
    rows = random_rows(space, 40, seed=11)
    rows = space.repair(rows, np.random.default_rng(0))
    for index in range(len(rows)):
        row = rows.iloc[index]
        inputs = {name: row[name] for name in space.input_names}
        here = codes_of(space, rows.iloc[[index]])[0]
        found = space.neighbours(row, kind)  # type: ignore[arg-type]
        assert space.is_valid(found).all()
        assert (found[space.input_names] == pd.Series(inputs)).all().all()
        got = codes_of(space, found)
        assert len(got) == len(set(got))
        assert set(got) == neighbours_by_hand(space, inputs, here, kind, is_valid_by_hand)


@pytest.mark.parametrize("kind", NEIGHBOUR_KINDS)
@pytest.mark.parametrize("limit", [None, 1], ids=["enumerated", "rejection"])
def test_neighbour_codes_are_the_neighbours_codes_in_the_same_order(
    kind: str, limit: int | None
) -> None:
    # the exploiter ranks candidates with ties broken by their order, so the code path must
    # give the same rows in the same order as the table path
    space = make_space(limit)
    rows = space.repair(random_rows(space, 30, seed=5), np.random.default_rng(1))
    for index in range(len(rows)):
        row = rows.iloc[index]
        here = space.design_codes(rows.iloc[[index]])[0]
        expected = space.design_codes(space.neighbours(row, kind))  # type: ignore[arg-type]
        got = space.neighbour_codes(row.to_dict(), here, kind)  # type: ignore[arg-type]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("limit", [DEFAULT_ENUMERATE_LIMIT, 1], ids=["enumerated", "rejection"])
@pytest.mark.parametrize(
    ("here", "kind", "expected_size"),
    [
        ((3, 3), "strictly_adjacent", 0),  # the whole first ring is invalid
        ((3, 3), "adjacent", 16),  # so the nearest ring is the second: 5 * 5 - 3 * 3
        ((3, 3), "Hamming", 8),  # x or y moved by 2 or 3 along a line
        ((6, 0), "adjacent", 2),  # (5, 0) is invalid: (5, 1) is, and (6, 1)
        ((0, 0), "strictly_adjacent", 3),
    ],
)
def test_adjacent_steps_over_invalid_rings(
    limit: int, here: tuple[int, int], kind: str, expected_size: int
) -> None:
    space = Space([], HOLE_DESIGN, HOLE_CONSTRAINTS, enumerate_limit=limit)
    found = space.neighbours({"x": here[0], "y": here[1]}, kind)  # type: ignore[arg-type]
    got = set(codes_of(space, found))
    assert got == neighbours_by_hand(space, {}, here, kind, hole_by_hand)
    assert len(got) == expected_size


def test_a_configuration_without_neighbours_gets_an_empty_table() -> None:
    space = Space([], HOLE_DESIGN, ["x == 2 and y == 2"])
    for kind in NEIGHBOUR_KINDS:
        found = space.neighbours({"x": 2, "y": 2}, kind)  # type: ignore[arg-type]
        assert len(found) == 0 and list(found.columns) == ["x", "y"]


def test_unknown_neighbour_kind_is_refused() -> None:
    row = {"n": 4, "gpu": "A", "tile": 1, "unroll": 1, "variant": "a"}
    with pytest.raises(SpaceError, match="neighbour kind"):
        make_space().neighbours(row, "next door")  # type: ignore[arg-type]
    with pytest.raises(SpaceError, match="neighbour kind"):
        make_space().neighbour_codes(row, np.zeros(3, int), "next door")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------- grids


def test_grid_sizes() -> None:
    space = Space(
        [
            Parameter("n", "int", low=1, high=1024, log=True),
            Parameter("gpu", "categorical", values=("A", "B", "C")),
            Parameter("x", "float", low=0.0, high=1.0),
        ],
        DESIGN,
    )
    grid = space.grid(4)
    assert len(grid) == 4 * 3 * 4
    assert list(grid.columns) == ["n", "gpu", "x"]
    assert sorted(grid["n"].unique().tolist()) == [1, 10, 102, 1024]
    assert grid["n"].dtype == np.int64 and grid["x"].dtype == np.float64
    assert len(grid.drop_duplicates()) == len(grid)
    sized = space.grid({"n": 2, "x": 5})
    assert len(sized) == 2 * 3 * 5
    assert len(space.grid({"x": 1})) == 8 * 3 * 1  # unnamed inputs default to 8 points
    with pytest.raises(SpaceError, match="unknown inputs"):
        space.grid({"m": 3})


def test_grid_without_inputs_is_one_point() -> None:
    assert len(Space([], DESIGN).grid(5)) == 1


# ------------------------------------------------------------------------------- definition


@pytest.mark.parametrize(
    ("inputs", "design"),
    [
        ([Parameter("tile", "int", low=1, high=4)], DESIGN),
        ([], [*DESIGN, Parameter("unroll", "int", values=(1, 2))]),
    ],
)
def test_duplicate_names_are_rejected(inputs: list[Parameter], design: list[Parameter]) -> None:
    with pytest.raises(SpaceError, match="duplicate parameter name"):
        Space(inputs, design)


def test_a_space_needs_a_design_parameter() -> None:
    with pytest.raises(SpaceError, match="design"):
        Space(INPUTS, [])


def test_constraints_are_checked_against_the_space() -> None:
    from mlkaps_gpu.space import ConstraintError

    with pytest.raises(ConstraintError, match="unknown parameter 'm'"):
        Space(INPUTS, DESIGN, ["tile <= m"])


def test_constrained_inputs_and_features() -> None:
    space = make_space()
    assert space.constrained_inputs == ["n", "gpu"]
    assert Space(INPUTS, DESIGN, ["tile <= 4"]).constrained_inputs == []
    assert space.categorical_features == [1, 4]
    table = pd.DataFrame({"n": [3], "gpu": ["B"], "tile": [2], "unroll": [1], "variant": ["c"]})
    assert space.features(table).tolist() == [[3.0, 1.0, 2.0, 1.0, 2.0]]


# ------------------------------------------------------- configuration counts (int64 keys)


def _wide_design(parameters: int, values: int = 4, prefix: str = "p") -> list[Parameter]:
    return [
        Parameter(f"{prefix}{i}", "int", values=tuple(range(1, values + 1)))
        for i in range(parameters)
    ]


@pytest.mark.parametrize(
    "design",
    [
        _wide_design(27),  # 4**27 = 2**54
        _wide_design(64, 2) + _wide_design(1, 3, "q"),  # 3 * 2**64: above int64 too
        [Parameter(f"p{i}", "int", low=1, high=4096) for i in range(6)],  # 2**72
    ],
    ids=["2**54", "3*2**64", "2**72"],
)
def test_design_space_beyond_2_53_configurations_is_refused(design: list[Parameter]) -> None:
    with pytest.raises(SpaceError, match=r"configurations .* more than 2\*\*53.*fewer"):
        Space([Parameter("n", "int", low=1, high=8)], design)


def test_grid_beyond_2_62_point_configuration_pairs_is_refused() -> None:
    space = Space([Parameter("n", "int", low=1, high=100_000)], _wide_design(25))  # 2**50
    space.check_grid({"n": 4000})  # 4000 * 2**50 < 2**62
    with pytest.raises(SpaceError, match=r"2\*\*62 .*coarser grid"):
        space.grid({"n": 5000})
    assert space.grid_size({"n": 5000}) == 5000


def test_optimizer_answers_stay_inside_the_bounds_of_a_2_52_design() -> None:
    from mlkaps_gpu.optimize import GridOptimizer
    from mlkaps_gpu.surrogate import LightGBMSurrogate

    space = Space([Parameter("n", "int", low=1, high=100)], _wide_design(26), ["p0 + p1 <= n"])
    rng = np.random.default_rng(0)
    table = space.sample_valid(200, rng)
    target = ((table[space.design_names].to_numpy() - 2.5) ** 2).sum(axis=1)
    model = LightGBMSurrogate(n_estimators=20).fit(space.features(table), target)
    optimizer = GridOptimizer(
        space, objectives=["time"], directions=["minimize"], method="nsga2",
        population=16, generations=4, seed=0,
    )  # fmt: skip
    result = optimizer.run([model], space.grid({"n": 12}))
    answered = result[result["n_valid"] != 0]
    assert len(answered) >= 11
    codes = space.design_codes(answered)
    assert (codes >= 0).all() and (codes < space.design_sizes).all()
    assert space.is_valid(answered[space.names]).all()


# ------------------------------------------------------------- constraints on inputs only

TRIANGLE_INPUTS = [
    Parameter("n1", "int", low=16, high=4096, log=True),
    Parameter("n2", "int", low=16, high=4096, log=True),
]
TRIANGLE_DESIGN = [Parameter("block", "int", values=(4, 8, 16, 32, 64, 128))]


@pytest.mark.parametrize(
    "constraints",
    [["n2 <= n1"], ["n2 <= n1", "block <= n2"], ["n1 * n2 <= 10000"], ["n2 <= n1 // 2"]],
)
def test_constraints_on_inputs_only_restrict_the_input_domain(constraints: list[str]) -> None:
    space = Space(TRIANGLE_INPUTS, TRIANGLE_DESIGN, constraints)
    assert [c.source for c in space.input_constraints] == [
        c for c in constraints if "block" not in c
    ]
    rng = np.random.default_rng(1)
    inputs = space.sample_inputs(500, rng)
    assert len(inputs) == 500 and space.satisfies_input_constraints(inputs).all()
    rows = space.sample_valid(300, rng)
    assert space.is_valid(rows).all()
    grid = space.grid(8)
    full = cartesian_grid(space, 8, breaks=True)
    if "block <= n2" in constraints:  # n2 gains where 2 of blocks 32, 64, 128 become valid
        added = sorted(set(full["n2"]) - set(space.parameters["n2"].grid(8)))
        assert len(added) == 4 and len(full) == 8 * 12
        assert all((x - 1, x) in {(31, 32), (63, 64), (127, 128)} for x in added[1::2])
    else:
        assert len(full) == 64
    assert 0 < len(grid) < len(full) and space.satisfies_input_constraints(grid).all()
    assert space.enumerable  # a constraint on inputs only does not force per-input masks
    outside = {"n1": 16, "n2": 4096}
    assert len(space.valid_design_codes(outside)) == 0
    inside = {"n1": 64, "n2": 16}
    assert len(space.valid_design_codes(inside)) > 0


def test_unsatisfiable_input_domain_is_refused_clearly() -> None:
    space = Space(TRIANGLE_INPUTS, TRIANGLE_DESIGN, ["n1 + n2 < 10"])
    with pytest.raises(SpaceError, match="inputs only: n1 \\+ n2 < 10"):
        space.sample_inputs(3, np.random.default_rng(0))
    with pytest.raises(SpaceError, match="no grid point"):
        space.grid(4)
    with pytest.raises(SpaceError):
        space.check_satisfiable(np.random.default_rng(0))


def _check_from_thread(
    space: Space,
    barrier: Any,
    offset: int,
    expected: dict[int, np.ndarray],
    failures: list[BaseException],
) -> None:
    barrier.wait()
    try:
        for n in [*range(offset + 1, 65), *range(1, offset + 1)]:
            assert np.array_equal(space.valid_design_codes({"n": n}), expected[n])
    except BaseException as error:  # reported by the main thread
        failures.append(error)


def test_valid_design_codes_from_many_threads_at_once() -> None:
    """Grid chunks share one space across threads (and in-process Dask workers): the first
    calls build the design product while others read it, and the valid-set cache is filled
    concurrently. Every thread gets the single-threaded answer."""
    import sys
    import threading

    def fresh() -> Space:
        return Space(
            [Parameter("n", "int", low=1, high=64)],
            [
                Parameter("block", "int", values=(1, 2, 4, 8, 16, 32, 64)),
                Parameter("tile", "int", low=1, high=40),
                Parameter("kind", "categorical", values=("a", "b", "c")),
            ],
            ["block <= n", "tile * block <= 4 * n or kind == 'a'"],
        )

    expected = {n: fresh().valid_design_codes({"n": n}) for n in range(1, 65)}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        for _ in range(20):
            space, barrier = fresh(), threading.Barrier(8)
            failures: list[BaseException] = []
            threads = [
                threading.Thread(
                    target=_check_from_thread, args=(space, barrier, 8 * i, expected, failures)
                )
                for i in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not failures, failures[0]
    finally:
        sys.setswitchinterval(interval)


# ------------------------------------------------------------------ designs that exist (replays)
def _allowed_tables(space: Space) -> dict[str, pd.DataFrame]:
    """Per gpu, a subset of the design product: 'A' keeps odd unrolls, 'B' keeps tile 1 or 2."""
    designs = pd.DataFrame(
        list(itertools.product((1, 2, 4, 8), (1, 2, 3, 4), ("a", "b", "c"))),
        columns=space.design_names,
    )
    return {
        "A": designs[designs["unroll"] % 2 == 1],
        "B": designs[designs["tile"] <= 2],
    }


@pytest.mark.parametrize("enumerate_limit", [None, 1])
def test_allowed_designs_limit_every_way_to_a_valid_configuration(enumerate_limit):
    """Validity, enumeration, random valid designs, repair and neighbours of a space whose
    designs must also be among given tables (per gpu) agree with brute force."""
    plain = make_space(enumerate_limit)
    tables = _allowed_tables(plain)
    space = plain.with_allowed_designs("gpu", tables)
    assert space.allowed_designs_restrict()
    assert "gpu" in space.constrained_inputs and space.enumerable == plain.enumerable

    def allowed(row: dict[str, Any]) -> bool:
        table = tables[row["gpu"]]
        match = (
            (table["tile"] == row["tile"])
            & (table["unroll"] == row["unroll"])
            & (table["variant"] == row["variant"])
        )
        return bool(match.any()) and is_valid_by_hand(row)

    rows = pd.DataFrame(
        [
            {"n": n, "gpu": gpu, "tile": t, "unroll": u, "variant": v}
            for n in (1, 3, 9, 20)
            for gpu in ("A", "B")
            for t in (1, 2, 4, 8)
            for u in (1, 2, 3, 4)
            for v in ("a", "b", "c")
        ]
    )
    expected = np.array([allowed(r) for r in rows.to_dict("records")])
    assert expected.any() and (~expected).any()
    assert np.array_equal(space.is_valid(rows), expected)
    assert np.array_equal(
        plain.is_valid(rows), [is_valid_by_hand(r) for r in rows.to_dict("records")]
    )

    rng = np.random.default_rng(0)
    drawn = space.sample_valid(300, rng)
    assert all(allowed(r) for r in drawn.to_dict("records"))
    assert set(drawn["gpu"]) == {"A", "B"}
    repaired = space.repair(rows, rng)
    assert all(allowed(r) for r in repaired.to_dict("records"))
    row = {"n": 20, "gpu": "B", "tile": 2, "unroll": 1, "variant": "a"}
    for kind in ("Hamming", "adjacent"):
        found = space.neighbours(row, kind)  # type: ignore[arg-type]
        assert len(found) and all(allowed(r) for r in found.to_dict("records"))
    if space.enumerable:
        codes = space.valid_design_codes({"n": 20, "gpu": "B"})
        table = space.assemble(pd.DataFrame([{"n": 20, "gpu": "B"}] * len(codes)), codes)
        assert len(codes) == int(expected[(rows["n"] == 20) & (rows["gpu"] == "B")].sum())
        assert all(allowed(r) for r in table.to_dict("records"))
    fixed = space.with_fixed_inputs({"gpu": "A"})
    assert fixed.allowed_designs is not None
    assert np.array_equal(fixed.is_valid(rows), expected)


def test_allowed_designs_that_hold_every_valid_one_do_not_restrict():
    space = Space(DESIGN[:1], DESIGN[1:], ["unroll <= 3"])  # no input: one table, key None
    everything = pd.DataFrame(
        {"unroll": [1, 2, 3, 4] * 3, "variant": ["a"] * 4 + ["b"] * 4 + ["c"] * 4}
    )
    assert not space.with_allowed_designs(None, {None: everything}).allowed_designs_restrict()
    some = everything[everything["unroll"] != 2]
    assert space.with_allowed_designs(None, {None: some}).allowed_designs_restrict()
    with pytest.raises(SpaceError, match="not an input"):
        space.with_allowed_designs("gpu", {"A": some})
