"""Argument builders and correctness checks of the shipped kernels.

They follow the contract of :mod:`mlkaps_gpu.executors._worker_api` and run in the worker
process, hence module-level functions. Matrices are row-major (numpy C order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlkaps_gpu.executors import Design, KernelCall

#: Code passed to ``lu``'s ``variant`` argument for each panel variant.
PANEL_CODES: dict[str, int] = {"unblocked": 0, "recursive": 1}

#: Tolerance of ``lu`` against ``scipy.linalg.lu_factor``, relative to max |LU|.
LU_RTOL = 1e-8
#: Tolerance of the matrix products, relative to k * max|A| * max|B|.
GEMM_RTOL = 1e-10
#: Tolerance of ``matsum``, relative to the sum of |a|.
SUM_RTOL = 1e-9


# ------------------------------------------------------------------------------------ matsum
def matsum_arguments(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    n, m = int(inputs["n"]), int(inputs["m"])
    a = rng.random((n, m))
    return KernelCall([n, m, a])


def check_matsum(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    a = np.asarray(inputs["a"])
    total = outputs["return"]
    if total is None or not np.isfinite(total):
        return False
    return bool(abs(total - a.sum()) <= SUM_RTOL * max(1.0, float(np.abs(a).sum())))


# ---------------------------------------------------------------------------------------- lu
def lu_arguments(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    m, n = int(inputs["m"]), int(inputs["n"])
    a = rng.standard_normal((m, n))
    ipiv = np.full(min(m, n), -1, dtype=np.intc)
    args = [m, n, a, n, ipiv, Design("nb"), Design("panel", codes=PANEL_CODES)]
    return KernelCall(args, overwritten=["a"])


def check_lu(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    """Packed LU and pivots equal to ``scipy.linalg.lu_factor``'s (within ``LU_RTOL``); when
    the pivots differ (a near tie decided the other way by rounding), a valid partial-pivoting
    factorisation with a small backward error is accepted instead."""
    import scipy.linalg

    a0 = np.asarray(inputs["a"])
    lu = np.asarray(outputs["a"])
    piv = np.asarray(outputs["ipiv"]).astype(np.int64)
    if not np.all(np.isfinite(lu)):
        return False
    ref, ref_piv = scipy.linalg.lu_factor(a0, check_finite=False)
    scale = max(1.0, float(np.max(np.abs(ref))))
    if np.array_equal(piv, ref_piv) and float(np.max(np.abs(lu - ref))) <= LU_RTOL * scale:
        return True
    return lu_backward_ok(a0, lu, piv)


def check_lu_exact(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    """Strict variant of :func:`check_lu` for tests: the pivots must equal scipy's."""
    import scipy.linalg

    a0 = np.asarray(inputs["a"])
    lu = np.asarray(outputs["a"])
    ref, ref_piv = scipy.linalg.lu_factor(a0, check_finite=False)
    scale = max(1.0, float(np.max(np.abs(ref))))
    return bool(
        np.array_equal(np.asarray(outputs["ipiv"]), ref_piv)
        and np.all(np.isfinite(lu))
        and float(np.max(np.abs(lu - ref))) <= LU_RTOL * scale
    )


def lu_backward_ok(a0: np.ndarray, lu: np.ndarray, piv: np.ndarray) -> bool:
    """``P A = L U`` holds to ``LU_RTOL`` with ``|L| <= 1`` (partial pivoting's property)."""
    m, n = a0.shape
    k = min(m, n)
    if piv.shape != (k,) or np.any(piv < np.arange(k)) or np.any(piv >= m):
        return False
    lower = np.tril(lu[:, :k], -1) + np.eye(m, k)
    upper = np.triu(lu[:k, :])
    if float(np.max(np.abs(lower))) > 1.0 + 1e-12:
        return False
    pa = np.array(a0, copy=True)
    for i, p in enumerate(piv):
        if p != i:
            pa[[i, p]] = pa[[p, i]]
    scale = max(1.0, float(np.max(np.abs(a0))), float(np.max(np.abs(upper))))
    return bool(float(np.max(np.abs(pa - lower @ upper))) <= LU_RTOL * scale)


# -------------------------------------------------------------------------------------- gemm
def gemm_arguments(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    m, n, k = int(inputs["m"]), int(inputs["n"]), int(inputs["k"])
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    c = np.full((m, n), np.nan)  # a kernel that leaves part of C unwritten fails the check
    return KernelCall([m, n, k, a, b, c])


def check_gemm(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    a, b = np.asarray(inputs["a"]), np.asarray(inputs["b"])
    c = np.asarray(outputs["c"])
    if c.shape != (a.shape[0], b.shape[1]) or not np.all(np.isfinite(c)):
        return False
    k = a.shape[1]
    scale = max(
        1.0, k * float(np.max(np.abs(a), initial=0.0)) * float(np.max(np.abs(b), initial=0.0))
    )
    return bool(float(np.max(np.abs(c - a @ b), initial=0.0)) <= GEMM_RTOL * scale)


def gemm_cuda_grid(values: dict[str, Any]) -> tuple[int, int]:
    """Launch grid of ``gemm_tiled``: ceil(n / block_x) x ceil(m / block_y)."""
    bx, by = int(values["block_x"]), int(values["block_y"])
    return (-(-int(values["n"]) // bx), -(-int(values["m"]) // by))
