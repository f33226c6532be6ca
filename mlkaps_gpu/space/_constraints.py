"""The constraint language: a small, safe expression language compiled to vectorised numpy.

Allowed: numbers, strings (compared with categorical parameters only), parameter names,
``+ - * / // % **``, comparisons (chained too), ``and or not``, parentheses and the functions
``min max abs``. A constraint is parsed with :mod:`ast` and every node is checked against a
whitelist; nothing is ever ``eval``-ed. The checked tree is compiled into a chain of numpy
closures that evaluate the constraint over whole columns at once, and it can also be written
as C (for the run-time validity check in generated headers).

Arithmetic is done in float64 (exact for integers below 2**53) with Python's semantics for
``//``, ``%``, ``and``, ``or`` and chained comparisons. Where Python would raise (a division or
modulo by zero, zero to a negative power) the value is *undefined* (carried as nan); an undefined
value makes the whole constraint false for that row, whatever ``not`` is applied to it, unless an
``and``/``or`` short-circuits past it as Python would. Such a row is simply invalid.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlkaps_gpu.space._parameters import Parameter, SpaceError

Evaluator = Callable[[Mapping[str, Any]], Any]


def _divide(left: Any, right: Any) -> Any:
    return np.where(np.equal(right, 0), np.nan, np.true_divide(left, right))


def _floor_divide(left: Any, right: Any) -> Any:
    return np.where(np.equal(right, 0), np.nan, np.floor_divide(left, right))


def _modulo(left: Any, right: Any) -> Any:
    return np.where(np.equal(right, 0), np.nan, np.mod(left, right))


def _power(left: Any, right: Any) -> Any:
    # numpy (and C) say nan ** 0 == 1: an undefined operand must stay undefined, as Python
    # would have raised before reaching the power
    undefined = np.equal(left, 0) & np.less(right, 0) | _undefined(left) | _undefined(right)
    return np.where(undefined, np.nan, np.power(left, right))


_BINARY: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", np.add),
    ast.Sub: ("-", np.subtract),
    ast.Mult: ("*", np.multiply),
    ast.Div: ("/", _divide),
    ast.FloorDiv: ("//", _floor_divide),
    ast.Mod: ("%", _modulo),
    ast.Pow: ("**", _power),
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
#: Deepest nesting accepted (a left-to-right chain such as ``a + b - c + d`` counts as one level);
#: it keeps compiling, evaluating and writing C far from Python's recursion limit.
MAX_DEPTH = 100

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
        object/str for categorical ones) or to a scalar, which is broadcast. A row where the
        constraint is undefined (division by zero...) does not satisfy it.
        """
        with np.errstate(all="ignore"):
            value = np.asarray(self._evaluate(columns), dtype=np.float64)
            result = (value != 0) & ~np.isnan(value)
        return np.broadcast_to(result, (n_rows,)).copy()

    def to_c(
        self,
        name_of: Callable[[str], str],
        literal_of: Callable[[str, str], str],
        *,
        pymod: str = "mlkaps_pymod",
        fmin: str = "fmin",
        fmax: str = "fmax",
    ) -> str:
        """The constraint as a C expression of type int.

        Args:
            name_of: C expression for a parameter (as a double, or an enum for categoricals).
            literal_of: C literal for a string constant compared with a categorical parameter,
                given ``(parameter_name, value)``.
            pymod: name of the C function ``double f(double, double)`` that computes Python's
                ``%`` (the caller defines it, e.g. with a prefix of its own).
            fmin: name of the C function used for ``min`` (e.g. an inline helper that, like
                numpy, propagates NaN, where ``<math.h>``'s ``fmin`` ignores it).
            fmax: likewise for ``max``.
        """
        writer = _CWriter(name_of, literal_of, pymod=pymod, fmin=fmin, fmax=fmax)
        return writer.truth(self.tree.body)


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
    too_deep = f"constraint {text[:60]!r}...: nested more than {MAX_DEPTH} levels deep"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        if "nested" in str(error.msg) or "complex" in str(error.msg):
            raise ConstraintError(too_deep) from None
        raise ConstraintError(f"constraint {text!r}: syntax error ({error.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise ConstraintError(too_deep) from None
    if _depth(tree.body) > MAX_DEPTH:
        raise ConstraintError(too_deep)
    checker = _Checker(text, parameters)
    evaluate, kind = checker.compile(tree.body)
    if kind == _STR:
        raise checker.fail(tree.body, "a string is not a condition")
    return Constraint(text, frozenset(checker.names), tree, evaluate)


def _left_chain(node: ast.BinOp) -> tuple[ast.expr, list[ast.BinOp]]:
    """``a + b - c`` as its leftmost operand and its operations, innermost first."""
    chain = []
    current: ast.expr = node
    while isinstance(current, ast.BinOp):
        chain.append(current)
        current = current.left
    chain.reverse()
    return current, chain


def _depth(root: ast.expr) -> int:
    """Nesting depth, found without recursion (left-to-right operator chains count once)."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.expr):
                continue
            same_chain = isinstance(node, ast.BinOp) and child is node.left
            stack.append((child, depth if same_chain else depth + 1))
    return deepest


def _numbers(value: Any) -> Any:
    return np.asarray(value, dtype=np.float64)


def _undefined(value: Any) -> Any:
    """Where a number is undefined (nan)."""
    return np.isnan(value)


def _logical_not(value: Any) -> Any:
    value = _numbers(value)
    return np.where(_undefined(value), np.nan, np.equal(value, 0).astype(np.float64))


def _logical_and(left: Any, right: Any) -> Any:
    """Python's ``left and right``: ``left`` when it is false (or undefined), else ``right``."""
    left = _numbers(left)
    return np.where(_undefined(left) | np.equal(left, 0), left, right)


def _logical_or(left: Any, right: Any) -> Any:
    """Python's ``left or right``: ``left`` when it is true (or undefined), else ``right``."""
    left = _numbers(left)
    return np.where(np.not_equal(left, 0), left, right)  # nan != 0: undefined stays


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
        if isinstance(value, (bool, int, float)):
            try:
                number = np.float64(value)
            except OverflowError:  # an integer literal beyond float64
                number = np.float64(np.inf)
            return (lambda _c: number), _NUM
        if isinstance(value, str):
            return (lambda _c: value), _STR
        raise self.fail(node, "only numbers and strings are allowed as constants")

    def _name(self, node: ast.Name) -> tuple[Evaluator, str]:
        name = node.id
        if name in _FUNCTIONS:
            raise self.fail(node, f"'{name}' is a function and must be called")
        if name not in self.parameters:
            known = ", ".join(sorted(self.parameters)) or "none"
            raise self.fail(node, f"unknown parameter '{name}' (known: {known})")
        self.names.add(name)
        if self.parameters[name].kind == "categorical":
            return (lambda columns: columns[name]), _STR
        return (lambda columns: _numbers(columns[name])), _NUM

    def _binary(self, node: ast.BinOp) -> tuple[Evaluator, str]:
        # a left-to-right chain (a + b - c ...) is compiled in a loop, not by recursion
        leftmost, chain = _left_chain(node)
        first, kind = self.compile(leftmost)
        steps: list[tuple[Callable[[Any, Any], Any], Evaluator]] = []
        for operation in chain:
            if type(operation.op) not in _BINARY:
                raise self.fail(
                    operation, f"operator '{type(operation.op).__name__}' is not allowed"
                )
            right, right_kind = self.compile(operation.right)
            if _STR in (kind, right_kind):
                raise self.fail(operation, "arithmetic on a categorical parameter or string")
            steps.append((_BINARY[type(operation.op)][1], right))

        def evaluate(columns: Mapping[str, Any]) -> Any:
            value = _numbers(first(columns))
            for function, right in steps:
                value = function(value, right(columns))
            return value

        return evaluate, _NUM

    def _unary(self, node: ast.UnaryOp) -> tuple[Evaluator, str]:
        operand, kind = self.compile(node.operand)
        if kind == _STR:
            raise self.fail(node, "a string is not a number or a condition")
        if isinstance(node.op, ast.Not):
            return (lambda columns: _logical_not(operand(columns))), _NUM
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
        combine = _logical_and if isinstance(node.op, ast.And) else _logical_or

        def evaluate(columns: Mapping[str, Any]) -> Any:
            result = parts[0](columns)
            for part in parts[1:]:
                result = combine(result, part(columns))
            return result

        return evaluate, _NUM

    def _compare(self, node: ast.Compare) -> tuple[Evaluator, str]:
        nodes = [node.left, *node.comparators]
        operands = [self.compile(n) for n in nodes]
        comparisons = []
        for index, op in enumerate(node.ops):
            if type(op) not in _COMPARE:
                raise self.fail(node, f"comparison '{type(op).__name__}' is not allowed")
            (_, left_kind), (_, right_kind) = operands[index], operands[index + 1]
            if left_kind != right_kind:
                raise self.fail(node, "comparison of a string with a number")
            if left_kind == _STR:
                if not isinstance(op, (ast.Eq, ast.NotEq)):
                    raise self.fail(node, "strings can only be compared with == or !=")
                self._check_category(node, nodes[index], nodes[index + 1])
            comparisons.append((_COMPARE[type(op)][1], left_kind == _NUM))
        evaluators = [e for e, _ in operands]

        def evaluate(columns: Mapping[str, Any]) -> Any:
            values = [e(columns) for e in evaluators]
            result = None
            for index, (compare, numeric) in enumerate(comparisons):
                left, right = values[index], values[index + 1]
                step = np.asarray(compare(left, right), dtype=np.float64)
                if numeric:
                    step = np.where(_undefined(left) | _undefined(right), np.nan, step)
                # a < b < c is (a < b) and (b < c), short-circuiting like Python
                result = step if result is None else _logical_and(result, step)
            return result

        return evaluate, _NUM

    def _check_category(self, node: ast.Compare, left: ast.expr, right: ast.expr) -> None:
        """A string compared with a categorical parameter must be one of its values."""
        for name_node, constant in ((left, right), (right, left)):
            if isinstance(name_node, ast.Name) and isinstance(constant, ast.Constant):
                values = self.parameters[name_node.id].values or ()
                if constant.value not in values:
                    allowed = ", ".join(repr(v) for v in values)
                    raise self.fail(
                        node,
                        f"{constant.value!r} is not a value of '{name_node.id}' ({allowed})",
                    )

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
        self,
        name_of: Callable[[str], str],
        literal_of: Callable[[str, str], str],
        *,
        pymod: str = "mlkaps_pymod",
        fmin: str = "fmin",
        fmax: str = "fmax",
    ) -> None:
        self.name_of = name_of
        self.literal_of = literal_of
        self.pymod = pymod
        self.fmin = fmin
        self.fmax = fmax

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
            return (
                repr(float(node.value))  # type: ignore[arg-type]
                if not isinstance(node.value, bool)
                else ("1.0" if node.value else "0.0")
            )
        if isinstance(node, ast.Name):
            return self.name_of(node.id)
        if isinstance(node, ast.BinOp):
            leftmost, chain = _left_chain(node)  # a loop, not recursion, along a + b - c ...
            text = self.value(leftmost)
            for operation in chain:
                text = self._arithmetic(operation.op, text, self.value(operation.right), self.pymod)
            return text
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
            function = self.fmin if node.func.id == "min" else self.fmax
            result = arguments[0]
            for argument in arguments[1:]:
                result = f"{function}({result}, {argument})"
            return result
        raise ConstraintError(f"cannot write {type(node).__name__} as C")

    @staticmethod
    def _arithmetic(op: ast.operator, left: str, right: str, pymod: str) -> str:
        if isinstance(op, ast.FloorDiv):
            return f"floor({left} / {right})"
        if isinstance(op, ast.Mod):
            return f"{pymod}({left}, {right})"
        if isinstance(op, ast.Pow):
            return f"pow({left}, {right})"
        return f"({left} {_BINARY[type(op)][0]} {right})"

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
