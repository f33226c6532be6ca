"""The built-in demo: a real NumPy routine measured for real.

``blocked_matmul`` multiplies two n x n matrices block by block (``C[i, j] += A[i, k] @ B[k, j]``
on ``block`` x ``block`` tiles, visiting the tiles in ``order``, with a one-thread BLAS). Small
blocks pay Python and call overhead per tile, large ones lose cache locality, so the best block
size depends on n: a small, honest input-aware tuning problem that runs anywhere.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

DEMO_CONFIG = """\
# Built-in demo: tune the block size and loop order of a blocked NumPy matrix product.
[campaign]
name = "demo_blocked_matmul"
seed = 0

[kernel]
executor = "python"
function = "mlkaps_gpu.cli._demo:blocked_matmul"
measure = true
warmup = 1
repeats = 3

[inputs]
n = { type = "int", range = [32, 512], log = true }

[design]
block = { type = "int", values = [8, 16, 32, 64, 128, 256, 512] }
order = { type = "categorical", values = ["ijk", "ikj", "jki"] }
constraints = ["block <= n", "(n // block) ** 3 <= 32768"]

[objectives]
time = "minimize"

[sampling]
budget = 240

[trees]
prefix = "demo"
"""


#: The routine the demo tunes, as its configuration names it.
DEMO_FUNCTION = "mlkaps_gpu.cli._demo:blocked_matmul"
#: The fixed default the demo compares the header's choices with (valid at every size shown).
DEMO_DEFAULT = {"block": 32, "order": "ijk"}
#: The sizes the demo answers for: geometric over its range [32, 512], off the grid's points.
DEMO_SIZES = (40, 64, 100, 150, 200, 280, 380, 500)


@lru_cache(maxsize=4)
def _operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    return rng.random((n, n)), rng.random((n, n))


@lru_cache(maxsize=1)
def _one_blas_thread() -> object:
    """Limit this process's BLAS to one thread, once (the limit is kept for the process).

    Each tile product is a BLAS call. With the BLAS's own threads, a machine of a few cores
    times the same product in two modes: on a 2-core machine a 256 x 256 x 256 product took
    0.5 ms in a quiet process and 4 - 7 ms in the demo's worker, where its two threads
    contend with the campaign's process, so the demo's campaign and its check measured a
    different kernel from one run to the next (decision 0031).
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def blocked_matmul(n: int, block: int, order: str) -> float:
    """Compute A @ B by tiles with a one-thread BLAS; returns the checksum (the executor times
    the call; its warm-up run pays for limiting the threads)."""
    _one_blas_thread()
    a, b = _operands(int(n))
    c = np.zeros((n, n))
    starts = range(0, n, block)
    if order == "ijk":
        for i in starts:
            for j in starts:
                for k in starts:
                    c[i : i + block, j : j + block] += (
                        a[i : i + block, k : k + block] @ b[k : k + block, j : j + block]
                    )
    elif order == "ikj":
        for i in starts:
            for k in starts:
                tile = a[i : i + block, k : k + block]
                for j in starts:
                    c[i : i + block, j : j + block] += tile @ b[k : k + block, j : j + block]
    elif order == "jki":
        for j in starts:
            for k in starts:
                tile = b[k : k + block, j : j + block]
                for i in starts:
                    c[i : i + block, j : j + block] += a[i : i + block, k : k + block] @ tile
    else:
        raise ValueError(f"unknown loop order {order!r}")
    return float(c[0, 0])
