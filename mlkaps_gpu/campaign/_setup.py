"""Turn a validated configuration into a Space and an Executor (still before any directory is
created, so every error is reported while nothing has been written)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlkaps_gpu.campaign._config import CampaignConfig
from mlkaps_gpu.campaign._config_checks import (
    build_space,
    check_names,
    check_space,
    parameters_from_specs,
)
from mlkaps_gpu.campaign._config_errors import ConfigError, show_value
from mlkaps_gpu.executors import (
    CffiKernelSettings,
    CommandKernelSettings,
    CupyKernelSettings,
    Executor,
    ExecutorError,
    ExternalExecutor,
    PythonExecutor,
    PythonKernelSettings,
    ReplayDataError,
    ReplayKernelSettings,
    load_kernel_functions,
)
from mlkaps_gpu.space import Parameter, SettingError, Space


@dataclass
class Setup:
    """What a campaign runs with."""

    space: Space
    executor: Executor
    objectives: list[str]
    directions: list[str]
    expert: Any = None


def prepare(config: CampaignConfig) -> Setup:
    """Build the space and executor of a configuration; raise ConfigError on any problem."""
    label = config.path.name
    kernel = config.kernel
    inputs = parameters_from_specs(label, "inputs", config.inputs)
    design = parameters_from_specs(label, "design", config.design.parameters())
    expert = None
    if kernel.executor == "python":
        executor: Executor = _python_executor(config)
    elif kernel.executor == "command":
        executor = _command_executor(config)
    elif kernel.executor == "external":
        executor = ExternalExecutor(tuple(config.objectives))
    elif kernel.table_replay:
        executor, inputs, design = _table_replay_executor(config, inputs, design)
    elif kernel.executor == "replay":
        executor, replay_inputs, replay_design = _replay_executor(config)
        if design:
            raise ConfigError(
                f"{label}: [design] {design[0].name}: a replay campaign takes its design "
                "parameters from the data; give only 'constraints'"
            )
        check_names(config, {"kernel": [p.name for p in [*replay_inputs, *replay_design]]})
        inputs = [*replay_inputs, *inputs]
        design = replay_design
    else:
        executor, builtin_inputs, builtin_design, expert = _builtin_executor(config)
        inputs = inputs or builtin_inputs
        design = design or builtin_design
    _check_unique(label, inputs, design)
    space = build_space(config, inputs, design)
    if kernel.table_replay:
        space = _listed_space(config, space, executor)
    check_space(config, space, grid=not kernel.table_replay)  # fixed inputs, grid, fields
    objectives = list(config.objectives)
    unknown_bounds = sorted(set(config.optimization.bounds) - set(objectives[1:]))
    if unknown_bounds:
        raise ConfigError(
            f"{label}: [optimization] bounds: {unknown_bounds[0]} is not a secondary objective "
            f"(secondary objectives: {', '.join(objectives[1:]) or 'none'})"
        )
    missing = [o for o in objectives if o not in executor.objectives]
    if missing:
        raise ConfigError(
            f"{label}: [objectives] {missing[0]}: the kernel produces only "
            f"{', '.join(executor.objectives)}"
        )
    return Setup(space, executor, objectives, list(config.objectives.values()), expert)


def _check_unique(label: str, inputs: list[Parameter], design: list[Parameter]) -> None:
    seen: set[str] = set()
    for section, parameters in (("inputs", inputs), ("design", design)):
        for parameter in parameters:
            if parameter.name in seen:
                raise ConfigError(
                    f"{label}: [{section}] {parameter.name}: duplicate parameter name"
                )
            seen.add(parameter.name)


def _python_executor(config: CampaignConfig) -> Executor:
    """The kernel ``module:function`` or ``file.py:function`` (relative to the configuration
    file), run in a worker process with the ``[kernel]`` timeout and memory cap."""
    kernel = config.kernel
    assert isinstance(kernel, PythonKernelSettings)
    try:
        return PythonExecutor(
            kernel.function or "",
            objectives=tuple(config.objectives),
            repeats=kernel.repeats,
            warmup=kernel.warmup,
            measure=kernel.measure,
            base=config.path.parent,
            timeout_s=kernel.timeout,
            memory_limit_mib=kernel.memory_limit,
        )
    except ExecutorError as error:
        raise ConfigError(f"{config.path.name}: [kernel] function: {error}") from None


def _command_executor(config: CampaignConfig) -> Executor:
    from mlkaps_gpu.executors import CommandExecutor

    kernel = config.kernel
    assert isinstance(kernel, CommandKernelSettings)
    try:
        return CommandExecutor(
            kernel.command or [],
            objectives=tuple(config.objectives),
            pattern=kernel.pattern,
            repeats=kernel.repeats,
            warmup=kernel.warmup,
            timeout_s=kernel.timeout,
            cwd=kernel.cwd,
            env=kernel.env,
            invalid_exit_codes=kernel.invalid_exit_codes,
        )
    except ExecutorError as error:
        raise ConfigError(f"{config.path.name}: [kernel] command: {error}") from None


def _replay_executor(config: CampaignConfig) -> tuple[Executor, list[Parameter], list[Parameter]]:
    from mlkaps_gpu.executors import ReplayExecutor

    label = config.path.name
    kernel = config.kernel
    assert isinstance(kernel, ReplayKernelSettings)
    options = kernel.replay_options()
    try:
        executor = ReplayExecutor.from_files(
            kernel.files,
            format=kernel.format,  # type: ignore[arg-type]
            objective=kernel.objective,
            **options,
        )
    except (ReplayDataError, ExecutorError) as error:
        raise ConfigError(f"{label}: [kernel] files: {error}") from None
    input_parameter = executor.input_parameter()
    inputs = [input_parameter] if input_parameter is not None else []
    return executor, inputs, executor.design_parameters()


def _table_replay_executor(
    config: CampaignConfig, inputs: list[Parameter], design: list[Parameter]
) -> tuple[Executor, list[Parameter], list[Parameter]]:
    """A replay of one table over input points (``input_columns``, or an AutoHeuristic file):
    its inputs and design parameters come from the data."""
    from mlkaps_gpu.executors import TableReplayExecutor, autoheuristic_table, load_input_table

    label = config.path.name
    kernel = config.kernel
    assert isinstance(kernel, ReplayKernelSettings)
    for section, given in (("inputs", inputs), ("design", design)):
        if given:
            raise ConfigError(
                f"{label}: [{section}] {given[0].name}: a table replay takes its inputs and "
                "design parameters from the data's columns; give only [design] constraints"
            )
    if config.optimization.given("grid"):
        raise ConfigError(
            f"{label}: [optimization] grid: a table replay's grid is its recorded input points; "
            "remove the key"
        )
    assert isinstance(kernel.files, str)  # one file, checked by the config model
    options = kernel.replay_options()
    try:
        if kernel.format == "autoheuristic":
            table = autoheuristic_table(
                kernel.files, objective=kernel.objective, aggregate=options["aggregate"]
            )
        else:
            table = load_input_table(kernel.files, objective=kernel.objective, **options)
        executor = TableReplayExecutor(table)
    except (ReplayDataError, ExecutorError) as error:
        raise ConfigError(f"{label}: [kernel] files: {error}") from None
    names = [*table.input_names, *table.design_names]
    check_names(config, {"kernel": names})
    return executor, table.inputs, table.design


def _listed_space(config: CampaignConfig, space: Space, executor: Executor) -> Space:
    """The space of a table replay: only the (input point, configuration) rows of the data
    exist (samplers draw those, the optimizer and the decisions judge only those)."""
    from mlkaps_gpu.executors import TableReplayExecutor
    from mlkaps_gpu.space import SpaceError

    assert isinstance(executor, TableReplayExecutor)
    try:
        return space.with_listed_rows(executor.listed_rows(), space.input_names)
    except SpaceError as error:
        raise ConfigError(
            f"{config.path.name}: [design] constraints: {error} ({'; '.join(config.constraints)})"
        ) from None


def _builtin_executor(
    config: CampaignConfig,
) -> tuple[Executor, list[Parameter], list[Parameter], Any]:
    """The executor of a shipped kernel (``builtin``) or of the user's C ``source``: both are a
    :class:`~mlkaps_gpu.kernels.BuiltinKernel`, measured through its ``make_executor``."""
    from mlkaps_gpu.kernels import BUILTIN_KERNELS, load_builtin, user_c_kernel

    label = config.path.name
    settings = config.kernel
    assert isinstance(settings, (CffiKernelSettings, CupyKernelSettings))
    if isinstance(settings, CffiKernelSettings) and settings.source is not None:
        assert settings.prototype is not None and settings.builder is not None
        try:
            load_kernel_functions(settings)  # the builder and check: user code, imported now
        except SettingError as error:
            raise ConfigError(
                f"{label}: [kernel] {error.key}: {show_value(error.value)}: {error.message}"
            ) from None
        kernel = user_c_kernel(
            settings.source,
            settings.prototype,
            settings.builder,
            check=settings.check,
            macros=settings.macros,
            runtime=settings.runtime,
            threads=settings.threads,
            extra_compile_args=settings.extra_compile_args,
        )
    else:
        name = settings.builtin or ""
        if name not in BUILTIN_KERNELS:
            raise ConfigError(
                f"{label}: [kernel] builtin: unknown kernel '{name}' "
                f"(shipped: {', '.join(sorted(BUILTIN_KERNELS))})"
            )
        kernel = load_builtin(name)
    try:
        executor = kernel.make_executor(**settings.options)
    except (ExecutorError, TypeError, ValueError) as error:
        source = isinstance(settings, CffiKernelSettings) and settings.source is not None
        key = "options" if settings.options else ("source" if source else "builtin")
        raise ConfigError(f"{label}: [kernel] {key}: {error}") from None
    return executor, list(kernel.inputs), list(kernel.design), kernel.expert
