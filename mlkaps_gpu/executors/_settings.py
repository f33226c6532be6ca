"""What every ``[kernel]`` settings model shares, and the ``[execution]`` section.

Each executor has its own model of ``[kernel]`` (``PythonKernelSettings``,
``ReplayKernelSettings`` ...), derived from :class:`KernelSettingsBase`; the union of them,
discriminated on ``executor``, is in :mod:`mlkaps_gpu.executors._kernel_settings`. Paths
(replay files, a command's working directory, a C kernel's ``source``) are resolved when the
configuration is loaded, relative to the configuration file's folder, with ``${VAR}`` taken from
the environment, and must exist then. User code (a Python kernel, a C kernel's builder and
check) is never imported here: that happens when the executor is built.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from mlkaps_gpu._settings import FiniteFloat, SettingError, SettingsModel

#: Most measured runs (``repeats``) and untimed runs (``warmup``) per configuration.
MAX_REPEATS = 10_000
MAX_WARMUP = 10_000
#: Longest time one run of a command may take, in seconds.
MAX_TIMEOUT = 86_400.0
#: Largest memory cap of a Python kernel's worker, in MiB (1 PiB).
MAX_MEMORY_LIMIT = float(1 << 30)
#: Most Dask workers and batches in flight per worker.
MAX_WORKERS = 10_000
MAX_IN_FLIGHT = 1_000

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: ``[kernel] repeats``, ``warmup`` and ``timeout`` of the executors that run the kernel
#: themselves (python, command): one definition for both.
Repeats = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_REPEATS,
        description=(
            "python, command: measured runs per configuration (the objective is their median)."
        ),
    ),
]
Warmup = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_WARMUP,
        description=(
            "python, command: untimed runs first. With 1 or more, a timed python routine (as "
            "a C or CUDA kernel) measured after 0.1 s without a measurement warms up for 20 ms "
            "at least (decision 0050)."
        ),
    ),
]
Timeout = Annotated[
    FiniteFloat,
    Field(
        gt=0,
        le=MAX_TIMEOUT,
        description=(
            "command, python: seconds one run (one call of a Python kernel, in its worker "
            "process) may take before it is killed (status `timeout`)."
        ),
    ),
]
#: ``[kernel] options`` of the executors that build a shipped or compiled kernel (cffi, cupy).
KernelOptions = Annotated[
    dict[str, Any],
    Field(
        description=(
            "cffi / cupy: executor options (`timeout_s`, `cache_dir`, `env`, `compiler` ...), "
            "checked when the executor is built."
        ),
        json_schema_extra={"allowed": "a table of executor options"},
    ),
]


def base_folder(info: ValidationInfo) -> Path:
    """The folder relative paths are resolved against: the configuration file's (the
    validation context's ``base``), else the working directory."""
    context = info.context or {}
    return Path(context.get("base") or Path.cwd())


def expand_path(value: str, key: str, base: Path) -> Path:
    """``value`` with ``${VAR}`` expanded, relative to ``base`` unless absolute.

    Raises:
        SettingError: an environment variable is not set.
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise SettingError(key, f"environment variable {name} is not set", value)
        return os.environ[name]

    path = Path(_VARIABLE.sub(replace, value))
    return path if path.is_absolute() else base / path


class KernelSettingsBase(SettingsModel):
    """Base of the ``[kernel]`` model of one executor: its ``executor`` tag, and the checks the
    campaign runs on every kind (each a no-op unless the kind overrides it)."""

    executor: str

    @property
    def table_replay(self) -> bool:
        """Whether this is a replay of one table over input points (see
        ``ReplayKernelSettings``)."""
        return False

    def check_design(self, design: list[str]) -> None:
        """Check the keys that name design parameters against the space's design parameters.

        Raises:
            SettingError: naming the key.
        """

    def command_fields(self) -> list[str]:
        """Parameter names the kernel's command line uses as ``{name}`` (none but for
        ``command``)."""
        return []

    def check_objectives(self, objectives: list[str]) -> None:
        """Check what this kernel can produce against the campaign's objectives.

        Raises:
            SettingError: naming the key.
        """


class ExecutionSettings(SettingsModel):
    """``[execution]``: where measurements run: in this process (``local``) or on Dask workers
    (``dask``)."""

    backend: Literal["local", "dask"] = Field(
        default="local",
        description=(
            "`local`: in the campaign process; `dask`: on Dask workers (docs/distributed.md)."
        ),
    )
    cluster: Literal["local", "slurm"] = Field(
        default="local", description="dask: a local cluster or SLURM jobs (dask-jobqueue)."
    )
    scheduler: str | None = Field(
        default=None,
        pattern=r"^(tcp|tls|inproc)://\S+$",
        description="dask: the address of a running scheduler, e.g. `tcp://host:8786`.",
        json_schema_extra={"allowed": "an address like tcp://host:8786"},
    )
    workers: int = Field(
        default=1,
        ge=1,
        le=MAX_WORKERS,
        description="dask: worker processes (local) or SLURM workers.",
    )
    in_flight: int = Field(
        default=2,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="dask: batches asked ahead per worker (random and LHS samplers).",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="dask: options of the cluster (see docs/distributed.md).",
        json_schema_extra={"allowed": "a table of cluster options"},
    )

    @model_validator(mode="after")
    def _dask_keys_need_dask(self) -> ExecutionSettings:
        if self.backend == "local":
            for key in ("cluster", "scheduler", "workers", "in_flight", "options"):
                if self.given(key):
                    raise SettingError(
                        key, 'applies only to backend = "dask"; remove it', getattr(self, key)
                    )
        return self


__all__ = [
    "MAX_IN_FLIGHT",
    "MAX_MEMORY_LIMIT",
    "MAX_REPEATS",
    "MAX_TIMEOUT",
    "MAX_WARMUP",
    "MAX_WORKERS",
    "ExecutionSettings",
    "KernelOptions",
    "KernelSettingsBase",
    "Repeats",
    "Timeout",
    "Warmup",
    "base_folder",
    "expand_path",
]
