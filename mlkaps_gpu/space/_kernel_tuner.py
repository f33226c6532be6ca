"""Kernel Tuner search spaces as design spaces: ``tune_params`` dicts and restriction strings.

Kernel Tuner writes restrictions as Python expressions (``"block_size_x * block_size_y <= 1024"``)
or as callables. Expression strings are translated to the safe constraint language: the same
syntax, plus ``x in [a, b]`` / ``x not in (...)`` (rewritten as ``==`` / ``!=`` chains) and the
constants ``True`` / ``False``; anything else (calls other than ``min max abs``, attribute access,
subscripts, comprehensions, lambdas) is refused with a message naming the restriction. Callables
cannot be translated and are refused. ``max_threads`` adds Kernel Tuner's implicit restriction
on the product of the block-size parameters present.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mlkaps_gpu.space._constraints import ConstraintError, parse_constraint
from mlkaps_gpu.space._parameters import Parameter, SpaceError
from mlkaps_gpu.space._space import Space

#: Kernel Tuner's default names of the thread-block dimensions.
BLOCK_SIZE_NAMES: tuple[str, ...] = ("block_size_x", "block_size_y", "block_size_z")


def _parameter(name: str, values: Any) -> Parameter:
    """The design parameter of one ``tune_params`` entry (int, float, bool or categorical)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise SpaceError(f"tune_params['{name}']: expected a list of values, got {values!r}")
    listed = list(values)
    if not listed:
        raise SpaceError(f"tune_params['{name}']: no values")
    if all(isinstance(v, bool) for v in listed):
        return Parameter(name, "bool", values=tuple(listed))
    if all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
        return Parameter(name, "int", values=tuple(listed))
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in listed):
        return Parameter(name, "float", values=tuple(float(v) for v in listed))
    if all(isinstance(v, str) for v in listed):
        return Parameter(name, "categorical", values=tuple(listed))
    raise SpaceError(
        f"tune_params['{name}']: values must be all ints, all numbers, all bools or all "
        f"strings, got {listed!r}"
    )


class _Translator(ast.NodeTransformer):
    """Rewrites the Python forms the constraint language lacks into forms it has."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:  # noqa: N802 - ast API
        self.generic_visit(node)
        if not any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            return node
        if len(node.ops) != 1 or not isinstance(node.comparators[0], ast.List | ast.Tuple):
            raise ValueError("'in' works only as 'name in [constant, ...]' here")
        options = node.comparators[0].elts
        if not options:
            raise ValueError("'in' an empty list")
        negate = isinstance(node.ops[0], ast.NotIn)
        comparisons: list[ast.expr] = [
            ast.Compare(node.left, [ast.NotEq() if negate else ast.Eq()], [option])
            for option in options
        ]
        if len(comparisons) == 1:
            return comparisons[0]
        return ast.BoolOp(ast.And() if negate else ast.Or(), comparisons)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:  # noqa: N802 - ast API
        if isinstance(node.value, bool):
            return ast.Constant(int(node.value))
        return node


def translate_restriction(text: str) -> str:
    """A Kernel Tuner restriction string in the constraint language (module docstring).

    Raises:
        ValueError: the expression uses a form that cannot be translated.
    """
    tree = ast.parse(text.strip(), mode="eval")
    return ast.unparse(ast.fix_missing_locations(_Translator().visit(tree)))


def checked_restriction(text: str, parameters: Mapping[str, Parameter], where: str) -> str:
    """A restriction translated (:func:`translate_restriction`) and parsed against
    ``parameters``.

    Raises:
        SpaceError: ``where``, the text and why it cannot be used.
    """
    try:
        translated = translate_restriction(text)
        parse_constraint(translated, parameters)
    except (SyntaxError, ValueError, ConstraintError) as error:
        raise SpaceError(f"{where} {text!r}: {error}") from None
    return translated


def _restriction_texts(restrictions: Any) -> list[str]:
    if restrictions is None:
        return []
    if isinstance(restrictions, str):
        return [restrictions]
    if callable(restrictions):
        raise SpaceError(
            "restrictions: a Python callable cannot be translated into the safe constraint "
            "language; write it as expression strings"
        )
    texts = list(restrictions)
    for index, item in enumerate(texts):
        if not isinstance(item, str):
            raise SpaceError(
                f"restrictions[{index}]: {item!r} is not an expression string (callables and "
                "lambdas cannot be translated into the safe constraint language)"
            )
    return texts


def space_from_kernel_tuner(
    tune_params: Mapping[str, Any],
    restrictions: str | Sequence[str] | None = None,
    *,
    inputs: Sequence[Parameter] = (),
    max_threads: int | None = None,
    block_size_names: Sequence[str] = BLOCK_SIZE_NAMES,
) -> Space:
    """The :class:`Space` of a Kernel Tuner search space (module docstring).

    Args:
        tune_params: Kernel Tuner's ``tune_params`` (name -> list of values).
        restrictions: expression strings (or one string), in Kernel Tuner's Python syntax.
        inputs: input parameters of the space (Kernel Tuner has none: its problem size is fixed).
        max_threads: when given, the product of the block-size parameters present must not
            exceed it (Kernel Tuner's implicit restriction with the device's thread limit).
        block_size_names: the names of the block-size parameters.

    Raises:
        SpaceError: a value list, a restriction or a callable that cannot be translated.
    """
    design = [_parameter(str(name), values) for name, values in tune_params.items()]
    parameters = {p.name: p for p in [*inputs, *design]}
    constraints: list[str] = []
    for index, text in enumerate(_restriction_texts(restrictions)):
        constraints.append(checked_restriction(text, parameters, f"restrictions[{index}]"))
    present = [name for name in block_size_names if name in parameters]
    if max_threads is not None and present:
        constraints.append(f"{' * '.join(present)} <= {int(max_threads)}")
    return Space(list(inputs), design, constraints)
