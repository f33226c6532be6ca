"""CUDA kernels measured through CuPy (an optional extra: ``pip install mlkaps_gpu[gpu]``).

:class:`CupyExecutor` compiles the CUDA C source with ``cupy.RawModule`` (NVRTC; compile-time
design parameters become ``-D NAME=value`` options; CuPy keeps compiled kernels in its own disk
cache, and the worker keeps each macro set's module loaded), launches the kernel with a grid and
block computed from the row, and times each launch with CUDA events on the current stream.

The argument contract is the one of :mod:`mlkaps_gpu.executors._worker_api`, with these
conversions: numpy arrays are copied to the device before the runs (overwritten ones are
restored from a device copy before every run, outside the events), Python ``int``/``bool`` are
passed as ``int32`` and ``float`` as ``float64`` (give numpy scalars for other types), and the
check sees host copies (``outputs`` copied back after the run).

Like the C executor, every measurement runs in a worker process: an illegal memory access gives
``runtime_error`` and a fresh worker (a CUDA context does not survive it), a kernel that never
ends gives ``timeout``. CuPy is imported only inside the worker and by :meth:`__init__`'s check.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import plain

from ._base import INVALID, OK, Executor, ExecutorError, encode_times
from ._cffi import macro_text, read_source
from ._timing import TimingPolicy, collect_times, median, summarize
from ._worker_api import (
    Design,
    KernelCall,
    input_seed,
    overwritten_positions,
    split_prototype,
)
from ._worker_handle import WorkerHandle

#: GPU default: 2 warm-up launches (clocks, caches, lazy module load), 10 timed launches.
GPU_TIMING = TimingPolicy(warmup=2, repeats=10)
#: Seconds NVRTC may take for one module.
COMPILE_TIMEOUT_S = 300.0

Shape = Sequence[int | str] | Callable[[dict[str, Any]], Sequence[int]]


def cupy_available() -> bool:
    """True when the ``cupy`` package can be imported (no device is touched)."""
    return importlib.util.find_spec("cupy") is not None


def _shape(spec: Shape, values: dict[str, Any], what: str) -> tuple[int, ...]:
    if callable(spec):
        raw = spec(values)
    else:
        raw = [values[item] if isinstance(item, str) else item for item in spec]
    dims = tuple(int(plain(d)) for d in raw)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {dims}")
    if any(d < 1 for d in dims):
        raise ValueError(f"{what} {dims} has a dimension below 1")
    return dims


class CupyExecutor(Executor):
    """Measure a CUDA kernel through CuPy (see the module docstring).

    Args:
        source: CUDA C source text, or the path of a ``.cu`` file; the kernel must be
            ``extern "C" __global__``.
        kernel: the kernel's name.
        build_arguments: ``(inputs, rng) -> KernelCall``; a module-level function.
        grid: the launch grid: a callable of the row's values (inputs and design) returning 1 to
            3 ints, or a sequence of ints and parameter names.
        block: the block shape, same forms (e.g. ``("block_x", "block_y")``).
        macros: design parameters passed as ``-D NAME=value`` (a mapping renames them).
        runtime: design parameters passed as arguments (``Design(name)`` in the call).
        check: ``(inputs, outputs) -> bool`` on host arrays.
        options: NVRTC options besides the macros.
        shared_mem: dynamic shared memory bytes (int, or callable of the row's values).
        timing: default 2 warm-ups and 10 timed launches.
        timeout_s: seconds one step (a launch, the set-up, a check) may take.
        seed: seed of the builder's random generator (combined with the input values).
        device: CUDA device number.
        env: extra environment variables of the worker process.
        parameters: the kernel's parameter names (the keys of the check's dicts and of
            ``KernelCall.overwritten``); by default read from the ``__global__`` signature in
            the source, else ``arg0, arg1, ...``.
    """

    objectives = ("time",)

    def __init__(
        self,
        source: str | os.PathLike[str],
        kernel: str,
        build_arguments: Callable[[dict[str, Any], np.random.Generator], KernelCall],
        *,
        grid: Shape,
        block: Shape,
        macros: Iterable[str] | Mapping[str, str] = (),
        runtime: Iterable[str] = (),
        check: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
        options: Sequence[str] = (),
        shared_mem: int | Callable[[dict[str, Any]], int] = 0,
        timing: TimingPolicy | None = None,
        timeout_s: float = 30.0,
        seed: int = 0,
        device: int = 0,
        env: Mapping[str, str] | None = None,
        parameters: Sequence[str] | None = None,
    ) -> None:
        if not cupy_available():
            raise ExecutorError("CuPy is not installed: pip install mlkaps_gpu[gpu]")
        text, _ = read_source(source)
        if not kernel.isidentifier():
            raise ExecutorError(f"kernel name {kernel!r} is not an identifier")
        if isinstance(macros, Mapping):
            self.macro_names = {str(k): str(v) for k, v in macros.items()}
        else:
            self.macro_names = {str(k): str(k) for k in macros}
        self.runtime = list(runtime)
        self.design_names = [*self.macro_names, *self.runtime]
        self.grid = grid
        self.block = block
        self.shared_mem = shared_mem
        self.timeout_s = float(timeout_s)
        self.timing = timing or GPU_TIMING
        names = list(parameters) if parameters is not None else None
        if names is None:
            names = kernel_parameter_names(text, kernel)
        config = {
            "source": text,
            "kernel": kernel,
            "names": names,
            "options": [str(o) for o in options],
            "builder": build_arguments,
            "check": check,
            "policy": self.timing,
            "seed": int(seed),
            "device": int(device),
        }
        self.worker = WorkerHandle("mlkaps_gpu.executors._cupy:CupyRunner", config, env=env)

    @property
    def worker_starts(self) -> int:
        """Worker processes started so far (1 + restarts after crashes, timeouts and broken
        CUDA contexts)."""
        return self.worker.starts

    def close(self) -> None:
        """Stop the worker process (and release its GPU context). Safe to call twice; a later
        :meth:`run` starts a new worker."""
        self.worker.close()

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        missing = [name for name in self.design_names if name not in rows.columns]
        if missing:
            raise ExecutorError(f"rows lack the design parameter column(s) {missing}")
        out = []
        for raw in rows.to_dict("records"):
            record = {k: plain(v) for k, v in raw.items()}
            try:
                macros = {c: macro_text(c, record[d]) for d, c in self.macro_names.items()}
                grid = _shape(self.grid, record, "grid")
                block = _shape(self.block, record, "block")
                if math.prod(block) > 1024:
                    raise ValueError(f"block {block} has more than 1024 threads")
                shared = self.shared_mem(record) if callable(self.shared_mem) else self.shared_mem
            except (ValueError, KeyError, TypeError) as error:
                out.append(_row(INVALID, [], str(error)))
                continue
            request = {
                "macros": macros,
                "grid": grid,
                "block": block,
                "shared_mem": int(shared),
                "inputs": {k: v for k, v in record.items() if k not in self.design_names},
                "design": {k: record[k] for k in self.design_names},
            }
            result = self.worker.measure(request, self.timeout_s)
            out.append(_row(result["status"], result.get("times", []), result.get("message", "")))
        return pd.DataFrame(out)


def _row(status: str, times: Sequence[float], message: str) -> dict[str, Any]:
    ok = status == OK and len(times) > 0
    return {
        "time": median(times) if ok else np.nan,
        "status": status if status != OK or ok else INVALID,
        "n_repeats": len(times) if ok else 0,
        "raw_times": encode_times(times) if ok else "[]",
        "message": str(message),
    }


# ------------------------------------------------------------------------ worker-process side
class _InvalidResultError(Exception):
    pass


class CupyRunner:
    """Created in the worker from the executor's configuration."""

    def __init__(self, config: dict[str, Any]) -> None:
        import cupy

        self.cp = cupy
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            raise RuntimeError("no CUDA device")
        cupy.cuda.Device(config["device"]).use()
        self.source: str = config["source"]
        self.kernel: str = config["kernel"]
        self.options: list[str] = config["options"]
        self.builder = config["builder"]
        self.check = config["check"]
        self.policy: TimingPolicy = config["policy"]
        self.seed: int = config["seed"]
        self.names: list[str] = list(config["names"])
        self._functions: dict[tuple[tuple[str, str], ...], Any] = {}

    def _function(self, macros: dict[str, str], progress: Callable[..., None]) -> Any:
        key = tuple(sorted(macros.items()))
        if key not in self._functions:
            progress("compiling the CUDA module", COMPILE_TIMEOUT_S)
            options = (*self.options, *(f"-D{k}={v}" for k, v in key))
            module = self.cp.RawModule(code=self.source, options=options)
            self._functions[key] = module.get_function(self.kernel)
        return self._functions[key]

    def measure(self, request: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
        cp = self.cp
        try:
            function = self._function(request["macros"], progress)
        except cp.cuda.compiler.CompileException as error:
            return {"status": "compile_error", "times": [], "message": str(error)[:4000]}
        prepared = self._arguments(request, progress)
        if isinstance(prepared, dict):
            return prepared  # the row failed before the kernel ran
        host, device, restore = prepared
        grid, block, shared = request["grid"], request["block"], request["shared_mem"]
        start, stop = cp.cuda.Event(), cp.cuda.Event()

        def run_once(index: int, timed: bool) -> float:
            for pos, pristine in restore.items():
                device[pos][...] = pristine
            progress(f"running the kernel (run {index})")
            start.record()
            function(grid, block, tuple(device), shared_mem=shared)
            stop.record()
            stop.synchronize()
            if index == 0:
                self._check(host, device, progress)
            return float(cp.cuda.get_elapsed_time(start, stop)) * 1e-3

        try:
            times = collect_times(run_once, self.policy)
            if self.policy.warmup + len(times) > 1:
                self._check(host, device, progress)
        except _InvalidResultError as error:
            return {"status": "invalid", "times": [], "message": str(error)}
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as error:
            return {
                "status": "runtime_error",
                "times": [],
                "message": f"CUDA error: {error}",
                "restart": True,
            }
        summary = summarize(times, self.policy.confidence)
        return {"status": "ok", "times": times, "message": summary.describe()}

    def _arguments(
        self, request: dict[str, Any], progress: Callable[..., None]
    ) -> tuple[list[Any], list[Any], dict[int, Any]] | dict[str, Any]:
        """Host and device arguments and the pristine copies of overwritten device arrays; or
        the failure result of a row whose arguments cannot be built."""
        cp = self.cp
        progress("building the arguments")
        inputs = request["inputs"]
        rng = np.random.default_rng(input_seed(self.seed, inputs))
        try:
            call = self.builder(dict(inputs), rng)
        except Exception as error:  # noqa: BLE001 - a broken builder fails the row
            return {
                "status": "runtime_error",
                "times": [],
                "message": f"build_arguments raised {type(error).__name__}: {error}",
            }
        try:
            if not isinstance(call, KernelCall):
                raise TypeError(f"the builder returned {type(call).__name__}, not KernelCall")
            host, device = self._convert(call, request["design"])
            if self.names and len(self.names) != len(host):
                raise ValueError(
                    f"{len(host)} arguments for {self.kernel}, which takes {len(self.names)}"
                )
            names = self.names or _default_names(len(host))
            restore = {
                pos: device[pos].copy()
                for pos in overwritten_positions(call, names)
                if isinstance(device[pos], cp.ndarray)
            }
        except (KeyError, TypeError, ValueError) as error:
            return {"status": "runtime_error", "times": [], "message": f"bad arguments: {error}"}
        return host, device, restore

    def _convert(self, call: KernelCall, design: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        cp = self.cp
        host: list[Any] = []
        device: list[Any] = []
        for value in call.args:
            if isinstance(value, Design):
                value = value.resolve(design)
            if isinstance(value, np.ndarray):
                host.append(value)
                device.append(cp.asarray(value))
            elif isinstance(value, np.generic):
                host.append(value)
                device.append(value)
            elif isinstance(value, (bool, int)):
                host.append(np.int32(value))
                device.append(np.int32(value))
            elif isinstance(value, float):
                host.append(np.float64(value))
                device.append(np.float64(value))
            else:
                raise TypeError(f"unsupported kernel argument {type(value).__name__}")
        return host, device

    def _check(
        self,
        host: list[Any],
        device: list[Any],
        progress: Callable[..., None],
    ) -> None:
        if self.check is None:
            return
        progress("checking the result")
        names = self.names or _default_names(len(host))
        given = {names[i]: host[i] for i in range(len(host))}
        left = {
            names[i]: (d.get() if isinstance(d, self.cp.ndarray) else d)
            for i, d in enumerate(device)
        }
        left["return"] = None
        try:
            good = bool(self.check(given, left))
        except Exception as error:  # noqa: BLE001 - a failing check is a wrong answer
            raise _InvalidResultError(f"the check raised {type(error).__name__}: {error}") from None
        if not good:
            raise _InvalidResultError("wrong result (the check failed)")


def _default_names(count: int) -> list[str]:
    return [f"arg{i}" for i in range(count)]


def kernel_parameter_names(source: str, kernel: str) -> list[str]:
    """Parameter names of ``__global__ void kernel(...)`` in the CUDA source ([] if not found)."""
    match = re.search(
        r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
        + re.escape(kernel)
        + r"\s*\(([^)]*)\)",
        source,
    )
    if match is None:
        return []
    try:
        return split_prototype(f"void {kernel}({match.group(1)})")[1]
    except ValueError:
        return []
