"""C code generation for decision models: a header-only selector that compiles as C99, C++17
and CUDA.

The layout is generic over :class:`~mlkaps_gpu.trees._model.DecisionModel`: each tree becomes a
function ``<prefix>_<tree>_leaf(const double *x)`` that returns a leaf index (nested
``if``/``else``, or, where the tree's cell table is small, a branch-free threshold count and table
lookup that defers to the nested form ``<prefix>_<tree>_leaf_branches`` for NaN and on the
device), and each design parameter a function ``<prefix>_<param>_value(int leaf)`` that
reads its per-leaf value table. ``<prefix>_select`` rounds the inputs to float32 features once,
calls every leaf function once and fills the configuration struct field by field.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from mlkaps_gpu.codegen._c_literals import (
    INDENT,
    c_type,
    comment_text,
    double_literal,
    value_literal,
)
from mlkaps_gpu.codegen._codegen_table import emit_table_leaf_function, table_layout
from mlkaps_gpu.codegen._codegen_validity import ValidityWriter
from mlkaps_gpu.codegen._names import InputNames, NamePlan, OutputNames, unique_name
from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees import FLOAT32_MAX, DecisionModel, Selector, TreeStructure, tool_versions


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
    parameter: Parameter,
    names: OutputNames,
    codes: np.ndarray,
    hd_macro: str,
    *,
    table: bool = False,
) -> list[str]:
    """A function mapping a leaf index to the parameter's value: a switch over the leaves, or
    with ``table`` a constant array read on the host (a switch's jump table mispredicts when
    the leaf varies from call to call) and the switch in device code."""
    literals = [value_literal(parameter, names, int(code)) for code in codes]
    c_result = c_type(parameter, names)
    lines = [f"static inline {hd_macro} {c_result} {names.value_function}(int leaf)", "{"]
    indent = INDENT
    if table:
        lines.append("#ifdef __CUDA_ARCH__")
    lines.append(f"{indent}switch (leaf) {{")
    for index, literal in enumerate(literals[:-1]):
        lines.append(f"{indent}case {index}:")
        lines.append(f"{indent * 2}return {literal};")
    lines.append(f"{indent}default: /* leaf {len(literals) - 1} */")
    lines.append(f"{indent * 2}return {literals[-1]};")
    lines.append(f"{indent}}}")
    if table:
        lines.append("#else")
        lines.append(f"{indent}{{")
        lines.append(f"{indent * 2}static const {c_result} values[{len(literals)}] = {{")
        per_line = 4 if parameter.kind == "categorical" else 8
        for start in range(0, len(literals), per_line):
            chunk = ", ".join(literals[start : start + per_line])
            last = start + per_line >= len(literals)
            lines.append(f"{indent * 3}{chunk}{'' if last else ','}")
        lines.append(f"{indent * 2}}};")
        lines.append(f"{indent * 2}return values[leaf];")
        lines.append(f"{indent}}}")
        lines.append("#endif")
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
    lines += _validity_comment(model, plan)
    if model.ranking is not None:
        lines.append(
            f"{plan.ranked_function}(inputs..., {plan.config_type} *out, int max) writes up to"
            f" max configurations, best first, and returns how many: {plan.select_function}()'s"
            f" answer, then the other {len(model.ranking.portfolio) - 1} configurations of this"
            " header in the order the inputs' leaf ranks them (fewest of its tuned points where"
            " they are invalid, then least predicted regret)"
            + (", without those that fail the constraints" if model.validity else "")
            + ". A library that cannot run the first at some inputs (a kernel it did not"
            " generate there) takes the first it can. Host code only."
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


def _validity_comment(model: DecisionModel, plan: NamePlan) -> list[str]:
    validity = model.validity
    if validity is None:
        return []
    names = plan.validity
    constraints = "; ".join(validity.constraints) or "none"
    lines = [
        f"Constraints: {constraints}.",
        f"{names.is_valid}(inputs..., &config) is 1 when every input and field lies in its"
        " domain and every constraint holds.",
    ]
    if validity.constraints and validity.constrained_design:
        searched = (
            f"every combination of {', '.join(p.name for p in validity.constrained_params)}"
            if validity.searches_product
            else f"{len(validity.candidate_codes())} combinations found in the optima"
        )
        lines += [
            f"{plan.select_function}() takes the trees' configuration ({names.tree_select}()),"
            " checks the constraints at the inputs clamped into their domain (a NaN float"
            " input becomes the low end; the trees see the inputs unclamped) and, when they"
            f" fail, returns {names.fallback}(): the valid configuration nearest to the trees'"
            " one (sum of value-code distances over the constrained parameters, ties to the"
            f" first) among {searched}. So no input inside the domain gets an invalid"
            " configuration unless none is valid there (then the trees' one is returned).",
        ]
    return lines


def enum_lines(parameter: Parameter, names: InputNames | OutputNames) -> list[str]:
    """The C ``typedef enum`` of a categorical parameter: one constant per value, numbered in
    the order of its domain, each with the value in a comment (single and multi-target
    headers both write it)."""
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


def _feature_lines(model: DecisionModel, plan: NamePlan, features: str) -> list[str]:
    """Statements filling the feature array ``features`` from the select arguments."""
    return [
        f"{INDENT}{features}[{index}] = {_feature_expression(parameter, names.argument, plan)};"
        for index, (parameter, names) in enumerate(zip(model.inputs, plan.inputs, strict=True))
    ]


def _select_arguments(model: DecisionModel, plan: NamePlan) -> list[str]:
    return [
        f"{c_type(parameter, names)} {names.argument}"
        for parameter, names in zip(model.inputs, plan.inputs, strict=True)
    ]


def _select_function(model: DecisionModel, plan: NamePlan, name: str) -> list[str]:
    """The trees' configuration: features once, each leaf function once, fields filled."""
    config, features, leaf = plan.locals
    arguments = ", ".join(_select_arguments(model, plan))
    lines = [
        f"static inline {plan.hd_macro} {plan.config_type} {name}({arguments})",
        "{",
        f"{INDENT}{plan.config_type} {config};",
        f"{INDENT}double {features}[{len(model.inputs)}];",
        f"{INDENT}int {leaf};",
    ]
    lines += _feature_lines(model, plan, features)
    for tree_index, function in enumerate(plan.leaf_functions):
        lines.append(f"{INDENT}{leaf} = {function}({features});")
        for output, output_names in zip(model.outputs, plan.outputs, strict=True):
            if output.tree == tree_index:
                value = f"{output_names.value_function}({leaf})"
                lines.append(f"{INDENT}{config}.{output_names.field} = {value};")
    lines.append(f"{INDENT}return {config};")
    lines.append("}")
    return lines


def _index_type(count: int) -> str:
    """The smallest unsigned C type that holds the indices 0 .. count - 1."""
    if count <= 256:
        return "unsigned char"
    return "unsigned short" if count <= 65536 else "unsigned int"


def _ranked_function(
    model: DecisionModel, plan: NamePlan, writer: ValidityWriter | None
) -> list[str]:
    """``<prefix>_ranked``: up to ``max`` configurations, best first (host code only: its
    tables are static locals).

    The first is ``<prefix>_select``'s answer; then the portfolio in the order the inputs'
    leaf ranks it, without the first and, where ``select`` checks constraints, without those
    that fail at the clamped inputs. :meth:`DecisionModel.ranked_codes` is the Python twin.
    """
    ranking = model.ranking
    assert ranking is not None and len(model.trees) == 1
    arguments = _select_arguments(model, plan)
    scope = {*plan.all_file_scope(), *(names.argument for names in plan.inputs)}
    _, features, leaf = plan.locals
    scope |= {features, leaf}
    out, most, count, k, candidate, portfolio, order = (
        unique_name(name, scope)
        for name in ("out", "max", "count", "k", "candidate", "portfolio", "order")
    )
    n_ranked = len(ranking.portfolio)
    lines = [
        f"static inline int {plan.ranked_function}({', '.join(arguments)}, "
        f"{plan.config_type} *{out}, int {most})",
        "{",
        f"{INDENT}static const {plan.config_type} {portfolio}[{n_ranked}] = {{",
    ]
    for index, codes in enumerate(ranking.portfolio):
        literals = [
            value_literal(parameter, names, int(code))
            for parameter, names, code in zip(model.design, plan.outputs, codes, strict=True)
        ]
        comma = "," if index < n_ranked - 1 else ""
        lines.append(f"{INDENT * 2}{{{', '.join(literals)}}}{comma}")
    lines.append(f"{INDENT}}};")
    index_type = _index_type(n_ranked)
    lines.append(
        f"{INDENT}static const {index_type} {order}[{len(ranking.order)}][{n_ranked}] = {{"
    )
    for index, row in enumerate(ranking.order):
        comma = "," if index < len(ranking.order) - 1 else ""
        lines.append(f"{INDENT * 2}{{{', '.join(str(int(r)) for r in row)}}}{comma}")
    lines += [
        f"{INDENT}}};",
        f"{INDENT}double {features}[{len(model.inputs)}];",
        f"{INDENT}int {leaf}, {k}, {count};",
    ]
    checks = writer is not None and writer.checks_in_select
    clamped: list[str] = []
    if checks:
        assert writer is not None
        clamping, clamped = writer.clamped_inputs(scope)
        lines += clamping
    call = ", ".join(names.argument for names in plan.inputs)
    lines += [
        f"{INDENT}if ({most} < 1) {{",
        f"{INDENT * 2}return 0;",
        f"{INDENT}}}",
        f"{INDENT}{out}[0] = {plan.select_function}({call});",
        f"{INDENT}{count} = 1;",
    ]
    lines += _feature_lines(model, plan, features)
    same = " && ".join(
        f"{candidate}->{names.field} == {out}[0].{names.field}" for names in plan.outputs
    )
    lines += [
        f"{INDENT}{leaf} = {plan.leaf_functions[0]}({features});",
        f"{INDENT}for ({k} = 0; {k} < {n_ranked} && {count} < {most}; ++{k}) {{",
        f"{INDENT * 2}const {plan.config_type} *{candidate} = &{portfolio}[{order}[{leaf}][{k}]];",
        f"{INDENT * 2}if ({same}) {{",
        f"{INDENT * 3}continue;",
        f"{INDENT * 2}}}",
    ]
    if checks:
        assert writer is not None
        satisfied = ", ".join([*clamped, candidate])
        lines += [
            f"{INDENT * 2}if (!{writer.names.satisfies}({satisfied})) {{",
            f"{INDENT * 3}continue;",
            f"{INDENT * 2}}}",
        ]
    lines += [
        f"{INDENT * 2}{out}[{count}] = *{candidate};",
        f"{INDENT * 2}{count} += 1;",
        f"{INDENT}}}",
        f"{INDENT}return {count};",
        "}",
    ]
    return lines


def _preamble_blocks(
    model: DecisionModel,
    plan: NamePlan,
    versions: Mapping[str, str],
    provenance: Mapping[str, str] | None,
    writer: ValidityWriter | None,
) -> list[list[str]]:
    """The top comment, the include guard (with ``<math.h>`` where the validity code needs it)
    and the ``__host__ __device__`` macro."""
    guard = [f"#ifndef {plan.guard}", f"#define {plan.guard}"]
    if writer is not None and writer.needs_math:
        guard += ["", "#include <math.h>"]
    return [
        _header_comment(model, plan, versions, provenance),
        guard,
        [
            "#ifdef __CUDACC__",
            f"#define {plan.hd_macro} __host__ __device__",
            "#else",
            f"#define {plan.hd_macro}",
            "#endif",
        ],
    ]


def _type_blocks(model: DecisionModel, plan: NamePlan) -> list[list[str]]:
    """The enums of categorical inputs and design parameters, then the configuration struct."""
    blocks = [
        enum_lines(parameter, input_names)
        for parameter, input_names in zip(model.inputs, plan.inputs, strict=True)
        if parameter.kind == "categorical"
    ]
    blocks += [
        enum_lines(parameter, output_names)
        for parameter, output_names in zip(model.design, plan.outputs, strict=True)
        if parameter.kind == "categorical"
    ]
    struct = [f"typedef struct {plan.config_type} {{"]
    for parameter, output_names in zip(model.design, plan.outputs, strict=True):
        struct.append(f"{INDENT}{c_type(parameter, output_names)} {output_names.field};")
    struct.append(f"}} {plan.config_type};")
    blocks.append(struct)
    return blocks


def _leaf_blocks(
    model: DecisionModel, plan: NamePlan, *, lookup: bool
) -> tuple[list[list[str]], list[bool]]:
    """Each tree's leaf function(s), and for each tree whether it got the table form.

    A tree with a table layout gets its nested form under the ``branches`` name and the table
    lookup under the leaf function's name; any other tree gets the nested form only.
    """
    nan_possible = [parameter.kind == "float" for parameter in model.inputs]
    blocks: list[list[str]] = []
    tabled = []
    for tree, function, branches in zip(
        model.trees, plan.leaf_functions, plan.branch_functions, strict=True
    ):
        layout = table_layout(tree, len(model.inputs)) if lookup else None
        tabled.append(layout is not None)
        if layout is None:
            blocks.append(emit_leaf_function(tree, function, plan.hd_macro, nan_possible))
            continue
        blocks.append(emit_leaf_function(tree, branches, plan.hd_macro, nan_possible))
        blocks.append(
            emit_table_leaf_function(tree, function, branches, plan.hd_macro, nan_possible, layout)
        )
    return blocks, tabled


def _select_blocks(
    model: DecisionModel, plan: NamePlan, writer: ValidityWriter | None
) -> list[list[str]]:
    """The validity code (if any) and the select function(s).

    Where the select function checks the constraints, the trees' configuration moves to the
    ``tree_select`` function and the checking select function calls it.
    """
    if writer is None:
        return [_select_function(model, plan, plan.select_function)]
    blocks = writer.blocks()
    if writer.checks_in_select:
        blocks.append(_select_function(model, plan, plan.validity.tree_select))
        blocks.append(writer.select_function(_select_arguments(model, plan)))
    else:
        blocks.append(_select_function(model, plan, plan.select_function))
    return blocks


def render_model_header(
    model: DecisionModel,
    *,
    prefix: str,
    versions: Mapping[str, str],
    provenance: Mapping[str, str] | None = None,
    lookup: bool = True,
) -> str:
    """The header text of a decision model.

    Args:
        model: trees and per-leaf output tables.
        prefix: symbol prefix (validated: ``[A-Za-z_][A-Za-z0-9_]*``, not a keyword).
        versions: tool name -> version, listed in the top comment.
        provenance: extra ``key: value`` lines for the top comment, in the given order.
        lookup: leaf functions as threshold counts + a cell table where the table is small
            (:mod:`~mlkaps_gpu.codegen._codegen_table`), the nested ``if`` form kept for NaN
            inputs and device code; False: nested ``if`` only.

    Returns:
        The header, byte-identical for the same model and arguments.
    """
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    writer = ValidityWriter(model, plan) if model.validity is not None else None
    blocks = _preamble_blocks(model, plan, versions, provenance, writer)
    blocks += _type_blocks(model, plan)
    blocks.append(_feature_function(plan))
    leaf_blocks, tabled = _leaf_blocks(model, plan, lookup=lookup)
    blocks += leaf_blocks
    for output, output_names in zip(model.outputs, plan.outputs, strict=True):
        blocks.append(
            emit_value_function(
                output.parameter,
                output_names,
                output.codes,
                plan.hd_macro,
                table=tabled[output.tree],
            )
        )
    blocks += _select_blocks(model, plan, writer)
    if model.ranking is not None:
        blocks.append(_ranked_function(model, plan, writer))
    blocks.append([f"#endif /* {plan.guard} */"])
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def render_header(
    selector: Selector | DecisionModel,
    prefix: str = "mlkaps",
    *,
    provenance: Mapping[str, Any] | None = None,
    lookup: bool = True,
) -> str:
    """The header-only C / C++ / CUDA selector of a fitted selector.

    Args:
        selector: a fitted :class:`~mlkaps_gpu.trees.Selector` (or its decision model).
        prefix: symbol prefix, ``[A-Za-z_][A-Za-z0-9_]*``, not a C keyword or libm name.
        provenance: extra ``key: value`` lines for the top comment (e.g. a sample hash).
        lookup: branch-free table lookup of the leaves where the table is small (host code;
            the nested ``if`` form is kept for NaN inputs and device code).

    Returns:
        The header text, byte-identical for the same selector and arguments.
    """
    model = selector if isinstance(selector, DecisionModel) else selector.fitted_model()
    lines = {str(key): str(value) for key, value in (provenance or {}).items()}
    return render_model_header(
        model, prefix=prefix, versions=tool_versions(), provenance=lines, lookup=lookup
    )
