"""A deliberately faulty C kernel, to check that an executor survives what kernels do.

``faulty(int n, double *x, int mode, int expect)`` sums ``x`` unless ``mode`` says otherwise:

====  ==========================================================================
mode  behaviour
====  ==========================================================================
0     correct: returns the sum of x
1     dereferences NULL (SIGSEGV)
2     loops forever
3     prints a message to stderr and aborts (SIGABRT)
4     prints a lot to stdout, then returns the sum (must not disturb the worker)
5     wrong answer: the sum plus one
6     returns 1 when omp_get_max_threads() == expect, else -1
7     adds 1 to every x[i] and returns the new sum (needs x restored before each run)
====  ==========================================================================

Compiled with ``-D BREAK=1`` the source has a syntax error. ``faulty_cuda`` is the CUDA
counterpart (y = 2 x, or a crash, a hang, a wrong answer). Used by the executor tests and handy
to check a new machine's setup.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlkaps_gpu.executors import Design, KernelCall

FAULTY_ENTRY = "double faulty(int n, double *x, int mode, int expect)"

FAULTY_SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef BREAK
#define BREAK 0
#endif
#if BREAK
this is not C;
#endif

double faulty(int n, double *x, int mode, int expect)
{
    double s = 0.0;
    if (mode == 1) {
        volatile double *nowhere = NULL;
        return *nowhere;
    }
    if (mode == 2) {
        volatile int spin = 1;
        while (spin) {
        }
    }
    if (mode == 3) {
        fprintf(stderr, "faulty kernel: giving up\n");
        fflush(stderr);
        abort();
    }
    if (mode == 4) {
        for (int i = 0; i < 2000; i++) printf("kernel chatter line %d\n", i);
        fflush(stdout);
    }
    if (mode == 6) {
#ifdef _OPENMP
        return omp_get_max_threads() == expect ? 1.0 : -1.0;
#else
        return expect == 1 ? 1.0 : -1.0;
#endif
    }
    if (mode == 7) {
        for (int i = 0; i < n; i++) x[i] += 1.0;
    }
    for (int i = 0; i < n; i++) s += x[i];
    if (mode == 5) s += 1.0;
    return s;
}
"""


def faulty_arguments(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    """x restored before each run."""
    n = int(inputs["n"])
    x = rng.random(n)
    return KernelCall([n, x, Design("mode"), Design("expect")], overwritten=["x"])


def faulty_arguments_unrestored(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    """x not declared overwritten: mode 7 then drifts from run to run."""
    call = faulty_arguments(inputs, rng)
    return KernelCall(call.args)


def check_faulty(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    mode = int(inputs["mode"])
    result = outputs["return"]
    x = np.asarray(inputs["x"])
    if mode == 6:
        return bool(result == 1.0)
    expected = float(x.sum()) + (x.size if mode == 7 else 0)
    return bool(abs(result - expected) <= 1e-9 * max(1.0, abs(expected)))


# ------------------------------------------------------------------------------------- CUDA
FAULTY_CUDA_KERNEL = "faulty_cuda"

FAULTY_CUDA_SOURCE = r"""
#ifndef BREAK
#define BREAK 0
#endif
#if BREAK
this is not CUDA;
#endif

/* y = 2 x; mode 1: write to an illegal address; 2: loop forever; 3: wrong answer (2 x + 1) */
extern "C" __global__ void faulty_cuda(int n, const double *x, double *y, int mode)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (mode == 1 && i == 0) {
        double *bad = (double *)0x10;
        bad[0] = 1.0;
    }
    if (mode == 2) {
        long long start = clock64(); /* the clock never goes back: an endless loop */
        while (clock64() >= start) {
        }
    }
    if (i < n) y[i] = 2.0 * x[i] + (mode == 3 ? 1.0 : 0.0);
}
"""


def faulty_cuda_arguments(inputs: dict[str, Any], rng: np.random.Generator) -> KernelCall:
    n = int(inputs["n"])
    x = rng.random(n)
    y = np.full(n, np.nan)
    return KernelCall([n, x, y, Design("mode")])


def faulty_cuda_grid(values: dict[str, Any]) -> tuple[int]:
    return (-(-int(values["n"]) // int(values["bs"])),)


def check_faulty_cuda(inputs: dict[str, Any], outputs: dict[str, Any]) -> bool:
    return bool(np.allclose(outputs["y"], 2.0 * np.asarray(inputs["x"]), rtol=1e-14, atol=0.0))
