"""The worker side of isolated Python kernels (see :class:`~mlkaps_gpu.executors.PythonExecutor`).

:func:`make_runner` runs in the measurement worker (:mod:`~mlkaps_gpu.executors._worker`): it
caps the worker's memory, loads the function from its reference, and returns a runner whose
``measure`` evaluates one row, announcing every call to the parent (whose per-call timeout
restarts at each announcement).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping
from typing import Any

from mlkaps_gpu.executors._base import OK, RUNTIME_ERROR
from mlkaps_gpu.executors._python_function import Failure, RowEvaluator, summarize_samples
from mlkaps_gpu.executors._python_loader import load_function

_MIB = 1 << 20


def cap_memory(limit_mib: float) -> None:
    """Let this process map at most ``limit_mib`` MiB more than it maps now (``RLIMIT_AS``):
    an allocation past it fails (``MemoryError`` in Python) instead of swapping the machine."""
    current = _mapped_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + int(limit_mib * _MIB)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class PythonRunner:
    """Evaluates rows of one Python kernel inside the worker."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if config.get("memory_limit_mib"):
            cap_memory(float(config["memory_limit_mib"]))
        function = load_function(config["reference"])
        self.evaluator = RowEvaluator(
            function,
            objectives=config["objectives"],
            repeats=config["repeats"],
            warmup=config["warmup"],
            timer=config["timer"],
            measure=config["measure"],
        )
        self.limit = config.get("memory_limit_mib")

    def measure(self, request: Mapping[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
        try:
            samples = self.evaluator.evaluate(request["row"], progress)
        except Failure as failure:
            message = str(failure)
            if failure.restart and self.limit:
                message = f"memory cap of {self.limit:g} MiB reached: {message}"
            return {
                "status": RUNTIME_ERROR,
                "times": [],
                "message": message,
                "restart": failure.restart,
            }
        first = self.evaluator.objectives[0]
        return {
            "status": OK,
            "values": summarize_samples(samples),
            "times": list(samples[first]),
            "message": "",
        }


def make_runner(config: Mapping[str, Any]) -> PythonRunner:
    return PythonRunner(config)
