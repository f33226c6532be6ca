"""The SciPy LU kernel (``mlkaps_gpu.kernels.scipy_lu``): every method, block size and thread count
factors like ``scipy.linalg.lu_factor``; the library's default call is a valid configuration of
the experiment's space; a tiny campaign tunes, validates and merges against it."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import lu_factor
from threadpoolctl import threadpool_info

import mlkaps_gpu
from mlkaps_gpu.campaign import prepare
from mlkaps_gpu.kernels import _scipy_lu as module
from mlkaps_gpu.kernels import scipy_lu, scipy_lu_expert
from mlkaps_gpu.validation import FixedConfiguration, HeadroomSettings

CONFIG = Path(__file__).resolve().parents[2] / "experiments" / "configs" / "scipy_lu.toml"
SHAPES = [(1, 1), (1, 6), (6, 1), (7, 3), (3, 7), (70, 70), (90, 45), (45, 90)]
THREADS = sorted({1, module.default_threads()})


def factors(lu: np.ndarray, piv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``perm, L, U`` of ``lu_factor``'s output: ``A[perm] = L @ U``."""
    m, n = lu.shape
    k = min(m, n)
    perm = np.arange(m)
    for row, other in enumerate(piv):
        perm[[row, other]] = perm[[other, row]]
    lower = np.tril(lu[:, :k], -1) + np.eye(m, k)
    upper = np.triu(lu[:k, :])
    return perm, lower, upper


@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{n}" for m, n in SHAPES])
def test_every_method_block_and_thread_count_factors_with_partial_pivoting(
    shape: tuple[int, int],
) -> None:
    m, n = shape
    matrix = module.scipy_lu_matrix(m, n)
    expected_lu, expected_piv = lu_factor(matrix)
    for method, nb, threads in itertools.product(module.SCIPY_LU_METHODS, (1, 16, 32), THREADS):
        lu, piv = scipy_lu(m, n, method, nb, threads)
        perm, lower, upper = factors(lu, piv)
        residual = np.abs(matrix[perm] - lower @ upper).max()
        scale = np.abs(matrix).max() * max(m, n) * np.finfo(float).eps
        where = f"{method}, nb {nb}, threads {threads}"
        assert residual <= 10 * scale, where
        # partial pivoting: the largest remaining entry of each column is the pivot
        assert np.abs(lower).max() <= 1.0, where
        assert piv.tolist() == expected_piv.tolist(), where
        np.testing.assert_allclose(lu, expected_lu, rtol=0, atol=1e-12, err_msg=where)
    assert not matrix.flags.writeable  # the matrix stays intact for the next call


def test_the_library_method_on_the_default_threads_is_lu_factor_itself() -> None:
    matrix = module.scipy_lu_matrix(120, 80)
    lu, piv = scipy_lu(120, 80, **scipy_lu_expert())
    expected_lu, expected_piv = lu_factor(matrix)
    assert np.array_equal(lu, expected_lu) and np.array_equal(piv, expected_piv)
    assert scipy_lu_expert() == {
        "method": "library",
        "nb": module.SCIPY_LU_BLOCKS[0],
        "threads": module.default_threads(),
    }


def test_the_thread_count_holds_during_the_call_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    factor = module._factor

    def recording(matrix: np.ndarray, method: str, nb: int) -> tuple[np.ndarray, np.ndarray]:
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return factor(matrix, method, nb)

    monkeypatch.setattr(module, "_factor", recording)
    default = module.default_threads()
    scipy_lu(40, 40, "blocked", 16, 1)
    scipy_lu(40, 40, "library", 16, default)
    assert seen == [1, default]
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert max(after) == default


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="method must be one of"):
        scipy_lu(8, 8, "magic", 16, 1)
    with pytest.raises(ValueError, match="positive"):
        scipy_lu(8, 8, "blocked", 0, 1)


def test_the_library_default_is_one_valid_configuration_of_the_experiment_space() -> None:
    space = prepare(mlkaps_gpu.load_config(CONFIG)).space
    expert = {**scipy_lu_expert(), "threads": 2}  # the file's thread counts are [1, 2]
    grid = space.grid(6)
    assert space.is_valid(grid.assign(**expert)[space.names]).all()
    # the library call has no block size: one configuration per thread count, not six
    assert not space.is_valid(grid.assign(**{**expert, "nb": 64})[space.names]).any()
    # a block of every column is the library call again: refused
    wide = grid.assign(method="blocked", nb=512, threads=1)[space.names]
    assert space.is_valid(wide).tolist() == (np.minimum(grid["m"], grid["n"]) > 512).tolist()
    FixedConfiguration(space, expert).configurations(grid)  # every value in its domain


def tiny_config(tmp_path: Path) -> Path:
    """The experiment's configuration, shrunk: sizes 32..96, budget 30, one timed call."""
    text = CONFIG.read_text(encoding="utf-8")
    for old, new in (
        ("range = [32, 1024]", "range = [32, 96]"),
        ("budget = 600", "budget = 30"),
        ("batch_size = 50", "batch_size = 10"),
        ("repeats = 5", "repeats = 1"),
        ("warmup = 1", "warmup = 0"),
        ("grid = { m = 16, n = 16 }", "grid = { m = 4, n = 4 }"),
        ('prefix = "scipy_lu"', 'prefix = "scipy_lu"\nverify_inputs = 500'),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "scipy_lu.toml"
    path.write_text(text)
    return path


def test_a_tiny_campaign_tunes_validates_and_merges_against_the_library_default(
    tmp_path: Path,
) -> None:
    campaign = mlkaps_gpu.tune(tiny_config(tmp_path), out=tmp_path / "run")
    try:
        assert campaign.header_path.exists()
        expert = FixedConfiguration(campaign.space, {**scipy_lu_expert(), "threads": 2})
        before = mlkaps_gpu.validate(campaign, expert, sizes={"m": 2, "n": 2}, repeats=2)
        assert len(before.points) == 4
        assert (before.points["verdict"] != "failed").all()
        result = mlkaps_gpu.merge(
            campaign, expert, before=before, headroom=HeadroomSettings(points=1, neighbours=2)
        )
    finally:
        campaign.setup.executor.close()
    # two rounds can never make a progression (p >= 1/4): the library's default ships
    assert result.summary["shipped"] == "expert"
    assert result.header is None
    assert len(result.summary["headroom"]["points"]) == 1
