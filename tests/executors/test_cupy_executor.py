"""CupyExecutor: optional dependency handling here, real launches on a GPU (marked ``gpu``)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._cupy import CupyExecutor, cupy_available, kernel_parameter_names
from mlkaps_gpu.executors._timing import TimingPolicy
from mlkaps_gpu.kernels import load_builtin
from mlkaps_gpu.kernels._faulty import (
    FAULTY_CUDA_KERNEL,
    FAULTY_CUDA_SOURCE,
    check_faulty_cuda,
    faulty_cuda_arguments,
    faulty_cuda_grid,
)


def test_parameter_names_are_read_from_the_source() -> None:
    names = kernel_parameter_names(FAULTY_CUDA_SOURCE, FAULTY_CUDA_KERNEL)
    assert names == ["n", "x", "y", "mode"]
    assert kernel_parameter_names(FAULTY_CUDA_SOURCE, "other") == []


@pytest.mark.skipif(cupy_available(), reason="CuPy is installed")
def test_without_cupy_construction_fails_clearly() -> None:
    with pytest.raises(
        ExecutorError, match=r"CuPy is not installed: pip install mlkaps_gpu\[gpu\]"
    ):
        CupyExecutor(
            FAULTY_CUDA_SOURCE,
            FAULTY_CUDA_KERNEL,
            faulty_cuda_arguments,
            grid=faulty_cuda_grid,
            block=("bs",),
        )


@pytest.fixture(scope="module")
def gpu() -> Any:
    cupy = pytest.importorskip("cupy")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver
        count = 0
    if count < 1:
        pytest.skip("no CUDA device")
    return cupy


@pytest.mark.gpu
def test_gemm_cuda_configurations(gpu: Any) -> None:
    kernel = load_builtin("gemm_cuda")
    rows = pd.DataFrame(
        [
            {"m": m, "n": n, "k": k, "block_x": bx, "block_y": by, "tile_k": tk}
            for (m, n, k) in [(100, 70, 33), (256, 256, 256)]
            for (bx, by, tk) in [(16, 16, 16), (32, 4, 64), (8, 32, 8), (32, 32, 32)]
        ]
    )
    with kernel.make_executor() as executor:
        result = executor.run(rows)
    assert (result["status"] == "ok").all(), list(result["message"])
    assert (result["n_repeats"] == 10).all()
    assert result["time"].gt(0).all()


@pytest.mark.gpu
def test_faulty_cuda_kernel_batch(gpu: Any) -> None:
    executor = CupyExecutor(
        FAULTY_CUDA_SOURCE,
        FAULTY_CUDA_KERNEL,
        faulty_cuda_arguments,
        grid=faulty_cuda_grid,
        block=("bs",),
        macros=["BREAK"],
        runtime=["mode"],
        check=check_faulty_cuda,
        timing=TimingPolicy(warmup=1, repeats=3),
        timeout_s=5.0,
    )
    base = {"n": 1000, "bs": 128, "mode": 0, "BREAK": 0}
    specs = [
        {},
        {"mode": 1},  # illegal address
        {},
        {"mode": 3},  # wrong answer
        {"BREAK": 1},  # does not compile
        {"bs": 2048},  # too many threads per block
        {"mode": 2},  # never ends
        {"n": 5},
    ]
    with executor:
        result = executor.run(pd.DataFrame([{**base, **s} for s in specs]))
        starts = executor.worker_starts
    assert list(result["status"]) == [
        "ok",
        "runtime_error",
        "ok",
        "invalid",
        "compile_error",
        "invalid",
        "timeout",
        "ok",
    ], list(result["message"])
    assert "CUDA" in result["message"][1] or "killed" in result["message"][1]
    assert "this is not CUDA" in result["message"][4] or "error" in result["message"][4]
    assert starts >= 3
