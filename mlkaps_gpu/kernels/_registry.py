"""The shipped kernels: their spaces, expert defaults and executors.

``load_builtin(name)`` returns a :class:`BuiltinKernel`; ``BUILTIN_KERNELS`` maps every name to
its kernel. The C / CUDA sources are package data files next to this module. A user's own C
source (``[kernel] source = "saxpy.c"``) becomes a :class:`BuiltinKernel` too
(:func:`user_c_kernel`), so that both are measured through the same ``make_executor``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mlkaps_gpu.executors import Executor, ExecutorError
from mlkaps_gpu.space import Parameter

from . import _builders as b


def available_cores() -> int:
    """CPU cores this process may run on (the affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _threads(name: str, cores: int) -> Parameter:
    return Parameter(name, "int", values=tuple(range(1, cores + 1)))


@dataclass
class BuiltinKernel:
    """One shipped kernel.

    Attributes:
        name: registry key.
        description: one line.
        inputs: input parameters (the problem: sizes).
        design: design parameters (what is tuned).
        constraints: conditions on inputs and design, in the safe expression language.
        objectives: measured objectives.
        expert: the expert default configuration: a dict of design values, where a value may be
            a callable of the inputs dict; or one callable ``inputs -> dict``.
        source: file name of the kernel source (package data), or an absolute path (a
            user's kernel).
        entry: C prototype of the entry function (C kernels) or the kernel name (CUDA).
        language: ``"c"`` (cffi executor) or ``"cuda"`` (CuPy executor).
        executor_options: the builder, check, macros ... given to the executor.
    """

    name: str
    description: str
    inputs: list[Parameter]
    design: list[Parameter]
    constraints: list[str]
    objectives: tuple[str, ...] = ("time",)
    expert: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]] = field(
        default_factory=dict
    )
    source: str = ""
    entry: str = ""
    language: str = "c"
    executor_options: dict[str, Any] = field(default_factory=dict)

    @property
    def source_path(self) -> Path:
        """Path of the kernel's source file (inside the installed package for a shipped
        kernel)."""
        if Path(self.source).is_absolute():
            return Path(self.source)
        return Path(str(resources.files(__package__) / self.source))

    def expert_for(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The expert configuration for these input values."""
        values = dict(inputs)
        if callable(self.expert):
            return dict(self.expert(values))
        return {k: (v(values) if callable(v) else v) for k, v in self.expert.items()}

    def make_executor(self, **options: Any) -> Executor:
        """An executor measuring this kernel; ``options`` go to the executor (``timing``,
        ``timeout_s``, ``cache_dir``, ``env`` ...) and may override the defaults."""
        settings = {**self.executor_options, **options}
        if self.language == "c":
            from mlkaps_gpu.executors import CffiExecutor

            return CffiExecutor(self.source_path, self.entry, **settings)
        if self.language == "cuda":
            from mlkaps_gpu.executors import CupyExecutor

            return CupyExecutor(self.source_path, self.entry, **settings)
        raise ExecutorError(f"kernel {self.name}: unknown language {self.language!r}")


def user_c_kernel(
    source: str | Path,
    prototype: str,
    builder: str | Callable[..., Any],
    *,
    check: str | Callable[..., Any] | None = None,
    macros: Sequence[str] | Mapping[str, str] = (),
    runtime: Sequence[str] = (),
    threads: str | None = None,
    extra_compile_args: list[str] | None = None,
) -> BuiltinKernel:
    """A user's C kernel (measured like a shipped one, through cffi).

    Args:
        source: the C file (made absolute).
        prototype: C prototype of its entry function.
        builder: ``build_arguments(inputs, rng) -> KernelCall``, or a reference to it
            (``"module:function"``, ``"path/to/file.py:function"``).
        check: ``check(inputs, outputs) -> bool`` or a reference; None: no check.
        macros, runtime, threads, extra_compile_args: as :class:`CffiExecutor` takes them.

    The kernel's inputs, design and constraints are the campaign's (empty here).
    """
    path = Path(source).resolve()
    options: dict[str, Any] = {
        "build_arguments": builder,
        "check": check,
        "macros": dict(macros) if isinstance(macros, Mapping) else list(macros),
        "runtime": list(runtime),
        "threads": threads,
    }
    if extra_compile_args is not None:
        options["extra_compile_args"] = list(extra_compile_args)
    entry = prototype.strip().rstrip(";")
    return BuiltinKernel(
        name=path.stem,
        description=f"{entry} from {path.name}",
        inputs=[],
        design=[],
        constraints=[],
        source=str(path),
        entry=entry,
        executor_options=options,
    )


def _matsum(cores: int) -> BuiltinKernel:
    return BuiltinKernel(
        name="matsum",
        description="Sum of an n x m matrix of doubles with T OpenMP threads",
        inputs=[
            Parameter("n", "int", low=16, high=2048, log=True),
            Parameter("m", "int", low=16, high=2048, log=True),
        ],
        design=[_threads("T", cores)],
        constraints=[],
        expert={"T": cores},
        source="matsum.c",
        entry="double matsum(int n, int m, const double *a)",
        executor_options={
            "build_arguments": b.matsum_arguments,
            "check": b.check_matsum,
            "threads": "T",
        },
    )


def _lu(cores: int) -> BuiltinKernel:
    return BuiltinKernel(
        name="lu",
        description=(
            "Blocked right-looking LU with partial pivoting (dgetrf semantics, row-major): "
            "block size, panel variant, tiles of the trailing update, threads"
        ),
        inputs=[
            Parameter("m", "int", low=64, high=1024, log=True),
            Parameter("n", "int", low=64, high=1024, log=True),
        ],
        design=[
            Parameter("nb", "int", values=(8, 16, 32, 64, 128, 256)),
            Parameter("panel", "categorical", values=tuple(b.PANEL_CODES)),
            Parameter("tile_m", "int", values=(8, 16, 32, 64)),
            Parameter("tile_n", "int", values=(16, 32, 64, 128, 256)),
            _threads("threads", cores),
        ],
        # The kernel is correct for any nb; larger blocks than min(m, n) only repeat nb=min(m,n).
        constraints=["nb <= min(m, n)"],
        # LAPACK's reference: block size 64, recursive panel (dgetrf2), all threads.
        expert={"nb": 64, "panel": "recursive", "tile_m": 32, "tile_n": 64, "threads": cores},
        source="lu.c",
        entry="void lu(int m, int n, double *a, int lda, int *ipiv, int nb, int variant)",
        executor_options={
            "build_arguments": b.lu_arguments,
            "check": b.check_lu,
            "macros": {"tile_m": "TILE_M", "tile_n": "TILE_N"},
            "runtime": ["nb", "panel"],
            "threads": "threads",
        },
    )


def _gemm(cores: int) -> BuiltinKernel:
    return BuiltinKernel(
        name="gemm",
        description="Tiled C = A * B (row-major doubles): tiles, unrolling, loop order, threads",
        inputs=[
            Parameter("m", "int", low=32, high=512, log=True),
            Parameter("n", "int", low=32, high=512, log=True),
            Parameter("k", "int", low=32, high=512, log=True),
        ],
        design=[
            Parameter("tile_m", "int", values=(8, 16, 32, 64, 128)),
            Parameter("tile_n", "int", values=(16, 32, 64, 128, 256)),
            Parameter("tile_k", "int", values=(16, 32, 64, 128, 256)),
            Parameter("unroll", "int", values=(1, 2, 4, 8)),
            Parameter("loop_order", "categorical", values=("ijk", "ikj", "kij")),
            _threads("threads", cores),
        ],
        constraints=[],
        expert={
            "tile_m": 32,
            "tile_n": 64,
            "tile_k": 64,
            "unroll": 4,
            "loop_order": "ikj",
            "threads": cores,
        },
        source="gemm.c",
        entry="void gemm(int m, int n, int k, const double *a, const double *b, double *c)",
        executor_options={
            "build_arguments": b.gemm_arguments,
            "check": b.check_gemm,
            "macros": {
                "tile_m": "TILE_M",
                "tile_n": "TILE_N",
                "tile_k": "TILE_K",
                "unroll": "UNROLL",
                "loop_order": "LOOP_ORDER",
            },
            "threads": "threads",
        },
    )


def _gemm_cuda() -> BuiltinKernel:
    return BuiltinKernel(
        name="gemm_cuda",
        description="Shared-memory tiled C = A * B on an NVIDIA GPU through CuPy (doubles)",
        inputs=[
            Parameter("m", "int", low=64, high=4096, log=True),
            Parameter("n", "int", low=64, high=4096, log=True),
            Parameter("k", "int", low=64, high=4096, log=True),
        ],
        design=[
            Parameter("block_x", "int", values=(8, 16, 32)),
            Parameter("block_y", "int", values=(1, 2, 4, 8, 16, 32)),
            Parameter("tile_k", "int", values=(8, 16, 32, 64)),
        ],
        constraints=["block_x * block_y <= 1024", "block_x * block_y >= 32"],
        expert={"block_x": 16, "block_y": 16, "tile_k": 16},
        source="gemm_cuda.cu",
        entry="gemm_tiled",
        language="cuda",
        executor_options={
            "build_arguments": b.gemm_arguments,
            "check": b.check_gemm,
            "macros": {"block_x": "BLOCK_X", "block_y": "BLOCK_Y", "tile_k": "TILE_K"},
            "block": ("block_x", "block_y"),
            "grid": b.gemm_cuda_grid,
        },
    )


def _all() -> dict[str, BuiltinKernel]:
    cores = available_cores()
    kernels = [_matsum(cores), _lu(cores), _gemm(cores), _gemm_cuda()]
    return {kernel.name: kernel for kernel in kernels}


#: Every shipped kernel by name (thread ranges sized to this machine's cores at import).
BUILTIN_KERNELS: dict[str, BuiltinKernel] = _all()


def load_builtin(name: str) -> BuiltinKernel:
    """The shipped kernel ``name`` (a fresh copy: changing it leaves the registry as is)."""
    if name not in BUILTIN_KERNELS:
        known = ", ".join(sorted(BUILTIN_KERNELS))
        raise KeyError(f"no built-in kernel '{name}' (known: {known})")
    return _all()[name]
