"""One header holding a selector per architecture, picked at compile time or by name.

Each target's selector is emitted as it would be on its own (:func:`render_header`) with the
prefix ``<prefix>_<target>``, so its symbols, include guard and host/device macro never clash with
another target's. After them come the common API, under ``<prefix>``:

* ``<prefix>_config`` and one common enum per categorical input / design parameter (the same
  names a single-target header of that prefix would use), with converters from each target's
  struct, field by field;
* ``<prefix>_select(inputs...)``: the target chosen by ``-DMLKAPS_TARGET_<NAME>`` (at most one),
  else the default target;
* ``<prefix>_select_target(const char *name, inputs..., <prefix>_config *out)``: the target of
  that name (ASCII case-insensitive), returning 0; for an unknown name (or NULL) it returns -1
  and fills ``out`` with the default target's answer. Host and device: the name comparison is
  an inline loop, not ``strcmp``;
* where every target's header ranks its configurations (joint trees, decision 0048),
  ``<prefix>_ranked(inputs..., <prefix>_config *out, int max)`` (the target of the macro) and
  ``<prefix>_ranked_target(const char *name, inputs..., out, max)`` (the named target; -1 and
  nothing written for an unknown name): that target's ``_ranked`` converted to the common
  struct, returning how many it wrote. Host code only, as each target's ranked function.

All targets must have identical input and design parameters (names, kinds, values, ranges),
with one exception: a categorical input that holds a single value in a target (a campaign that
measured one GPU) is a constant of that target, not a conflict. The target's own select gets its
only value; the common functions take that input only where some target has several values of
it (those targets must then agree on them), and drop it where every target has one.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mlkaps_gpu.codegen._c_literals import INDENT, c_type, comment_text
from mlkaps_gpu.codegen._codegen import enum_lines, render_header
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


def _one_valued(parameter: Parameter) -> bool:
    """A categorical input with a single value: a constant of its target."""
    return parameter.kind == "categorical" and len(parameter.domain_values()) == 1


def _common_inputs(models: Sequence[DecisionModel]) -> list[Parameter]:
    """Per input, the parameter of the first target holding several of its values (else the
    first target's one-valued parameter)."""
    return [
        next((p for p in column if not _one_valued(p)), column[0])
        for column in zip(*(m.inputs for m in models), strict=True)
    ]


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
                if role == "input" and (_one_valued(parameter) or _one_valued(parameter0)):
                    continue  # a constant of its target (module docstring)
                if parameter != parameter0:
                    raise MultiTargetError(
                        f"target '{target.name}' ({where}): {role} parameter "
                        f"'{parameter.name}' is {_describe(parameter)} but "
                        f"{_describe(parameter0)} in target '{first.name}' ({where0})"
                    )
    for column in zip(*(m.inputs for m in models), strict=True):
        several = [(t, p) for t, p in zip(targets, column, strict=True) if not _one_valued(p)]
        for target, parameter in several[1:]:
            if parameter != several[0][1]:
                raise MultiTargetError(
                    f"target '{target.name}': input parameter '{parameter.name}' is "
                    f"{_describe(parameter)} but {_describe(several[0][1])} in target "
                    f"'{several[0][0].name}'"
                )


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


def _check_distinct_macros(targets: Sequence[Target]) -> None:
    """Raise when two target names give the same ``MLKAPS_TARGET_`` macro."""
    seen: dict[str, str] = {}
    for target in targets:
        macro = target_macro(target.name)
        if macro in seen:
            raise MultiTargetError(
                f"target names '{seen[macro]}' and '{target.name}' both give the macro {macro};"
                " choose distinct names"
            )
        seen[macro] = target.name


def _default_index(targets: Sequence[Target], default: str | None) -> int:
    """Position of the default target: the first, or the one whose macro ``default`` gives."""
    if default is None:
        return 0
    wanted = target_macro(default)
    matches = [i for i, t in enumerate(targets) if target_macro(t.name) == wanted]
    if not matches:
        raise MultiTargetError(
            f"default target '{default}' is not one of {[t.name for t in targets]}"
        )
    return matches[0]


def _fitted_models(targets: Sequence[Target]) -> list[DecisionModel]:
    """Each target's decision model; raise for a selector that is not fitted."""
    models = []
    for target in targets:
        model = getattr(target.selector, "model_", None)
        if model is None:
            raise MultiTargetError(f"target '{target.name}': the selector is not fitted")
        models.append(model)
    return models


def _claim_symbols(
    targets: Sequence[Target], plans: Sequence[NamePlan], common: NamePlan, public: list[str]
) -> set[str]:
    """Every file-scope name of the targets' selectors and the common ``public`` names (plus
    the common enums and the target macros); raise where two would collide."""
    taken: set[str] = set()
    for plan in plans:
        for name in plan.all_file_scope():
            if name in taken:
                raise MultiTargetError(f"the symbol {name} would be defined by two targets")
            taken.add(name)
    public = list(public)
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
    return taken


@dataclass(frozen=True)
class _MultiPlan:
    """The targets of a multi-target header with every name its common part uses.

    ``arguments``, ``name_arg``, ``out_arg``, ``result`` and ``status`` are the arguments and
    locals of the common functions, chosen to shadow no file-scope name.
    """

    targets: Sequence[Target]
    identifiers: list[str]
    macros: list[str]
    models: list[DecisionModel]
    plans: list[NamePlan]
    common: NamePlan
    default_index: int
    guard: str
    select_target: str
    name_equals: str
    selected_name: str
    converters: list[str]
    common_inputs: list[Parameter]  # per input: the parameter the common functions take
    dropped: list[bool]  # per input: one-valued in every target, not taken by common functions
    arguments: list[str]
    name_arg: str
    out_arg: str
    result: str
    status: str
    #: the ranked functions (every target's model ranks its configurations), else empty:
    #: ``<prefix>_ranked``, ``<prefix>_ranked_target``, one converting helper per target,
    #: and the locals ``max``, ``count``, ``k`` and ``buffer``
    ranked: str = ""
    ranked_target: str = ""
    ranked_helpers: tuple[str, ...] = ()
    ranked_locals: tuple[str, ...] = ()

    @property
    def reference(self) -> DecisionModel:
        """The first target's model, whose parameters every target shares."""
        return self.models[0]

    @property
    def hd(self) -> str:
        """The common ``__host__ __device__`` macro."""
        return self.common.hd_macro

    @property
    def default_identifier(self) -> str:
        return self.identifiers[self.default_index]


def _plan(targets: Sequence[Target], prefix: str, default: str | None) -> _MultiPlan:
    """Check the targets (names, default, fitted, same parameters) and choose every name."""
    validate_prefix(prefix)
    if not targets:
        raise MultiTargetError("no targets to export")
    identifiers = [target_identifier(t.name) for t in targets]
    _check_distinct_macros(targets)
    default_index = _default_index(targets, default)
    models = _fitted_models(targets)
    _check_parameters(targets, models)
    reference = models[0]
    plans = [
        NamePlan.build(f"{prefix}_{ident}", m.inputs, m.design, m.tree_names)
        for ident, m in zip(identifiers, models, strict=True)
    ]
    common_inputs = _common_inputs(models)
    common = NamePlan.build(prefix, common_inputs, reference.design, ())
    guard = f"{prefix.upper()}_MULTI_TARGET_H_INCLUDED"
    select_target = f"{prefix}_select_target"
    public = [guard, common.hd_macro, common.config_type, common.select_function, select_target]
    ranks = all(m.ranking is not None and len(m.trees) == 1 for m in models)
    if ranks:
        public += [f"{prefix}_ranked", f"{prefix}_ranked_target"]
    taken = _claim_symbols(targets, plans, common, public)
    name_equals = unique_name(f"{prefix}_target_name_equals", taken)
    selected_name = unique_name(f"{prefix.upper()}_SELECTED_TARGET", taken)
    converters = [unique_name(f"{plan.prefix}_to_common", taken) for plan in plans]
    helpers = (
        tuple(unique_name(f"{plan.prefix}_ranked_to_common", taken) for plan in plans)
        if ranks
        else ()
    )
    # arguments and locals of the common functions shadow no file-scope name
    scope = set(taken)
    arguments = [unique_name(names.argument, scope) for names in common.inputs]
    name_arg, out_arg, result, status = (
        unique_name(n, scope) for n in ("name", "out", "result", "status")
    )
    ranked_locals = (
        tuple(unique_name(n, scope) for n in ("max", "count", "k", "buffer")) if ranks else ()
    )
    return _MultiPlan(
        targets=targets,
        identifiers=identifiers,
        macros=[target_macro(t.name) for t in targets],
        models=models,
        plans=plans,
        common=common,
        default_index=default_index,
        guard=guard,
        select_target=select_target,
        name_equals=name_equals,
        selected_name=selected_name,
        converters=converters,
        common_inputs=common_inputs,
        dropped=[_one_valued(p) for p in common_inputs],
        arguments=arguments,
        name_arg=name_arg,
        out_arg=out_arg,
        result=result,
        status=status,
        ranked=f"{prefix}_ranked" if ranks else "",
        ranked_target=f"{prefix}_ranked_target" if ranks else "",
        ranked_helpers=helpers,
        ranked_locals=ranked_locals,
    )


def _top_comment(mp: _MultiPlan) -> list[str]:
    """The header's comment: tools, how to choose a target, and one line per target."""
    versions = ", ".join(f"{k} {v}" for k, v in tool_versions().items())
    default_target = mp.targets[mp.default_index]
    spellings = [
        " / ".join(_spellings(t.name, i)) for t, i in zip(mp.targets, mp.identifiers, strict=True)
    ]
    select = mp.common.select_function
    comment = [
        f"Generated by mlkaps_gpu ({versions}). Do not edit: regenerate with mlkaps-gpu export.",
        f"Multi-target selector: {len(mp.targets)} architectures, header-only, C99 / C++17 / CUDA.",
        f"Compile-time choice: define at most one of {', '.join(mp.macros)}; then "
        f"{select}(inputs...) answers for that target. With none defined it"
        f" answers for the default target '{mp.default_identifier}'.",
        f"Run-time choice: {mp.select_target}(name, inputs..., &config) answers for the target"
        f" of that name (ASCII case-insensitive, sanitised or as given: "
        f"{', '.join(spellings)})"
        " and returns 0; for an unknown or NULL name"
        f" it returns -1 and fills config with the default target's"
        f" ('{mp.default_identifier}') answer. Host and device code.",
        f"{mp.selected_name} is the name of the target {select}() uses.",
        "Each target's own selector follows with its prefix, its own include guard and"
        " host/device macro; the common types and functions come last.",
    ]
    for target, ident, plan in zip(mp.targets, mp.identifiers, mp.plans, strict=True):
        details = "; ".join(f"{k}: {v}" for k, v in target.provenance.items())
        mark = " (default)" if target is default_target else ""
        line = f"Target {ident}{mark}: {target_macro(target.name)}, prefix {plan.prefix}"
        if details:
            line += f"; {details}"
        comment.append(line)
    return _comment(comment)


def _target_headers(mp: _MultiPlan) -> list[list[str]]:
    """Each target's own single-target header, under its prefix, as one block."""
    blocks = []
    for target, ident, plan in zip(mp.targets, mp.identifiers, mp.plans, strict=True):
        provenance = {"target": ident, **target.provenance}
        text = render_header(target.selector, plan.prefix, provenance=provenance)
        blocks.append([text.rstrip("\n")])
    return blocks


def _common_types(mp: _MultiPlan) -> list[list[str]]:
    """The check that at most one target macro is defined, the common host/device macro, the
    common enums and the common configuration struct."""
    reference, common = mp.reference, mp.common
    blocks = [
        [
            f"#if ({' + '.join(f'defined({m})' for m in mp.macros)}) > 1",
            f'#error "define at most one of {", ".join(mp.macros)}"',
            "#endif",
        ],
        [
            "#ifdef __CUDACC__",
            f"#define {mp.hd} __host__ __device__",
            "#else",
            f"#define {mp.hd}",
            "#endif",
        ],
    ]
    for parameter, names, dropped in zip(mp.common_inputs, common.inputs, mp.dropped, strict=True):
        if parameter.kind == "categorical" and not dropped:
            blocks.append(enum_lines(parameter, names))
    for parameter, output_names in zip(reference.design, common.outputs, strict=True):
        if parameter.kind == "categorical":
            blocks.append(enum_lines(parameter, output_names))
    struct = [f"typedef struct {common.config_type} {{"]
    for parameter, output_names in zip(reference.design, common.outputs, strict=True):
        struct.append(f"{INDENT}{c_type(parameter, output_names)} {output_names.field};")
    struct.append(f"}} {common.config_type};")
    blocks.append(struct)
    return blocks


def _converter(mp: _MultiPlan, index: int) -> list[str]:
    """The function converting target ``index``'s configuration to the common one."""
    plan, config, out = mp.plans[index], mp.common.config_type, mp.out_arg
    body = [
        f"static inline {mp.hd} {config} {mp.converters[index]}({plan.config_type} {mp.result})",
        "{",
        f"{INDENT}{config} {out};",
    ]
    for parameter, mine, theirs in zip(
        mp.reference.design, mp.common.outputs, plan.outputs, strict=True
    ):
        value = f"{mp.result}.{theirs.field}"
        if parameter.kind == "categorical":
            value = f"({c_type(parameter, mine)}){value}"
        body.append(f"{INDENT}{out}.{mine.field} = {value};")
    body += [f"{INDENT}return {out};", "}"]
    return body


def _input_parameters(mp: _MultiPlan) -> list[str]:
    """The common functions' input parameters (type and name), without the dropped ones."""
    return [
        f"{c_type(p, names)} {argument}"
        for p, names, argument, dropped in zip(
            mp.common_inputs, mp.common.inputs, mp.arguments, mp.dropped, strict=True
        )
        if not dropped
    ]


def _call(mp: _MultiPlan, index: int) -> str:
    """Target ``index``'s select function on the common arguments, converted to the common
    configuration (categorical inputs cast to the target's enums)."""
    plan = mp.plans[index]
    passed = _passed(mp, index)
    return f"{mp.converters[index]}({plan.select_function}({', '.join(passed)}))"


def _passed(mp: _MultiPlan, index: int) -> list[str]:
    """The common arguments as target ``index``'s functions take them (a one-valued input its
    only value, categorical inputs cast to the target's enums)."""
    plan, model = mp.plans[index], mp.models[index]
    return [
        names.enum_constants[0]
        if _one_valued(p)
        else f"({c_type(p, names)}){argument}"
        if p.kind == "categorical"
        else argument
        for p, names, argument in zip(model.inputs, plan.inputs, mp.arguments, strict=True)
    ]


def _ranked_helper(mp: _MultiPlan, index: int) -> list[str]:
    """Target ``index``'s ranked configurations, converted to the common configuration
    (host code, as the target's ranked function)."""
    plan, model = mp.plans[index], mp.models[index]
    assert model.ranking is not None
    most, count, k, buffer = mp.ranked_locals
    width = len(model.ranking.portfolio) + 1
    config, out = mp.common.config_type, mp.out_arg
    arguments = [*_input_parameters(mp), f"{config} *{out}", f"int {most}"]
    call = ", ".join([*_passed(mp, index), buffer, f"{most} < {width} ? {most} : {width}"])
    return [
        f"static inline int {mp.ranked_helpers[index]}({', '.join(arguments)})",
        "{",
        f"{INDENT}{plan.config_type} {buffer}[{width}];",
        f"{INDENT}int {count} = {plan.ranked_function}({call});",
        f"{INDENT}int {k};",
        f"{INDENT}for ({k} = 0; {k} < {count}; ++{k}) {{",
        f"{INDENT * 2}{out}[{k}] = {mp.converters[index]}({buffer}[{k}]);",
        f"{INDENT}}}",
        f"{INDENT}return {count};",
        "}",
    ]


def _ranked_call(mp: _MultiPlan, index: int) -> str:
    """Target ``index``'s helper on the common arguments, ``out`` and ``max``."""
    passed = [a for a, dropped in zip(mp.arguments, mp.dropped, strict=True) if not dropped]
    return f"{mp.ranked_helpers[index]}({', '.join([*passed, mp.out_arg, mp.ranked_locals[0]])})"


def _ranked_functions(mp: _MultiPlan) -> list[list[str]]:
    """``<prefix>_ranked`` (the target of the macro, else the default) and
    ``<prefix>_ranked_target`` (the named target; -1 and nothing written for an unknown
    name), host code only."""
    config, out, most = mp.common.config_type, mp.out_arg, mp.ranked_locals[0]
    inputs = _input_parameters(mp)
    entry = [
        f"static inline int {mp.ranked}({', '.join([*inputs, f'{config} *{out}', f'int {most}'])})",
        "{",
    ]
    for index, macro in enumerate(mp.macros):
        entry += [f"#{'if' if index == 0 else 'elif'} defined({macro})"]
        entry += [f"{INDENT}return {_ranked_call(mp, index)};"]
    entry += ["#else", f"{INDENT}return {_ranked_call(mp, mp.default_index)};", "#endif", "}"]
    arguments = [f"const char *{mp.name_arg}", *inputs, f"{config} *{out}", f"int {most}"]
    named = [
        "/* The named target's ranked configurations and how many; -1 and nothing written for"
        " an unknown or NULL name. */",
        f"static inline int {mp.ranked_target}({', '.join(arguments)})",
        "{",
    ]
    for index, ident in enumerate(mp.identifiers):
        test = " || ".join(
            f'{mp.name_equals}({mp.name_arg}, "{spelling}")'
            for spelling in _spellings(mp.targets[index].name, ident)
        )
        named += [f"{INDENT}if ({test}) {{", f"{INDENT * 2}return {_ranked_call(mp, index)};"]
        named += [f"{INDENT}}}"]
    named += [f"{INDENT}return -1;", "}"]
    return [entry, named]


def _compile_time_select(mp: _MultiPlan) -> list[list[str]]:
    """The ``<PREFIX>_SELECTED_TARGET`` name and ``<prefix>_select``, both following the
    target macro (else the default target)."""
    selected: list[str] = []
    entry = [
        f"static inline {mp.hd} {mp.common.config_type} {mp.common.select_function}"
        f"({', '.join(_input_parameters(mp)) or 'void'})",
        "{",
    ]
    for index, macro in enumerate(mp.macros):
        condition = f"#{'if' if index == 0 else 'elif'} defined({macro})"
        selected += [condition, f'#define {mp.selected_name} "{mp.identifiers[index]}"']
        entry += [condition, f"{INDENT}return {_call(mp, index)};"]
    selected += ["#else", f'#define {mp.selected_name} "{mp.default_identifier}"', "#endif"]
    entry += ["#else", f"{INDENT}return {_call(mp, mp.default_index)};", "#endif", "}"]
    return [selected, entry]


def _name_equals_function(hd: str, name: str) -> list[str]:
    """A case-insensitive ASCII string comparison usable in device code."""
    return [
        "/* 1 when the NUL-terminated ASCII strings are equal ignoring case (no strcmp: it",
        " * also runs in device code); 0 for a NULL name. */",
        f"static inline {hd} int {name}(const char *a, const char *b)",
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


def _select_target_function(mp: _MultiPlan) -> list[str]:
    """``<prefix>_select_target``: the named target's answer, or the default's and -1."""
    config, out, result, status = mp.common.config_type, mp.out_arg, mp.result, mp.status
    arguments = [f"const char *{mp.name_arg}", *_input_parameters(mp), f"{config} *{out}"]
    lines = [
        f"/* 0 and the named target's configuration; -1 and the default target's"
        f" ('{mp.default_identifier}') for an unknown or NULL name. */",
        f"static inline {mp.hd} int {mp.select_target}({', '.join(arguments)})",
        "{",
        f"{INDENT}{config} {result};",
        f"{INDENT}int {status} = 0;",
    ]
    for index, ident in enumerate(mp.identifiers):
        keyword = "if" if index == 0 else "} else if"
        test = " || ".join(
            f'{mp.name_equals}({mp.name_arg}, "{spelling}")'
            for spelling in _spellings(mp.targets[index].name, ident)
        )
        lines += [
            f"{INDENT}{keyword} ({test}) {{",
            f"{INDENT * 2}{result} = {_call(mp, index)};",
        ]
    lines += [
        f"{INDENT}}} else {{",
        f"{INDENT * 2}{result} = {_call(mp, mp.default_index)};",
        f"{INDENT * 2}{status} = -1;",
        f"{INDENT}}}",
        f"{INDENT}if ({out} != 0) {{",
        f"{INDENT * 2}*{out} = {result};",
        f"{INDENT}}}",
        f"{INDENT}return {status};",
        "}",
    ]
    return lines


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
    mp = _plan(targets, prefix, default)
    header = [_top_comment(mp), [f"#ifndef {mp.guard}", f"#define {mp.guard}"]]
    header += _target_headers(mp)
    header += _common_types(mp)
    header += [_converter(mp, index) for index in range(len(mp.plans))]
    header += _compile_time_select(mp)
    header.append(_name_equals_function(mp.hd, mp.name_equals))
    header.append(_select_target_function(mp))
    if mp.ranked:
        header += [_ranked_helper(mp, index) for index in range(len(mp.plans))]
        header += _ranked_functions(mp)
    header.append([f"#endif /* {mp.guard} */"])
    return "\n\n".join("\n".join(block) for block in header) + "\n"
