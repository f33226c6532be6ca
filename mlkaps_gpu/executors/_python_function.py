"""Python kernels: loading ``module:function`` or ``file.py:function``, and evaluating one row.

Used in the campaign's process (to check a configuration, and by an executor that runs
in-process) and in the measurement worker (:mod:`~mlkaps_gpu.executors._python_runner`), so
both evaluate a row the same way.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlkaps_gpu.executors._base import ExecutorError

TIMERS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


class Failure(Exception):  # noqa: N818 - a failed row, never escapes the executor
    """A row's evaluation failed; the message is the reason.

    Attributes:
        restart: the process that evaluated it should be replaced (memory exhausted).
    """

    def __init__(self, message: str, *, restart: bool = False) -> None:
        super().__init__(message)
        self.restart = restart


def split_reference(reference: str) -> tuple[str, str]:
    """``"where:function"`` -> ``(where, function)``.

    Raises:
        ExecutorError: not of that form.
    """
    where, _, name = reference.rpartition(":")
    if not where or not name.isidentifier():
        raise ExecutorError(
            f"function {reference!r}: give 'module:function' or 'file.py:function' (a path "
            "relative to the configuration file)"
        )
    return where, name


def is_file_reference(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def resolve_reference(reference: str, base: Path | None) -> str:
    """The reference with a file path made absolute (relative to ``base``)."""
    where, name = split_reference(reference)
    if not is_file_reference(where):
        return reference
    path = Path(where).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return f"{path.resolve()}:{name}"


def load_function(reference: str, base: Path | None = None) -> Callable[..., Any]:
    """The callable a reference names: ``module:function`` (imported) or ``file.py:function``
    (loaded from the file, relative to ``base``, without needing ``PYTHONPATH``; the file's
    folder is put on ``sys.path`` so that it may import its neighbours).

    Raises:
        ExecutorError: naming the file or module and the function, and what went wrong.
    """
    where, name = split_reference(resolve_reference(reference, base))
    if is_file_reference(where):
        module = _load_file(Path(where))
        label = where
    else:
        label = f"module {where}"
        try:
            module = importlib.import_module(where)
        except ImportError as error:
            raise ExecutorError(
                f"function {reference!r}: cannot import {where} ({_text(error)}); give a file "
                "path such as 'kernels.py:run' (relative to the configuration file) or put the "
                "module on PYTHONPATH"
            ) from None
        except Exception as error:  # noqa: BLE001 - user code at import time
            raise ExecutorError(
                f"function {reference!r}: importing {where} raised {_describe(error)}"
            ) from None
    function = getattr(module, name, None)
    if function is None:
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
        )
        raise ExecutorError(
            f"function {reference!r}: {label} has no function '{name}' "
            f"(it defines: {', '.join(defined[:12]) or 'no functions'})"
        )
    if not callable(function):
        raise ExecutorError(f"function {reference!r}: '{name}' in {label} is not callable")
    return function  # type: ignore[no-any-return]


def _load_file(path: Path) -> Any:
    if not path.is_file():
        raise ExecutorError(f"function file not found: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"mlkaps_kernel_{_identifier(path.stem)}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ExecutorError(f"{path}: not a Python file that can be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        sys.modules.pop(module_name, None)
        raise ExecutorError(f"{path}:{error.lineno}: syntax error ({error.msg})") from None
    except Exception as error:  # noqa: BLE001 - user code at import time
        sys.modules.pop(module_name, None)
        raise ExecutorError(f"{path}: loading it raised {_describe(error)}") from None
    return module


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


class RowEvaluator:
    """Evaluates one row with a Python function (see :class:`PythonExecutor` for the modes).

    Args:
        function: the model or the routine to time.
        objectives, repeats, warmup, timer, measure: as :class:`PythonExecutor`.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        objectives: Sequence[str],
        repeats: int,
        warmup: int,
        timer: str,
        measure: bool,
    ) -> None:
        self.function = function
        self.objectives = tuple(objectives)
        self.repeats = repeats
        self.warmup = warmup
        self.timer = timer
        self.measure = measure

    def evaluate(
        self, row: Mapping[str, Any], before_call: Callable[[str], None] | None = None
    ) -> dict[str, list[float]]:
        """Samples per objective (one per kept call).

        Args:
            row: parameter values.
            before_call: told ``"warm-up call i of n"`` / ``"call i of n"`` before each call.

        Raises:
            Failure: the function raised, or returned no usable value.
        """
        announce = before_call or (lambda _what: None)
        if self.measure:
            return self._time(dict(row), announce)
        return self._model(dict(row), announce)

    def _model(
        self, row: dict[str, Any], announce: Callable[[str], None]
    ) -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {name: [] for name in self.objectives}
        for index in range(self.repeats):
            announce(f"call {index + 1} of {self.repeats}")
            try:
                result = self.function(dict(row))
            except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
                raise _failure(exc) from None
            for name, value in self._objective_values(result).items():
                samples[name].append(value)
        return samples

    def _objective_values(self, result: Any) -> dict[str, float]:
        if isinstance(result, Mapping):
            missing = [name for name in self.objectives if name not in result]
            if missing:
                raise Failure(f"function returned no value for {missing}")
            raw = {name: result[name] for name in self.objectives}
        elif len(self.objectives) == 1:
            raw = {self.objectives[0]: result}
        else:
            raise Failure(
                f"function returned {type(result).__name__}; expected a dict with "
                f"{list(self.objectives)}"
            )
        out = {}
        for name, value in raw.items():
            try:
                out[name] = float(value)
            except (TypeError, ValueError):
                raise Failure(f"'{name}' is not a number: {value!r}") from None
        return out

    def _time(self, row: dict[str, Any], announce: Callable[[str], None]) -> dict[str, list[float]]:
        clock = TIMERS[self.timer]
        times: list[float] = []
        try:
            for index in range(self.warmup):
                announce(f"warm-up call {index + 1} of {self.warmup}")
                self.function(**row)
            for index in range(self.repeats):
                announce(f"call {index + 1} of {self.repeats}")
                start = clock()
                self.function(**row)
                times.append(clock() - start)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is a result
            raise _failure(exc) from None
        return {self.objectives[0]: times}


def summarize_samples(samples: Mapping[str, list[float]]) -> dict[str, float]:
    """The objective values of a row: the median of its samples (NaN kept: the executor marks
    a non-finite value as an impossible measurement)."""
    out = {}
    for name, values in samples.items():
        array = np.asarray(values, dtype=np.float64)
        out[name] = math.nan if np.isnan(array).any() else float(np.median(array))
    return out


def _failure(exc: BaseException) -> Failure:
    if isinstance(exc, MemoryError):
        return Failure(f"out of memory ({_describe(exc)})", restart=True)
    return Failure(_describe(exc))


def _text(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _describe(exc: BaseException) -> str:
    """One-line ``Type: text`` of an exception."""
    text = _text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
