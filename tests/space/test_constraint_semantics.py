"""One meaning for the constraint language: numpy and the generated C agree on every value.

Random expressions of the whole language (hypothesis) are written as C with
``mlkaps_gpu.codegen.constraint_c_value``, compiled into one cffi module per batch, and
evaluated on random rows that include the edge values (0, -0, NaN, +-inf, integers near 2**53
and 2**63, tiny and huge doubles); every value must be identical, undefined (NaN) included, and
so must the truth.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from mlkaps_gpu.space import Parameter, parse_constraint
from mlkaps_gpu.testing._constraint_c import CompiledConstraints, same_values

pytestmark = pytest.mark.compiler

PARAMETERS = [
    Parameter("a", "float", low=-1.0, high=1.0),
    Parameter("b", "float", low=-1.0, high=1.0),
    Parameter("c", "int", low=-(2**62), high=2**62),
    Parameter("g", "categorical", values=("x", "y")),
]
BY_NAME = {p.name: p for p in PARAMETERS}
EDGE_VALUES = [
    0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 0.3, 128.0, 1024.0,
    math.nan, math.inf, -math.inf, 2.0**53, 2.0**53 + 2, -(2.0**53), 2.0**62, 2.0**63,
    -(2.0**63), 1e308, -1e308, 5e-324, 1e-300, 7.0, 0.1,
]  # fmt: skip
LITERALS = [
    "0", "1", "2", "3", "5", "0.0", "0.5", "2.5", "0.3", "128", "1024", "1e308", "1e400",
    "9007199254740993", "4611686018427387904", "True", "False", "1e-320",
]  # fmt: skip
#: Expressions x rows compared per run of the default suite (Done-when: at least 100,000).
MINIMUM_COMPARISONS = 100_000
BATCH = 180
ROWS = 640


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    arithmetic = st.sampled_from(["+", "-", "*", "/", "//", "%", "**"])
    comparisons = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    chain = st.lists(st.tuples(comparisons, children), min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda x, op, y: f"({x} {op} {y})", children, arithmetic, children),
        st.builds(lambda x: f"(-{x})", children),
        st.builds(lambda x: f"(+{x})", children),
        st.builds(lambda x: f"(not {x})", children),
        st.builds(lambda x: f"abs({x})", children),
        st.builds(lambda f, xs: f"{f}({', '.join(xs)})", st.sampled_from(["min", "max"]),
                  st.lists(children, min_size=2, max_size=3)),
        st.builds(lambda xs, op: "(" + f" {op} ".join(xs) + ")",
                  st.lists(children, min_size=2, max_size=3), st.sampled_from(["and", "or"])),
        st.builds(lambda x, rest: "(" + x + "".join(f" {o} {y}" for o, y in rest) + ")",
                  children, chain),
    )  # fmt: skip


LEAVES = (
    st.sampled_from(["a", "b", "c"])
    | st.sampled_from(LITERALS)
    | st.sampled_from(["(g == 'x')", "(g != 'y')", "('x' == g)"])
)
EXPRESSIONS = st.recursive(LEAVES, _extend, max_leaves=12)


def random_rows(seed: int, n_rows: int) -> list[tuple[float, float, float, str]]:
    """Rows whose values are edge values (half of them), small integers and halves, or any
    double (random bit patterns: NaN, infinities and subnormals included); ``c`` integral."""
    rng = np.random.default_rng(seed)

    def column(integral: bool) -> np.ndarray:
        edge = np.array(EDGE_VALUES)[rng.integers(len(EDGE_VALUES), size=n_rows)]
        small = rng.integers(-8, 9, size=n_rows) / (1.0 if integral else 2.0)
        bits = rng.integers(0, 2**64, size=n_rows, dtype=np.uint64).view(np.float64)
        if integral:
            bits = np.trunc(np.where(np.isfinite(bits), bits, 0.0))
        pick = rng.integers(4, size=n_rows)
        return np.where(pick < 2, edge, np.where(pick == 2, small, bits))

    a, b, c = column(False), column(False), column(True)
    g = np.array(["x", "y"])[rng.integers(2, size=n_rows)]
    return list(zip(a.tolist(), b.tolist(), c.tolist(), g.tolist(), strict=True))


def _columns(rows: list[tuple[float, float, float, str]]) -> dict[str, np.ndarray]:
    return {
        "a": np.array([r[0] for r in rows], dtype=np.float64),
        "b": np.array([r[1] for r in rows], dtype=np.float64),
        "c": np.array([r[2] for r in rows], dtype=np.float64),
        "g": np.array([r[3] for r in rows], dtype=object),
    }


def compare_batch(texts: list[str], rows: list[Any], workdir: Path, flags: list[str]) -> int:
    """Evaluate every expression on every row in numpy and in C; return the comparisons made.

    Raises:
        AssertionError: naming the first expression and row where the two differ.
    """
    unique = sorted(set(texts))
    constraints = [parse_constraint(text, BY_NAME) for text in unique]
    compiled = CompiledConstraints(constraints, PARAMETERS, workdir=workdir, flags=flags)
    columns = _columns(rows)
    for index, constraint in enumerate(constraints):
        expected = constraint.value(columns, len(rows))
        actual = compiled.values(index, columns, len(rows))
        same = same_values(expected, actual)
        truth = constraint.evaluate(columns, len(rows))
        c_truth = ~np.isnan(actual) & (actual != 0)
        if not (same.all() and np.array_equal(truth, c_truth)):
            bad = int(np.flatnonzero(~same | (truth != c_truth))[0])
            raise AssertionError(
                f"{constraint.source!r} at a={rows[bad][0]!r}, b={rows[bad][1]!r}, "
                f"c={rows[bad][2]!r}, g={rows[bad][3]!r}: numpy {expected[bad]!r}, "
                f"C {actual[bad]!r}"
            )
    return len(unique) * len(rows)


def draw(strategy: st.SearchStrategy[Any], count: int) -> list[Any]:
    """``count`` examples of a strategy, drawn by hypothesis (edge cases first, no shrinking:
    a disagreement is reported with its expression and row by :func:`compare_batch`)."""
    drawn: list[Any] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    collect()
    return drawn


def test_numpy_and_c_agree_on_random_expressions(tmp_path: Path) -> None:
    texts = draw(EXPRESSIONS, BATCH)
    rows = random_rows(draw(st.integers(0, 2**32 - 1), 1)[0], ROWS)
    compared = compare_batch(texts, rows, tmp_path, ["-O0"])
    assert compared >= MINIMUM_COMPARISONS, compared


@pytest.mark.slow
def test_numpy_and_c_agree_optimised_build(tmp_path: Path) -> None:
    """Ten times as many expressions, compiled as users compile headers (-O2)."""
    for _ in range(10):
        seed = draw(st.integers(0, 2**32 - 1), 1)[0]
        compare_batch(draw(EXPRESSIONS, BATCH), random_rows(seed, ROWS), tmp_path, ["-O2"])


EDGE_ROWS = [(x, y, z, "x") for x in EDGE_VALUES for y in EDGE_VALUES for z in (0.0, -0.0, 3.0)]


#: Expressions compared on every combination of edge values.
EDGE_EXPRESSIONS = [
    "a < 128 or ((a - 128) / (b - 0.3)) ** 0 > 0",  # the example
    "a / b", "a // b", "a % b", "a ** b", "b ** a", "-a // b", "a % -b",
    "(a / b) ** 0", "(a // b) ** 0 == 1", "a ** 0.5", "a ** -1", "a ** c", "c ** -2",
    "a < b < c", "a == b != c", "not a / b", "a and b or c", "min(a, b) == max(b, a)",
    "abs(a - b) <= 1e-300", "a * b + c", "a - a", "a * 0", "a + 1e308 > a",
    "9007199254740993 == c", "4611686018427387904 < c * 2", "a ** 1e400", "1e400 ** a",
    "c // 2 * 2 + c % 2 == c", "(g == 'x') + a",
]  # fmt: skip


def test_edge_values_agree(tmp_path: Path) -> None:
    """Every pair of edge values (0, -0, NaN, inf, huge integers...) in both evaluators."""
    compared = compare_batch(EDGE_EXPRESSIONS, EDGE_ROWS, tmp_path, ["-O0"])
    assert compared == len(EDGE_EXPRESSIONS) * len(EDGE_ROWS)


def test_the_comparison_can_fail(tmp_path: Path) -> None:
    """The harness sees a disagreement: C's own `pow(nan, 0) == 1` against the language's
    undefined `nan ** 0`."""
    constraint = parse_constraint("(a / b) ** 0", BY_NAME)
    compiled = CompiledConstraints([constraint], PARAMETERS, workdir=tmp_path)
    columns = _columns([(1.0, 0.0, 0.0, "x")])
    assert np.isnan(constraint.value(columns, 1)[0])
    assert np.isnan(compiled.values(0, columns, 1)[0])
    assert not same_values(np.array([math.nan]), np.array([1.0]))[0]
    assert not same_values(np.array([0.0]), np.array([-0.0]))[0]


def test_mutated_constraint_strings_are_refused_cleanly_or_agree_in_c(tmp_path: Path) -> None:
    """Damaged constraints (experiments/fuzz_config.py runs 1,000 through the loader): each is
    refused with a ConstraintError or accepted, and the accepted ones compile as C and agree
    with numpy."""
    import random

    from mlkaps_gpu.space import ConstraintError
    from mlkaps_gpu.testing._constraint_fuzz import PARAMETERS as FUZZED
    from mlkaps_gpu.testing._constraint_fuzz import mutated_constraint

    rng = random.Random(draw(st.integers(0, 2**32 - 1), 1)[0])
    by_name = {p.name: p for p in FUZZED}
    accepted = []
    for _ in range(300):
        text = mutated_constraint(rng)
        try:
            accepted.append(parse_constraint(text, by_name))
        except ConstraintError as error:
            assert "\n" not in str(error).strip() or "\n" in text, (text, str(error))
    assert len(accepted) > 30
    compiled = CompiledConstraints(accepted, FUZZED, workdir=tmp_path)
    values = np.random.default_rng(0)
    columns = {
        "n": values.integers(1, 4097, 256).astype(float),
        "m": values.choice([0.0, 0.3, 0.25, 1.0], 256),
        "block": values.choice([1, 2, 4, 8, 16, 32, 64, 128], 256).astype(float),
        "variant": values.choice(np.array(["a", "b"], dtype=object), 256),
        "flag": values.integers(0, 2, 256).astype(float),
    }
    for index, constraint in enumerate(accepted):
        expected = constraint.value(columns, 256)
        assert same_values(expected, compiled.values(index, columns, 256)).all(), constraint.source
