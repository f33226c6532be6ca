"""The constraint language: a small, safe expression language, evaluated in numpy and in C
with one meaning.

Allowed: numbers, strings (compared with categorical parameters only), parameter names,
``+ - * / // % **``, comparisons (chained too), ``and or not``, parentheses and the functions
``min max abs``. A constraint is parsed with :mod:`ast` and every node is checked against a
whitelist; nothing is ever ``eval``-ed. The checked tree is compiled into numpy closures that
evaluate the constraint over whole columns at once here, and written as C statements (the
run-time validity check of generated headers) by ``mlkaps_gpu.codegen`` through the same
dispatch (:class:`~mlkaps_gpu.space.ConstraintWalker`). Both follow the semantics below,
operation by operation, so that a configuration is valid in Python exactly when it is valid in
the header (``tests/space/test_constraint_semantics.py`` compares them on random expressions
and values).

Semantics (the one definition):

* Every value is an IEEE double. Integer and bool parameters are converted to double (exact up
  to 2**53), ``True``/``False`` are 1 and 0, a literal is the nearest double (``1e400`` and
  integers beyond the double range are ``inf``). A value may be *undefined* (carried as NaN).
* ``+ - *`` and unary ``-``: IEEE double arithmetic (``inf - inf`` is undefined; overflow
  gives ``inf``, where Python would raise for ``**`` of floats).
* ``a / b``: undefined when ``b`` is zero (either sign), else the IEEE quotient.
* ``a // b`` and ``a % b``: undefined when ``b`` is zero, else Python's float floor division
  and modulo (the remainder has the sign of the divisor), computed by CPython's and numpy's
  algorithm: ``m = fmod(a, b)``, ``d = (a - m) / b``; when ``m != 0`` and ``m`` and ``b`` differ
  in sign, ``m += b`` and ``d -= 1``; a zero ``m`` takes the sign of ``b``; ``a // b`` is
  ``floor(d)``, plus one when ``d - floor(d) > 0.5``, and ``copysign(0, a / b)`` when ``d`` is 0.
* ``a ** b``: undefined when either operand is undefined or ``a`` is zero and ``b`` negative.
  A finite integral ``b`` is exact binary exponentiation, with multiplications in a fixed order
  (``p = 1``; while ``k = |b| > 0``: ``p *= x`` when ``k`` is odd, ``x *= x``, ``k = floor(k /
  2)``), and ``1 / p`` for a negative ``b``: results that are integers below 2**53 are exact, and
  no math library is involved. Any other ``b`` (fractional or infinite) uses the C library's
  ``pow`` (the Python side calls the same function through :func:`math.pow`), so a fractional
  power of a negative number is undefined (Python would give a complex number). Only these
  powers may differ in the last bit between two math libraries (or a compiler's constant
  folding).
* ``min``, ``max``, ``abs``: undefined when an argument is undefined.
* Comparisons ``< <= > >= == !=``: 1 or 0, undefined when either operand is undefined; a chain
  ``a < b < c`` is ``(a < b) and (b < c)`` with ``b`` evaluated once. A categorical parameter
  compares (``==``, ``!=``) with one of its values only.
* ``not x``: 1 when ``x`` is 0, 0 when it is another number, undefined when ``x`` is.
* ``x and y`` is ``x`` when ``x`` is 0 or undefined, else ``y``; ``x or y`` is ``x`` when ``x``
  is non-zero or undefined, else ``y`` (Python's short circuit, where an undefined value is an
  error that stops the evaluation).
* A row satisfies a constraint when its value is defined and non-zero. An undefined value is
  where Python would raise (a division by zero...); such a row is simply invalid.

Generated C keeps these semantics when compiled without ``-ffast-math`` and without contraction
of ``a * b + c`` into a fused multiply-add (``-ffp-contract=off``; nvcc: ``--fmad=false``), which
matters only for products that are not exact.
"""

from __future__ import annotations

import ast
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from mlkaps_gpu.space._constraint_tree import ConstraintWalker, left_chain
from mlkaps_gpu.space._parameters import Parameter, SpaceError

Evaluator = Callable[[Mapping[str, Any]], Any]


def _divide(left: Any, right: Any) -> Any:
    return np.where(np.equal(right, 0), np.nan, np.true_divide(left, right))


def _divmod(left: Any, right: Any) -> tuple[Any, Any]:
    """Python's float ``(a // b, a % b)``, step for step as the C writer (``mlkaps_gpu.codegen``)
    writes ``//`` and ``%``."""
    left, right = np.broadcast_arrays(_numbers(left), _numbers(right))
    modulo = np.fmod(left, right)
    quotient = (left - modulo) / right
    adjust = np.not_equal(modulo, 0) & (np.less(right, 0) != np.less(modulo, 0))
    modulo = np.where(
        adjust, modulo + right, np.where(np.not_equal(modulo, 0), modulo, np.copysign(0.0, right))
    )
    quotient = np.where(adjust, quotient - 1.0, quotient)
    floored = np.floor(quotient)
    floored = np.where(quotient - floored > 0.5, floored + 1.0, floored)
    floored = np.where(np.not_equal(quotient, 0), floored, np.copysign(0.0, left / right))
    zero = np.equal(right, 0)
    return np.where(zero, np.nan, floored), np.where(zero, np.nan, modulo)


def _floor_divide(left: Any, right: Any) -> Any:
    return _divmod(left, right)[0]


def _modulo(left: Any, right: Any) -> Any:
    return _divmod(left, right)[1]


def _library_power(base: float, exponent: float) -> float:
    """The C library's ``pow`` (through :func:`math.pow`), errors mapped to its IEEE results."""
    try:
        return math.pow(base, exponent)
    except OverflowError:  # only a positive base reaches here with a fractional exponent
        return math.inf
    except ValueError:  # a negative base to a fractional power
        return math.nan


def _power(left: Any, right: Any) -> Any:
    """``left ** right`` as the module docstring defines it (exact for integral exponents)."""
    base, exponent = np.broadcast_arrays(_numbers(left), _numbers(right))
    undefined = _undefined(base) | _undefined(exponent) | (np.equal(base, 0) & (exponent < 0))
    integral = np.isfinite(exponent) & np.equal(exponent, np.floor(exponent))
    remaining = np.where(integral & ~undefined, np.abs(exponent), 0.0)
    power = np.ones(base.shape)
    factor = base.astype(np.float64, copy=True)
    while np.any(remaining > 0):
        odd = np.equal(np.fmod(remaining, 2.0), 1.0)
        power = np.where(odd, power * factor, power)
        factor = factor * factor
        remaining = np.floor(remaining / 2.0)
    result = np.where(exponent < 0, 1.0 / power, power)
    fractional = ~integral & ~undefined
    if np.any(fractional):
        # the C library's pow, once per distinct (base, exponent) pair
        pairs = np.stack([base[fractional], exponent[fractional]], axis=1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        values = np.array([_library_power(b, e) for b, e in unique.tolist()])
        result = np.array(result, dtype=np.float64)
        result[fractional] = values[inverse.reshape(-1)]
    return np.where(undefined, np.nan, result)


def _minimum(left: Any, right: Any) -> Any:
    left, right = _numbers(left), _numbers(right)
    either = _undefined(left) | _undefined(right)
    return np.where(either, np.nan, np.where(right < left, right, left))


def _maximum(left: Any, right: Any) -> Any:
    left, right = _numbers(left), _numbers(right)
    either = _undefined(left) | _undefined(right)
    return np.where(either, np.nan, np.where(right > left, right, left))


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
        tree: the checked syntax tree (``mlkaps_gpu.codegen`` writes it as C).
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

    def value(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """The constraint's value per row (float64; NaN where it is undefined)."""
        with np.errstate(all="ignore"):
            value = np.asarray(self._evaluate(columns), dtype=np.float64)
        return np.broadcast_to(value, (n_rows,)).copy()


def operator_symbol(op: ast.operator | ast.cmpop) -> str:
    """The symbol of an arithmetic or comparison operator of the language (``+``, ``<=`` ...),
    which C writes the same way for ``+ - *`` and every comparison."""
    table = _BINARY if isinstance(op, ast.operator) else _COMPARE
    return table[type(op)][0]


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
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": refused below anyway
            warnings.simplefilter("ignore", SyntaxWarning)
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
    evaluate, kind = checker.visit(tree.body)
    if kind == _STR:
        raise checker.fail(tree.body, "a string is not a condition")
    return Constraint(text, frozenset(checker.names), tree, evaluate)


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


class _Checker(ConstraintWalker[tuple[Evaluator, str]]):
    """Walks the AST, refusing anything outside the whitelist, and builds numpy closures."""

    def __init__(self, text: str, parameters: Mapping[str, Parameter]) -> None:
        self.text = text
        self.parameters = parameters
        self.names: set[str] = set()

    def fail(self, node: ast.AST, problem: str) -> ConstraintError:
        segment = ast.get_source_segment(self.text, node) or type(node).__name__
        return ConstraintError(f"constraint {self.text!r}: {problem}: '{segment}'")

    def _other(self, node: ast.AST) -> NoReturn:
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
        leftmost, chain = left_chain(node)
        first, kind = self.visit(leftmost)
        steps: list[tuple[Callable[[Any, Any], Any], Evaluator]] = []
        for operation in chain:
            if type(operation.op) not in _BINARY:
                raise self.fail(
                    operation, f"operator '{type(operation.op).__name__}' is not allowed"
                )
            right, right_kind = self.visit(operation.right)
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
        operand, kind = self.visit(node.operand)
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
            part, kind = self.visit(value)
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
        operands = [self.visit(n) for n in nodes]
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
        """Strings compare only as a categorical parameter against one of its values (the
        header holds categorical values as enum codes: two parameters' codes, or two texts,
        would not compare as their strings do)."""
        for name_node, constant in ((left, right), (right, left)):
            if isinstance(name_node, ast.Name) and isinstance(constant, ast.Constant):
                values = self.parameters[name_node.id].values or ()
                if constant.value not in values:
                    allowed = ", ".join(repr(v) for v in values)
                    raise self.fail(
                        node,
                        f"{constant.value!r} is not a value of '{name_node.id}' ({allowed})",
                    )
                return
        raise self.fail(
            node, "compare a categorical parameter with one of its values, as in gpu == 'A100'"
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
            evaluator, kind = self.visit(argument)
            if kind == _STR:
                raise self.fail(argument, f"'{name}' of a string")
            arguments.append(evaluator)
        if name == "abs":
            only = arguments[0]
            return (lambda columns: np.abs(only(columns))), _NUM
        reduce = _minimum if name == "min" else _maximum

        def evaluate(columns: Mapping[str, Any]) -> Any:
            result = arguments[0](columns)
            for argument in arguments[1:]:
                result = reduce(result, argument(columns))
            return result

        return evaluate, _NUM
