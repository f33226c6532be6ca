"""The ``[kernel]`` and ``[execution]`` sections: what measures a configuration, and where.

Each executor kind reads its own keys of ``[kernel]`` (:data:`KERNEL_KEYS`); a key of another
kind is refused rather than ignored. Paths (replay files, a command's working directory, a C
kernel's ``source``) are resolved when the configuration is loaded, relative to the
configuration file's folder, with ``${VAR}`` taken from the environment, and must exist then; a
C kernel's ``builder`` and ``check`` are imported then (with the loader of the Python executor's
``function``), so that a missing file or function is named before anything runs.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._cffi import check_prototype
from mlkaps_gpu.executors._command import template_fields
from mlkaps_gpu.executors._python_loader import load_function, resolve_reference
from mlkaps_gpu.space import (
    FiniteFloat,
    IdentifierError,
    SettingError,
    SettingsModel,
    check_identifier,
)

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
    "replay": (
        "files",
        "format",
        "objective",
        "design_columns",
        "input_columns",
        "objective_column",
        "failure_values",
        "aggregate",
        "key_suffix",
        "suffix_keys",
    ),
    "cffi": (
        "builtin",
        "source",
        "prototype",
        "builder",
        "check",
        "macros",
        "runtime",
        "threads",
        "extra_compile_args",
        "options",
    ),
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
    "cffi": (),  # `builtin` or `source` (with `prototype` and `builder`): see KernelSettings
    "cupy": ("builtin",),
    "command": ("command",),
    "external": (),
}
#: The ``[kernel]`` keys of a cffi kernel given by its ``source`` (a builtin brings its own).
SOURCE_KEYS = (
    "prototype",
    "builder",
    "check",
    "macros",
    "runtime",
    "threads",
    "extra_compile_args",
)
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
            "`python`: a Python function; `replay`: recorded measurements; `cffi`: a C kernel "
            "(your `source`, or a shipped `builtin`); `cupy`: a shipped CUDA kernel; `command`: "
            "an external program run per "
            "configuration; `external`: measured by your own loop through `Campaign.ask` / "
            "`Campaign.tell`."
        )
    )
    builtin: str | None = Field(
        default=None,
        description=(
            "cffi / cupy: the shipped kernel (`lu`, `gemm`, `matsum`, `gemm_cuda`); cffi takes "
            "`builtin` or `source`."
        ),
    )
    source: str | None = Field(
        default=None,
        description=(
            "cffi: your C source file (a path relative to the configuration file, `${VAR}` "
            "expanded), compiled with the design's `macros` as `-D NAME=value` and called "
            "through its `prototype` with the arguments `builder` makes; instead of `builtin`. "
            "Each design parameter reaches it through `macros`, `runtime` or `threads`."
        ),
    )
    prototype: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): the C prototype of the entry function, e.g. "
            "`void saxpy(int n, double a, const double *x, double *y)`."
        ),
    )
    builder: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): `file.py:function` (relative to the configuration file, "
            "loaded without PYTHONPATH) or `module:function`, called as `function(inputs, rng)` "
            "and returning `KernelCall(args=[...], overwritten=[...])`: one argument per "
            'parameter of the prototype, `Design("name")` where a `runtime` parameter goes.'
        ),
        json_schema_extra={"allowed": 'a string "module:function" or "file.py:function"'},
    )
    check: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): `file.py:function` or `module:function`, called as "
            "`function(inputs, outputs)` after the first and the last run; false gives the "
            "row the status `invalid`. Default: no check."
        ),
        json_schema_extra={"allowed": 'a string "module:function" or "file.py:function"'},
    )
    macros: list[str] | dict[str, str] = Field(
        default_factory=list,
        description=(
            "cffi (with `source`): design parameters passed at compile time as `-D NAME=value`, "
            'a list (the macro is the parameter\'s name) or `{parameter = "MACRO", ...}`; '
            "each distinct combination of values is compiled once."
        ),
        json_schema_extra={"allowed": 'a list of names, or a table {parameter = "MACRO"}'},
    )
    runtime: list[str] = Field(
        default_factory=list,
        description=(
            "cffi (with `source`): design parameters passed as arguments, where the builder "
            'puts `Design("name")`.'
        ),
    )
    threads: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): the design parameter holding the OpenMP thread count (set "
            "with `omp_set_num_threads` before the runs; the kernel needs no code for it)."
        ),
    )
    extra_compile_args: list[str] | None = Field(
        default=None,
        description='cffi (with `source`): compiler flags (default `["-O2", "-fopenmp"]`).',
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
    format: Literal["kernel_tuner", "csv", "t4", "parquet", "autoheuristic"] = Field(
        default="kernel_tuner",
        description=(
            "replay: Kernel Tuner cache files, CSV tables, T4 results files (the common "
            "results format of auto-tuners; the objective is the measurement named `objective`), "
            "Parquet tables (with `input_columns`, needs pyarrow), or PyTorch AutoHeuristic "
            "files (`autoheuristic`: a table over input shapes, read as it is)."
        ),
    )
    objective: str = Field(
        default="time",
        description="replay: the data's objective (cache field, CSV column or T4 measurement).",
    )
    design_columns: list[str] | None = Field(
        default=None,
        description="replay (csv, parquet): the columns that are design parameters.",
    )
    input_columns: list[str] | None = Field(
        default=None,
        min_length=1,
        description=(
            "replay (csv, parquet): the columns that form the input point of a table over "
            "inputs (a table replay: one file whose rows are inputs, configuration, "
            "objective); C identifiers, they become the header's arguments."
        ),
        json_schema_extra={"allowed": "a non-empty list of column names"},
    )
    aggregate: Literal["median", "mean"] = Field(
        default="median",
        description=(
            "replay (table over inputs): the objective of a cell measured several times "
            "(repeated rows): the median or the mean of its finite repeat times."
        ),
    )
    objective_column: str | None = Field(
        default=None,
        description=(
            "replay (csv): the column holding the measured objective (default: the column named "
            "as `objective`, else the column `objective`)."
        ),
    )
    failure_values: list[FiniteFloat] = Field(
        default_factory=list,
        description=(
            "replay (csv): objective values that mark a failed run (e.g. `[1.0]` for a runner "
            "that wrote 1.0 on failure); none by default."
        ),
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

    @field_validator("function", "builder", "check")
    @classmethod
    def _module_function(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not _FUNCTION.fullmatch(value):
            key = info.field_name or "function"
            raise SettingError(key, "must be 'module:function' or 'file.py:function'", value)
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
        if kind == "replay" and self.format != "kernel_tuner" and self.key_suffix is not None:
            raise SettingError(
                "key_suffix",
                'applies only to format = "kernel_tuner" (cache keys)',
                self.key_suffix,
            )
        if kind == "replay" and self.format not in ("csv", "parquet"):
            for key in ("design_columns", "objective_column", "failure_values", "input_columns"):
                if key in self.model_fields_set:
                    raise SettingError(
                        key,
                        'applies only to format = "csv" or "parquet" (tables)',
                        getattr(self, key),
                    )
        if kind == "replay":
            self._check_table_replay()
        base = _base(info)
        if kind == "replay":
            self.files = _resolve_files(self.files, base)
        if kind == "command":
            self._resolve_command(base)
        if kind == "cffi":
            self._resolve_c_source(base)
        return self

    @property
    def table_replay(self) -> bool:
        """Whether this is a replay of one table over input points (``input_columns``, or an
        AutoHeuristic file)."""
        return self.executor == "replay" and (
            self.input_columns is not None or self.format == "autoheuristic"
        )

    def _check_table_replay(self) -> None:
        if self.format == "parquet" and self.input_columns is None:
            raise SettingError(
                "input_columns", 'missing: format = "parquet" reads a table over inputs'
            )
        if self.format == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise SettingError(
                    "format", "parquet needs pyarrow (pip install pyarrow), or use a CSV", "parquet"
                ) from None
        if not self.table_replay:
            if "aggregate" in self.model_fields_set:
                raise SettingError(
                    "aggregate",
                    "applies only to a table over inputs (input_columns, or format = "
                    '"autoheuristic")',
                    self.aggregate,
                )
            return
        if self.files is not None and not isinstance(self.files, str):
            raise SettingError(
                "files",
                "a table over inputs is one file (its input columns select the rows), not "
                "{input = {value = file}}",
                self.files,
            )
        if self.format != "autoheuristic" and not self.design_columns:
            raise SettingError("design_columns", "missing: input_columns needs design_columns")
        for key in ("input_columns", "design_columns"):
            for index, column in enumerate(getattr(self, key) or []):
                try:
                    check_identifier(column, what="column name")
                except IdentifierError as error:
                    raise SettingError(
                        f"{key}[{index}]", f"{error} (it becomes a name in the C header)", column
                    ) from None
        both = sorted(set(self.input_columns or []) & set(self.design_columns or []))
        if both:
            raise SettingError(
                "input_columns", f"{both[0]!r} is also in design_columns", self.input_columns
            )

    def _resolve_c_source(self, base: Path) -> None:
        """A cffi kernel is a `builtin` or a `source`; a source's file, prototype, builder,
        check and macro names are checked now (the builder and the check are imported)."""
        if (self.builtin is None) == (self.source is None):
            problem = "give `builtin` or `source`, not both" if self.builtin else "missing"
            raise SettingError(
                "source" if self.builtin else "builtin",
                f'{problem}: executor = "cffi" needs `builtin` (a shipped kernel) or `source` '
                "(your C file, with `prototype` and `builder`)",
                self.source,
            )
        if self.builtin is not None:
            for key in SOURCE_KEYS:
                if key in self.model_fields_set:
                    raise SettingError(
                        key,
                        "only with `source` (a builtin kernel brings its own)",
                        getattr(self, key),
                    )
            return
        assert self.source is not None
        path = expand_path(self.source, "source", base).absolute()
        if not path.is_file():
            raise SettingError("source", f"C source file not found: {path}", self.source)
        self.source = str(path)
        for key in ("prototype", "builder"):
            if getattr(self, key) is None:
                raise SettingError(key, "missing: `source` needs it")
        self._check_prototype()
        self.builder = _load_reference("builder", self.builder, base)
        if self.check is not None:
            self.check = _load_reference("check", self.check, base)
        self._check_macro_names()

    def _check_prototype(self) -> None:
        assert self.prototype is not None
        try:
            entry = check_prototype(self.prototype)
            check_identifier(entry, what="entry function")
        except (ExecutorError, IdentifierError) as error:
            raise SettingError("prototype", str(error), self.prototype) from None

    def _check_macro_names(self) -> None:
        macros = self.macros
        pairs = list(macros.items()) if isinstance(macros, dict) else [(m, m) for m in macros]
        for index, (name, macro) in enumerate(pairs):
            key = f"macros.{name}" if isinstance(macros, dict) else f"macros[{index}]"
            try:
                check_identifier(macro, what="macro")
            except IdentifierError as error:
                raise SettingError(key, str(error), macro) from None
        seen: set[str] = set()
        for key, names in (
            ("macros", [name for name, _ in pairs]),
            ("runtime", self.runtime),
            ("threads", [self.threads] if self.threads else []),
        ):
            for name in names:
                if name in seen:
                    raise SettingError(
                        key, f"design parameter {name!r} is passed to the kernel twice", name
                    )
                seen.add(name)

    def replay_options(self) -> dict[str, Any]:
        """The loader options of a replay kernel (``ReplayExecutor.from_files`` keywords besides
        ``format`` and ``objective``): CSV columns and failure markers, a cache's key suffix."""
        options: dict[str, Any] = {}
        if self.table_replay:
            options["aggregate"] = self.aggregate
            if self.format != "autoheuristic":
                options["input_columns"] = list(self.input_columns or [])
                options["design_columns"] = list(self.design_columns or [])
                options["objective_column"] = self.objective_column
                options["failure_values"] = tuple(self.failure_values)
                options["format"] = self.format
            return options
        if self.format == "csv":
            options["objective_column"] = self.objective_column
            options["failure_values"] = tuple(self.failure_values)
            if self.design_columns:
                options["design_columns"] = list(self.design_columns)
        if self.key_suffix:
            options["key_suffix"] = self.key_suffix
            options["suffix_keys"] = tuple(self.suffix_keys or ())
        return options

    def passed_design(self) -> dict[str, str]:
        """cffi ``source``: the design parameters passed to the kernel, each with the key that
        passes it (``macros``, ``runtime`` or ``threads``)."""
        passed = {name: "macros" for name in self.macros}
        passed.update({name: "runtime" for name in self.runtime})
        if self.threads:
            passed[self.threads] = "threads"
        return passed

    def check_design(self, design: list[str]) -> None:
        """Check a cffi ``source`` kernel's ``macros``, ``runtime`` and ``threads`` against the
        space's design parameters: each names one, and each reaches the kernel.

        Raises:
            SettingError: naming the key.
        """
        if self.executor != "cffi" or self.source is None:
            return
        passed = self.passed_design()
        for name, key in passed.items():
            if name not in design:
                raise SettingError(
                    key,
                    f"{name!r} is not a design parameter (design: {', '.join(design) or 'none'})",
                    getattr(self, key),
                )
        for name in design:
            if name not in passed:
                raise SettingError(
                    "runtime",
                    f"design parameter {name!r} does not reach the kernel: list it in `macros` "
                    f'(compile time), `runtime` (an argument, Design("{name}") in the builder) '
                    "or `threads`",
                )

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


def _load_reference(key: str, reference: str | None, base: Path) -> str:
    """``module:function`` or ``file.py:function`` (relative to ``base``), loaded now to refuse a
    missing file or function; returned with the file's path made absolute."""
    assert reference is not None
    try:
        load_function(reference, base)
    except ExecutorError as error:
        raise SettingError(key, str(error), reference) from None
    return resolve_reference(reference, base)


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
    "SOURCE_KEYS",
    "ExecutionSettings",
    "KernelSettings",
    "expand_path",
]
