"""The ``[kernel]`` and ``[execution]`` sections: what measures a configuration, and where.

Each executor kind reads its own keys of ``[kernel]`` (:data:`KERNEL_KEYS`); a key of another
kind is refused rather than ignored. Paths (replay files, a command's working directory) are
resolved when the configuration is loaded, relative to the configuration file's folder, with
``${VAR}`` taken from the environment, and must exist then.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._command import template_fields
from mlkaps_gpu.space import FiniteFloat, SettingError, SettingsModel

EXECUTORS = ("python", "replay", "cffi", "cupy", "command")
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

#: The ``[kernel]`` keys each executor kind reads (besides ``executor``).
KERNEL_KEYS: dict[str, tuple[str, ...]] = {
    "python": ("function", "measure", "repeats", "warmup", "timeout", "memory_limit"),
    "replay": ("files", "format", "objective", "design_columns", "key_suffix", "suffix_keys"),
    "cffi": ("builtin", "options"),
    "cupy": ("builtin", "options"),
    "external": (),
    "command": (
        "command",
        "repeats",
        "warmup",
        "timeout",
        "pattern",
        "cwd",
        "env",
        "invalid_exit_codes",
    ),
}
#: Keys each kind cannot do without.
REQUIRED_KERNEL_KEYS: dict[str, tuple[str, ...]] = {
    "python": ("function",),
    "replay": ("files",),
    "cffi": ("builtin",),
    "cupy": ("builtin",),
    "command": ("command",),
    "external": (),
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FUNCTION = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*|[^:]+\.py):[A-Za-z_][A-Za-z0-9_]*")


def _base(info: ValidationInfo) -> Path:
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


class KernelSettings(SettingsModel):
    """``[kernel]``: the executor and what it needs."""

    executor: Literal["python", "replay", "cffi", "cupy", "command", "external"] = Field(
        description=(
            "`python`: a Python function; `replay`: recorded measurements; `cffi`: a shipped C "
            "kernel; `cupy`: a shipped CUDA kernel; `command`: an external program run per "
            "configuration; `external`: measured by your own loop through `Campaign.ask` / "
            "`Campaign.tell`."
        )
    )
    builtin: str | None = Field(
        default=None,
        description="cffi / cupy: the shipped kernel (`lu`, `gemm`, `matsum`, `gemm_cuda`).",
    )
    function: str | None = Field(
        default=None,
        description=(
            "python: `module:function`, or `file.py:function` (a path relative to the "
            "configuration file, loaded without PYTHONPATH), called as `function(row)` returning "
            "the objective(s), or timed as `function(**row)` with `measure = true`; it runs in "
            "a worker process (see `timeout` and `memory_limit`)."
        ),
        json_schema_extra={"allowed": 'a string "module:function" or "file.py:function"'},
    )
    measure: bool = Field(
        default=False,
        description="python: time `function(**row)` instead of asking it (one objective).",
    )
    repeats: int = Field(
        default=1,
        ge=1,
        le=MAX_REPEATS,
        description=(
            "python, command: measured runs per configuration (the objective is their median)."
        ),
    )
    warmup: int = Field(
        default=0, ge=0, le=MAX_WARMUP, description="python, command: untimed runs first."
    )
    files: str | dict[str, dict[str, str]] | None = Field(
        default=None,
        description=(
            "replay: a data file, or `{input = {value = file, ...}}` (one file per value of an "
            "input, e.g. per GPU); `${VAR}` is expanded, relative paths are relative to the "
            "configuration file."
        ),
        json_schema_extra={"allowed": 'a path, or a table {input = {value = "path", ...}}'},
    )
    format: Literal["kernel_tuner", "csv"] = Field(
        default="kernel_tuner", description="replay: Kernel Tuner cache files or CSV tables."
    )
    objective: str = Field(default="time", description="replay: the data's objective column.")
    design_columns: list[str] | None = Field(
        default=None, description="replay (csv): the columns that are design parameters."
    )
    key_suffix: str | None = Field(
        default=None, description="replay: a suffix of the data's configuration keys to strip."
    )
    suffix_keys: list[str] | None = Field(
        default=None, description="replay: the parameters the `key_suffix` stands for."
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "cffi / cupy: executor options (`timeout_s`, `cache_dir`, `env`, `compiler` ...), "
            "checked when the executor is built."
        ),
        json_schema_extra={"allowed": "a table of executor options"},
    )
    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description=(
            'command: the program and its arguments, e.g. `["./bench", "--n", "{n}"]`; `{name}` '
            "is replaced by the configuration's value of parameter `name` (`{{` and `}}` give "
            "braces); no shell. A program given with a `/` is relative to `cwd`, otherwise "
            "looked up on PATH."
        ),
        json_schema_extra={"allowed": "a non-empty list of strings"},
    )
    timeout: FiniteFloat = Field(
        default=60.0,
        gt=0,
        le=MAX_TIMEOUT,
        description=(
            "command, python: seconds one run (one call of a Python kernel, in its worker "
            "process) may take before it is killed (status `timeout`)."
        ),
    )
    memory_limit: FiniteFloat | None = Field(
        default=None,
        gt=0,
        le=MAX_MEMORY_LIMIT,
        description=(
            "python: MiB the kernel's worker process may allocate beyond what it holds once "
            "started; past it the call fails (status `runtime_error`) and the worker restarts. "
            "Default: no cap."
        ),
    )
    pattern: str | None = Field(
        default=None,
        description=(
            "command: regular expression reading the objective from stdout (one group, or one "
            "named group per objective; the last match counts). Default: the last line of "
            "stdout is JSON, a number or `{objective = value}`."
        ),
    )
    cwd: str | None = Field(
        default=None,
        description=(
            "command: working directory of the program (default: the configuration's folder)."
        ),
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="command: environment variables added for the program."
    )
    invalid_exit_codes: list[int] = Field(
        default_factory=list,
        description="command: exit statuses meaning a wrong answer (status `invalid`).",
        json_schema_extra={"allowed": "a list of integers from 1 to 255"},
    )

    @field_validator("function")
    @classmethod
    def _module_function(cls, value: str | None) -> str | None:
        if value is not None and not _FUNCTION.fullmatch(value):
            raise SettingError("function", "must be 'module:function' or 'file.py:function'", value)
        return value

    @field_validator("invalid_exit_codes")
    @classmethod
    def _exit_codes(cls, value: list[int]) -> list[int]:
        for index, code in enumerate(value):
            if not 1 <= code <= 255:
                raise SettingError(
                    f"invalid_exit_codes[{index}]", "must be an exit status from 1 to 255", code
                )
        return value

    @field_validator("pattern")
    @classmethod
    def _regular_expression(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compiled = re.compile(value)
            except re.error as error:
                raise SettingError(
                    "pattern", f"not a regular expression ({error})", value
                ) from None
            if compiled.groups < 1:
                raise SettingError(
                    "pattern",
                    "needs a group around the objective's number, e.g. 'time=(\\S+)'",
                    value,
                )
        return value

    @field_validator("command")
    @classmethod
    def _command_template(cls, value: list[str] | None) -> list[str] | None:
        for index, argument in enumerate(value or []):
            try:
                template_fields(argument)
            except ExecutorError as error:
                raise SettingError(f"command[{index}]", str(error), argument) from None
        return value

    @model_validator(mode="after")
    def _keys_of_the_executor(self, info: ValidationInfo) -> KernelSettings:
        kind = self.executor
        for key in self.model_fields_set - {"executor"}:
            if key not in KERNEL_KEYS[kind]:
                users = [k for k, keys in KERNEL_KEYS.items() if key in keys]
                raise SettingError(
                    key,
                    f'not read by executor = "{kind}" (only by {", ".join(users)}); '
                    f"{kind} reads: {', '.join(KERNEL_KEYS[kind])}",
                    getattr(self, key),
                )
        for key in REQUIRED_KERNEL_KEYS[kind]:
            if getattr(self, key) is None:
                raise SettingError(key, f'missing: executor = "{kind}" needs it')
        if self.suffix_keys is not None and self.key_suffix is None:
            raise SettingError("suffix_keys", "needs key_suffix", self.suffix_keys)
        base = _base(info)
        if kind == "replay":
            self.files = _resolve_files(self.files, base)
        if kind == "command":
            self._resolve_command(base)
        return self

    def _resolve_command(self, base: Path) -> None:
        folder = expand_path(self.cwd, "cwd", base) if self.cwd is not None else base
        if not folder.is_dir():
            raise SettingError("cwd", f"not a directory: {folder}", self.cwd)
        self.cwd = str(folder)
        assert self.command is not None
        program = self.command[0]
        if "/" in program:
            path = Path(program) if Path(program).is_absolute() else folder / program
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise SettingError("command[0]", f"not an executable file: {path}", program)
        elif shutil.which(program) is None:
            raise SettingError("command[0]", "program not found on PATH", program)

    def command_fields(self) -> list[str]:
        """Parameter names used as ``{name}`` in ``command``."""
        return sorted({f for a in self.command or [] for f in template_fields(a)})

    def check_objectives(self, objectives: list[str]) -> None:
        """Check what this kernel can produce against the campaign's objectives.

        Raises:
            SettingError: naming the key.
        """
        if self.measure and len(objectives) != 1:
            raise SettingError(
                "measure",
                f"times one objective; the campaign has {len(objectives)}: {', '.join(objectives)}",
                True,
            )
        if self.pattern is not None and len(objectives) > 1:
            named = set(re.compile(self.pattern).groupindex)
            missing = [o for o in objectives if o not in named]
            if missing:
                raise SettingError(
                    "pattern",
                    f"needs a named group (?P<{missing[0]}>...) per objective",
                    self.pattern,
                )


def _resolve_files(files: Any, base: Path) -> Any:
    def resolve(value: str, key: str) -> str:
        path = expand_path(value, key, base)
        if not path.is_file():
            raise SettingError(key, f"replay file not found: {path}", value)
        return str(path)

    if isinstance(files, str):
        return resolve(files, "files")
    assert isinstance(files, dict)
    if len(files) != 1:
        raise SettingError(
            "files", "must be a path or {input = {value = path, ...}} with one input", files
        )
    ((input_name, mapping),) = files.items()
    if not mapping:
        raise SettingError(f"files.{input_name}", "must map input values to files", mapping)
    return {
        input_name: {
            value: resolve(file, f"files.{input_name}.{value}") for value, file in mapping.items()
        }
    }


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
    "EXECUTORS",
    "KERNEL_KEYS",
    "MAX_IN_FLIGHT",
    "MAX_REPEATS",
    "MAX_TIMEOUT",
    "MAX_WARMUP",
    "MAX_WORKERS",
    "REQUIRED_KERNEL_KEYS",
    "ExecutionSettings",
    "KernelSettings",
    "expand_path",
]
