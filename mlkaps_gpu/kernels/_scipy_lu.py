"""LU factorisation with partial pivoting built from SciPy's LAPACK / BLAS wrappers: a real
library with real knobs, whose own default call is the expert.

``scipy_lu(m, n, method, nb, threads)`` factors the seeded random ``m x n`` matrix of that size
(the same one at every call) and returns ``(lu, piv)`` in :func:`scipy.linalg.lu_factor`'s form
(``A[perm] = L @ U`` with ``piv`` 0-based LAPACK row interchanges). Like ``lu_factor(A)`` every
method leaves ``A`` intact (it factors a Fortran-ordered copy) and checks that it is finite.

Methods:

* ``library``: ``scipy.linalg.lu_factor(A)``, one ``dgetrf`` on the whole matrix (OpenBLAS's
  own recursive, threaded getrf); ``nb`` is ignored (a campaign pins it to one value).
* ``blocked``: right-looking blocked LU; ``dgetrf`` on each ``nb``-column panel, its row
  interchanges applied to the other columns (a gather of the moved rows), ``dtrsm`` for the
  block row of U and one ``dgemm`` for the trailing update.
* ``recursive``: recursive LU (Toledo); the columns split in halves down to at most ``nb``
  columns, those leaves factored by ``dgetrf``, the right half updated by ``dtrsm`` and
  ``dgemm``.

``threads`` is the BLAS thread count, set with threadpoolctl around the call; the library's
default (every core: :func:`default_threads`) is left untouched, so the configuration
``method="library", threads=default_threads()`` *is* the plain call ``lu_factor(A)``:
:func:`scipy_lu_expert` gives it. SciPy is imported on first use only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

#: Values of the ``method`` design parameter.
SCIPY_LU_METHODS = ("library", "blocked", "recursive")
#: Values of the ``nb`` design parameter (block / leaf width in columns).
SCIPY_LU_BLOCKS = (16, 32, 64, 128, 256, 512)


@lru_cache(maxsize=1)
def _controller() -> Any:
    """One threadpoolctl controller (inspecting the loaded libraries is slow: do it once)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@lru_cache(maxsize=1)
def default_threads() -> int:
    """The BLAS library's own thread count (what ``lu_factor(A)`` uses when nobody limits it)."""
    counts = [info["num_threads"] for info in _controller().info() if info["user_api"] == "blas"]
    return max(counts) if counts else 1


@lru_cache(maxsize=8)
def scipy_lu_matrix(m: int, n: int) -> np.ndarray:
    """The seeded ``m x n`` matrix factored at that size (read-only; entries normal(0, 1))."""
    matrix = np.random.default_rng([m, n]).standard_normal((m, n))
    matrix.setflags(write=False)
    return matrix


def scipy_lu_expert() -> dict[str, Any]:
    """The library's default call, ``lu_factor(A)`` with the default threads, as a configuration."""
    return {"method": "library", "nb": SCIPY_LU_BLOCKS[0], "threads": default_threads()}


def scipy_lu(m: int, n: int, method: str, nb: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Factor the ``m x n`` matrix of :func:`scipy_lu_matrix` (module docstring); the timed
    routine of a ``measure = true`` Python campaign."""
    matrix = scipy_lu_matrix(int(m), int(n))
    return lu_factor_with(matrix, str(method), int(nb), int(threads))


def lu_factor_with(
    matrix: np.ndarray, method: str, nb: int, threads: int
) -> tuple[np.ndarray, np.ndarray]:
    """``lu_factor(matrix)`` computed by ``method`` with block ``nb`` on ``threads`` BLAS
    threads; returns ``(lu, piv)`` as :func:`scipy.linalg.lu_factor` does."""
    if method not in SCIPY_LU_METHODS:
        raise ValueError(f"method must be one of {SCIPY_LU_METHODS}, not {method!r}")
    if nb < 1 or threads < 1:
        raise ValueError(f"nb and threads must be positive, got nb={nb}, threads={threads}")
    if threads == default_threads():
        return _factor(matrix, method, nb)
    with _controller().limit(limits=threads, user_api="blas"):
        return _factor(matrix, method, nb)


def _factor(matrix: np.ndarray, method: str, nb: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.linalg import lu_factor

    if method == "library":
        return lu_factor(matrix)
    work = np.array(np.asarray_chkfinite(matrix), dtype=np.float64, order="F")
    piv = np.arange(min(work.shape), dtype=np.int32)
    if method == "blocked":
        _blocked(work, piv, nb)
    else:
        _recursive(work, piv, 0, min(work.shape), nb)
        _update(work, 0, min(work.shape), work.shape[1])  # the columns beyond a wide square
    return work, piv


def _panel(work: np.ndarray, piv: np.ndarray, start: int, width: int) -> None:
    """Factor columns ``start : start + width`` from row ``start`` down with ``dgetrf`` and apply
    its row interchanges to the other columns."""
    from scipy.linalg.lapack import dgetrf

    lu, local, info = dgetrf(work[start:, start : start + width])
    if info < 0:  # pragma: no cover - a wrong argument, never a singular matrix (info > 0)
        raise ValueError(f"dgetrf: argument {-info} is illegal")
    piv[start : start + width] = local + start
    work[start:, start : start + width] = lu
    moved, source = _moved_rows(local)
    if len(moved):
        rows, sources = moved + start, source + start
        work[rows, :start] = work[sources, :start]
        work[rows, start + width :] = work[sources, start + width :]


def _moved_rows(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interchanges ``row k <-> row local[k]`` (k = 0, 1, ... in turn, LAPACK's ``laswp``) as
    a gather: row ``moved[i]`` of the result is row ``source[i]`` of the input; at most
    ``2 * len(local)`` rows move."""
    order: dict[int, int] = {}
    for k, other in enumerate(local.tolist()):
        if other != k:
            order[k], order[other] = order.get(other, other), order.get(k, k)
    moved = np.fromiter(order, dtype=np.intp, count=len(order))
    source = np.fromiter(order.values(), dtype=np.intp, count=len(order))
    keep = moved != source
    return moved[keep], source[keep]


def _update(work: np.ndarray, start: int, width: int, last: int) -> None:
    """Block row of U and trailing update for the panel ``start : start + width``, on the
    columns ``start + width : last``: ``U12 = L11^-1 A12`` (``dtrsm``), ``A22 -= L21 U12``."""
    from scipy.linalg.blas import dgemm, dtrsm

    right = slice(start + width, last)
    if right.start >= last:
        return
    top = slice(start, start + width)
    work[top, right] = dtrsm(1.0, work[top, top], work[top, right], lower=1, diag=1)
    below = slice(start + width, work.shape[0])
    if below.start < work.shape[0]:
        # SciPy's dgemm, not NumPy's matmul: NumPy links a second OpenBLAS whose idle threads
        # would spin against SciPy's between the calls
        work[below, right] += dgemm(-1.0, work[below, top], work[top, right])


def _blocked(work: np.ndarray, piv: np.ndarray, nb: int) -> None:
    for start in range(0, min(work.shape), nb):
        width = min(nb, min(work.shape) - start)
        _panel(work, piv, start, width)
        _update(work, start, width, work.shape[1])


def _recursive(work: np.ndarray, piv: np.ndarray, start: int, width: int, nb: int) -> None:
    """Factor columns ``start : start + width`` (rows ``start :``), interchanges applied to every
    column of the matrix; the update of the columns beyond is left to the caller."""
    if width <= nb:
        _panel(work, piv, start, width)
        return
    left = width // 2
    _recursive(work, piv, start, left, nb)
    _update(work, start, left, start + width)
    _recursive(work, piv, start + left, width - left, nb)
