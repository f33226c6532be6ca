"""The shipped ``matsum`` kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors._timing import TimingPolicy
from mlkaps_gpu.kernels import available_cores, load_builtin
from mlkaps_gpu.kernels._builders import check_matsum, matsum_arguments


@pytest.mark.compiler
def test_matsum_every_thread_count(kernel_cache: Path) -> None:
    kernel = load_builtin("matsum")
    threads = [int(t) for t in kernel.design[0].domain_values()]
    assert threads == list(range(1, available_cores() + 1))
    rows = [
        {"n": n, "m": m, "T": t}
        for (n, m) in [(1, 1), (16, 2048), (333, 77), (2048, 16)]
        for t in threads[:4]
    ]
    with kernel.make_executor(cache_dir=kernel_cache, timing=TimingPolicy(1, 3)) as ex:
        result = ex.run(pd.DataFrame(rows))
    assert (result["status"] == "ok").all(), list(result["message"])
    assert (result["n_repeats"] == 3).all()


def test_matsum_check() -> None:
    call = matsum_arguments({"n": 4, "m": 6}, np.random.default_rng(0))
    a = call.args[2]
    assert a.shape == (4, 6)
    assert check_matsum({"a": a}, {"return": float(a.sum())})
    assert not check_matsum({"a": a}, {"return": float(a.sum()) + 1e-3})
    assert not check_matsum({"a": a}, {"return": float("nan")})
