"""The constraint language: a small, safe expression language compiled to vectorised numpy.

Allowed: numbers, strings (compared with categorical parameters only), parameter names,
``+ - * / // % **``, comparisons (chained too), ``and or not``, parentheses and the functions
``min max abs``. A constraint is parsed with :mod:`ast` and every node is checked against a
whitelist; nothing is ever ``eval``-ed. The checked tree is compiled into a chain of numpy
closures that evaluate the constraint over whole columns at once, and it can also be written
as C (for the run-time validity check in generated headers).

Arithmetic is done in float64 (exact for integers below 2**53); a division by zero gives
inf or nan, and any comparison with nan is false, so such a row is simply invalid.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlkaps_gpu.space._parameters import Parameter, SpaceError

Evaluator = Callable[[Mapping[str, Any]], Any]

_BINARY: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", np.add),
    ast.Sub: ("-", np.subtract),
    ast.Mult: ("*", np.multiply),
    ast.Div: ("/", np.true_divide),
    ast.FloorDiv: ("//", np.floor_divide),
    ast.Mod: ("%", np.mod),
    ast.Pow: ("**", np.power),
}
_COMPARE: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("==", np.equal),
    ast.NotEq: ("!=", np.not_equal),
    ast.Lt: ("<", np.less),
    ast.LtE: ("<=", np.less_equal),
    ast.Gt: (">", np.greater),
    ast.GtE: (">=", np.greater_equal),
}
_FUNCTIONS = {"min": (2, None), "max": (2, None), "abs": (1, 1)}
#: Longest constraint text accepted (characters).
MAX_LENGTH = 100_000

_NUM, _STR = "number", "string"


class ConstraintError(SpaceError):
    """A constraint is not in the language, or names something unknown."""


@dataclass(frozen=True)
class Constraint:
    """A parsed, checked constraint.

    Attributes:
        source: the text as written.
        names: parameter names it refers to.
    """

    source: str
    names: frozenset[str]
    tree: ast.Expression
    _evaluate: Evaluator

    def evaluate(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """Boolean array: which of ``n_rows`` rows satisfy the constraint.

        ``columns`` maps each parameter name to a column (float64 for numeric parameters,
        object/str for categorical ones) or to a scalar, which is broadcast.
        """
        with np.errstate(all="ignore"):
            value = self._evaluate(columns)
            result = _truth(value)
        return np.broadcast_to(result, (n_rows,)).copy()

    def to_c(self, name_of: Callable[[str], str], literal_of: Callable[[str, str], str]) -> str:
        """The constraint as a C expression of type int.

        Args:
            name_of: C expression for a parameter (as a double, or an enum for categoricals).
            literal_of: C literal for a string constant compared with a categorical parameter,
                given ``(parameter_name, value)``.
        """
        return _CWriter(name_of, literal_of).truth(self.tree.body)


def parse_constraint(source: str, parameters: Mapping[str, Parameter]) -> Constraint:
    """Parse and check one constraint against the known parameters.

    Raises:
        ConstraintError: naming the constraint and the offending part of its text.
    """
    if not isinstance(source, str):
        raise ConstraintError(f"constraint {source!r}: must be a string")
    text = source.strip()
    if not text:
        raise ConstraintError("constraint '': empty expression")
    if len(text) > MAX_LENGTH:
        raise ConstraintError(f"constraint of {len(text)} characters: longer than {MAX_LENGTH}")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ConstraintError(f"constraint {text!r}: syntax error ({error.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise ConstraintError(f"constraint {text[:60]!r}...: too deeply nested") from None
    checker = _Checker(text, parameters)
    try:
        evaluate, _ = checker.compile(tree.body)
    except RecursionError:
        raise ConstraintError(f"constraint {text[:60]!r}...: too deeply nested") from None
    return Constraint(text, frozenset(checker.names), tree, evaluate)


def _truth(value: Any) -> Any:
    array = np.asarray(value)
    if array.dtype == bool:
        return array
    if array.dtype == object:
        raise ConstraintError("a string is not a condition")
    return array != 0


class _Checker:
    """Walks the AST, refusing anything outside the whitelist, and builds numpy closures."""

    def __init__(self, text: str, parameters: Mapping[str, Parameter]) -> None:
        self.text = text
        self.parameters = parameters
        self.names: set[str] = set()

    def fail(self, node: ast.AST, problem: str) -> ConstraintError:
        segment = ast.get_source_segment(self.text, node) or type(node).__name__
        return ConstraintError(f"constraint {self.text!r}: {problem}: '{segment}'")

    def compile(self, node: ast.AST) -> tuple[Evaluator, str]:
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.BoolOp):
            return self._boolean(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        problems = {
            ast.Attribute: "attribute access is not allowed",
            ast.Subscript: "subscripts are not allowed",
            ast.Lambda: "lambdas are not allowed",
            ast.IfExp: "conditional expressions are not allowed",
            ast.NamedExpr: "assignment is not allowed",
        }
        problem = problems.get(type(node), f"'{type(node).__name__}' is not allowed")
        raise self.fail(node, problem)

    def _constant(self, node: ast.Constant) -> tuple[Evaluator, str]:
        value = node.value
        if isinstance(value, bool):
            number = float(value)
            return (lambda _c: number), _NUM
        if isinstance(value, (int, float)):
            number = float(value)
            return (lambda _c: number), _NUM
        if isinstance(value, str):
            return (lambda _c: value), _STR
        raise self.fail(node, "only numbers and strings are allowed as constants")

    def _name(self, node: ast.Name) -> tuple[Evaluator, str]:
        name = node.id
        if name in _FUNCTIONS:
            raise self.fail(node, f"'{name}' is a function and must be called")
        if name in ("True", "False"):  # pragma: no cover - parsed as Constant in py3
            raise self.fail(node, "unexpected name")
        if name not in self.parameters:
            known = ", ".join(sorted(self.parameters)) or "none"
            raise self.fail(node, f"unknown parameter '{name}' (known: {known})")
        self.names.add(name)
        kind = _STR if self.parameters[name].kind == "categorical" else _NUM
        return (lambda columns: columns[name]), kind

    def _binary(self, node: ast.BinOp) -> tuple[Evaluator, str]:
        if type(node.op) not in _BINARY:
            raise self.fail(node, f"operator '{type(node.op).__name__}' is not allowed")
        left, left_kind = self.compile(node.left)
        right, right_kind = self.compile(node.right)
        if _STR in (left_kind, right_kind):
            raise self.fail(node, "arithmetic on a categorical parameter or string")
        function = _BINARY[type(node.op)][1]

        def evaluate(columns: Mapping[str, Any]) -> Any:
            return function(np.asarray(left(columns), dtype=np.float64), right(columns))

        return evaluate, _NUM

    def _unary(self, node: ast.UnaryOp) -> tuple[Evaluator, str]:
        operand, kind = self.compile(node.operand)
        if kind == _STR:
            raise self.fail(node, "a string is not a number or a condition")
        if isinstance(node.op, ast.Not):
            return (lambda columns: np.logical_not(_truth(operand(columns)))), _NUM
        if isinstance(node.op, ast.USub):
            return (lambda columns: np.negative(operand(columns))), _NUM
        if isinstance(node.op, ast.UAdd):
            return operand, _NUM
        raise self.fail(node, f"operator '{type(node.op).__name__}' is not allowed")

    def _boolean(self, node: ast.BoolOp) -> tuple[Evaluator, str]:
        parts = []
        for value in node.values:
            part, kind = self.compile(value)
            if kind == _STR:
                raise self.fail(value, "a string is not a condition")
            parts.append(part)
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or

        def evaluate(columns: Mapping[str, Any]) -> Any:
            result = _truth(parts[0](columns))
            for part in parts[1:]:
                result = combine(result, _truth(part(columns)))
            return result

        return evaluate, _NUM

    def _compare(self, node: ast.Compare) -> tuple[Evaluator, str]:
        operands = [self.compile(node.left)]
        operands += [self.compile(c) for c in node.comparators]
        comparisons = []
        for index, op in enumerate(node.ops):
            if type(op) not in _COMPARE:
                raise self.fail(node, f"comparison '{type(op).__name__}' is not allowed")
            (_, left_kind), (_, right_kind) = operands[index], operands[index + 1]
            if left_kind != right_kind:
                raise self.fail(node, "comparison of a string with a number")
            if left_kind == _STR and not isinstance(op, (ast.Eq, ast.NotEq)):
                raise self.fail(node, "strings can only be compared with == or !=")
            comparisons.append(_COMPARE[type(op)][1])
        evaluators = [e for e, _ in operands]

        def evaluate(columns: Mapping[str, Any]) -> Any:
            values = [e(columns) for e in evaluators]
            result = None
            for index, compare in enumerate(comparisons):
                step = np.asarray(compare(values[index], values[index + 1]), dtype=bool)
                result = step if result is None else np.logical_and(result, step)
            return result

        return evaluate, _NUM

    def _call(self, node: ast.Call) -> tuple[Evaluator, str]:
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, "only calls of min, max and abs are allowed")
        name = node.func.id
        if name not in _FUNCTIONS:
            raise self.fail(node, f"call to '{name}' is not allowed (only min, max, abs)")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, "keyword or starred arguments are not allowed")
        lowest, highest = _FUNCTIONS[name]
        if len(node.args) < lowest or (highest is not None and len(node.args) > highest):
            raise self.fail(node, f"wrong number of arguments to '{name}'")
        arguments = []
        for argument in node.args:
            evaluator, kind = self.compile(argument)
            if kind == _STR:
                raise self.fail(argument, f"'{name}' of a string")
            arguments.append(evaluator)
        if name == "abs":
            only = arguments[0]
            return (lambda columns: np.abs(only(columns))), _NUM
        reduce = np.minimum if name == "min" else np.maximum

        def evaluate(columns: Mapping[str, Any]) -> Any:
            result = arguments[0](columns)
            for argument in arguments[1:]:
                result = reduce(result, argument(columns))
            return result

        return evaluate, _NUM


class _CWriter:
    """Writes a checked constraint tree as C (double arithmetic, Python semantics for // and %)."""

    def __init__(
        self, name_of: Callable[[str], str], literal_of: Callable[[str, str], str]
    ) -> None:
        self.name_of = name_of
        self.literal_of = literal_of

    def truth(self, node: ast.AST) -> str:
        if isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        ):
            return self.value(node)
        return f"({self.value(node)} != 0.0)"

    def value(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                raise ConstraintError("string constant outside a comparison")
            return repr(float(node.value)) if not isinstance(node.value, bool) else (
                "1.0" if node.value else "0.0"
            )
        if isinstance(node, ast.Name):
            return self.name_of(node.id)
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.FloorDiv):
                return f"floor({left} / {right})"
            if isinstance(node.op, ast.Mod):
                return f"mlkaps_pymod({left}, {right})"
            if isinstance(node.op, ast.Pow):
                return f"pow({left}, {right})"
            return f"({left} {_BINARY[type(node.op)][0]} {right})"
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return f"(!{self.truth(node.operand)})"
            sign = "-" if isinstance(node.op, ast.USub) else "+"
            return f"({sign}{self.value(node.operand)})"
        if isinstance(node, ast.BoolOp):
            joiner = " && " if isinstance(node.op, ast.And) else " || "
            return "(" + joiner.join(self.truth(v) for v in node.values) + ")"
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            parts = []
            for index, op in enumerate(node.ops):
                parts.append(self._comparison(operands[index], op, operands[index + 1]))
            return "(" + " && ".join(parts) + ")"
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)
            arguments = [self.value(a) for a in node.args]
            if node.func.id == "abs":
                return f"fabs({arguments[0]})"
            function = "fmin" if node.func.id == "min" else "fmax"
            result = arguments[0]
            for argument in arguments[1:]:
                result = f"{function}({result}, {argument})"
            return result
        raise ConstraintError(f"cannot write {type(node).__name__} as C")

    def _comparison(self, left: ast.AST, op: ast.cmpop, right: ast.AST) -> str:
        symbol = _COMPARE[type(op)][0]
        for name_node, const_node in ((left, right), (right, left)):
            if (
                isinstance(name_node, ast.Name)
                and isinstance(const_node, ast.Constant)
                and isinstance(const_node.value, str)
            ):
                literal = self.literal_of(name_node.id, const_node.value)
                return f"((int)({self.name_of(name_node.id)}) {symbol} (int)({literal}))"
        return f"({self.value(left)} {symbol} {self.value(right)})"
