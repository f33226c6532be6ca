"""The shipped headers in ``generated/``: golden (what ``scripts/regenerate_headers.py``
produces), bit-identical to ``predict`` on 100,000 inputs per kernel, valid on a dense grid,
and compiling as C99, C++17 and CUDA together in one translation unit."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from mlkaps_gpu.codegen import boundary_inputs, compile_check, example_call, verify_header
from mlkaps_gpu.trees import constraint_violations

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
KERNELS = ("matsum", "lu", "gemm")


def load_script(name: str) -> ModuleType:
    """A module of ``scripts/`` (not a package: its folder goes on ``sys.path``)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def generated() -> dict[str, Any]:
    script = load_script("regenerate_headers")
    return {name: script.generate(name) for name in KERNELS}


@pytest.mark.parametrize("kernel", KERNELS)
def test_checked_in_header_is_what_the_script_produces(generated, kernel: str) -> None:
    result = generated[kernel]
    path = ROOT / "generated" / result.filename
    assert path.exists(), f"{path} is missing: run python scripts/regenerate_headers.py"
    assert path.read_text(encoding="utf-8") == result.header, (
        f"{path} is out of date (tool versions or the tree code changed?): run "
        "python scripts/regenerate_headers.py and review the diff"
    )


@pytest.mark.parametrize("kernel", KERNELS)
def test_header_provenance_says_how_it_was_made(generated, kernel: str) -> None:
    header = generated[kernel].header
    assert " * source: NOT MEASURED: the trees are fitted to the analytic cost model" in header
    assert f" * depth: {generated[kernel].sweep.chosen}, the smallest of 1.." in header
    assert "JointSelector(" in header


@pytest.mark.compiler
@pytest.mark.parametrize("kernel", KERNELS)
def test_header_equals_predict_on_100k_inputs(generated, kernel: str, tmp_path: Path) -> None:
    result = generated[kernel]
    table = boundary_inputs(result.selector, 100_000, np.random.default_rng(0))
    assert len(table) >= 100_000
    features = result.selector.model_.features(table)
    assert (features > 2**24).any()  # integers past float32's exact range
    report = verify_header(result.selector, result.header, table, prefix=kernel, workdir=tmp_path)
    assert report.ok, str(report)


@pytest.mark.parametrize("kernel", KERNELS)
def test_joint_header_is_valid_on_a_dense_grid(generated, kernel: str) -> None:
    result = generated[kernel]
    space = result.model.space
    size = 100 if len(space.inputs) <= 2 else 22
    dense = space.grid(size)
    while len(dense) < 10_000:  # at least 100 x 100 points (log grids of ints lose a few)
        size += 1
        dense = space.grid(size)
    assert len(dense) >= 10_000
    report = constraint_violations(result.selector, space, dense)
    assert report.n_invalid_trees == 0 and report.n_invalid_selected == 0, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_joint_header_is_valid_on_a_100_per_input_grid(generated, kernel: str) -> None:
    result = generated[kernel]
    space = result.model.space
    report = constraint_violations(result.selector, space, space.grid(100))
    assert report.n_invalid_trees == 0, str(report)


def _all_headers_unit(generated, cuda: bool) -> tuple[str, str]:
    includes = "".join(f'#include "{generated[k].filename}"\n' for k in KERNELS)
    calls = "".join(example_call(generated[k].selector.model_, k, cuda=cuda) for k in KERNELS)
    return includes, calls


@pytest.mark.compiler
@pytest.mark.parametrize(
    "command, suffix",
    [
        (["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"], ".c"),
        (["g++", "-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"], ".cpp"),
        (["nvcc", "-std=c++17", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra"], ".cu"),
    ],
)
def test_all_headers_compile_in_one_unit(
    generated, command: list[str], suffix: str, tmp_path: Path
) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} not found")
    for kernel in KERNELS:
        (tmp_path / generated[kernel].filename).write_text(generated[kernel].header)
    includes, calls = _all_headers_unit(generated, cuda=suffix == ".cu")
    flags = [*command, f"-I{tmp_path}"]
    output = compile_check(includes, flags, suffix=suffix, body=calls, workdir=tmp_path)
    assert output == ""
