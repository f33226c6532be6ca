"""The constraint language written as C: the run-time validity check of generated headers.

A checked constraint (:class:`~mlkaps_gpu.space.Constraint`) is written from its syntax tree,
through the same dispatch over node kinds as its numpy evaluation
(:class:`~mlkaps_gpu.space.ConstraintWalker`), operation by operation with the semantics
``mlkaps_gpu.space`` defines (its ``_constraints`` module docstring), so that a configuration is
valid in the header exactly when it is valid in Python (``tests/space/test_constraint_semantics.py``
compares them on random expressions and values).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import NoReturn

from mlkaps_gpu.space import (
    Constraint,
    ConstraintError,
    ConstraintWalker,
    is_string_constant,
    left_chain,
    operator_symbol,
)


def constraint_c_value(
    constraint: Constraint,
    name_of: Callable[[str], str],
    literal_of: Callable[[str, str], str],
    *,
    avoid: Collection[str] = (),
    indent: str = "    ",
) -> tuple[list[str], str]:
    """``constraint`` as C statements computing its value (a double, NaN when undefined), with
    the semantics the constraint language defines (``mlkaps_gpu.space``), operation by operation.

    Args:
        name_of: C expression of a parameter's value (a double; an enum for categoricals).
        literal_of: C constant of a categorical value, given ``(parameter_name, value)``.
        avoid: identifiers in scope where the statements go (arguments, locals): the
            statements' own locals are named differently.
        indent: one level of indentation.

    Returns:
        ``(lines, variable)``: statements (to place in a function body, after
        ``#include <math.h>``) and the name of the double they leave the value in.
    """
    writer = _CWriter(name_of, literal_of, avoid=avoid, indent=indent)
    result = writer.local("value")
    lines = [f"double {result};", "{"]
    body = writer.visit(constraint.tree.body)
    lines += [indent + line for line in [*body.lines, f"{result} = {body.value};"]]
    lines.append("}")
    return lines, result


def constraint_c_check(
    constraint: Constraint,
    name_of: Callable[[str], str],
    literal_of: Callable[[str, str], str],
    *,
    avoid: Collection[str] = (),
    indent: str = "    ",
    otherwise: str = "return 0;",
) -> list[str]:
    """The constraint as a C block that runs ``otherwise`` when the constraint does not
    hold (arguments as :func:`constraint_c_value`)."""
    lines, result = constraint_c_value(
        constraint, name_of, literal_of, avoid=[*avoid, "value"], indent=indent
    )
    return [
        "{",
        *(indent + line for line in lines),
        f"{indent}if (!({result} == {result} && {result} != 0.0)) {{",
        f"{indent * 2}{otherwise}",
        f"{indent}}}",
        "}",
    ]


@dataclass
class _CCode:
    """C statements and the C expression (an identifier or a literal) of their value."""

    lines: list[str]
    value: str


def _c_double(value: float) -> str:
    if math.isinf(value):
        return "HUGE_VAL" if value > 0 else "(-HUGE_VAL)"
    text = repr(float(value))
    return text if any(c in text for c in ".en") else text + ".0"


class _CWriter(ConstraintWalker[_CCode]):
    """Writes a checked constraint tree as C statements with the language's semantics.

    Every operation stores its result in a fresh local double, so nothing is evaluated twice
    and no expression nests deeper than one operation (compilers limit nesting, and a chained
    comparison written as nested expressions would repeat its middle operands); ``and``, ``or``
    and chained comparisons are flat sequences of ``if`` blocks guarded by a flag.
    """

    def __init__(
        self,
        name_of: Callable[[str], str],
        literal_of: Callable[[str, str], str],
        *,
        avoid: Collection[str],
        indent: str,
    ) -> None:
        self.name_of = name_of
        self.literal_of = literal_of
        self.avoid = set(avoid)
        self.indent = indent
        self.count = 0

    def local(self, hint: str = "t") -> str:
        while True:
            name = f"{hint}{self.count}"
            self.count += 1
            if name not in self.avoid:
                self.avoid.add(name)
                return name

    def _other(self, node: ast.AST) -> NoReturn:
        raise ConstraintError(f"cannot write {type(node).__name__} as C")

    def _constant(self, node: ast.Constant) -> _CCode:
        if isinstance(node.value, str):
            raise ConstraintError("string constant outside a comparison")
        value = node.value
        assert isinstance(value, (int, float)), "checked when parsed"
        number = _int_to_float(value) if isinstance(value, int) else float(value)
        return _CCode([], _c_double(number))

    def _name(self, node: ast.Name) -> _CCode:
        return _CCode([], f"({self.name_of(node.id)})")

    def _binary(self, node: ast.BinOp) -> _CCode:
        leftmost, chain = left_chain(node)  # a loop, not recursion, along a + b - c ...
        code = self.visit(leftmost)
        lines = list(code.lines)
        value = code.value
        for operation in chain:
            right = self.visit(operation.right)
            lines += right.lines
            result = self.local()
            lines += self._arithmetic(operation.op, value, right.value, result)
            value = result
        return _CCode(lines, value)

    def _arithmetic(self, op: ast.operator, a: str, b: str, r: str) -> list[str]:
        i = self.indent
        if isinstance(op, (ast.Add, ast.Sub, ast.Mult)):
            return [f"double {r} = {a} {operator_symbol(op)} {b};"]
        if isinstance(op, ast.Div):
            return [f"double {r} = ({b} == 0.0) ? NAN : {a} / {b};"]
        if isinstance(op, ast.FloorDiv):
            m, d, f = self.local("m"), self.local("d"), self.local("f")
            return [
                f"double {r} = NAN;",
                f"if ({b} != 0.0) {{",
                f"{i}double {m} = fmod({a}, {b});",
                f"{i}double {d} = ({a} - {m}) / {b};",
                f"{i}if ({m} != 0.0 && (({b} < 0.0) != ({m} < 0.0))) {{",
                f"{i * 2}{d} -= 1.0;",
                f"{i}}}",
                f"{i}if ({d} != 0.0) {{",
                f"{i * 2}double {f} = floor({d});",
                f"{i * 2}{r} = ({d} - {f} > 0.5) ? {f} + 1.0 : {f};",
                f"{i}}} else {{",
                f"{i * 2}{r} = copysign(0.0, {a} / {b});",
                f"{i}}}",
                "}",
            ]
        if isinstance(op, ast.Mod):
            m = self.local("m")
            return [
                f"double {r} = NAN;",
                f"if ({b} != 0.0) {{",
                f"{i}double {m} = fmod({a}, {b});",
                f"{i}if ({m} != 0.0) {{",
                f"{i * 2}{r} = (({b} < 0.0) != ({m} < 0.0)) ? {m} + {b} : {m};",
                f"{i}}} else {{",
                f"{i * 2}{r} = copysign(0.0, {b});",
                f"{i}}}",
                "}",
            ]
        assert isinstance(op, ast.Pow)
        x, k, p = self.local("x"), self.local("k"), self.local("p")
        return [
            f"double {r} = NAN;",
            f"if ({a} == {a} && {b} == {b} && !({a} == 0.0 && {b} < 0.0)) {{",
            f"{i}if ({b} == floor({b}) && fabs({b}) != HUGE_VAL) {{",
            f"{i * 2}double {x} = {a};",
            f"{i * 2}double {k} = fabs({b});",
            f"{i * 2}double {p} = 1.0;",
            f"{i * 2}while ({k} > 0.0) {{",
            f"{i * 3}if (fmod({k}, 2.0) == 1.0) {{",
            f"{i * 4}{p} *= {x};",
            f"{i * 3}}}",
            f"{i * 3}{x} *= {x};",
            f"{i * 3}{k} = floor({k} / 2.0);",
            f"{i * 2}}}",
            f"{i * 2}{r} = ({b} < 0.0) ? 1.0 / {p} : {p};",
            f"{i}}} else {{",
            f"{i * 2}{r} = pow({a}, {b});",
            f"{i}}}",
            "}",
        ]

    def _unary(self, node: ast.UnaryOp) -> _CCode:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        a, r = operand.value, self.local()
        if isinstance(node.op, ast.USub):
            return _CCode([*operand.lines, f"double {r} = -{a};"], r)
        line = f"double {r} = ({a} != {a}) ? {a} : (({a} == 0.0) ? 1.0 : 0.0);"
        return _CCode([*operand.lines, line], r)

    def _sequence(self, first: _CCode, rest: list[Callable[[str], list[str]]], go: str) -> _CCode:
        """``first``, then each of ``rest`` while the flag expression ``go`` (of the running
        result) holds; ``rest[i](result)`` writes the statements that update the result."""
        r = self.local()
        lines = [*first.lines, f"double {r} = {first.value};"]
        if not rest:
            return _CCode(lines, r)
        flag = self.local("go")
        lines.append(f"int {flag} = {go.format(r=r)};")
        for index, step in enumerate(rest):
            lines.append(f"if ({flag}) {{")
            lines += [self.indent + line for line in step(r)]
            if index < len(rest) - 1:
                lines.append(f"{self.indent}{flag} = {go.format(r=r)};")
            lines.append("}")
        return _CCode(lines, r)

    def _boolean(self, node: ast.BoolOp) -> _CCode:
        # and: go on while the value is defined and non-zero; or: while it is zero
        go = "({r} == {r} && {r} != 0.0)" if isinstance(node.op, ast.And) else "({r} == 0.0)"

        def step(value: ast.expr) -> Callable[[str], list[str]]:
            def write(r: str) -> list[str]:
                code = self.visit(value)
                return [*code.lines, f"{r} = {code.value};"]

            return write

        return self._sequence(self.visit(node.values[0]), [step(v) for v in node.values[1:]], go)

    def _comparison(self, left: ast.expr, op: ast.cmpop, right: ast.expr, a: str, b: str) -> str:
        symbol = operator_symbol(op)
        for name_node, constant in ((left, right), (right, left)):
            if (
                isinstance(name_node, ast.Name)
                and isinstance(constant, ast.Constant)
                and isinstance(constant.value, str)
            ):
                literal = self.literal_of(name_node.id, constant.value)
                enum = self.name_of(name_node.id)
                return f"((int)({enum}) {symbol} (int)({literal})) ? 1.0 : 0.0"
        return f"({a} != {a} || {b} != {b}) ? NAN : (({a} {symbol} {b}) ? 1.0 : 0.0)"

    def _operand(self, node: ast.expr) -> _CCode:
        if is_string_constant(node):  # categorical comparisons read names and constants directly
            return _CCode([], "0.0")
        return self.visit(node)

    def _compare(self, node: ast.Compare) -> _CCode:
        operands = [node.left, *node.comparators]
        # comparison i reads operands i and i + 1; a numeric one past the first reads operand i
        # from the carried local (categorical ones read names and constants directly)
        numeric = [not (is_string_constant(operands[i]) or is_string_constant(operands[i + 1]))
                   for i in range(len(node.ops))]  # fmt: skip
        first, second = self._operand(operands[0]), self._operand(operands[1])
        carry = self.local("c") if any(numeric[1:]) else ""
        lines = [*first.lines, *second.lines]
        if carry:
            lines.append(f"double {carry} = {second.value};")
        head = _CCode(
            lines,
            self._comparison(operands[0], node.ops[0], operands[1], first.value, second.value),
        )

        def step(index: int) -> Callable[[str], list[str]]:
            def write(r: str) -> list[str]:
                code = self._operand(operands[index + 1])
                text = self._comparison(
                    operands[index], node.ops[index], operands[index + 1], carry, code.value
                )
                lines = [*code.lines, f"{r} = {text};"]
                if any(numeric[index + 1 :]):
                    lines.append(f"{carry} = {code.value};")
                return lines

            return write

        go = "({r} == {r} && {r} != 0.0)"
        return self._sequence(head, [step(i) for i in range(1, len(node.ops))], go)

    def _call(self, node: ast.Call) -> _CCode:
        assert isinstance(node.func, ast.Name)
        arguments = [self.visit(a) for a in node.args]
        lines = [line for argument in arguments for line in argument.lines]
        if node.func.id == "abs":
            r = self.local()
            return _CCode([*lines, f"double {r} = fabs({arguments[0].value});"], r)
        r = self.local()
        lines.append(f"double {r} = {arguments[0].value};")
        better = "<" if node.func.id == "min" else ">"
        for argument in arguments[1:]:
            b = argument.value
            choice = f"(({b} {better} {r}) ? {b} : {r})"
            lines.append(f"{r} = ({r} != {r} || {b} != {b}) ? NAN : {choice};")
        return _CCode(lines, r)


def _int_to_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer literal beyond the double range
        return math.inf


__all__ = ["constraint_c_check", "constraint_c_value"]
