"""The shipped ``gemm`` kernel: every loop order, unrolling and a spread of tiles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors._cffi import CffiExecutor
from mlkaps_gpu.executors._timing import TimingPolicy
from mlkaps_gpu.kernels import load_builtin
from mlkaps_gpu.kernels._builders import check_gemm, gemm_arguments

ONCE = TimingPolicy(warmup=0, repeats=1)
DESIGNS = [
    # tile_m, tile_n, tile_k, unroll, loop_order
    (8, 16, 16, 1, "ijk"),
    (32, 64, 64, 4, "ikj"),
    (16, 32, 256, 8, "kij"),
    (128, 256, 32, 2, "ikj"),
    (64, 16, 128, 4, "ijk"),
]


@pytest.mark.compiler
def test_gemm_matches_numpy(kernel_cache: Path) -> None:
    rows = []
    shapes = [(33, 47, 29), (64, 64, 64), (5, 130, 1), (100, 3, 70)]
    for i, (tm, tn, tk, unroll, order) in enumerate(DESIGNS):
        for j, (m, n, k) in enumerate(shapes):
            rows.append(
                {
                    "m": m,
                    "n": n,
                    "k": k,
                    "tile_m": tm,
                    "tile_n": tn,
                    "tile_k": tk,
                    "unroll": unroll,
                    "loop_order": order,
                    "threads": 1 + (i + j) % 2,
                }
            )
    frame = pd.DataFrame(rows)
    ex = load_builtin("gemm").make_executor(timing=ONCE, cache_dir=kernel_cache)
    assert isinstance(ex, CffiExecutor)
    with ex:
        result = ex.run(frame)
        assert ex.compile_count <= len(DESIGNS)
    bad = pd.concat([frame, result], axis=1)[result["status"] != "ok"]
    assert bad.empty, bad.to_string()


@pytest.mark.compiler
def test_gemm_rejects_an_unknown_loop_order_at_compile_time(kernel_cache: Path) -> None:
    row = {
        "m": 8,
        "n": 8,
        "k": 8,
        "tile_m": 8,
        "tile_n": 16,
        "tile_k": 16,
        "unroll": 1,
        "loop_order": "jki",
        "threads": 1,
    }
    with load_builtin("gemm").make_executor(timing=ONCE, cache_dir=kernel_cache) as ex:
        result = ex.run(pd.DataFrame([row]))
    assert result["status"][0] == "compile_error"
    assert "LOOP_ORDER must be" in result["message"][0]


def test_gemm_check() -> None:
    call = gemm_arguments({"m": 7, "n": 5, "k": 3}, np.random.default_rng(0))
    _, _, _, a, b, c = call.args
    assert np.isnan(c).all()
    inputs = {"a": a, "b": b}
    assert check_gemm(inputs, {"c": a @ b})
    assert not check_gemm(inputs, {"c": c})
    assert not check_gemm(inputs, {"c": a @ b + 1e-6})
    assert not check_gemm(inputs, {"c": (a @ b)[:, :4]})
