"""One header holding a selector per architecture, picked at compile time or by name.

Each target's selector is emitted as it would be on its own (``selector.to_c``) with the prefix
``<prefix>_<target>``, so its symbols, include guard and host/device macro never clash with
another target's. After them come the common API, under ``<prefix>``:

* ``<prefix>_config`` and one common enum per categorical input / design parameter (the same
  names a single-target header of that prefix would use), with converters from each target's
  struct, field by field;
* ``<prefix>_select(inputs...)``: the target chosen by ``-DMLKAPS_TARGET_<NAME>`` (at most one),
  else the default target;
* ``<prefix>_select_target(const char *name, inputs..., <prefix>_config *out)``: the target of
  that name (ASCII case-insensitive), returning 0; for an unknown name (or NULL) it returns -1
  and fills ``out`` with the default target's answer. Host and device: the name comparison is
  an inline loop, not ``strcmp``.

All targets must have identical input and design parameters (names, kinds, values, ranges).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mlkaps_gpu.codegen._c_literals import INDENT, c_type, comment_text
from mlkaps_gpu.codegen._codegen import render_header
from mlkaps_gpu.codegen._names import (
    InputNames,
    NamePlan,
    OutputNames,
    sanitize,
    unique_name,
    validate_prefix,
)
from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees import DecisionModel, Selector, tool_versions

MACRO_PREFIX = "MLKAPS_TARGET_"


class MultiTargetError(ValueError):
    """The targets cannot share one header (differing parameters, clashing names...)."""


@dataclass(frozen=True)
class Target:
    """One architecture of a multi-target header.

    Args:
        name: target name (sanitised to a C identifier; its upper case names the macro).
        selector: the fitted selector of that architecture.
        label: where the target comes from, for error messages (e.g. a campaign directory).
        provenance: ``key: value`` lines for the header comments (campaign, environment...).
    """

    name: str
    selector: Selector
    label: str = ""
    provenance: Mapping[str, str] = field(default_factory=dict)


def target_identifier(name: str) -> str:
    """The C identifier of a target name (``'rx 6600'`` -> ``'rx_6600'``)."""
    return sanitize(str(name).strip())


def target_macro(name: str) -> str:
    """The macro selecting a target at compile time: ``MLKAPS_TARGET_<NAME>``."""
    return MACRO_PREFIX + target_identifier(name).upper()


def _spellings(name: str, ident: str) -> list[str]:
    """The names a target answers to at run time: its identifier, and the name as given when
    that differs and is printable ASCII without quotes or backslashes."""
    given = str(name).strip()
    safe = given.isascii() and given.isprintable() and not any(c in given for c in '"\\?')
    return [ident, given] if safe and given and given.upper() != ident.upper() else [ident]


def _describe(parameter: Parameter) -> str:
    if parameter.values is not None:
        return f"{parameter.kind} values {list(parameter.values)}"
    text = f"{parameter.kind} range [{parameter.low}, {parameter.high}]"
    if parameter.log:
        text += " log"
    if parameter.levels is not None:
        text += f" levels={parameter.levels}"
    return text


def _check_parameters(targets: Sequence[Target], models: Sequence[DecisionModel]) -> None:
    first, reference = targets[0], models[0]
    where0 = first.label or first.name
    for target, model in zip(targets[1:], models[1:], strict=True):
        where = target.label or target.name
        for role, mine, theirs in (
            ("input", model.inputs, reference.inputs),
            ("design", model.design, reference.design),
        ):
            names, names0 = [p.name for p in mine], [p.name for p in theirs]
            if names != names0:
                extra = sorted(set(names) ^ set(names0))
                what = f"parameter '{extra[0]}'" if extra else "the parameter order"
                raise MultiTargetError(
                    f"target '{target.name}' ({where}): {role} parameters {names} differ from "
                    f"{names0} of target '{first.name}' ({where0}): {what}"
                )
            for parameter, parameter0 in zip(mine, theirs, strict=True):
                if parameter != parameter0:
                    raise MultiTargetError(
                        f"target '{target.name}' ({where}): {role} parameter "
                        f"'{parameter.name}' is {_describe(parameter)} but "
                        f"{_describe(parameter0)} in target '{first.name}' ({where0})"
                    )


def _enum_lines(parameter: Parameter, names: InputNames | OutputNames) -> list[str]:
    assert names.enum_type is not None
    values = parameter.domain_values().tolist()
    lines = [f"typedef enum {names.enum_type} {{"]
    for code, constant in enumerate(names.enum_constants):
        comma = "," if code < len(names.enum_constants) - 1 else ""
        lines.append(f"{INDENT}{constant} = {code}{comma} /* {comment_text(values[code])} */")
    lines.append(f"}} {names.enum_type};")
    return lines


def _comment(lines: Sequence[str]) -> list[str]:
    wrapped = [
        piece
        for line in lines
        for piece in (
            textwrap.wrap(
                comment_text(line), width=96, subsequent_indent="  ", break_on_hyphens=False
            )
            or [""]
        )
    ]
    return ["/*", *(f" * {piece}".rstrip() for piece in wrapped), " */"]


def render_multi_header(
    targets: Sequence[Target], *, prefix: str, default: str | None = None
) -> str:
    """The header text of several targets' selectors (see the module docstring).

    Args:
        targets: at least one target; names must stay distinct once sanitised and upper-cased.
        prefix: common symbol prefix; target ``T`` uses ``<prefix>_T``.
        default: the target used without a ``MLKAPS_TARGET_`` macro and for unknown names
            (the first when ``None``).

    Raises:
        MultiTargetError: no targets, clashing names, unknown default, or differing parameters.
        ValueError: the prefix is not a valid C identifier.
    """
    validate_prefix(prefix)
    if not targets:
        raise MultiTargetError("no targets to export")
    identifiers = [target_identifier(t.name) for t in targets]
    seen: dict[str, str] = {}
    for target in targets:
        macro = target_macro(target.name)
        if macro in seen:
            raise MultiTargetError(
                f"target names '{seen[macro]}' and '{target.name}' both give the macro {macro};"
                " choose distinct names"
            )
        seen[macro] = target.name
    if default is None:
        default_index = 0
    else:
        wanted = target_macro(default)
        matches = [i for i, t in enumerate(targets) if target_macro(t.name) == wanted]
        if not matches:
            raise MultiTargetError(
                f"default target '{default}' is not one of {[t.name for t in targets]}"
            )
        default_index = matches[0]
    models = []
    for target in targets:
        model = getattr(target.selector, "model_", None)
        if model is None:
            raise MultiTargetError(f"target '{target.name}': the selector is not fitted")
        models.append(model)
    _check_parameters(targets, models)
    reference = models[0]

    plans = [
        NamePlan.build(f"{prefix}_{ident}", m.inputs, m.design, m.tree_names)
        for ident, m in zip(identifiers, models, strict=True)
    ]
    common = NamePlan.build(prefix, reference.inputs, reference.design, ())
    taken: set[str] = set()
    for plan in plans:
        for name in plan.all_file_scope():
            if name in taken:
                raise MultiTargetError(f"the symbol {name} would be defined by two targets")
            taken.add(name)
    guard = f"{prefix.upper()}_MULTI_TARGET_H_INCLUDED"
    select_target = f"{prefix}_select_target"
    public = [guard, common.hd_macro, common.config_type, common.select_function, select_target]
    enums: list[InputNames | OutputNames] = [*common.inputs, *common.outputs]
    for names in enums:
        if names.enum_type is not None:
            public += [names.enum_type, *names.enum_constants]
    public += [target_macro(t.name) for t in targets]
    for name in public:
        if name in taken:
            raise MultiTargetError(
                f"the common symbol {name} clashes with a target's symbol; choose another"
                " prefix or other target names"
            )
        taken.add(name)
    name_equals = unique_name(f"{prefix}_target_name_equals", taken)
    selected_name = unique_name(f"{prefix.upper()}_SELECTED_TARGET", taken)
    converters = [unique_name(f"{plan.prefix}_to_common", taken) for plan in plans]
    # arguments and locals of the common functions shadow no file-scope name
    scope = set(taken)
    arguments = [unique_name(names.argument, scope) for names in common.inputs]
    name_arg, out_arg, result, status = (
        unique_name(n, scope) for n in ("name", "out", "result", "status")
    )
    hd = common.hd_macro

    header: list[list[str]] = []
    versions = ", ".join(f"{k} {v}" for k, v in tool_versions().items())
    default_target = targets[default_index]
    spellings = [
        " / ".join(_spellings(t.name, i)) for t, i in zip(targets, identifiers, strict=True)
    ]
    comment = [
        f"Generated by mlkaps_gpu ({versions}). Do not edit: regenerate with mlkaps-gpu export.",
        f"Multi-target selector: {len(targets)} architectures, header-only, C99 / C++17 / CUDA.",
        f"Compile-time choice: define at most one of "
        f"{', '.join(target_macro(t.name) for t in targets)}; then "
        f"{common.select_function}(inputs...) answers for that target. With none defined it"
        f" answers for the default target '{identifiers[default_index]}'.",
        f"Run-time choice: {select_target}(name, inputs..., &config) answers for the target of"
        f" that name (ASCII case-insensitive, sanitised or as given: "
        f"{', '.join(spellings)})"
        " and returns 0; for an unknown or NULL name"
        f" it returns -1 and fills config with the default target's"
        f" ('{identifiers[default_index]}') answer. Host and device code.",
        f"{selected_name} is the name of the target {common.select_function}() uses.",
        "Each target's own selector follows with its prefix, its own include guard and"
        " host/device macro; the common types and functions come last.",
    ]
    for target, ident, plan in zip(targets, identifiers, plans, strict=True):
        details = "; ".join(f"{k}: {v}" for k, v in target.provenance.items())
        mark = " (default)" if target is default_target else ""
        lines = [f"Target {ident}{mark}: {target_macro(target.name)}, prefix {plan.prefix}"]
        if details:
            lines[0] += f"; {details}"
        comment += lines
    header.append(_comment(comment))
    header.append([f"#ifndef {guard}", f"#define {guard}"])
    for target, ident, plan in zip(targets, identifiers, plans, strict=True):
        provenance = {"target": ident, **target.provenance}
        text = render_header(target.selector, plan.prefix, provenance=provenance)
        header.append([text.rstrip("\n")])

    # compile-time choice
    macros = [target_macro(t.name) for t in targets]
    choice = [
        f"#if ({' + '.join(f'defined({m})' for m in macros)}) > 1",
        f'#error "define at most one of {", ".join(macros)}"',
        "#endif",
    ]
    header.append(choice)
    header.append(
        [
            "#ifdef __CUDACC__",
            f"#define {hd} __host__ __device__",
            "#else",
            f"#define {hd}",
            "#endif",
        ]
    )
    for parameter, names in zip(reference.inputs, common.inputs, strict=True):
        if parameter.kind == "categorical":
            header.append(_enum_lines(parameter, names))
    for parameter, output_names in zip(reference.design, common.outputs, strict=True):
        if parameter.kind == "categorical":
            header.append(_enum_lines(parameter, output_names))
    struct = [f"typedef struct {common.config_type} {{"]
    for parameter, output_names in zip(reference.design, common.outputs, strict=True):
        struct.append(f"{INDENT}{c_type(parameter, output_names)} {output_names.field};")
    struct.append(f"}} {common.config_type};")
    header.append(struct)

    for plan, converter in zip(plans, converters, strict=True):
        body = [
            f"static inline {hd} {common.config_type} {converter}({plan.config_type} {result})",
            "{",
            f"{INDENT}{common.config_type} {out_arg};",
        ]
        for parameter, mine, theirs in zip(
            reference.design, common.outputs, plan.outputs, strict=True
        ):
            value = f"{result}.{theirs.field}"
            if parameter.kind == "categorical":
                value = f"({c_type(parameter, mine)}){value}"
            body.append(f"{INDENT}{out_arg}.{mine.field} = {value};")
        body += [f"{INDENT}return {out_arg};", "}"]
        header.append(body)

    parameters = [
        f"{c_type(p, names)} {argument}"
        for p, names, argument in zip(reference.inputs, common.inputs, arguments, strict=True)
    ]

    def call(index: int) -> str:
        plan = plans[index]
        passed = [
            f"({c_type(p, names)}){argument}" if p.kind == "categorical" else argument
            for p, names, argument in zip(reference.inputs, plan.inputs, arguments, strict=True)
        ]
        return f"{converters[index]}({plan.select_function}({', '.join(passed)}))"

    select: list[str] = []
    for index, macro in enumerate(macros):
        select += [
            f"#{'if' if index == 0 else 'elif'} defined({macro})",
            f'#define {selected_name} "{identifiers[index]}"',
        ]
    select += ["#else", f'#define {selected_name} "{identifiers[default_index]}"', "#endif"]
    header.append(select)
    entry = [
        f"static inline {hd} {common.config_type} {common.select_function}"
        f"({', '.join(parameters)})",
        "{",
    ]
    for index, macro in enumerate(macros):
        entry += [
            f"#{'if' if index == 0 else 'elif'} defined({macro})",
            f"{INDENT}return {call(index)};",
        ]
    entry += ["#else", f"{INDENT}return {call(default_index)};", "#endif", "}"]
    header.append(entry)

    header.append(
        [
            "/* 1 when the NUL-terminated ASCII strings are equal ignoring case (no strcmp: it",
            " * also runs in device code); 0 for a NULL name. */",
            f"static inline {hd} int {name_equals}(const char *a, const char *b)",
            "{",
            f"{INDENT}if (a == 0) {{",
            f"{INDENT * 2}return 0;",
            f"{INDENT}}}",
            f"{INDENT}for (;; ++a, ++b) {{",
            f"{INDENT * 2}char x = *a;",
            f"{INDENT * 2}char y = *b;",
            f"{INDENT * 2}if (x >= 'a' && x <= 'z') {{",
            f"{INDENT * 3}x = (char)(x - 'a' + 'A');",
            f"{INDENT * 2}}}",
            f"{INDENT * 2}if (y >= 'a' && y <= 'z') {{",
            f"{INDENT * 3}y = (char)(y - 'a' + 'A');",
            f"{INDENT * 2}}}",
            f"{INDENT * 2}if (x != y) {{",
            f"{INDENT * 3}return 0;",
            f"{INDENT * 2}}}",
            f"{INDENT * 2}if (x == '\\0') {{",
            f"{INDENT * 3}return 1;",
            f"{INDENT * 2}}}",
            f"{INDENT}}}",
            "}",
        ]
    )
    by_name = [
        f"/* 0 and the named target's configuration; -1 and the default target's"
        f" ('{identifiers[default_index]}') for an unknown or NULL name. */",
        f"static inline {hd} int {select_target}"
        f"(const char *{name_arg}, {', '.join(parameters)}, {common.config_type} *{out_arg})",
        "{",
        f"{INDENT}{common.config_type} {result};",
        f"{INDENT}int {status} = 0;",
    ]
    for index, ident in enumerate(identifiers):
        keyword = "if" if index == 0 else "} else if"
        test = " || ".join(
            f'{name_equals}({name_arg}, "{spelling}")'
            for spelling in _spellings(targets[index].name, ident)
        )
        by_name += [
            f"{INDENT}{keyword} ({test}) {{",
            f"{INDENT * 2}{result} = {call(index)};",
        ]
    by_name += [
        f"{INDENT}}} else {{",
        f"{INDENT * 2}{result} = {call(default_index)};",
        f"{INDENT * 2}{status} = -1;",
        f"{INDENT}}}",
        f"{INDENT}if ({out_arg} != 0) {{",
        f"{INDENT * 2}*{out_arg} = {result};",
        f"{INDENT}}}",
        f"{INDENT}return {status};",
        "}",
    ]
    header.append(by_name)
    header.append([f"#endif /* {guard} */"])
    return "\n\n".join("\n".join(block) for block in header) + "\n"
