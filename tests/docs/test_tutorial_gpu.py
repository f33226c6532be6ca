"""docs/tutorials/gpu_kernel.md, run as written where CuPy and a CUDA GPU are present (``-m gpu``):
the shipped CUDA matrix product and the page's own CuPy kernel tuned with small budgets, and the
page's CuPy program computing a correct product with the selected configuration."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, blocks, run_page, run_python

PAGE = TUTORIALS / "gpu_kernel.md"


def _gpu_present() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no driver, no device: no GPU
        return False


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.skipif(not _gpu_present(), reason="needs CuPy and a CUDA GPU"),
    pytest.mark.integration,
]


def test_gpu_tutorial_runs(tmp_path: Path) -> None:
    steps = run_page(PAGE, tmp_path)
    assert (tmp_path / "runs" / "gemm" / "gemm_gpu.h").is_file()
    assert (tmp_path / "runs" / "saxpy" / "saxpy.h").is_file()
    answers = [json.loads(s.stdout) for s in steps if "select" in s.argv]
    assert set(answers[0]) == {"block_x", "block_y", "tile_k"}
    assert 32 <= answers[0]["block_x"] * answers[0]["block_y"] <= 1024
    assert set(answers[1]) == {"block", "blocks_per_sm"}
    (program,) = [b for b in blocks(PAGE) if b.lang == "python" and b.file_name is None]
    run_python(program, tmp_path)  # asserts the product equals a @ b
