"""Worker-process side of :class:`~mlkaps_gpu.executors._cffi.CffiExecutor`.

Loads a compiled cffi module, builds the arguments (the contract of
:mod:`mlkaps_gpu.executors._worker_api`), times the entry function and checks its result.
"""

from __future__ import annotations

import gc
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ._python_loader import load_function
from ._timing import TimingPolicy, collect_times, summarize
from ._worker_api import Design, KernelCall, input_seed, overwritten_positions

_FLOAT_TYPES = {"float": "f", "double": "f", "long double": "f"}
_NUMPY_FOR_C = {
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
    "int": np.dtype(np.intc),
    "unsigned int": np.dtype(np.uintc),
    "long": np.dtype(np.int_),
    "unsigned long": np.dtype(np.uint),
    "long long": np.dtype(np.longlong),
    "short": np.dtype(np.short),
    "char": np.dtype(np.byte),
    "signed char": np.dtype(np.byte),
    "unsigned char": np.dtype(np.ubyte),
    "int8_t": np.dtype(np.int8),
    "int16_t": np.dtype(np.int16),
    "int32_t": np.dtype(np.int32),
    "int64_t": np.dtype(np.int64),
    "uint8_t": np.dtype(np.uint8),
    "uint16_t": np.dtype(np.uint16),
    "uint32_t": np.dtype(np.uint32),
    "uint64_t": np.dtype(np.uint64),
    "size_t": np.dtype(np.uintp),
}


#: Compiled modules one worker loads before it asks to be replaced (they cannot be unloaded).
MAX_MODULES = 256


class _InvalidResultError(Exception):
    pass


class _BadCallError(Exception):
    pass


def _failure(status: str, message: str) -> dict[str, Any]:
    return {"status": status, "times": [], "message": message}


def _function(function: Callable[..., Any] | str) -> Callable[..., Any]:
    """A builder or check: sent as a function, or as a resolved ``file.py:function`` /
    ``module:function`` reference loaded here."""
    return load_function(function) if isinstance(function, str) else function


class CffiRunner:
    """Created in the worker from the executor's configuration."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.entry: str = config["entry"]
        self.names: list[str] = list(config["names"])
        self.builder: Callable[..., KernelCall] = _function(config["builder"])
        self.check: Callable[[dict[str, Any], dict[str, Any]], bool] | None = (
            _function(config["check"]) if config["check"] is not None else None
        )
        self.policy: TimingPolicy = config["policy"]
        self.seed: int = config["seed"]
        self._modules: dict[str, Any] = {}

    def _load(self, name: str, path: str) -> Any:
        module = self._modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._modules[name] = module
        return module

    def measure(self, request: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
        progress("loading the compiled module")
        module = self._load(request["module"], request["path"])
        ffi, lib = module.ffi, module.lib
        function = getattr(lib, self.entry)
        prepared = self._arguments(ffi, ffi.typeof(function), request, progress)
        if isinstance(prepared, dict):
            return prepared  # the row failed before the kernel ran
        cargs, values, keep, restore = prepared
        if request.get("threads") is not None:
            lib._mlkaps_set_threads(int(request["threads"]))

        returned: list[Any] = [None]

        def run_once(index: int, timed: bool) -> float:
            for pos, pristine in restore.items():
                np.copyto(values[pos], pristine)
            progress(f"running the kernel (run {index})")
            start = time.perf_counter_ns()
            returned[0] = function(*cargs)
            stop = time.perf_counter_ns()
            if index == 0:
                self._check(values, restore, returned[0], progress)
            return (stop - start) * 1e-9

        collecting = gc.isenabled()
        gc.disable()  # no collector pauses inside the timed region
        try:
            times = collect_times(run_once, self.policy)
            if self.policy.warmup + len(times) > 1:
                self._check(values, restore, returned[0], progress)
        except _InvalidResultError as error:
            return _failure("invalid", str(error))
        finally:
            if collecting:
                gc.enable()
            keep.clear()  # the buffers were needed until the last run
        summary = summarize(times, self.policy.confidence)
        result: dict[str, Any] = {"status": "ok", "times": times, "message": summary.describe()}
        if len(self._modules) >= MAX_MODULES:
            result["restart"] = True  # loaded modules cannot be unloaded: start afresh
        return result

    def _arguments(
        self, ffi: Any, ftype: Any, request: dict[str, Any], progress: Callable[[str], None]
    ) -> tuple[list[Any], list[Any], list[Any], dict[int, np.ndarray]] | dict[str, Any]:
        """The kernel's C arguments, their values, the buffers to keep alive and the pristine
        copies of overwritten arrays; or the failure result of a row whose arguments cannot be
        built."""
        inputs: dict[str, Any] = request["inputs"]
        progress("building the arguments")
        rng = np.random.default_rng(input_seed(self.seed, inputs))
        try:
            call = self.builder(dict(inputs), rng)
        except Exception as error:  # noqa: BLE001 - a broken builder fails the row
            return _failure(
                "runtime_error", f"build_arguments raised {type(error).__name__}: {error}"
            )
        try:
            if not isinstance(call, KernelCall):
                raise _BadCallError(f"the builder returned {type(call).__name__}, not KernelCall")
            cargs, values, keep = self._convert(ffi, ftype, call, request["design"])
            restore = {
                pos: np.array(values[pos], copy=True)
                for pos in overwritten_positions(call, self.names)
                if isinstance(values[pos], np.ndarray)
            }
        except (_BadCallError, KeyError, TypeError, ValueError) as error:
            return _failure("runtime_error", f"bad kernel arguments: {error}")
        return cargs, values, keep, restore

    def _check(
        self,
        values: list[Any],
        restore: dict[int, np.ndarray],
        returned: Any,
        progress: Callable[[str], None],
    ) -> None:
        if self.check is None:
            return
        progress("checking the result")
        given = {name: restore.get(i, values[i]) for i, name in enumerate(self.names)}
        left = {name: values[i] for i, name in enumerate(self.names)}
        left["return"] = returned
        try:
            good = bool(self.check(given, left))
        except Exception as error:  # noqa: BLE001 - a failing check is a wrong answer
            raise _InvalidResultError(f"the check raised {type(error).__name__}: {error}") from None
        if not good:
            raise _InvalidResultError("wrong result (the check failed)")

    def _convert(
        self, ffi: Any, ftype: Any, call: KernelCall, design: dict[str, Any]
    ) -> tuple[list[Any], list[Any], list[Any]]:
        params = list(ftype.args)
        if len(call.args) != len(params):
            raise _BadCallError(
                f"{len(call.args)} arguments for {self.entry}, which takes {len(params)}"
            )
        cargs: list[Any] = []
        values: list[Any] = []
        keep: list[Any] = []
        for i, (value, ctype) in enumerate(zip(call.args, params, strict=True)):
            name = self.names[i] if i < len(self.names) else f"arg{i}"
            if isinstance(value, Design):
                value = value.resolve(design)
            if isinstance(value, np.generic):
                value = value.item()
            if ctype.kind == "pointer":
                if value is None:
                    cargs.append(ffi.NULL)
                elif isinstance(value, np.ndarray):
                    _check_array(name, value, ctype, ffi)
                    buffer = ffi.from_buffer(value)
                    keep.append(buffer)
                    cargs.append(ffi.cast(ctype, buffer))
                else:
                    raise _BadCallError(f"argument '{name}' ({ctype.cname}) needs a numpy array")
            elif ctype.kind == "primitive":
                if isinstance(value, (bool, int, float)):
                    number: Any = float(value) if ctype.cname in _FLOAT_TYPES else int(value)
                    cargs.append(number)
                    value = number
                else:
                    raise _BadCallError(f"argument '{name}' ({ctype.cname}) needs a number")
            else:
                raise _BadCallError(f"argument '{name}': unsupported C type {ctype.cname}")
            values.append(value)
        # ``keep`` holds the from_buffer objects: the cast pointers do not keep them alive
        return cargs, values, keep


def _check_array(name: str, array: np.ndarray, ctype: Any, ffi: Any) -> None:
    if not array.flags["C_CONTIGUOUS"]:
        raise _BadCallError(f"argument '{name}': the array must be C-contiguous")
    item = ctype.item
    if item.kind == "void":
        return
    if item.kind != "primitive":
        raise _BadCallError(f"argument '{name}': unsupported pointer type {ctype.cname}")
    expected = _NUMPY_FOR_C.get(item.cname)
    if expected is not None:
        if array.dtype != expected:
            raise _BadCallError(
                f"argument '{name}' ({ctype.cname}) needs dtype {expected}, got {array.dtype}"
            )
    elif array.dtype.itemsize != ffi.sizeof(item):
        raise _BadCallError(
            f"argument '{name}' ({ctype.cname}): element size {array.dtype.itemsize} != "
            f"{ffi.sizeof(item)}"
        )
