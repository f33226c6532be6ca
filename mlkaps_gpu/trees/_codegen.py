"""C code generation for decision models: a header-only selector that compiles as C99, C++17
and CUDA.

The layout is generic over :class:`~mlkaps_gpu.trees._model.DecisionModel`: each tree becomes a
function ``<prefix>_<tree>_leaf(const double *x)`` made of nested ``if``/``else`` that returns
a leaf index, and each design parameter a function ``<prefix>_<param>_value(int leaf)`` that
reads its per-leaf value table. ``<prefix>_select`` rounds the inputs to float32 features once,
calls every leaf function once and fills the configuration struct field by field.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterator, Mapping

import numpy as np

from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees._model import FLOAT32_MAX, DecisionModel, TreeStructure
from mlkaps_gpu.trees._names import InputNames, NamePlan, OutputNames

INDENT = "    "
_C_TYPES = {"int": "long long", "float": "double", "bool": "int"}
_INT64_MIN = -(2**63)


def double_literal(value: float) -> str:
    """A C double literal that reads back as exactly ``value`` (Python's shortest repr)."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"cannot write the non-finite value {number!r} as a C constant")
    text = repr(number)
    return text if any(c in text for c in ".e") else text + ".0"


def long_long_literal(value: int) -> str:
    """A C ``long long`` literal; INT64_MIN has no literal form and is written as an expression."""
    number = int(value)
    if number == _INT64_MIN:
        return "(-9223372036854775807LL - 1)"
    if not _INT64_MIN < number < 2**63:
        raise ValueError(f"{number} does not fit in a C long long")
    return f"{number}LL"


def comment_text(text: str) -> str:
    """Text safe inside a ``/* */`` comment on one line."""
    return " ".join(str(text).replace("*/", "* /").replace("/*", "/ *").split())


def c_type(parameter: Parameter, names: InputNames | OutputNames) -> str:
    """The C type of a parameter: long long, double, int (bool) or its enum type."""
    if parameter.kind == "categorical":
        assert names.enum_type is not None
        return names.enum_type
    return _C_TYPES[parameter.kind]


def value_literal(parameter: Parameter, names: OutputNames, code: int) -> str:
    """The C expression of the domain value with index ``code``."""
    if parameter.kind == "categorical":
        return names.enum_constants[code]
    value = parameter.domain_values()[code]
    if parameter.kind == "bool":
        return "1" if bool(value) else "0"
    if parameter.kind == "int":
        return long_long_literal(int(value))
    return double_literal(float(value))


def emit_leaf_function(
    tree: TreeStructure,
    name: str,
    hd_macro: str,
    nan_possible: list[bool],
) -> list[str]:
    """A function returning the leaf index of the feature vector ``x`` (nested if/else).

    ``x`` holds features already rounded to float32 (see the feature function), so each test is
    ``x[j] <= threshold`` exactly as scikit-learn's. A NaN feature (possible only where
    ``nan_possible[j]``) goes left where the tree says so, hence ``|| x[j] != x[j]`` there.
    """
    leaf_index = {int(node): index for index, node in enumerate(tree.leaf_nodes)}
    lines = [f"static inline {hd_macro} int {name}(const double *x)", "{"]
    if tree.n_leaves == 1:
        lines.append(f"{INDENT}(void)x; /* a single leaf: no test */")

    def walk(node: int, depth: int) -> Iterator[str]:
        pad = INDENT * depth
        left = int(tree.children_left[node])
        if left == -1:
            yield f"{pad}return {leaf_index[node]};"
            return
        feature = int(tree.feature[node])
        test = f"x[{feature}] <= {double_literal(tree.threshold[node])}"
        if nan_possible[feature] and bool(tree.nan_goes_left[node]):
            test += f" || x[{feature}] != x[{feature}]"
        yield f"{pad}if ({test}) {{"
        yield from walk(left, depth + 1)
        yield f"{pad}}} else {{"
        yield from walk(int(tree.children_right[node]), depth + 1)
        yield f"{pad}}}"

    lines.extend(walk(0, 1))
    lines.append("}")
    return lines


def emit_value_function(
    parameter: Parameter, names: OutputNames, codes: np.ndarray, hd_macro: str
) -> list[str]:
    """A function mapping a leaf index to the parameter's value (a switch over the leaves)."""
    literals = [value_literal(parameter, names, int(code)) for code in codes]
    lines = [
        f"static inline {hd_macro} {c_type(parameter, names)} {names.value_function}(int leaf)",
        "{",
        f"{INDENT}switch (leaf) {{",
    ]
    for index, literal in enumerate(literals[:-1]):
        lines.append(f"{INDENT}case {index}:")
        lines.append(f"{INDENT * 2}return {literal};")
    lines.append(f"{INDENT}default: /* leaf {len(literals) - 1} */")
    lines.append(f"{INDENT * 2}return {literals[-1]};")
    lines.append(f"{INDENT}}}")
    lines.append("}")
    return lines


def _describe(parameter: Parameter) -> str:
    if parameter.values is not None:
        shown = [str(v) for v in parameter.domain_values().tolist()]
        if len(shown) > 12:
            shown = [*shown[:6], "...", *shown[-3:]]
        return f"{parameter.name} ({parameter.kind}: {', '.join(shown)})"
    scale = ", log" if parameter.log else ""
    return f"{parameter.name} ({parameter.kind} in [{parameter.low}, {parameter.high}]{scale})"


def _header_comment(
    model: DecisionModel,
    plan: NamePlan,
    versions: Mapping[str, str],
    provenance: Mapping[str, str] | None,
) -> list[str]:
    tools = ", ".join(f"{name} {version}" for name, version in versions.items())
    lines = [
        f"Generated by mlkaps_gpu ({tools}). Do not edit: regenerate from the campaign.",
        f"Entry point: {plan.select_function}(); header-only, C99 / C++17 / CUDA.",
    ]
    if model.description:
        lines.append(f"Model: {model.description}")
    lines.append("Inputs: " + "; ".join(_describe(p) for p in model.inputs))
    lines.append("Design: " + "; ".join(_describe(p) for p in model.design))
    lines.append(
        "Features are rounded to float32 and compared with 'x <= threshold' in double, as"
        " scikit-learn does."
    )
    if any(p.kind == "float" for p in model.inputs):
        lines.append(
            "A NaN float input goes to the child scikit-learn chose for missing values (the"
            " larger one when training saw no NaN)."
        )
    for key, value in (provenance or {}).items():
        lines.append(f"{key}: {value}")
    wrapped = [
        piece
        for line in lines
        for piece in textwrap.wrap(
            comment_text(line), width=96, subsequent_indent="  ", break_on_hyphens=False
        )
    ]
    return ["/*", *(f" * {piece}" for piece in wrapped), " */"]


def _enum_lines(parameter: Parameter, names: InputNames | OutputNames) -> list[str]:
    assert names.enum_type is not None
    constants = names.enum_constants
    lines = [f"typedef enum {names.enum_type} {{"]
    values = parameter.domain_values().tolist()
    for code, constant in enumerate(constants):
        comma = "," if code < len(constants) - 1 else ""
        lines.append(f"{INDENT}{constant} = {code}{comma} /* {comment_text(values[code])} */")
    lines.append(f"}} {names.enum_type};")
    return lines


def _feature_expression(parameter: Parameter, argument: str, plan: NamePlan) -> str:
    if parameter.kind == "categorical":
        return f"(double){argument}"
    if parameter.kind == "bool":
        return f"(double)({argument} != 0)"
    return f"{plan.feature_function}((double){argument})"


def _feature_function(plan: NamePlan) -> list[str]:
    limit = double_literal(FLOAT32_MAX)
    return [
        "/* scikit-learn rounds every feature to float32 before comparing it with a double",
        " * threshold. Values beyond the float32 range (and NaN) are passed through unchanged:",
        " * they compare with every threshold as their float32 rounding (+-inf) would, and",
        " * converting them to float is not defined by the C standard. */",
        f"static inline {plan.hd_macro} double {plan.feature_function}(double value)",
        "{",
        f"{INDENT}if (!(value <= {limit} && value >= -{limit})) {{",
        f"{INDENT * 2}return value;",
        f"{INDENT}}}",
        f"{INDENT}return (double)(float)value;",
        "}",
    ]


def _select_function(model: DecisionModel, plan: NamePlan) -> list[str]:
    config, features, leaf = plan.locals
    arguments = ", ".join(
        f"{c_type(parameter, names)} {names.argument}"
        for parameter, names in zip(model.inputs, plan.inputs, strict=True)
    )
    lines = [
        f"static inline {plan.hd_macro} {plan.config_type} {plan.select_function}({arguments})",
        "{",
        f"{INDENT}{plan.config_type} {config};",
        f"{INDENT}double {features}[{len(model.inputs)}];",
        f"{INDENT}int {leaf};",
    ]
    for index, (parameter, names) in enumerate(zip(model.inputs, plan.inputs, strict=True)):
        expression = _feature_expression(parameter, names.argument, plan)
        lines.append(f"{INDENT}{features}[{index}] = {expression};")
    for tree_index, function in enumerate(plan.leaf_functions):
        lines.append(f"{INDENT}{leaf} = {function}({features});")
        for output, output_names in zip(model.outputs, plan.outputs, strict=True):
            if output.tree == tree_index:
                value = f"{output_names.value_function}({leaf})"
                lines.append(f"{INDENT}{config}.{output_names.field} = {value};")
    lines.append(f"{INDENT}return {config};")
    lines.append("}")
    return lines


def render_header(
    model: DecisionModel,
    *,
    prefix: str,
    versions: Mapping[str, str],
    provenance: Mapping[str, str] | None = None,
) -> str:
    """The header text of a decision model.

    Args:
        model: trees and per-leaf output tables.
        prefix: symbol prefix (validated: ``[A-Za-z_][A-Za-z0-9_]*``, not a keyword).
        versions: tool name -> version, listed in the top comment.
        provenance: extra ``key: value`` lines for the top comment, in the given order.

    Returns:
        The header, byte-identical for the same model and arguments.
    """
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    nan_possible = [parameter.kind == "float" for parameter in model.inputs]
    blocks: list[list[str]] = [
        _header_comment(model, plan, versions, provenance),
        [f"#ifndef {plan.guard}", f"#define {plan.guard}"],
        [
            "#ifdef __CUDACC__",
            f"#define {plan.hd_macro} __host__ __device__",
            "#else",
            f"#define {plan.hd_macro}",
            "#endif",
        ],
    ]
    for parameter, input_names in zip(model.inputs, plan.inputs, strict=True):
        if parameter.kind == "categorical":
            blocks.append(_enum_lines(parameter, input_names))
    for parameter, output_names in zip(model.design, plan.outputs, strict=True):
        if parameter.kind == "categorical":
            blocks.append(_enum_lines(parameter, output_names))
    struct = [f"typedef struct {plan.config_type} {{"]
    for parameter, output_names in zip(model.design, plan.outputs, strict=True):
        struct.append(f"{INDENT}{c_type(parameter, output_names)} {output_names.field};")
    struct.append(f"}} {plan.config_type};")
    blocks.append(struct)
    blocks.append(_feature_function(plan))
    for tree, function in zip(model.trees, plan.leaf_functions, strict=True):
        blocks.append(emit_leaf_function(tree, function, plan.hd_macro, nan_possible))
    for output, output_names in zip(model.outputs, plan.outputs, strict=True):
        blocks.append(
            emit_value_function(output.parameter, output_names, output.codes, plan.hd_macro)
        )
    blocks.append(_select_function(model, plan))
    blocks.append([f"#endif /* {plan.guard} */"])
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
