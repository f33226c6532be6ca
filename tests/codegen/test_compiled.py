"""Compiled headers: answers equal ``select`` bit for bit, strict C/C++/CUDA builds, linking."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import (
    CompileError,
    boundary_inputs,
    compile_check,
    example_call,
    render_header,
    render_model_header,
    verify_header,
)
from mlkaps_gpu.codegen import _codegen_table as codegen_table
from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees import DecisionModel, PerParameterSelector, tool_versions

pytestmark = pytest.mark.compiler


@pytest.fixture(scope="module")
def odd_names_selector() -> PerParameterSelector:
    """Parameter and value names that are C keywords, non-ASCII or clash after sanitising."""
    rng = np.random.default_rng(2)
    x = Parameter("x", "int", low=0, high=100)
    double = Parameter("double", "float", low=0.0, high=1.0)
    size = Parameter("größe", "categorical", values=("a-b", "a_b", "A.B", "7up"))
    klass = Parameter("class", "categorical", values=("panel-recursive", "x", "X"))
    flag = Parameter("int", "bool")
    switch = Parameter("on", "bool")
    table = pd.DataFrame(
        {
            "on": rng.random(200) < 0.3,
            "x": rng.integers(0, 101, 200),
            "double": rng.random(200),
            "größe": rng.choice(size.domain_values(), 200),
            "class": rng.choice(klass.domain_values(), 200),
            "int": rng.random(200) < 0.5,
        }
    )
    table.loc[table["on"], "class"] = "x"
    return PerParameterSelector(max_depth=4).fit(table, [x, double, size, switch], [klass, flag])


@pytest.fixture(scope="module")
def constant_selector(optima: pd.DataFrame, params) -> PerParameterSelector:
    only = Parameter("only", "int", values=(7,))
    always = Parameter("always", "bool")
    return PerParameterSelector().fit(
        optima.assign(only=7, always=True), [params.n], [only, always]
    )


def model_of(fixture: str, request: pytest.FixtureRequest) -> DecisionModel:
    value = request.getfixturevalue(fixture)
    return value if isinstance(value, DecisionModel) else value.model_


HEADERS = [
    "selector",
    "density_selector",
    "tiny_model",
    "odd_names_selector",
    "constant_selector",
    "joint_selector",
    "checked_selector",
]


def header_of(fixture: str, request: pytest.FixtureRequest, prefix: str = "mlkaps") -> str:
    value = request.getfixturevalue(fixture)
    if isinstance(value, DecisionModel):
        return render_model_header(value, prefix=prefix, versions=tool_versions())
    return render_header(value, prefix, provenance={"sample_hash": "deadbeef"})


# ------------------------------------------------------------------------ answers agree
def test_header_equals_select_on_boundary_inputs(selector: PerParameterSelector, tmp_path) -> None:
    table = boundary_inputs(selector, 10_000, np.random.default_rng(0))
    assert len(table) >= 10_000
    n = table["n"].to_numpy()
    assert (n > 2**24).sum() > 100 and n.max() == 2**63 - 1
    for estimator in selector.trees_.values():
        split = (estimator.tree_.children_left != -1) & (estimator.tree_.feature == 0)
        for threshold in estimator.tree_.threshold[split]:
            low, high = math.floor(threshold), math.ceil(threshold)
            assert {low - 1, low, high, high + 1} <= set(n.tolist())
    header = render_header(selector, "mlkaps")
    report = verify_header(selector, header, table, prefix="mlkaps", workdir=tmp_path)
    assert report.ok, str(report)
    assert report.n_rows == len(table)
    assert report.mismatches == {"block": 0, "algo": 0, "use_shared": 0, "unroll": 0}


@pytest.mark.parametrize("lookup", [True, False])
def test_float_input_with_nan_and_inf(
    density_selector: PerParameterSelector, lookup: bool, tmp_path
) -> None:
    table = boundary_inputs(density_selector, 3000, np.random.default_rng(1))
    density = table["density"].to_numpy()
    assert np.isnan(density).any() and np.isposinf(density).any() and np.isneginf(density).any()
    assert (np.abs(density) > 3.5e38).any()  # beyond float32: rounding overflows to inf
    header = render_header(density_selector, "dens", lookup=lookup)
    assert ("_leaf_branches(" in header) == lookup
    report = verify_header(density_selector, header, table, prefix="dens", workdir=tmp_path)
    assert report.ok, str(report)


def test_hand_built_model_compiled(
    tiny_model: DecisionModel, request, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = pd.concat(
        [
            pd.DataFrame(
                {
                    "size": [16777218, 16777219, 16777220, 100, 101],
                    "dtype": ["fp32", "fp-64", "fp32", "fp-64", "fp32"],
                    "load": [0.5, 0.5, np.nan, 0.1, 0.25],
                }
            ),
            boundary_inputs(tiny_model, 500, np.random.default_rng(4)),
        ],
        ignore_index=True,
    )
    header = header_of("tiny_model", request, prefix="tiny")
    assert "count +=" not in header  # trees of 3 leaves or fewer keep the nested ifs
    report = verify_header(tiny_model, header, table, prefix="tiny", workdir=tmp_path)
    assert report.ok, str(report)
    # the lookup form on the same trees: float32 corner thresholds, NaN, +-inf, overflow
    monkeypatch.setattr(codegen_table, "MIN_LEAVES", 2)
    lookup = render_model_header(tiny_model, prefix="tiny", versions=tool_versions())
    assert "count += v > t0[k];" in lookup and "_leaf_branches(x); /* NaN" in lookup
    report = verify_header(tiny_model, lookup, table, prefix="tiny", workdir=tmp_path)
    assert report.ok, str(report)
    nested = render_model_header(tiny_model, prefix="tiny", versions=tool_versions(), lookup=False)
    assert "count +=" not in nested
    report = verify_header(tiny_model, nested, table, prefix="tiny", workdir=tmp_path)
    assert report.ok, str(report)


def test_odd_names_compiled(odd_names_selector: PerParameterSelector, tmp_path) -> None:
    table = boundary_inputs(odd_names_selector, 500, np.random.default_rng(6))
    header = render_header(odd_names_selector, "odd")
    assert "ODD_GR__E_A_B_2" in header and "ODD_CLASS_X_2" in header
    report = verify_header(odd_names_selector, header, table, prefix="odd", workdir=tmp_path)
    assert report.ok, str(report)


def test_verifier_detects_a_header_without_float32_rounding(
    selector: PerParameterSelector, tmp_path
) -> None:
    header = render_header(selector, "mlkaps", lookup=False)  # (the lookup form rounds by itself)
    broken = header.replace("return (double)(float)value;", "return value;")
    assert broken != header
    table = boundary_inputs(selector, 0, np.random.default_rng(0))
    report = verify_header(selector, broken, table, prefix="mlkaps", workdir=tmp_path)
    assert not report.ok
    assert report.first_mismatches and report.first_mismatches[0]["inputs"]["n"] > 2**24


# ----------------------------------------------------------------------- strict builds
@pytest.mark.parametrize("fixture", HEADERS)
def test_compiles_as_strict_c99(fixture: str, request, strict_c, tmp_path) -> None:
    body = example_call(model_of(fixture, request), "mlkaps")
    assert compile_check(header_of(fixture, request), strict_c, body=body, workdir=tmp_path) == ""


@pytest.mark.parametrize("fixture", HEADERS)
def test_compiles_as_strict_cxx17(fixture: str, request, strict_cxx, tmp_path) -> None:
    body = example_call(model_of(fixture, request), "mlkaps")
    output = compile_check(
        header_of(fixture, request), strict_cxx, suffix=".cpp", body=body, workdir=tmp_path
    )
    assert output == ""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("fixture", ["density_selector", "joint_selector"])
def test_compiles_with_nvcc(fixture: str, request, tmp_path) -> None:
    body = example_call(model_of(fixture, request), "mlkaps", cuda=True)
    command = ["nvcc", "-std=c++17", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra"]
    compile_check(header_of(fixture, request), command, suffix=".cu", body=body, workdir=tmp_path)


def test_compile_check_reports_compiler_message(
    selector: PerParameterSelector, strict_c, tmp_path
) -> None:
    assert compile_check(render_header(selector, "mlkaps"), strict_c, workdir=tmp_path) == ""
    with pytest.raises(CompileError, match="undeclared|error"):
        compile_check("static int broken(void) { return missing; }\n", strict_c, workdir=tmp_path)


# ------------------------------------------------------------------------------ linking
def test_two_translation_units_link(selector: PerParameterSelector, tmp_path: Path) -> None:
    (tmp_path / "selector.h").write_text(render_header(selector, "mlkaps"), encoding="utf-8")
    for unit in ("first", "second"):
        (tmp_path / f"{unit}.c").write_text(
            '#include "selector.h"\n'
            f"mlkaps_config {unit}_pick(long long n, int gpu);\n"
            f"mlkaps_config {unit}_pick(long long n, int gpu)\n"
            "{\n    return mlkaps_select(n, (mlkaps_gpu_t)gpu);\n}\n",
            encoding="utf-8",
        )
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "selector.h"\n'
        "mlkaps_config first_pick(long long n, int gpu);\n"
        "mlkaps_config second_pick(long long n, int gpu);\n"
        "int main(void)\n{\n"
        "    mlkaps_config a = first_pick(1000LL, MLKAPS_GPU_A100);\n"
        "    mlkaps_config b = second_pick(50000000LL, MLKAPS_GPU_W6600);\n"
        '    printf("%lld %d %d %lld\\n", a.block, (int)a.algo, a.use_shared, a.unroll);\n'
        '    printf("%lld %d %d %lld\\n", b.block, (int)b.algo, b.use_shared, b.unroll);\n'
        "    return 0;\n}\n",
        encoding="utf-8",
    )
    program = tmp_path / "program"
    strict = ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
    sources = [str(tmp_path / name) for name in ("first.c", "second.c", "main.c")]
    subprocess.run([*strict, *sources, "-o", str(program)], check=True, cwd=tmp_path)
    printed = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout

    expected = selector.select(pd.DataFrame({"n": [1000, 50_000_000], "gpu": ["A100", "W6600"]}))
    algo = {name: code for code, name in enumerate(("tiled", "panel-recursive", "naive"))}
    lines = [
        f"{row.block} {algo[row.algo]} {int(row.use_shared)} {row.unroll}"
        for row in expected.itertuples()
    ]
    assert printed.splitlines() == lines


def test_verifier_detects_a_lookup_off_by_one_at_thresholds(
    selector: PerParameterSelector, tmp_path
) -> None:
    header = render_header(selector, "mlkaps")
    broken = header.replace("count += v > t", "count += v >= t")
    assert broken != header
    table = boundary_inputs(selector, 0, np.random.default_rng(0))
    report = verify_header(selector, broken, table, prefix="mlkaps", workdir=tmp_path)
    assert not report.ok


def test_verifier_detects_a_header_ignoring_nan(
    density_selector: PerParameterSelector, tmp_path
) -> None:
    header = render_header(density_selector, "dens")
    broken = header.replace(" || x[2] != x[2]", "")
    assert broken != header
    table = boundary_inputs(density_selector, 0, np.random.default_rng(0))
    report = verify_header(density_selector, broken, table, prefix="dens", workdir=tmp_path)
    assert not report.ok
    assert all(math.isnan(row["inputs"]["density"]) for row in report.first_mismatches)
