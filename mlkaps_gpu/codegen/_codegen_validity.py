"""C code of a model's :class:`~mlkaps_gpu.trees._validity.Validity`: the constraints, the
public ``<prefix>_is_valid``, the fallback search and the checked ``<prefix>_select``.

Functions written (all ``static inline`` and ``__host__ __device__`` under nvcc):

- ``<prefix>_<param>_code(value)``: the code of a design value, -1 outside the domain;
- ``<prefix>_<param>_value_of_code(code)`` (constrained design parameters): the inverse;
- ``<prefix>_<param>_candidate(k)`` (constrained parameters, when the fallback searches a list);
- ``<prefix>_satisfies(<constrained inputs as double or enum>, const config *)``: every
  constraint, as C statements with the constraint language's one semantics
  (:mod:`mlkaps_gpu.space`; NaN carries an undefined value);
- ``<prefix>_is_valid(<inputs>, const config *)``: inputs and configuration in their domains and
  every constraint satisfied (``Space.is_valid``);
- ``<prefix>_fallback(<constrained inputs>, config)``: the nearest valid candidate;
- ``<prefix>_tree_select(<inputs>)`` and ``<prefix>_select(<inputs>)``: the trees' answer, and
  that answer checked at the clamped inputs with the fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlkaps_gpu.codegen._c_literals import (
    INDENT,
    c_type,
    double_literal,
    long_long_literal,
    value_literal,
)
from mlkaps_gpu.codegen._constraint_c import constraint_c_check
from mlkaps_gpu.codegen._names import InputNames, NamePlan, unique_name
from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees import DecisionModel, Validity, clamp_bounds


def _argument_type(parameter: Parameter, names: InputNames) -> str:
    """Type of an input in the satisfies/fallback signatures: enum, or double."""
    return c_type(parameter, names) if parameter.kind == "categorical" else "double"


@dataclass(frozen=True)
class _FallbackLocals:
    """Local variable names of the fallback function (one per constrained parameter in
    ``targets`` and ``codes``)."""

    chosen: str
    best: str
    trial: str
    best_distance: str
    distance: str
    k: str
    targets: list[str]
    codes: list[str]


class ValidityWriter:
    """Writes the validity functions of one model (names from one :class:`NamePlan`)."""

    def __init__(self, model: DecisionModel, plan: NamePlan) -> None:
        assert model.validity is not None
        self.model = model
        self.validity: Validity = model.validity
        self.plan = plan
        self.names = plan.validity
        self.hd = plan.hd_macro
        self.config_local = plan.locals[0]
        self.constraint_text = self._constraint_text()

    # ---------------------------------------------------------------------------- helpers
    @property
    def checks_in_select(self) -> bool:
        """Whether ``select`` checks the trees' answer (some constraint mentions a design
        parameter; otherwise no configuration could be better than another)."""
        return bool(self.validity.constraints) and bool(self.validity.constrained_design)

    @property
    def needs_math(self) -> bool:
        """The constraints' C uses ``<math.h>`` (NAN, fmod, floor, pow...)."""
        return bool(self.validity.constraints)

    def _constrained_inputs(self) -> list[tuple[Parameter, InputNames]]:
        return [
            (self.model.inputs[i], self.plan.inputs[i]) for i in self.validity.constrained_inputs
        ]

    def _constraint_text(self) -> list[list[str]]:
        """Per constraint, the C block that returns 0 when it does not hold (the
        statements of :func:`~mlkaps_gpu.codegen.constraint_c_check`: the language's semantics)."""
        inputs = dict(zip((p.name for p in self.model.inputs), self.plan.inputs, strict=True))
        outputs = dict(zip((p.name for p in self.model.design), self.plan.outputs, strict=True))
        parameters = {p.name: p for p in (*self.model.inputs, *self.model.design)}

        def name_of(name: str) -> str:
            parameter = parameters[name]
            if name in inputs:
                return inputs[name].argument  # already a double (or an enum)
            field = f"{self.config_local}->{outputs[name].field}"
            if parameter.kind == "categorical":
                return field
            if parameter.kind == "bool":
                return f"(double)({field} != 0)"
            return f"(double){field}"

        def literal_of(name: str, value: str) -> str:
            names = inputs[name] if name in inputs else outputs[name]
            index = parameters[name].domain_values().tolist().index(value)
            return names.enum_constants[index]

        scope = {
            *self.plan.all_file_scope(),
            *(names.argument for _, names in self._constrained_inputs()),
            self.config_local,
        }
        return [
            constraint_c_check(constraint, name_of, literal_of, avoid=scope, indent=INDENT)
            for constraint in self.validity.parsed()
        ]

    # -------------------------------------------------------------------------- functions
    def code_function(self, index: int) -> list[str]:
        """Value -> code of design parameter ``index`` (-1 outside the domain)."""
        parameter = self.model.design[index]
        names = self.plan.outputs[index]
        name = self.names.code_functions[index]
        head = [f"static inline {self.hd} int {name}({c_type(parameter, names)} value)", "{"]
        if parameter.kind == "categorical":
            count = parameter.n_values
            return [
                *head,
                f"{INDENT}return ((int)value >= 0 && (int)value < {count}) ? (int)value : -1;",
                "}",
            ]
        body: list[str] = []
        domain = parameter.domain_values()
        if parameter.kind == "int":
            body.append(f"{INDENT}switch (value) {{")
            for code, value in enumerate(domain.tolist()):
                body.append(f"{INDENT}case {long_long_literal(int(value))}:")
                body.append(f"{INDENT * 2}return {code};")
            body += [f"{INDENT}default:", f"{INDENT * 2}return -1;", f"{INDENT}}}"]
        elif parameter.kind == "bool":
            for code, value in enumerate(domain.tolist()):
                body.append(f"{INDENT}if ((value != 0) == {int(bool(value))}) {{")
                body += [f"{INDENT * 2}return {code};", f"{INDENT}}}"]
            body.append(f"{INDENT}return -1;")
        else:
            for code, value in enumerate(domain.tolist()):
                body.append(f"{INDENT}if (value == {double_literal(float(value))}) {{")
                body += [f"{INDENT * 2}return {code};", f"{INDENT}}}"]
            body.append(f"{INDENT}return -1;")
        return [*head, *body, "}"]

    def value_of_code_function(self, index: int) -> list[str]:
        parameter = self.model.design[index]
        names = self.plan.outputs[index]
        name = self.names.value_of_code[index]
        literals = [value_literal(parameter, names, code) for code in range(parameter.n_values)]
        lines = [
            f"static inline {self.hd} {c_type(parameter, names)} {name}(int code)",
            "{",
            f"{INDENT}switch (code) {{",
        ]
        for code, literal in enumerate(literals[:-1]):
            lines += [f"{INDENT}case {code}:", f"{INDENT * 2}return {literal};"]
        lines += [f"{INDENT}default:", f"{INDENT * 2}return {literals[-1]};", f"{INDENT}}}", "}"]
        return lines

    def candidate_function(self, column: int, codes: np.ndarray) -> list[str]:
        """Fallback candidate ``k`` -> code of the ``column``-th constrained parameter."""
        index = self.validity.constrained_design[column]
        name = self.names.candidate_functions[index]
        lines = [f"static inline {self.hd} int {name}(int k)", "{", f"{INDENT}switch (k) {{"]
        for k, code in enumerate(codes[:-1].tolist()):
            lines += [f"{INDENT}case {k}:", f"{INDENT * 2}return {code};"]
        lines += [f"{INDENT}default:", f"{INDENT * 2}return {int(codes[-1])};", f"{INDENT}}}", "}"]
        return lines

    def _signature_arguments(self) -> list[str]:
        return [
            f"{_argument_type(parameter, names)} {names.argument}"
            for parameter, names in self._constrained_inputs()
        ]

    def satisfies_function(self) -> list[str]:
        arguments = [
            *self._signature_arguments(),
            f"const {self.plan.config_type} *{self.config_local}",
        ]
        lines = [
            "/* Every constraint, at the given inputs (numeric ones as double). */",
            f"static inline {self.hd} int {self.names.satisfies}({', '.join(arguments)})",
            "{",
        ]
        if not self.validity.constrained_design:
            lines.append(f"{INDENT}(void){self.config_local};")
        for block in self.constraint_text:
            lines += [INDENT + line for line in block]
        lines.append(f"{INDENT}return 1;")
        lines.append("}")
        return lines

    def _input_domain_test(self, parameter: Parameter, argument: str) -> str:
        if parameter.kind == "categorical":
            return f"((int){argument} >= 0 && (int){argument} < {parameter.n_values})"
        domain = parameter.domain_values()
        if parameter.kind == "bool":
            tests = [f"({argument} != 0) == {int(bool(v))}" for v in domain.tolist()]
            return "(" + " || ".join(tests) + ")"

        def literal(value: float) -> str:
            if parameter.kind == "int":
                return long_long_literal(int(value))
            return double_literal(value)

        if parameter.values is not None:
            tests = [f"{argument} == {literal(v)}" for v in domain.tolist()]
            return "(" + " || ".join(tests) + ")"
        bounds = clamp_bounds(parameter)
        assert bounds is not None
        return f"({argument} >= {literal(bounds[0])} && {argument} <= {literal(bounds[1])})"

    def _as_double(self, parameter: Parameter, argument: str) -> str:
        if parameter.kind == "categorical":
            return argument
        if parameter.kind == "bool":
            return f"(double)({argument} != 0)"
        return f"(double){argument}"

    def is_valid_function(self) -> list[str]:
        config = self.config_local
        arguments = [
            f"{c_type(p, n)} {n.argument}"
            for p, n in zip(self.model.inputs, self.plan.inputs, strict=True)
        ]
        arguments.append(f"const {self.plan.config_type} *{config}")
        lines = [
            "/* 1 when every input and every field of the configuration lies in its domain and",
            " * every constraint holds (no clamping here), else 0. */",
            f"static inline {self.hd} int {self.names.is_valid}({', '.join(arguments)})",
            "{",
        ]
        for parameter, names in zip(self.model.inputs, self.plan.inputs, strict=True):
            test = self._input_domain_test(parameter, names.argument)
            lines += [f"{INDENT}if (!{test}) {{", f"{INDENT * 2}return 0;", f"{INDENT}}}"]
        for index, output in enumerate(self.plan.outputs):
            function = self.names.code_functions[index]
            lines += [
                f"{INDENT}if ({function}({config}->{output.field}) < 0) {{",
                f"{INDENT * 2}return 0;",
                f"{INDENT}}}",
            ]
        call = [
            self._as_double(parameter, names.argument)
            for parameter, names in self._constrained_inputs()
        ]
        lines.append(f"{INDENT}return {self.names.satisfies}({', '.join([*call, config])});")
        lines.append("}")
        return lines

    def _fallback_locals(self) -> _FallbackLocals:
        """The fallback's local names, unique against file-scope names and its arguments."""
        plan = self.plan
        n_constrained = len(self.validity.constrained_design)
        scope = set(plan.all_file_scope()) | {n.argument for _, n in self._constrained_inputs()}
        chosen = unique_name("chosen", scope)
        best, trial = unique_name("best", scope), unique_name("trial", scope)
        best_distance = unique_name("best_distance", scope)
        distance, k = unique_name("distance", scope), unique_name("k", scope)
        targets = [unique_name(f"target_{i}", scope) for i in range(n_constrained)]
        codes = [unique_name(f"code_{i}", scope) for i in range(n_constrained)]
        return _FallbackLocals(chosen, best, trial, best_distance, distance, k, targets, codes)

    def _fallback_decode_candidate(self, names: _FallbackLocals) -> list[str]:
        """Loop body: candidate ``k``'s codes (from the product's mixed radix, or from the
        candidate functions) and its values written into ``trial``."""
        validity, k = self.validity, names.k
        positions = validity.constrained_design
        sizes = [validity.design[i].n_values for i in positions]
        lines = []
        for column, (code, index) in enumerate(zip(names.codes, positions, strict=True)):
            if validity.searches_product:
                stride = int(np.prod(sizes[column + 1 :], dtype=np.int64))
                source = (
                    f"({k} / {stride}) % {sizes[column]}"
                    if stride > 1
                    else f"{k} % {sizes[column]}"
                )
            else:
                source = f"{self.names.candidate_functions[index]}({k})"
            field = self.plan.outputs[index].field
            lines.append(f"{INDENT * 2}{code} = {source};")
            lines.append(
                f"{INDENT * 2}{names.trial}.{field} = {self.names.value_of_code[index]}({code});"
            )
        return lines

    def _fallback_keep_nearest(self, names: _FallbackLocals) -> list[str]:
        """Loop body: skip an invalid ``trial``, keep it when nearer than the best so far,
        stop at distance 1; then the loop's end and the function's."""
        call = [n.argument for _, n in self._constrained_inputs()] + [f"&{names.trial}"]
        terms = " + ".join(
            f"({code} > {target} ? {code} - {target} : {target} - {code})"
            for code, target in zip(names.codes, names.targets, strict=True)
        )
        best, best_distance, distance = names.best, names.best_distance, names.distance
        return [
            f"{INDENT * 2}if (!{self.names.satisfies}({', '.join(call)})) {{",
            f"{INDENT * 3}continue;",
            f"{INDENT * 2}}}",
            f"{INDENT * 2}{distance} = {terms};",
            f"{INDENT * 2}if ({best_distance} < 0 || {distance} < {best_distance}) {{",
            f"{INDENT * 3}{best} = {names.trial};",
            f"{INDENT * 3}{best_distance} = {distance};",
            f"{INDENT * 3}if ({distance} <= 1) {{",
            f"{INDENT * 4}break; /* 'chosen' is invalid: no valid candidate is nearer */",
            f"{INDENT * 3}}}",
            f"{INDENT * 2}}}",
            f"{INDENT}}}",
            f"{INDENT}return {best};",
            "}",
        ]

    def fallback_function(self) -> list[str]:
        """``<prefix>_fallback``: the valid candidate nearest to the trees' configuration."""
        plan = self.plan
        names = self._fallback_locals()
        chosen, k = names.chosen, names.k
        n_candidates = len(self.validity.candidate_codes())
        arguments = [*self._signature_arguments(), f"{plan.config_type} {chosen}"]
        lines = [
            "/* The valid candidate nearest to 'chosen' (sum of code distances of the",
            " * constrained parameters; ties: the first candidate); 'chosen' itself when no",
            " * candidate is valid. Called by the select function with an invalid 'chosen'. */",
            f"static inline {self.hd} {plan.config_type} {self.names.fallback}"
            f"({', '.join(arguments)})",
            "{",
            f"{INDENT}{plan.config_type} {names.best} = {chosen};",
            f"{INDENT}{plan.config_type} {names.trial} = {chosen};",
            f"{INDENT}int {names.best_distance} = -1;",
            f"{INDENT}int {names.distance};",
            f"{INDENT}int {k};",
        ]
        for target, code, index in zip(
            names.targets, names.codes, self.validity.constrained_design, strict=True
        ):
            field = plan.outputs[index].field
            lines.append(
                f"{INDENT}int {target} = {self.names.code_functions[index]}({chosen}.{field});"
            )
            lines.append(f"{INDENT}int {code};")
        lines.append(f"{INDENT}for ({k} = 0; {k} < {n_candidates}; ++{k}) {{")
        lines += self._fallback_decode_candidate(names)
        lines += self._fallback_keep_nearest(names)
        return lines

    def select_function(self, arguments: Sequence[str]) -> list[str]:
        """``<prefix>_select``: the trees' answer, checked at the clamped inputs."""
        plan = self.plan
        config = self.config_local
        scope = set(plan.all_file_scope()) | {n.argument for n in plan.inputs} | {config}
        call_arguments = ", ".join(n.argument for n in plan.inputs)
        lines = [
            f"static inline {self.hd} {plan.config_type} {plan.select_function}"
            f"({', '.join(arguments)})",
            "{",
            f"{INDENT}{plan.config_type} {config} = {self.names.tree_select}({call_arguments});",
        ]
        clamping, clamped = self.clamped_inputs(scope)
        lines += clamping
        satisfied = ", ".join([*clamped, f"&{config}"])
        fallback = ", ".join([*clamped, config])
        lines += [
            f"{INDENT}if (!{self.names.satisfies}({satisfied})) {{",
            f"{INDENT * 2}{config} = {self.names.fallback}({fallback});",
            f"{INDENT}}}",
            f"{INDENT}return {config};",
            "}",
        ]
        return lines

    def clamped_inputs(self, scope: set[str]) -> tuple[list[str], list[str]]:
        """Statements declaring each constrained numeric input clamped into its domain (a NaN
        becomes the low end; names avoid ``scope``, which records them), and the expression
        of every constrained input as the satisfies function takes it."""
        lines: list[str] = []
        clamped = []
        for parameter, names in self._constrained_inputs():
            bounds = clamp_bounds(parameter)
            if bounds is None:
                clamped.append(self._as_double(parameter, names.argument))
                continue
            local = unique_name(f"{names.argument}_clamped", scope)
            low, high = (double_literal(b) for b in bounds)
            lines += [
                f"{INDENT}double {local} = (double){names.argument};",
                f"{INDENT}if (!({local} >= {low})) {{ /* below the domain, or NaN */",
                f"{INDENT * 2}{local} = {low};",
                f"{INDENT}}}",
                f"{INDENT}if ({local} > {high}) {{",
                f"{INDENT * 2}{local} = {high};",
                f"{INDENT}}}",
            ]
            clamped.append(local)
        return lines, clamped

    def blocks(self) -> list[list[str]]:
        """Every validity block, in header order (before the select functions)."""
        blocks: list[list[str]] = []
        for index in range(len(self.model.design)):
            blocks.append(self.code_function(index))
        if self.checks_in_select:
            for index in self.validity.constrained_design:
                blocks.append(self.value_of_code_function(index))
            if not self.validity.searches_product:
                candidates = self.validity.candidate_codes()
                for column in range(candidates.shape[1]):
                    blocks.append(self.candidate_function(column, candidates[:, column]))
        blocks.append(self.satisfies_function())
        blocks.append(self.is_valid_function())
        if self.checks_in_select:
            blocks.append(self.fallback_function())
        return blocks
