"""Multi-target headers: one selector per architecture, by macro or by name, strict builds."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import (
    MultiTargetError,
    Target,
    boundary_inputs,
    compile_check,
    render_multi_header,
    target_macro,
)
from mlkaps_gpu.codegen._c_literals import double_literal, long_long_literal
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.codegen._names import NamePlan
from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees import PerParameterSelector, Selector
from mlkaps_gpu.trees._model import DecisionModel

SHIM = "mtshim"


# ------------------------------------------------------------------ helpers (used by campaign)
def by_name(
    header: str,
    model: DecisionModel,
    prefix: str,
    name: str,
    build_dir: Path | None,
    extra: Sequence[str] = (),
) -> CompiledHeader:
    """``<prefix>_select_target(name, ...)`` through cffi, dressed as a single-target header of
    prefix ``mtshim`` so that :class:`CompiledHeader` can call it on a table."""
    common = NamePlan.build(prefix, model.inputs, model.design, ())
    shim = NamePlan.build(SHIM, model.inputs, model.design, ())
    lines = [f"typedef {common.config_type} {shim.config_type};"]
    for mine, theirs in zip(common.inputs, shim.inputs, strict=True):
        if mine.enum_type is not None:
            lines.append(f"typedef {mine.enum_type} {theirs.enum_type};")
    arguments = ", ".join(
        f"{theirs.enum_type or _scalar(p)} {theirs.argument}"
        for p, theirs in zip(model.inputs, shim.inputs, strict=True)
    )
    passed = ", ".join(theirs.argument for theirs in shim.inputs)
    lines += [
        f"static {shim.config_type} {shim.select_function}({arguments})",
        "{",
        f"    {shim.config_type} c;",
        f'    (void){prefix}_select_target("{name}", {passed}, &c);',
        "    return c;",
        "}",
        *extra,  # more shim functions, after the shim's types
    ]
    return CompiledHeader(model, header + "\n".join(lines) + "\n", prefix=SHIM, build_dir=build_dir)


def ranked_by_name(
    header: str, model: DecisionModel, prefix: str, name: str, table: pd.DataFrame
) -> tuple[list[pd.DataFrame], np.ndarray]:
    """``<prefix>_ranked_target(name, ...)`` through cffi on the table of :func:`by_name`'s
    shim, dressed as the single-target ``mtshim_ranked`` of ``model`` (the target's own model:
    its ranking's width sizes the buffers)."""
    common = NamePlan.build(prefix, model.inputs, model.design, ())
    shim = NamePlan.build(SHIM, model.inputs, model.design, ("joint",))
    arguments = ", ".join(
        f"{theirs.enum_type or _scalar(p)} {theirs.argument}"
        for p, theirs in zip(model.inputs, shim.inputs, strict=True)
    )
    passed = ", ".join(theirs.argument for theirs in shim.inputs)
    lines = [
        f"static int {shim.ranked_function}({arguments}, {common.config_type} *out, int max)",
        "{",
        f'    return {prefix}_ranked_target("{name}", {passed}, out, max);',
        "}",
    ]
    return by_name(header, model, prefix, name, None, lines).ranked(table)


def _scalar(parameter: Parameter) -> str:
    return {"int": "long long", "float": "double", "bool": "int"}[parameter.kind]


def _literal(parameter: Parameter, value: object, names_enum: tuple[str, ...]) -> str:
    if parameter.kind == "categorical":
        return names_enum[list(parameter.domain_values().tolist()).index(value)]
    if parameter.kind == "bool":
        return "1" if bool(value) else "0"
    if parameter.kind == "int":
        return long_long_literal(int(value))  # type: ignore[call-overload]
    return double_literal(float(value))  # type: ignore[arg-type]


def finite_rows(model: DecisionModel, table: pd.DataFrame, size: int = 40) -> pd.DataFrame:
    """At most ``size`` rows of ``table`` whose float inputs are finite (C literals)."""
    keep = np.ones(len(table), dtype=bool)
    for parameter in model.inputs:
        if parameter.kind == "float":
            keep &= np.isfinite(table[parameter.name].to_numpy(dtype=float))
    table = table[keep]
    return table.sample(n=min(size, len(table)), random_state=0).reset_index(drop=True)


def program_answers(
    header: str,
    model: DecisionModel,
    prefix: str,
    table: pd.DataFrame,
    workdir: Path,
    defines: Sequence[str] = (),
    unknown: str = "no-such-target",
) -> tuple[list[list[float]], list[int], list[list[float]]]:
    """Compile (gcc -std=c99 strict) and run a program calling ``<prefix>_select`` on every row
    and ``<prefix>_select_target(unknown, ...)``; returns the fields of the first (categorical
    as codes), the statuses and the fields of the second."""
    plan = NamePlan.build(prefix, model.inputs, model.design, ())
    calls = []
    for _, row in table.iterrows():
        args = ", ".join(
            _literal(p, row[p.name], names.enum_constants)
            for p, names in zip(model.inputs, plan.inputs, strict=True)
        )
        calls.append(args)
    printed = " ".join("%.17g" for _ in model.design)
    fields = ", ".join(f"(double)c.{o.field}" for o in plan.outputs)
    body = ["#include <stdio.h>", '#include "multi.h"', "int main(void)", "{"]
    body.append(f"    {plan.config_type} c;")
    for args in calls:
        body.append(f"    c = {prefix}_select({args});")
        body.append(f'    printf("{printed}\\n", {fields});')
        body.append(f'    printf("%d\\n", {prefix}_select_target("{unknown}", {args}, &c));')
        body.append(f'    printf("{printed}\\n", {fields});')
    body += ["    return 0;", "}"]
    (workdir / "multi.h").write_text(header)
    source = workdir / "main.c"
    source.write_text("\n".join(body) + "\n")
    binary = workdir / "main"
    strict = ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
    flags = [f"-D{macro}" for macro in defines]
    subprocess.run(
        [*strict, *flags, str(source), "-o", str(binary), "-lm"],
        check=True,
        capture_output=True,
        cwd=workdir,
        timeout=120,
    )
    lines = subprocess.run(
        [str(binary)], check=True, capture_output=True, text=True, timeout=60
    ).stdout.splitlines()
    selected, statuses, fallback = [], [], []
    for i in range(0, len(lines), 3):
        selected.append([float(v) for v in lines[i].split()])
        statuses.append(int(lines[i + 1]))
        fallback.append([float(v) for v in lines[i + 2].split()])
    return selected, statuses, fallback


def codes_of(selector: Selector, table: pd.DataFrame) -> list[list[float]]:
    """The selector's answers as the program prints them (categorical as codes)."""
    answer = selector.select(table)
    columns = []
    for parameter in selector.model_.design:
        column = answer[parameter.name]
        if parameter.kind == "categorical":
            columns.append(parameter.codes(column).astype(float))
        else:
            columns.append(column.to_numpy(dtype=float))
    return np.column_stack(columns).tolist()


# ---------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def pair(optima: pd.DataFrame, selector: PerParameterSelector, params) -> list[Target]:
    shallow = PerParameterSelector(max_depth=2).fit(
        optima, [params.n, params.gpu], selector.model_.design
    )
    return [
        Target("A100", selector, provenance={"campaign": "deep"}),
        Target("w-6600", shallow, provenance={"campaign": "shallow"}),
    ]


def test_targets_differ(pair: list[Target], optima: pd.DataFrame) -> None:
    first, second = (t.selector.select(optima) for t in pair)
    assert not first.equals(second)


# ------------------------------------------------------------------------------ strict builds
@pytest.mark.compiler
@pytest.mark.parametrize("defines", [(), ("MLKAPS_TARGET_A100",), ("MLKAPS_TARGET_W_6600",)])
def test_compiles_strict(
    pair: list[Target], strict_c: list[str], strict_cxx: list[str], defines, tmp_path: Path
) -> None:
    header = render_multi_header(pair, prefix="multi")
    assert "MLKAPS_TARGET_W_6600" in header and "strcmp(" not in header
    model = pair[0].selector.model_
    plan = NamePlan.build("multi", model.inputs, model.design, ())
    call = (
        f"double use(void);\ndouble use(void)\n{{\n    {plan.config_type} c = multi_select("
        f"100LL, {plan.inputs[1].enum_constants[0]});\n    {plan.config_type} d;\n"
        f'    int s = multi_select_target("a100", 7LL, {plan.inputs[1].enum_constants[1]}, &d);\n'
        "    return (double)c.block + (double)d.unroll + (double)s;\n}\n"
    )
    flags = [f"-D{d}" for d in defines]
    compile_check(header, [*strict_c, *flags], body=call, workdir=tmp_path)
    compile_check(header, [*strict_cxx, *flags], suffix=".cpp", body=call, workdir=tmp_path)
    # two translation units including the header link together
    for index in (1, 2):
        (tmp_path / f"u{index}.c").write_text(
            '#include "multi.h"\n' + call.replace("use(", f"use{index}(")
        )
    (tmp_path / "multi.h").write_text(header)
    (tmp_path / "main.c").write_text(
        "double use1(void);\ndouble use2(void);\n"
        "int main(void) { return use1() == use2() ? 0 : 1; }\n"
    )
    subprocess.run(
        [*strict_c, *flags, "u1.c", "u2.c", "main.c", "-o", "linked", "-lm"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    if shutil.which("nvcc") and not defines:
        cuda = call.replace("double use(void);", "__host__ __device__ double use(void);").replace(
            "double use(void)\n", "__host__ __device__ double use(void)\n"
        )
        cuda += "__global__ void kernel(double *out) { out[0] = use(); }\n"
        compile_check(
            header,
            ["nvcc", "-std=c++17", "-Werror", "all-warnings"],
            suffix=".cu",
            body=cuda,
            workdir=tmp_path,
        )


@pytest.mark.compiler
def test_two_macros_are_an_error(pair: list[Target], strict_c: list[str], tmp_path) -> None:
    header = render_multi_header(pair, prefix="multi")
    flags = ["-DMLKAPS_TARGET_A100", "-DMLKAPS_TARGET_W_6600"]
    with pytest.raises(Exception, match="at most one"):
        compile_check(header, [*strict_c, *flags], workdir=tmp_path)


# ------------------------------------------------------------------------------ answers agree
@pytest.mark.compiler
def test_by_name_equals_each_selector(pair: list[Target], tmp_path: Path) -> None:
    header = render_multi_header(pair, prefix="multi", default="W-6600")
    model = pair[0].selector.model_
    table = boundary_inputs(pair[0].selector, 300, np.random.default_rng(3))
    for name, target in (("A100", pair[0]), ("w_6600", pair[1]), ("unknown", pair[1])):
        compiled = by_name(header, model, "multi", name, tmp_path / "build")
        expected = target.selector.select(table)
        pd.testing.assert_frame_equal(compiled(table), expected, check_dtype=False)


@pytest.mark.compiler
@pytest.mark.parametrize("macro", [None, "A100", "w-6600"])
def test_macro_selects_target(pair: list[Target], macro, tmp_path: Path) -> None:
    header = render_multi_header(pair, prefix="multi")
    model = pair[0].selector.model_
    table = finite_rows(model, boundary_inputs(pair[0].selector, 60, np.random.default_rng(5)))
    defines = [target_macro(macro)] if macro else []
    selected, statuses, fallback = program_answers(header, model, "multi", table, tmp_path, defines)
    expected_target = pair[1] if macro == "w-6600" else pair[0]
    assert selected == codes_of(expected_target.selector, table)
    assert statuses == [-1] * len(table)
    assert fallback == codes_of(pair[0].selector, table)  # the default: the first target


@pytest.mark.compiler
def test_unknown_name_answers_default(pair: list[Target], tmp_path: Path) -> None:
    header = render_multi_header(pair, prefix="multi", default="w-6600")
    model = pair[0].selector.model_
    table = finite_rows(model, boundary_inputs(pair[0].selector, 40, np.random.default_rng(8)))
    # compiled for A100, so select != default; the unknown name still answers the default
    selected, statuses, fallback = program_answers(
        header, model, "multi", table, tmp_path, ["MLKAPS_TARGET_A100"]
    )
    assert selected == codes_of(pair[0].selector, table)
    assert statuses == [-1] * len(table)
    assert fallback == codes_of(pair[1].selector, table)
    assert selected != fallback
    known, statuses, by_name = program_answers(
        header, model, "multi", table, tmp_path, unknown="A100"
    )
    assert statuses == [0] * len(table) and by_name == selected
    assert known == fallback  # no macro: the default target


# ------------------------------------------------------------------------------------ refusals
def test_differing_parameters_refused(pair: list[Target], optima: pd.DataFrame, params) -> None:
    other_block = Parameter("block", "int", values=(32, 64, 128, 512))
    design = [other_block, *pair[0].selector.model_.design[1:]]
    changed = optima.replace({"block": {256: 512}})
    odd = PerParameterSelector(max_depth=2).fit(changed, [params.n, params.gpu], design)
    targets = [pair[0], Target("W6600", odd, label="campaign 'w' in /x/w")]
    with pytest.raises(MultiTargetError, match=r"campaign 'w'.*design parameter 'block'"):
        render_multi_header(targets, prefix="multi")
    fewer = PerParameterSelector(max_depth=2).fit(
        optima, [params.n], pair[0].selector.model_.design[:1]
    )
    with pytest.raises(MultiTargetError, match="input parameters"):
        render_multi_header([pair[0], Target("B", fewer)], prefix="multi")


def test_name_errors(pair: list[Target]) -> None:
    clash = [pair[0], Target("a100", pair[1].selector)]
    with pytest.raises(MultiTargetError, match="MLKAPS_TARGET_A100"):
        render_multi_header(clash, prefix="multi")
    with pytest.raises(MultiTargetError, match="default target 'H100'"):
        render_multi_header(pair, prefix="multi", default="H100")
    with pytest.raises(ValueError, match="not a C identifier"):
        render_multi_header(pair, prefix="2x")
    with pytest.raises(MultiTargetError, match="no targets"):
        render_multi_header([], prefix="multi")
