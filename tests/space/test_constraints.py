"""The constraint language: parsing, evaluation semantics, refusals, limits and C output."""

from __future__ import annotations

import ast
import itertools
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mlkaps_gpu.codegen import constraint_c_check, constraint_c_value
from mlkaps_gpu.space import Constraint, ConstraintError, Parameter, Space, parse_constraint

# The convolution space of ../shared/data/replay/README.md (convolution_6gpu) and its four
# restriction strings, as Kernel Tuner writes them.
CONVOLUTION_DESIGN = [
    Parameter("block_size_x", "int", values=tuple(range(16, 257, 16))),
    Parameter("block_size_y", "int", values=(1, 2, 4, 8, 16)),
    Parameter("tile_size_x", "int", values=(1, 2, 3, 4)),
    Parameter("tile_size_y", "int", values=(1, 2, 3, 4)),
    Parameter("read_only", "int", values=(0, 1)),
    Parameter("use_padding", "int", values=(0, 1)),
    Parameter("use_shmem", "int", values=(0, 1)),
    Parameter("use_cmem", "int", values=(1,)),
    Parameter("filter_height", "int", values=(15,)),
    Parameter("filter_width", "int", values=(15,)),
]
RESTRICTIONS = [
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or ((block_size_x*tile_size_x+(filter_width-1))"
    "*(block_size_y*tile_size_y+(filter_height-1))) < 12*1024",
]
CONVOLUTION = {p.name: p for p in CONVOLUTION_DESIGN}
#: Valid configurations of the convolution space, as the README states.
CONVOLUTION_VALID = 4362

NUMBERS = {
    "a": Parameter("a", "int", low=-5, high=5),
    "b": Parameter("b", "int", low=-5, high=5),
    "c": Parameter("c", "int", low=-5, high=5),
}
MIXED = {
    **NUMBERS,
    "gpu": Parameter("gpu", "categorical", values=("A100", "MI250X", "W6600")),
    "other": Parameter("other", "categorical", values=("A100", "T4")),
    "flag": Parameter("flag", "bool"),
}


def evaluate(text: str, parameters: Mapping[str, Parameter], **columns: Any) -> list[bool]:
    """Parse ``text`` and evaluate it over equally long columns."""
    constraint = parse_constraint(text, parameters)
    arrays = {}
    for name, values in columns.items():
        kind = parameters[name].kind
        arrays[name] = np.array(values, dtype=object if kind == "categorical" else np.float64)
    n_rows = len(next(iter(arrays.values()))) if arrays else 1
    return constraint.evaluate(arrays, n_rows).tolist()


def convolution_row(**values: int) -> dict[str, list[int]]:
    row = {"use_cmem": 1, "filter_height": 15, "filter_width": 15, "read_only": 0}
    row.update(values)
    return {name: [value] for name, value in row.items()}


# --------------------------------------------------------------------- README restrictions


@pytest.mark.parametrize(
    ("restriction", "row", "expected"),
    [
        (0, {"use_padding": 1, "block_size_x": 48}, True),  # 48 % 32 == 16
        (0, {"use_padding": 1, "block_size_x": 64}, False),  # 64 % 32 == 0
        (0, {"use_padding": 0, "block_size_x": 64}, True),
        (1, {"block_size_x": 256, "block_size_y": 4}, True),  # 1024 <= 1024
        (1, {"block_size_x": 256, "block_size_y": 8}, False),  # 2048
        (1, {"block_size_x": 16, "block_size_y": 16}, True),  # 256
        (2, {"use_padding": 1, "use_shmem": 0}, False),
        (2, {"use_padding": 1, "use_shmem": 1}, True),
        (2, {"use_padding": 0, "use_shmem": 0}, True),
        # (32*2 + 14) * (4*2 + 14) = 78 * 22 = 1716 < 12288
        (3, {"use_shmem": 1, "block_size_x": 32, "tile_size_x": 2, "block_size_y": 4,
             "tile_size_y": 2}, True),
        # (256*4 + 14) * (4*4 + 14) = 1038 * 30 = 31140
        (3, {"use_shmem": 1, "block_size_x": 256, "tile_size_x": 4, "block_size_y": 4,
             "tile_size_y": 4}, False),
        (3, {"use_shmem": 0, "block_size_x": 256, "tile_size_x": 4, "block_size_y": 4,
             "tile_size_y": 4}, True),
        # (512 + 14) * (16 + 14) = 15780 and (128 + 14) * (32 + 14) = 6532
        (3, {"use_shmem": 1, "block_size_x": 128, "tile_size_x": 4, "block_size_y": 8,
             "tile_size_y": 2}, False),
        (3, {"use_shmem": 1, "block_size_x": 64, "tile_size_x": 2, "block_size_y": 8,
             "tile_size_y": 4}, True),
    ],
)  # fmt: skip
def test_readme_restrictions_match_hand_computation(
    restriction: int, row: dict[str, int], expected: bool
) -> None:
    assert evaluate(RESTRICTIONS[restriction], CONVOLUTION, **convolution_row(**row)) == [expected]


def test_readme_restrictions_name_their_parameters() -> None:
    constraint = parse_constraint(RESTRICTIONS[3], CONVOLUTION)
    assert constraint.names == {
        "use_shmem",
        "block_size_x",
        "tile_size_x",
        "filter_width",
        "block_size_y",
        "tile_size_y",
        "filter_height",
    }
    assert constraint.source == RESTRICTIONS[3]


def test_readme_restrictions_leave_the_documented_number_of_configurations() -> None:
    space = Space([], CONVOLUTION_DESIGN, RESTRICTIONS)
    valid = space.valid_design_codes()
    assert len(valid) == CONVOLUTION_VALID
    # the same count by plain Python over the Cartesian product
    count = 0
    domains = [p.domain_values().tolist() for p in CONVOLUTION_DESIGN]
    for bx, by, tx, ty, _, pad, shmem, _, fh, fw in itertools.product(*domains):
        count += (
            (pad == 0 or bx % 32 != 0)
            and bx * by <= 1024
            and (pad == 0 or shmem != 0)
            and (shmem == 0 or (bx * tx + fw - 1) * (by * ty + fh - 1) < 12 * 1024)
        )
    assert count == CONVOLUTION_VALID


# ------------------------------------------------------------------------------ semantics


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a < b < c", [True, False, False, False, False]),
        ("a < b <= c", [True, False, False, False, True]),
        ("c > b > a", [True, False, False, False, False]),
        ("a == a == a", [True, True, True, True, True]),
        ("a != b != a", [True, True, False, False, True]),
        ("a < c > b", [True, False, False, False, False]),  # a < c and c > b
    ],
)
def test_chained_comparisons(text: str, expected: list[bool]) -> None:
    columns = {"a": [1, 3, 1, 0, 1], "b": [2, 2, 1, 0, 2], "c": [3, 1, 1, -1, 2]}
    assert evaluate(text, NUMBERS, **columns) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a > 0 and b > 0", [True, False, False, False]),
        ("a > 0 or b > 0", [True, True, True, False]),
        ("not a > 0", [False, False, True, True]),
        ("not (a > 0 and b > 0)", [False, True, True, True]),
        ("a > 0 and b > 0 or c > 0", [True, False, True, False]),
        ("a > 0 and (b > 0 or c > 0)", [True, False, False, False]),
        ("a", [True, True, False, False]),  # a number is true when non-zero, as in Python
        ("not a", [False, False, True, True]),
        ("(a or b) == 2", [False, True, False, False]),  # `or` yields an operand
    ],
)
def test_boolean_operators(text: str, expected: list[bool]) -> None:
    columns = {"a": [1, 2, 0, 0], "b": [1, -1, 1, 0], "c": [0, 0, 1, 0]}
    assert evaluate(text, NUMBERS, **columns) == expected


def test_and_or_yield_an_operand_as_python_does() -> None:
    columns = {"a": [0, 3, 3], "b": [5, 5, 0]}
    # Python: (0 or 5) == 5, (3 or 5) == 3, (3 and 0) == 0, (3 and 5) == 5
    assert evaluate("(a or b) == 5", NUMBERS, **columns) == [True, False, False]
    assert evaluate("(a and b) + 1 == 6", NUMBERS, **columns) == [False, True, False]
    assert evaluate("(a < b) + (a < b) == 2", NUMBERS, **columns) == [True, True, False]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("min(a, b) == -2", [True, False]),
        ("max(a, b, c) == 4", [True, False]),
        ("min(a, b, c) == -2", [True, False]),
        ("abs(a) == 2", [True, True]),
        ("abs(a - b) == 1", [False, True]),
        ("max(abs(a), abs(b)) == 3", [True, True]),
    ],
)
def test_functions(text: str, expected: list[bool]) -> None:
    columns = {"a": [-2, 2], "b": [3, 3], "c": [4, 0]}
    assert evaluate(text, NUMBERS, **columns) == expected


@pytest.mark.parametrize(
    ("text", "a", "b", "expected"),
    [
        ("a // b == -4", 7, -2, True),  # floor, not truncation
        ("a % b == -1", 7, -2, True),  # sign of the divisor
        ("a % b == 1", -7, 2, True),
        ("a // b == -4", -7, 2, True),
        ("a ** b == 81", 3, 4, True),
        ("a ** b == 0.25", 2, -2, True),  # int ** negative int is a float
        ("a / b == 3.5", 7, 2, True),
        ("-a ** 2 == -9", 3, 0, True),  # ** binds tighter than unary minus
        ("2 ** a ** b == 512", 3, 2, True),  # ** is right-associative
    ],
)
def test_arithmetic_follows_python(text: str, a: int, b: int, expected: bool) -> None:
    assert evaluate(text, NUMBERS, a=[a], b=[b]) == [expected]


def test_categorical_equality_with_strings() -> None:
    gpus = ["A100", "MI250X", "W6600"]
    assert evaluate("gpu == 'A100'", MIXED, gpu=gpus) == [True, False, False]
    assert evaluate('"A100" == gpu', MIXED, gpu=gpus) == [True, False, False]
    assert evaluate("gpu != 'A100'", MIXED, gpu=gpus) == [False, True, True]
    assert evaluate("gpu == 'W6600' or a > 0", MIXED, gpu=gpus, a=[1, 0, 0]) == [
        True,
        False,
        True,
    ]


@pytest.mark.parametrize("text", ["gpu == other", "other != gpu", "'A100' == 'A100'"])
def test_strings_compare_only_parameter_with_value(text: str) -> None:
    # the header holds categorical values as enum codes: two parameters' codes (or two texts)
    # would not compare as their strings do, so such comparisons are refused when parsed
    with pytest.raises(ConstraintError, match="with one of its values"):
        parse_constraint(text, MIXED)


def test_categorical_scalar_is_broadcast() -> None:
    constraint = parse_constraint("gpu == 'A100' and a < 2", MIXED)
    result = constraint.evaluate({"gpu": "A100", "a": np.array([0.0, 1.0, 2.0])}, 3)
    assert result.tolist() == [True, True, False]


def test_bool_parameters_compare_with_true_and_numbers() -> None:
    assert evaluate("flag == True", MIXED, flag=[1.0, 0.0]) == [True, False]
    assert evaluate("flag + 1 == 2", MIXED, flag=[1.0, 0.0]) == [True, False]


# ----------------------------------------------------- property test vs a reference interpreter

_LIMIT = 2**50  # float64 holds every integer below 2**53 exactly


class _Undefined(Exception):
    """Python would raise here (division by zero): the row is invalid."""


class _TooLarge(Exception):
    """An intermediate value is beyond exact float64 integers: not a fair comparison."""


_REFERENCE_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Div: operator.truediv,
}
_REFERENCE_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _checked(value: Any) -> Any:
    if abs(value) > _LIMIT:
        raise _TooLarge
    return value


def reference(node: ast.AST, env: Mapping[str, int]) -> Any:
    """A tiny interpreter of the constraint language with Python's integer semantics."""
    if isinstance(node, ast.Expression):
        return reference(node.body, env)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = reference(node.left, env), reference(node.right, env)
        try:
            return _checked(_REFERENCE_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise _Undefined from None
    if isinstance(node, ast.UnaryOp):
        operand = reference(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not operand
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BoolOp):
        result = reference(node.values[0], env)
        for value in node.values[1:]:
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
            result = reference(value, env)
        return result
    if isinstance(node, ast.Compare):
        left = reference(node.left, env)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = reference(comparator, env)
            if not _REFERENCE_COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        arguments = [reference(a, env) for a in node.args]
        functions: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}
        return functions[node.func.id](*arguments)
    raise AssertionError(f"not in the language: {ast.dump(node)}")


def reference_truth(text: str, env: Mapping[str, int]) -> bool:
    try:
        return bool(reference(ast.parse(text, mode="eval"), env))
    except _Undefined:
        return False


def _binary(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    operators = st.sampled_from(["+", "-", "*", "//", "%"])
    return st.builds(lambda x, op, y: f"({x} {op} {y})", children, operators, children)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    comparisons = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
    chain = st.lists(st.tuples(comparisons, children), min_size=1, max_size=3)
    return st.one_of(
        _binary(children),
        st.builds(lambda x, k: f"({x} ** {k})", children, st.integers(0, 3)),
        st.builds(lambda x: f"(-{x})", children),
        st.builds(lambda x: f"(not {x})", children),
        st.builds(lambda x: f"abs({x})", children),
        st.builds(lambda f, x, y: f"{f}({x}, {y})", st.sampled_from(["min", "max"]), children,
                  children),
        st.builds(lambda x, op, y: f"({x} {op} {y})", children, st.sampled_from(["and", "or"]),
                  children),
        st.builds(lambda x, rest: "(" + x + "".join(f" {o} {y}" for o, y in rest) + ")",
                  children, chain),
    )  # fmt: skip


EXPRESSIONS = st.recursive(
    st.sampled_from(["a", "b", "c"]) | st.integers(-3, 5).map(str), _extend, max_leaves=8
)
ROWS = st.lists(
    st.tuples(st.integers(-5, 5), st.integers(-5, 5), st.integers(-5, 5)), min_size=1, max_size=6
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=EXPRESSIONS, rows=ROWS)
def test_integer_semantics_equal_python(text: str, rows: list[tuple[int, int, int]]) -> None:
    expected = []
    for a, b, c in rows:
        try:
            expected.append(reference_truth(text, {"a": a, "b": b, "c": c}))
        except _TooLarge:
            assume(False)
    columns = {name: [row[i] for row in rows] for i, name in enumerate("abc")}
    assert evaluate(text, NUMBERS, **columns) == expected, text


def test_reference_interpreter_can_tell_semantics_apart() -> None:
    # the property test would catch C-style truncation or an undefined row counted as valid
    assert reference_truth("-7 // 2 == -4", {})
    assert not reference_truth("not (1 // 0 < 1)", {})
    assert reference_truth("0 == 0 or 1 // 0", {})


# --------------------------------------------------------------------------- division by zero


@pytest.mark.parametrize(
    "text",
    [
        "a / b > 1",
        "a // b > 1",
        "a % b == 0",
        "a % b != 0",
        "not (a / b < 1)",
        "a / b",
        "b ** -1 > 0",
        "min(a / b, 5) > 0",
        "abs(a // b) >= 0",
        "a / b != a / b",
    ],
)
def test_division_by_zero_gives_an_invalid_row(text: str) -> None:
    assert evaluate(text, NUMBERS, a=[5, 5], b=[0, 1]) == [
        False,
        reference_truth(text, {"a": 5, "b": 1}),
    ]


def test_short_circuit_guards_a_division_by_zero() -> None:
    assert evaluate("b == 0 or a / b > 1", NUMBERS, a=[5, 5], b=[0, 10]) == [True, False]
    assert evaluate("b != 0 and a / b > 1", NUMBERS, a=[5, 5], b=[0, 2]) == [False, True]
    assert evaluate("b > 0 > a // b", NUMBERS, a=[5, -5], b=[0, 2]) == [False, True]


# ---------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("text", "offending"),
    [
        ("a.real > 0", "a.real"),
        ("__import__('os')", "__import__('os')"),
        ("__import__('os').system('true') == 0", "__import__('os')"),
        ("len(a) > 0", "len(a)"),
        ("open('x') == 1", "open('x')"),
        ("a.__class__ == 1", "a.__class__"),
        ("a[0] > 1", "a[0]"),
        ("(lambda: 1)() > 0", "(lambda: 1)()"),
        ("(lambda x: x) == 1", "lambda x: x"),
        ("[x for x in (1, 2)] == a", "[x for x in (1, 2)]"),
        ("{x for x in (1, 2)} == a", "{x for x in (1, 2)}"),
        ("(x for x in (1, 2)) == a", "(x for x in (1, 2))"),
        ("foo < 3", "foo"),
        ("a < bar + 1", "bar"),
        ("gpu + 'x' == 'A100x'", "gpu + 'x'"),
        ("'ab' * 2 == gpu", "'ab' * 2"),
        ("-gpu == 1", "-gpu"),
        ("gpu < 'a'", "gpu < 'a'"),
        ("gpu == 1", "gpu == 1"),
        ("gpu == 'H100'", "gpu == 'H100'"),
        ("gpu", "gpu"),
        ("'A100'", "'A100'"),
        ("gpu and a", "gpu"),
        ("min(gpu, 'a') == 1", "gpu"),
        ("a if b else c", "a if b else c"),
        ("(d := 1) > 0", "d := 1"),
        ("a in (1, 2)", "a in (1, 2)"),
        ("a is None", "a is None"),
        ("a << 1 > 0", "a << 1"),
        ("a & b", "a & b"),
        ("~a > 0", "~a"),
        ("min(a) > 0", "min(a)"),
        ("abs(a, b) > 0", "abs(a, b)"),
        ("max(a, b, key=c) > 0", "max(a, b, key=c)"),
        ("min(*a) > 0", "min(*a)"),
        ("abs > 0", "abs"),
        ("None == a", "None"),
        ("a == 1j", "1j"),
        ("f'{a}' == 'x'", "f'{a}'"),
        ("(a, b) == 1", "(a, b)"),
    ],
)
def test_refused_constructs_name_the_offending_text(text: str, offending: str) -> None:
    with pytest.raises(ConstraintError) as raised:
        parse_constraint(text, MIXED)
    assert offending in str(raised.value)


@pytest.mark.parametrize("text", ["", "   ", "a <", "a = 1", "import os", "a; b"])
def test_syntax_errors_are_constraint_errors(text: str) -> None:
    with pytest.raises(ConstraintError):
        parse_constraint(text, MIXED)


def test_non_string_constraint_is_refused() -> None:
    with pytest.raises(ConstraintError, match="string"):
        parse_constraint(3, MIXED)  # type: ignore[arg-type]


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConstraintError, match="unknown parameter 'nn'.*a, b, c"):
        parse_constraint("nn < 3", NUMBERS)


def test_constraint_error_is_a_space_error() -> None:
    from mlkaps_gpu.space import SpaceError

    assert issubclass(ConstraintError, SpaceError)


# ---------------------------------------------------------------------------- long input


def _parse_quickly(text: str) -> Constraint | None:
    """Parse; None when refused (with ConstraintError, nothing else). The parse time of such
    inputs is measured by experiments/fuzz_config.py, never asserted in a unit test."""
    try:
        constraint: Constraint | None = parse_constraint(text, NUMBERS)
    except ConstraintError:
        constraint = None
    return constraint


def test_ten_thousand_character_sum_parses_and_evaluates() -> None:
    terms = 2500
    text = " + ".join(["a"] * terms) + " < 5"
    assert len(text) >= 10_000
    constraint = _parse_quickly(text)
    assert constraint is not None
    result = constraint.evaluate({"a": np.array([0.0, 1.0, -1.0])}, 3)
    assert result.tolist() == [True, False, True]
    c_text = "\n".join(constraint_c_check(constraint, lambda name: name, lambda name, value: value))
    assert c_text.count(" + ") == terms - 1
    # one statement per operation: no expression nests deeper than one operation
    assert max(len(line) for line in c_text.splitlines()) < 100


@pytest.mark.parametrize(
    "text",
    [
        "(" * 5000 + "a" + ")" * 5000 + " < 5",
        "(a + " * 2000 + "a" + ")" * 2000 + " < 5",
        "- " * 5000 + "a < 5",
        "not " * 2500 + "a",
        "a ** " * 2500 + "a < 5",
        "abs(" * 2000 + "a" + ")" * 2000 + " < 5",
        "-" * 99_990 + "a < 5",
        "[" * 10_000,
    ],
    ids=["parentheses", "right-nested", "minus", "not", "power", "calls", "100k-minus", "brackets"],
)
def test_deep_nesting_is_refused_cleanly(text: str) -> None:
    with pytest.raises(ConstraintError, match="nested|syntax"):
        parse_constraint(text, NUMBERS)


def test_nesting_limit_between_parser_and_recursion_limits() -> None:
    deep = "(a + " * 150 + "a" + ")" * 150 + " < 5"  # under Python's parenthesis limit
    with pytest.raises(ConstraintError, match="nested more than"):
        parse_constraint(deep, NUMBERS)
    shallow = "(a + " * 60 + "a" + ")" * 60 + " < 62"
    constraint = parse_constraint(shallow, NUMBERS)
    assert constraint.evaluate({"a": np.array([1.0, 2.0])}, 2).tolist() == [True, False]


def test_overlong_constraint_is_refused() -> None:
    with pytest.raises(ConstraintError, match="longer than"):
        parse_constraint("a" * 200_000, NUMBERS)


def test_huge_integer_literal_does_not_crash() -> None:
    assert evaluate("a < " + "9" * 400, NUMBERS, a=[1]) == [True]


# ---------------------------------------------------------------------------------- C output


def _c(text: str, parameters: Mapping[str, Parameter] = MIXED) -> str:
    constraint = parse_constraint(text, parameters)
    lines = constraint_c_check(
        constraint, lambda name: f"p_{name}", lambda name, value: f"E_{name}_{value}"
    )
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (RESTRICTIONS[0], ["p_use_padding", "==", "fmod(", "!=", "copysign("]),
        (RESTRICTIONS[1], ["*", "<=", "1024.0"]),
        (RESTRICTIONS[3], ["*", "+", "-", "<", "12.0", "1024.0"]),
        ("a > 0 and not b < 1", [">", "<", "== 0.0) ? 1.0 : 0.0"]),
        ("a // b >= c", ["floor(", "fmod(", ">=", "NAN"]),
        ("a ** 2 != 0", ["fmod(", "*=", "pow(", "!="]),
        ("min(a, b, c) > max(a, 1)", ["<", ">"]),
        ("abs(a) <= 3", ["fabs(", "<="]),
        ("a < b < c", ["<", "if (go"]),
        ("gpu == 'MI250X'", ["E_gpu_MI250X", "p_gpu", "=="]),
        ("a", ["!= 0.0"]),
        ("a < 1e400", ["HUGE_VAL"]),
    ],
)
def test_to_c_writes_the_operators(text: str, expected: list[str]) -> None:
    parameters = {**MIXED, **CONVOLUTION}
    c_text = _c(text, parameters)
    for piece in expected:
        assert piece in c_text, (piece, c_text)
    assert c_text.count("(") == c_text.count(")")
    assert c_text.count("{") == c_text.count("}")
    assert " and " not in c_text and " or " not in c_text and "not " not in c_text
    assert "return 0;" in c_text


def test_to_c_locals_avoid_names_in_scope() -> None:
    constraint = parse_constraint("a // b > c", NUMBERS)
    taken = {f"{hint}{i}" for hint in ("t", "m", "d", "f", "c", "go", "value") for i in range(9)}
    lines, result = constraint_c_value(
        constraint, lambda name: name, lambda name, value: value, avoid=taken
    )
    declared = {line.split()[1] for line in lines if line.strip().startswith("double ")}
    assert result not in taken
    assert declared and not declared & taken


def test_chained_comparison_evaluates_middle_operands_once_in_c() -> None:
    # nested chains must not repeat their middle operands (an exponential C text)
    text = "a < " + "(b < " * 30 + "c" + " < a)" * 30 + " < b"
    c_text = _c(text, NUMBERS)
    assert c_text.count("p_b") < 200


@pytest.mark.parametrize(
    "text", ["((a < (a // a)) ** 0)", "((a % a) ** 0)", "(((a // b) < c) ** 0) == 1"]
)
def test_undefined_operand_of_a_power_stays_undefined(text: str) -> None:
    # Python raises at a // 0 before the power; numpy's nan ** 0 would say 1 (found by the
    # property test below)
    assert evaluate(text, NUMBERS, a=[0], b=[0], c=[0]) == [False]
    assert reference_truth(text, {"a": 0, "b": 0, "c": 0}) is False
