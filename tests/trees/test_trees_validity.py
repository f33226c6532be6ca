"""Run-time validity: Python semantics of the check and fallback, and the compiled C agreeing
with them (``select``) and with ``Space.is_valid`` (``is_valid``)."""

from __future__ import annotations

import dataclasses
import pickle
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import (
    NamePlan,
    boundary_inputs,
    compile_check,
    example_call,
    render_header,
    render_model_header,
    verify_header,
)
from mlkaps_gpu.codegen._verify_validity import verify_is_valid
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.trees import PerParameterSelector, Validity, constraint_violations, tool_versions
from mlkaps_gpu.trees._validity import clamp_column

STRICT_C = ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]


# ------------------------------------------------------------------------- Python semantics
def test_clamping_maps_nan_to_the_low_end() -> None:
    density = Parameter("density", "float", low=0.25, high=1.0)
    listed = Parameter("size", "int", values=(8, 64, 32))
    values = np.array([np.nan, -1.0, 0.5, 2.0, np.inf, -np.inf])
    np.testing.assert_array_equal(clamp_column(density, values), [0.25, 0.25, 0.5, 1.0, 1.0, 0.25])
    np.testing.assert_array_equal(clamp_column(listed, np.array([1, 40, 100])), [8, 40, 64])


def test_fallback_is_the_nearest_valid_configuration_first_on_ties() -> None:
    n = Parameter("n", "int", low=1, high=100)
    block = Parameter("block", "int", values=(8, 16, 32, 64))
    other = Parameter("other", "int", values=(1, 2))
    validity = Validity((n,), (block, other), ("block <= n",))
    assert validity.constrained_design == (0,)  # 'other' never changes
    table = pd.DataFrame({"n": [20, 20, 5, 1000, -3, 40]})
    codes = np.array([[3, 1], [1, 0], [2, 1], [3, 0], [3, 1], [1, 1]])
    fixed = validity.apply(table, codes)
    # n=20: 64 -> 16 (nearest valid code); n=5: nothing valid -> unchanged; n=1000 clamps
    # to 100 where 64 is valid; n=-3 clamps to 1: nothing valid.
    np.testing.assert_array_equal(fixed, [[1, 1], [1, 0], [2, 1], [3, 0], [3, 1], [1, 1]])


def test_tie_goes_to_the_first_candidate() -> None:
    x = Parameter("x", "int", low=0, high=10)
    a = Parameter("a", "int", values=(0, 1, 2))
    b = Parameter("b", "int", values=(0, 1, 2))
    validity = Validity((x,), (a, b), ("a + b != 2",))
    # (1, 1) is invalid; (0, 1), (1, 0), (1, 2), (2, 1) are all at distance 1: (0, 1) first.
    np.testing.assert_array_equal(validity.apply(pd.DataFrame({"x": [0]}), [[1, 1]]), [[0, 1]])


def test_candidate_list_when_the_product_is_too_large(constrained: SimpleNamespace) -> None:
    space = constrained.space
    codes = space.design_codes(constrained.optima)
    validity = Validity.build(
        space.inputs, space.design, constraint_sources(space), optima_codes=codes, search_limit=10
    )
    assert not validity.searches_product
    expected = np.unique(codes[:, list(validity.constrained_design)], axis=0)
    np.testing.assert_array_equal(validity.candidate_codes(), expected)


def constraint_sources(space: Space) -> list[str]:
    return [c.source for c in space.constraints]


def test_select_checks_and_falls_back(
    checked_selector: PerParameterSelector, constrained: SimpleNamespace
) -> None:
    space = constrained.space
    dense = space.grid({"n": 60, "gpu": 2, "density": 60})
    report = constraint_violations(checked_selector, space, dense)
    assert report.n_invalid_trees > 0, "the fixture's raw trees should break constraints"
    assert report.n_invalid_selected == 0
    raw = checked_selector.model_.predict(dense, fallback=False)
    checked = checked_selector.select(dense)
    unchanged = space.is_valid(pd.concat([dense, raw], axis=1))
    pd.testing.assert_frame_equal(raw[unchanged], checked[unchanged])


def test_selector_with_validity_pickles(checked_selector: PerParameterSelector) -> None:
    again = pickle.loads(pickle.dumps(checked_selector))
    table = boundary_inputs(checked_selector, 300, np.random.default_rng(0))
    pd.testing.assert_frame_equal(again.select(table), checked_selector.select(table))


def test_space_must_match_the_parameters(constrained: SimpleNamespace) -> None:
    space = constrained.space
    with pytest.raises(ValueError, match="differ"):
        PerParameterSelector().fit(constrained.optima, space.inputs[:2], space.design, space=space)


# --------------------------------------------------------------------------- compiled C
@pytest.mark.compiler
def test_compiled_select_equals_predict_with_fallback(
    checked_selector: PerParameterSelector, tmp_path: Path
) -> None:
    table = boundary_inputs(checked_selector, 20_000, np.random.default_rng(1))
    model = checked_selector.model_
    fell_back = (model.select_codes(table) != model.select_codes(table, fallback=False)).any(1)
    assert fell_back.sum() > 100, "the inputs should exercise the fallback"
    header = render_header(checked_selector, "chk")
    report = verify_header(checked_selector, header, table, prefix="chk", workdir=tmp_path)
    assert report.ok, str(report)


@pytest.mark.compiler
def test_compiled_candidate_list_fallback(constrained: SimpleNamespace, tmp_path: Path) -> None:
    space = constrained.space
    selector = PerParameterSelector(max_depth=3).fit(
        constrained.optima, space.inputs, space.design, space=space
    )
    model = selector.model_
    assert model.validity is not None
    validity = Validity.build(
        space.inputs,
        space.design,
        constraint_sources(space),
        optima_codes=space.design_codes(constrained.optima),
        search_limit=10,
    )
    listed = dataclasses.replace(model, validity=validity)
    header = render_model_header(listed, prefix="lst", versions=tool_versions())
    assert "lst_block_candidate(int k)" in header
    table = boundary_inputs(listed, 5000, np.random.default_rng(2))
    report = verify_header(listed, header, table, prefix="lst", workdir=tmp_path)
    assert report.ok, str(report)


def random_configurations(space: Space, inputs: pd.DataFrame, rng: np.random.Generator):
    """Each row's inputs with a random design: mostly domain values, some outside."""
    table = inputs.reset_index(drop=True).copy()
    for parameter in space.design:
        domain = parameter.domain_values()
        values = domain[rng.integers(0, len(domain), len(table))]
        if parameter.kind == "int":
            outside = rng.random(len(table)) < 0.05
            values = np.where(outside, values + 1, values)
        table[parameter.name] = pd.Series(values, dtype=parameter.dtype)
    return table


@pytest.mark.compiler
def test_compiled_is_valid_equals_space_is_valid(
    checked_selector: PerParameterSelector, constrained: SimpleNamespace, tmp_path: Path
) -> None:
    space = constrained.space
    rng = np.random.default_rng(3)
    inputs = boundary_inputs(checked_selector, 20_000, rng)  # NaN, inf, huge ints included
    table = random_configurations(space, inputs, rng)
    header = render_header(checked_selector, "chk")
    expected = space.is_valid(table)
    assert 0.1 < expected.mean() < 0.9
    got = verify_is_valid(checked_selector, header, table, prefix="chk", workdir=tmp_path)
    np.testing.assert_array_equal(got, expected)


CONVOLUTION_CONSTRAINTS = (
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or ((block_size_x*tile_size_x+(filter_width-1))*"
    "(block_size_y*tile_size_y+(filter_height-1))) < 12*1024",
)


@pytest.mark.compiler
def test_compiled_is_valid_on_convolution_like_constraints(tmp_path: Path) -> None:
    """The replay convolution's constraints (%, products, 'or'), with a float input."""
    gpu = Parameter("gpu", "categorical", values=("A100", "W6600"))
    scale = Parameter("scale", "float", low=0.5, high=2.0)
    design = [
        Parameter("block_size_x", "int", values=tuple(range(16, 257, 16))),
        Parameter("block_size_y", "int", values=(1, 2, 4, 8, 16)),
        Parameter("tile_size_x", "int", values=(1, 2, 3, 4)),
        Parameter("tile_size_y", "int", values=(1, 2, 3, 4)),
        Parameter("use_padding", "int", values=(0, 1)),
        Parameter("use_shmem", "int", values=(0, 1)),
        Parameter("filter_height", "int", values=(15,)),
        Parameter("filter_width", "int", values=(15,)),
    ]
    space = Space([gpu, scale], design, [*CONVOLUTION_CONSTRAINTS, "tile_size_x <= 2 * scale"])
    rng = np.random.default_rng(4)
    optima = space.sample_valid(200, rng)
    selector = PerParameterSelector(max_depth=4).fit(
        optima, space.inputs, space.design, space=space
    )
    header = render_header(selector, "conv")
    inputs = space.sample_inputs(30_000, rng)
    table = random_configurations(space, inputs, rng)
    expected = space.is_valid(table)
    assert 0.05 < expected.mean() < 0.95
    got = verify_is_valid(selector, header, table, prefix="conv", workdir=tmp_path)
    np.testing.assert_array_equal(got, expected)
    checks = boundary_inputs(selector, 5000, rng)
    report = verify_header(selector, header, checks, prefix="conv", workdir=tmp_path)
    assert report.ok, str(report)


@pytest.mark.compiler
@pytest.mark.parametrize(
    "command, suffix",
    [
        (STRICT_C, ".c"),
        (["g++", "-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"], ".cpp"),
    ],
)
def test_validity_header_compiles_strictly(
    checked_selector: PerParameterSelector, command: list[str], suffix: str, tmp_path: Path
) -> None:
    header = render_header(checked_selector, "chk")
    assert "#include <math.h>" in header and "fmod(" in header  # Python's % in C
    body = example_call(checked_selector.model_, "chk")
    assert compile_check(header, command, suffix=suffix, body=body, workdir=tmp_path) == ""


@pytest.mark.compiler
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_validity_header_compiles_with_nvcc(
    checked_selector: PerParameterSelector, tmp_path: Path
) -> None:
    body = example_call(checked_selector.model_, "chk", cuda=True)
    command = ["nvcc", "-std=c++17", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra"]
    compile_check(
        render_header(checked_selector, "chk"), command, suffix=".cu", body=body, workdir=tmp_path
    )


@pytest.mark.compiler
def test_two_units_with_validity_link(
    checked_selector: PerParameterSelector, tmp_path: Path
) -> None:
    plan = NamePlan.build("chk", *_model_parameters(checked_selector))
    (tmp_path / "selector.h").write_text(render_header(checked_selector, "chk"), encoding="utf-8")
    call = "chk_select(n, (chk_gpu_t)gpu, density)"
    for unit in ("first", "second"):
        (tmp_path / f"{unit}.c").write_text(
            '#include "selector.h"\n'
            f"int {unit}_valid(long long n, int gpu, double density);\n"
            f"int {unit}_valid(long long n, int gpu, double density)\n"
            "{\n"
            f"    {plan.config_type} c = {call};\n"
            f"    return {plan.validity.is_valid}(n, (chk_gpu_t)gpu, density, &c);\n"
            "}\n",
            encoding="utf-8",
        )
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "selector.h"\n'
        "int first_valid(long long n, int gpu, double density);\n"
        "int second_valid(long long n, int gpu, double density);\n"
        "int main(void)\n{\n"
        "    long long n;\n    int bad = 0;\n"
        "    for (n = 16; n <= 4096; n += 7) {\n"
        "        bad += !first_valid(n, CHK_GPU_A100, 0.8);\n"
        "        bad += !second_valid(n, CHK_GPU_W6600, 0.3);\n"
        "    }\n"
        '    printf("%d\\n", bad);\n'
        "    return 0;\n}\n",
        encoding="utf-8",
    )
    program = tmp_path / "program"
    sources = [str(tmp_path / name) for name in ("first.c", "second.c", "main.c")]
    subprocess.run([*STRICT_C, *sources, "-lm", "-o", str(program)], check=True, cwd=tmp_path)
    printed = subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout
    assert printed.strip() == "0"


def _model_parameters(selector: PerParameterSelector):
    model = selector.model_
    return model.inputs, model.design, model.tree_names
