"""The tree of a checked constraint, as both of its meanings read it: the numpy evaluation
(:mod:`mlkaps_gpu.space._constraints`, where the semantics are defined) and the C statements of
generated headers (``mlkaps_gpu.codegen``). One dispatch over the node kinds, so that both accept
the same language, and the small readings of a node both need."""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod
from typing import Generic, NoReturn, TypeVar

_Result = TypeVar("_Result")


def left_chain(node: ast.BinOp) -> tuple[ast.expr, list[ast.BinOp]]:
    """``a + b - c`` as its leftmost operand and its operations, innermost first."""
    chain = []
    current: ast.expr = node
    while isinstance(current, ast.BinOp):
        chain.append(current)
        current = current.left
    chain.reverse()
    return current, chain


class ConstraintWalker(ABC, Generic[_Result]):
    """The one dispatch over the language's node kinds, shared by the checker (numpy closures,
    :mod:`mlkaps_gpu.space._constraints`) and the C writer (:mod:`mlkaps_gpu.codegen`), so that
    both accept the same whitelist: a constant, a name, an arithmetic
    or unary operation, ``and`` / ``or``, a comparison and a call each go to their method; any
    other node goes to :meth:`_other`, which refuses it."""

    def visit(self, node: ast.AST) -> _Result:
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
        self._other(node)

    @abstractmethod
    def _other(self, node: ast.AST) -> NoReturn:
        """Refuse a node outside the language."""

    @abstractmethod
    def _constant(self, node: ast.Constant) -> _Result: ...

    @abstractmethod
    def _name(self, node: ast.Name) -> _Result: ...

    @abstractmethod
    def _binary(self, node: ast.BinOp) -> _Result: ...

    @abstractmethod
    def _unary(self, node: ast.UnaryOp) -> _Result: ...

    @abstractmethod
    def _boolean(self, node: ast.BoolOp) -> _Result: ...

    @abstractmethod
    def _compare(self, node: ast.Compare) -> _Result: ...

    @abstractmethod
    def _call(self, node: ast.Call) -> _Result: ...


def is_string_constant(node: ast.expr) -> bool:
    """A string literal (compared with a categorical parameter only)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


__all__ = ["ConstraintWalker", "is_string_constant", "left_chain"]
