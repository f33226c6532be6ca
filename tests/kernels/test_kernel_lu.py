"""The shipped ``lu`` kernel against scipy.linalg.lu_factor."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.linalg

from mlkaps_gpu.executors._timing import TimingPolicy
from mlkaps_gpu.kernels import available_cores, load_builtin
from mlkaps_gpu.kernels._builders import check_lu, check_lu_exact, lu_arguments

ONCE = TimingPolicy(warmup=0, repeats=1)


def configurations(shapes, blocks, tiles, threads=(1, 2)):
    rows = []
    cycle = itertools.cycle(t for t in threads if t <= available_cores())
    for (m, n), nb, panel, (tm, tn) in itertools.product(
        shapes, blocks, ("unblocked", "recursive"), tiles
    ):
        rows.append(
            {
                "m": m,
                "n": n,
                "nb": nb,
                "panel": panel,
                "tile_m": tm,
                "tile_n": tn,
                "threads": next(cycle),
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.compiler
def test_lu_matches_scipy_for_every_panel_block_and_tile(kernel_cache: Path) -> None:
    kernel = load_builtin("lu")
    rows = configurations(
        shapes=[(37, 53), (96, 96), (100, 31), (1, 7), (9, 1)],
        blocks=[1, 5, 16, 64, 256],
        tiles=[(8, 16), (64, 256), (16, 64)],
    )
    with kernel.make_executor(check=check_lu_exact, timing=ONCE, cache_dir=kernel_cache) as ex:
        result = ex.run(rows)
    bad = pd.concat([rows, result], axis=1)[result["status"] != "ok"]
    assert bad.empty, bad.to_string()
    assert result["time"].gt(0).all()


@pytest.mark.compiler
def test_lu_expert_configuration(kernel_cache: Path) -> None:
    kernel = load_builtin("lu")
    inputs = {"m": 200, "n": 150}
    row = {**inputs, **kernel.expert_for(inputs)}
    with kernel.make_executor(cache_dir=kernel_cache) as ex:
        result = ex.run(pd.DataFrame([row]))
    assert result["status"][0] == "ok", result["message"][0]
    assert result["n_repeats"][0] == 5


@pytest.mark.slow
@pytest.mark.compiler
def test_lu_larger_matrices_with_threads(kernel_cache: Path) -> None:
    kernel = load_builtin("lu")
    rows = configurations(
        shapes=[(512, 512), (700, 300), (300, 640)],
        blocks=[8, 64, 128],
        tiles=[(32, 64), (8, 256)],
        threads=(2, 1),
    )
    with kernel.make_executor(check=check_lu_exact, timing=ONCE, cache_dir=kernel_cache) as ex:
        result = ex.run(rows)
    assert (result["status"] == "ok").all(), result["message"][result["status"] != "ok"]


def _factor_inputs(m: int, n: int, seed: int = 0):
    call = lu_arguments({"m": m, "n": n}, np.random.default_rng(seed))
    a = call.args[2]
    lu, piv = scipy.linalg.lu_factor(a)
    return {"a": a}, {"a": lu, "ipiv": piv.astype(np.intc)}


def test_lu_check_accepts_scipy_and_rejects_wrong_factorisations() -> None:
    inputs, outputs = _factor_inputs(40, 30)
    assert check_lu(inputs, outputs) and check_lu_exact(inputs, outputs)
    perturbed = {**outputs, "a": outputs["a"] + 1e-6}
    assert not check_lu(inputs, perturbed)
    swapped = {**outputs, "ipiv": outputs["ipiv"][::-1].copy()}
    assert not check_lu(inputs, swapped)
    nan = {**outputs, "a": np.full_like(outputs["a"], np.nan)}
    assert not check_lu(inputs, nan)
    # LU without pivoting: a true factorisation, but not partial pivoting's (|L| > 1)
    a = inputs["a"][:30, :30]
    lower, upper = np.eye(30), a.copy()
    for k in range(29):
        factors = upper[k + 1 :, k] / upper[k, k]
        lower[k + 1 :, k] = factors
        upper[k + 1 :] -= np.outer(factors, upper[k])
    packed = np.tril(lower, -1) + np.triu(upper)
    assert not check_lu({"a": a}, {"a": packed, "ipiv": np.arange(30, dtype=np.intc)})


def test_lu_check_accepts_a_tie_broken_the_other_way() -> None:
    # two equal candidate pivots: any choice is a valid partial-pivoting factorisation
    a = np.array([[1.0, 2.0], [-1.0, 3.0]])
    lu_other = np.array([[-1.0, 3.0], [-1.0, 5.0]])  # pivot row 1 instead of row 0
    assert check_lu({"a": a}, {"a": lu_other, "ipiv": np.array([1, 1], dtype=np.intc)})
    assert not check_lu_exact({"a": a}, {"a": lu_other, "ipiv": np.array([1, 1], dtype=np.intc)})
