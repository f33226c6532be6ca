"""The shipped CUDA source compiles with nvcc for several block and tile sizes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mlkaps_gpu.kernels import load_builtin

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found"),
]


@pytest.mark.parametrize(("bx", "by", "tk"), [(16, 16, 16), (32, 4, 64), (8, 1, 8)])
def test_gemm_cuda_compiles_to_ptx(tmp_path: Path, bx: int, by: int, tk: int) -> None:
    kernel = load_builtin("gemm_cuda")
    out = tmp_path / "gemm.ptx"
    done = subprocess.run(
        [
            "nvcc",
            "--ptx",
            f"-DBLOCK_X={bx}",
            f"-DBLOCK_Y={by}",
            f"-DTILE_K={tk}",
            str(kernel.source_path),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert ".entry gemm_tiled" in out.read_text()
