"""C kernels measured through cffi (API mode), compiled once per configuration, run in a worker.

:class:`CffiExecutor` takes the kernel's C source, the C prototype of its entry function and a
*builder* (a function, or a reference to one such as ``"kernels.py:build"``, loaded in the
worker) that makes the call's arguments (the contract is in
:mod:`mlkaps_gpu.executors._worker_api`; in short: ``build_arguments(inputs, rng)`` returns
``KernelCall(args=[...one per prototype parameter...], overwritten=[...])`` with
``Design("name")`` where a run-time design parameter goes). A configuration gives them as
``[kernel] source``, ``prototype`` and ``builder`` (a shipped kernel, ``builtin``, brings its
own; both are built by :meth:`mlkaps_gpu.kernels.BuiltinKernel.make_executor`).

Design parameters reach the kernel in one of three ways:

* ``macros``: compile-time, ``-D NAME=value`` (bool as 1/0, text values must be plain tokens
  such as ``ikj``); each distinct combination is its own compiled module;
* ``runtime``: passed as arguments, where the builder put ``Design("name")``;
* ``threads``: the name of the design parameter holding the OpenMP thread count: the generated
  glue calls ``omp_set_num_threads(value)`` in the worker right before the runs (the kernel
  needs no code for it; OMP_NUM_THREADS is not used).

**Compilation** (in the campaign process, in parallel across a batch's distinct macro sets):
cffi writes the extension's C file (user source, then the glue), and the C compiler is run as
an argument list (``cc -shared -fPIC <extra_compile_args> -D... -I<python include>``). The
module lands in ``cache_dir`` under a name made of a SHA-256 hash of the source, prototype,
compiler identity, flags and macro values, so a configuration is compiled once, also across
executors and campaigns sharing ``cache_dir``. A failed compilation is cached too (its message
is kept next to the modules) and gives the row ``compile_error`` with the compiler's output.

**Thread placement**: unless told otherwise (``pin_threads=False``, ``env`` or the campaign's
own ``OMP_PROC_BIND`` / ``OMP_PLACES``), the worker runs with ``OMP_PROC_BIND=close`` and
``OMP_PLACES=cores``: on the machines measured (``experiments/timing_noise.py``) unpinned
OpenMP threads made the objective vary several times more between campaigns.

**Measurement** happens in a worker process (:mod:`mlkaps_gpu.executors._worker`): arguments are
built, overwritten buffers are restored before every run (outside the timed region), only the
kernel call is timed (``time.perf_counter_ns``), ``warmup`` untimed runs come first and the
objective is the median of the timed runs (:mod:`mlkaps_gpu.executors._timing`). A crash gives
``runtime_error`` naming the signal; a step with no progress for ``timeout_s`` seconds (one
kernel run, the set-up, one check) gives ``timeout``; either way the worker is replaced and the
batch goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._files import write_atomically
from mlkaps_gpu._numbers import plain

from ._base import COMPILE_ERROR, INVALID, OK, Executor, ExecutorError, encode_times
from ._prototype import check_prototype
from ._python_loader import load_function, resolve_reference
from ._timing import TimingPolicy, median
from ._worker_api import KernelCall, split_prototype
from ._worker_handle import WorkerHandle

#: Bumped whenever the generated glue changes, so stale cached modules are not reused.
GLUE_VERSION = 1
#: Name of the glue function that sets the OpenMP thread count.
SET_THREADS = "_mlkaps_set_threads"

_GLUE = """
#line 1 "mlkaps_glue.c"
#ifdef _OPENMP
#include <omp.h>
#endif
static void _mlkaps_set_threads(int n)
{
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#else
    (void)n;
#endif
}
"""

_TOKEN = re.compile(r"^[A-Za-z0-9_.+\-]+$")
_CODEGEN_LOCK = threading.Lock()
_COMPILER_IDS: dict[tuple[str, ...], str] = {}
#: OpenMP placement of the worker by default: pinned threads vary much less from run to run.
PINNING: dict[str, str] = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
#: Characters of compiler output kept in a row's message (the whole output stays in the cache).
MESSAGE_LIMIT = 4000


def default_cache_dir() -> Path:
    """``$MLKAPS_GPU_CACHE/cffi``, else ``$XDG_CACHE_HOME/mlkaps_gpu/cffi`` (``~/.cache``)."""
    root = os.environ.get("MLKAPS_GPU_CACHE")
    if root:
        return Path(root) / "cffi"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlkaps_gpu" / "cffi"


def read_source(source: str | os.PathLike[str]) -> tuple[str, str]:
    """``(text, label)``: a path (``Path``, or one-line text naming an existing file) is read."""
    if isinstance(source, os.PathLike):
        path = Path(source)
    elif "\n" not in source and source.strip().endswith((".c", ".cu", ".h", ".cpp")):
        path = Path(source.strip())
    else:
        return str(source), "kernel.c"
    if not path.is_file():
        raise ExecutorError(f"kernel source file not found: {path}")
    return path.read_text(), str(path)


def macro_text(name: str, value: Any) -> str:
    """The ``value`` part of ``-D name=value``; ValueError for text that is no plain token."""
    value = plain(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not np.isfinite(value):
            raise ValueError(f"macro {name}: value {value!r} is not finite")
        return repr(value)
    text = str(value)
    if not _TOKEN.match(text):
        raise ValueError(f"macro {name}: value {text!r} is not a plain token")
    return text


@dataclass(frozen=True)
class CompileResult:
    """One configuration's module: ``path`` on success, else the compiler's ``error``."""

    name: str
    path: str | None
    error: str | None
    cached: bool


class ModuleCache:
    """Compiles cffi extension modules into a cache directory, once per key.

    Attributes:
        compiles: compiler runs made by this object (cache misses).
        hits: configurations found already compiled (or already failed) in the cache.
    """

    def __init__(
        self,
        source: str,
        label: str,
        prototype: str,
        *,
        compiler: Sequence[str],
        compile_args: Sequence[str],
        link_args: Sequence[str],
        cache_dir: Path,
        timeout_s: float,
    ) -> None:
        self.source = source
        self.label = label
        self.prototype = prototype.strip().rstrip(";")
        self.compiler = list(compiler)
        self.compile_args = list(compile_args)
        self.link_args = list(link_args)
        self.cache_dir = cache_dir
        self.timeout_s = timeout_s
        self.compiles = 0
        self.hits = 0
        self._lock = threading.Lock()
        self.suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"

    def compiler_id(self) -> str:
        key = tuple(self.compiler)
        if key not in _COMPILER_IDS:
            try:
                done = subprocess.run(
                    [*self.compiler, "--version"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as error:
                raise ExecutorError(
                    f"C compiler {self.compiler[0]!r} cannot run: {error}"
                ) from None
            lines = (done.stdout or done.stderr).strip().splitlines()
            _COMPILER_IDS[key] = lines[0] if lines else "unknown"
        return _COMPILER_IDS[key]

    def key(self, macros: Mapping[str, str]) -> str:
        import cffi

        blob = json.dumps(
            {
                "glue": GLUE_VERSION,
                "source": self.source,
                "prototype": self.prototype,
                "compiler": [self.compiler, self.compiler_id()],
                "compile_args": self.compile_args,
                "link_args": self.link_args,
                "macros": sorted(macros.items()),
                "suffix": self.suffix,
                "cffi": cffi.__version__,
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, macros: Mapping[str, str]) -> CompileResult:
        """The compiled module for these macro values (compiling it if needed)."""
        digest = self.key(macros)
        name = f"_mlkaps_{digest[:24]}"
        target = self.cache_dir / f"{name}{self.suffix}"
        failure = self.cache_dir / f"{name}.compile_error.txt"
        if target.is_file():
            with self._lock:
                self.hits += 1
            return CompileResult(name, str(target), None, True)
        if failure.is_file():
            with self._lock:
                self.hits += 1
            return CompileResult(name, None, failure.read_text(encoding="utf-8"), True)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self.compiles += 1
        with tempfile.TemporaryDirectory(prefix=name, dir=self.cache_dir) as work:
            c_file = Path(work) / f"{name}.c"
            self._write_c(name, c_file)
            out = Path(work) / f"{name}{self.suffix}"
            error, remember = self._compile(c_file, out, macros, Path(work))
            if error is not None:
                if remember:
                    write_atomically(failure, error)
                return CompileResult(name, None, error, False)
            os.replace(out, target)
        return CompileResult(name, str(target), None, False)

    def _compile(
        self, c_file: Path, out: Path, macros: Mapping[str, str], work: Path
    ) -> tuple[str | None, bool]:
        """Run the compiler: ``(error text or None, whether the failure is worth caching)``;
        only a real verdict of the compiler is cached, not a kill (out of memory...)."""
        defines = [f"-D{k}={v}" for k, v in sorted(macros.items())]
        command = [
            *self.compiler,
            "-shared",
            "-fPIC",
            *self.compile_args,
            *defines,
            "-I",
            sysconfig.get_paths()["include"],
            str(c_file),
            "-o",
            str(out),
            *self.link_args,
            "-lm",
        ]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
                cwd=work,
            )
        except subprocess.TimeoutExpired:
            return f"the compiler ran longer than {self.timeout_s:g} s", False
        if done.returncode == 0:
            return None, False
        text = (done.stderr + done.stdout).replace(str(work) + os.sep, "")
        return f"{command[0]} failed (exit {done.returncode}):\n{text}", done.returncode > 0

    def _write_c(self, name: str, c_file: Path) -> None:
        import cffi

        ffi = cffi.FFI()
        ffi.cdef(f"{self.prototype};\nstatic void {SET_THREADS}(int n);")
        label = self.label.replace("\\", "/").replace('"', "'")
        text = f'#line 1 "{label}"\n{self.source}\n{_GLUE}'
        ffi.set_source(name, text)
        with _CODEGEN_LOCK, contextlib.redirect_stdout(io.StringIO()):
            ffi.emit_c_code(str(c_file))


def _compiler_command(compiler: str | Sequence[str] | None) -> list[str]:
    """The C compiler as an argument list (default ``$CC`` split on spaces, else ``gcc``)."""
    if compiler is None:
        command = os.environ.get("CC", "gcc").split() or ["gcc"]
    elif isinstance(compiler, str):
        command = [compiler]
    else:
        command = list(compiler)
    if shutil.which(command[0]) is None:
        raise ExecutorError(f"C compiler {command[0]!r} not found")
    return command


def _worker_environment(pin_threads: bool, env: Mapping[str, str] | None) -> dict[str, str]:
    """Variables added to the worker's environment: thread pinning unless the campaign's own
    OpenMP placement settings are set, then ``env``."""
    worker_env = dict(PINNING) if pin_threads else {}
    for name in PINNING:
        if name in os.environ:
            worker_env.pop(name, None)
    worker_env.update(env or {})
    return worker_env


def _function_or_reference(
    function: Callable[..., Any] | str, what: str
) -> Callable[..., Any] | str:
    """What the worker is sent for a builder or a check: a callable as it is; a reference
    (``module:function`` or ``file.py:function``) loaded here first, so that a missing file or
    function is reported now, then sent as its resolved text (the worker loads it again: a
    function loaded from a file cannot be pickled by name)."""
    if isinstance(function, str):
        reference = resolve_reference(function, None)
        load_function(reference)
        return reference
    if not callable(function):
        raise ExecutorError(f"{what} must be callable or a 'module:function' reference")
    return function


class CffiExecutor(Executor):
    """Measure a C kernel (see the module docstring).

    Args:
        source: C source text, or the path of a ``.c`` file.
        entry: C prototype of the entry function, e.g.
            ``"void lu(int m, int n, double *a, int lda, int *ipiv, int nb, int variant)"``.
        build_arguments: ``(inputs: dict, rng) -> KernelCall``; a module-level function, or
            a reference to one: ``"module:function"`` or ``"path/to/file.py:function"``
            (relative to the working directory; loaded without ``PYTHONPATH``).
        macros: design parameters passed as ``-D NAME=value`` (a mapping renames them:
            ``{"tile_m": "TILE_M"}`` passes the design parameter ``tile_m`` as ``-DTILE_M=..``).
        runtime: design parameters passed as arguments (``Design(name)`` in the call).
        threads: design parameter holding the OpenMP thread count (set by the glue).
        check: ``(inputs, outputs) -> bool``; False gives ``invalid`` (a function or a
            reference, as ``build_arguments``).
        extra_compile_args: compiler flags (default ``["-O2", "-fopenmp"]``).
        extra_link_args: flags after the source file (``-lm`` is always added).
        compiler: C compiler command (argument list or one program name; default ``$CC`` split
            on spaces, else ``gcc``).
        timing: warm-up / repeats / adaptive policy (default: 1 warm-up, 5 repeats).
        timeout_s: seconds one step (a kernel run, the set-up, a check) may take.
        cache_dir: where compiled modules are kept (default :func:`default_cache_dir`).
        seed: seed of the builder's random generator (combined with the input values).
        env: extra environment variables of the worker process.
        compile_jobs: compilers run at once for a batch (default: number of CPUs).
        compile_timeout_s: seconds one compilation may take.
        pin_threads: run the worker with ``OMP_PROC_BIND=close`` and ``OMP_PLACES=cores``
            (OpenMP threads pinned, one per core), unless the campaign's environment or
            ``env`` sets them; see ``experiments/timing_noise.py`` for why.
    """

    objectives = ("time",)

    def __init__(
        self,
        source: str | os.PathLike[str],
        entry: str,
        build_arguments: Callable[[dict[str, Any], np.random.Generator], KernelCall] | str,
        *,
        macros: Iterable[str] | Mapping[str, str] = (),
        runtime: Iterable[str] = (),
        threads: str | None = None,
        check: Callable[[dict[str, Any], dict[str, Any]], bool] | str | None = None,
        extra_compile_args: Sequence[str] | None = None,
        extra_link_args: Sequence[str] = (),
        compiler: str | Sequence[str] | None = None,
        timing: TimingPolicy | None = None,
        timeout_s: float = 30.0,
        cache_dir: str | os.PathLike[str] | None = None,
        seed: int = 0,
        env: Mapping[str, str] | None = None,
        compile_jobs: int | None = None,
        compile_timeout_s: float = 300.0,
        pin_threads: bool = True,
    ) -> None:
        text, label = read_source(source)
        self.entry_name = check_prototype(entry)
        self.prototype = entry.strip().rstrip(";")
        _, self.parameter_names = split_prototype(self.prototype)
        builder = _function_or_reference(build_arguments, "build_arguments")
        checker = _function_or_reference(check, "check") if check is not None else None
        self._set_design(macros, runtime, threads)
        self.timing = timing or TimingPolicy()
        if timeout_s <= 0:
            raise ExecutorError("timeout_s must be > 0")
        self.timeout_s = float(timeout_s)
        self.cache = ModuleCache(
            text,
            label,
            self.prototype,
            compiler=_compiler_command(compiler),
            compile_args=(
                list(extra_compile_args) if extra_compile_args is not None else ["-O2", "-fopenmp"]
            ),
            link_args=list(extra_link_args),
            cache_dir=Path(cache_dir) if cache_dir is not None else default_cache_dir(),
            timeout_s=compile_timeout_s,
        )
        self.compile_jobs = max(1, compile_jobs or os.cpu_count() or 1)
        config = {
            "entry": self.entry_name,
            "names": self.parameter_names,
            "builder": builder,
            "check": checker,
            "policy": self.timing,
            "seed": int(seed),
        }
        self.worker_env = _worker_environment(pin_threads, env)
        self.worker = WorkerHandle(
            "mlkaps_gpu.executors._cffi_runner:CffiRunner", config, env=self.worker_env
        )

    def _set_design(
        self,
        macros: Iterable[str] | Mapping[str, str],
        runtime: Iterable[str],
        threads: str | None,
    ) -> None:
        if isinstance(macros, Mapping):
            self.macro_names = {str(k): str(v) for k, v in macros.items()}
        else:
            self.macro_names = {str(k): str(k) for k in macros}
        for macro in self.macro_names.values():
            if not macro.isidentifier():
                raise ExecutorError(f"macro name {macro!r} is not an identifier")
        self.macros = list(self.macro_names)
        self.runtime = list(runtime)
        self.threads = threads
        design = [*self.macros, *self.runtime, *([threads] if threads else [])]
        if len(set(design)) != len(design):
            raise ExecutorError(f"a design parameter is listed twice: {design}")
        self.design_names = design

    # ------------------------------------------------------------------------ bookkeeping
    @property
    def compile_count(self) -> int:
        """Compiler runs this executor made (the rest came from the cache)."""
        return self.cache.compiles

    @property
    def worker_starts(self) -> int:
        """Worker processes started so far (1 + restarts after crashes and timeouts)."""
        return self.worker.starts

    def close(self) -> None:
        """Stop the worker process (the compiled modules stay in the cache). Safe to call
        twice; a later :meth:`run` starts a new worker."""
        self.worker.close()

    # --------------------------------------------------------------------------------- run
    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        missing = [name for name in self.design_names if name not in rows.columns]
        if missing:
            raise ExecutorError(f"rows lack the design parameter column(s) {missing}")
        records = [{k: plain(v) for k, v in rec.items()} for rec in rows.to_dict("records")]
        macro_sets: list[dict[str, str] | str] = []
        for record in records:
            try:
                macro_sets.append(
                    {c: macro_text(c, record[d]) for d, c in self.macro_names.items()}
                )
            except ValueError as error:
                macro_sets.append(str(error))
        compiled = self._compile_all([m for m in macro_sets if isinstance(m, dict)])
        out: list[dict[str, Any]] = []
        for record, macros in zip(records, macro_sets, strict=True):
            if isinstance(macros, str):
                out.append(_row(INVALID, [], macros))
                continue
            if self.threads and not int(record[self.threads]) >= 1:
                out.append(_row(INVALID, [], f"{self.threads}={record[self.threads]} < 1"))
                continue
            module = compiled[_macro_key(macros)]
            if module.path is None:
                out.append(_row(COMPILE_ERROR, [], (module.error or "")[:MESSAGE_LIMIT]))
                continue
            request = {
                "module": module.name,
                "path": module.path,
                "inputs": {k: v for k, v in record.items() if k not in self.design_names},
                "design": {k: record[k] for k in self.design_names},
                "threads": int(record[self.threads]) if self.threads else None,
            }
            result = self.worker.measure(request, self.timeout_s)
            out.append(_row(result["status"], result.get("times", []), result.get("message", "")))
        return pd.DataFrame(out)

    def _compile_all(self, macro_sets: list[dict[str, str]]) -> dict[str, CompileResult]:
        unique: dict[str, dict[str, str]] = {}
        for macros in macro_sets:
            unique.setdefault(_macro_key(macros), macros)
        if len(unique) <= 1 or self.compile_jobs == 1:
            return {key: self.cache.get(m) for key, m in unique.items()}
        self.cache.compiler_id()  # once, before the threads
        with ThreadPoolExecutor(max_workers=min(self.compile_jobs, len(unique))) as pool:
            futures = {key: pool.submit(self.cache.get, m) for key, m in unique.items()}
            return {key: future.result() for key, future in futures.items()}


def _macro_key(macros: Mapping[str, str]) -> str:
    return json.dumps(sorted(macros.items()))


def _row(status: str, times: Sequence[float], message: str) -> dict[str, Any]:
    ok = status == OK and len(times) > 0
    return {
        "time": median(times) if ok else np.nan,
        "status": status if status != OK or ok else INVALID,
        "n_repeats": len(times) if ok else 0,
        "raw_times": encode_times(times) if ok else "[]",
        "message": str(message),
    }
