"""The registry of shipped kernels: spaces, expert defaults, constraints, sources."""

from __future__ import annotations

import pytest

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._cupy import cupy_available
from mlkaps_gpu.kernels import BUILTIN_KERNELS, BuiltinKernel, load_builtin


def test_registry_names() -> None:
    assert set(BUILTIN_KERNELS) >= {"matsum", "lu", "gemm", "gemm_cuda"}
    with pytest.raises(KeyError, match="known"):
        load_builtin("nope")
    first = load_builtin("lu")
    first.constraints.append("nb > 1")
    assert "nb > 1" not in load_builtin("lu").constraints


@pytest.mark.parametrize("name", sorted(BUILTIN_KERNELS))
def test_kernel_definition(name: str) -> None:
    kernel = load_builtin(name)
    assert isinstance(kernel, BuiltinKernel)
    assert kernel.source_path.is_file()
    assert kernel.objectives == ("time",)
    assert kernel.description
    names = [p.name for p in kernel.inputs + kernel.design]
    assert len(set(names)) == len(names)
    inputs = {p.name: p.domain_values()[0].item() for p in kernel.inputs}
    expert = kernel.expert_for(inputs)
    assert set(expert) == {p.name for p in kernel.design}
    for parameter in kernel.design:
        assert parameter.contains([expert[parameter.name]])[0], parameter.name


@pytest.mark.parametrize("name", sorted(BUILTIN_KERNELS))
def test_constraints_are_in_the_constraint_language(name: str) -> None:
    constraints = pytest.importorskip("mlkaps_gpu.space._constraints")
    kernel = load_builtin(name)
    parameters = {p.name: p for p in kernel.inputs + kernel.design}
    for text in kernel.constraints:
        constraints.parse_constraint(text, parameters)


def test_expert_may_depend_on_inputs() -> None:
    kernel = load_builtin("matsum")
    kernel.expert = {"T": lambda inputs: 1 if inputs["n"] * inputs["m"] < 1000 else 2}
    assert kernel.expert_for({"n": 10, "m": 10}) == {"T": 1}
    kernel.expert = lambda inputs: {"T": inputs["n"]}
    assert kernel.expert_for({"n": 3, "m": 1}) == {"T": 3}


@pytest.mark.skipif(cupy_available(), reason="CuPy is installed")
def test_cuda_kernel_without_cupy_gives_a_clear_error() -> None:
    with pytest.raises(
        ExecutorError, match="CuPy is not installed: pip install mlkaps_gpu\\[gpu\\]"
    ):
        load_builtin("gemm_cuda").make_executor()
