"""Checks of a configuration that span sections: names (C identifiers that are not reserved,
not the store's columns, distinct up to case), the space the parameters and constraints make
(parsed, satisfiable, fixed inputs in their domains, grid keys and size), the objectives against
the kernel and the optimizer, the builtin kernel. Every failure is a :class:`ConfigError` naming
the key."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mlkaps_gpu.campaign._config_errors import ConfigError, problem_line
from mlkaps_gpu.campaign._store import _BOOKKEEPING
from mlkaps_gpu.executors import (
    RESULT_COLUMNS,
    CffiKernelSettings,
    CommandKernelSettings,
    CupyKernelSettings,
)
from mlkaps_gpu.space import (
    Parameter,
    ParameterSpec,
    SettingError,
    Space,
    SpaceError,
    check_c_text,
    check_distinct,
    check_identifier,
)

if TYPE_CHECKING:
    from mlkaps_gpu.campaign._config import CampaignConfig

#: Columns of the store and of ``optima.csv`` besides the parameters and objectives; no
#: parameter or objective may take their names (ignoring case, as SQLite does).
STORE_COLUMNS: tuple[str, ...] = ("id", *RESULT_COLUMNS, *_BOOKKEEPING, "n_valid", "source")


def _fail(config: CampaignConfig, section: str, key: str, value: Any, problem: str) -> ConfigError:
    return ConfigError(f"{config.path.name}: {problem_line(section, key, value, problem)}")


def check_names(config: CampaignConfig, names: Mapping[str, Sequence[str]]) -> None:
    """Refuse reserved or clashing names (see ``mlkaps_gpu.space.check_identifier``).

    Args:
        names: per section (``inputs``, ``design``, ``objectives``, ``kernel`` for names
            that come from a replay's data), the names it declares.
    """
    what = {"objectives": "objective name", "kernel": "data parameter name"}
    for section, section_names in names.items():
        for name in section_names:
            try:
                check_identifier(
                    name, what=what.get(section, "parameter name"), columns=STORE_COLUMNS
                )
            except ValueError as error:
                raise _fail(config, section, name, None, str(error)) from None
    seen: dict[str, str] = {}
    for section, section_names in names.items():
        for name in section_names:
            if name in seen:
                raise _fail(config, section, name, None, f"duplicate name (also in [{seen[name]}])")
            try:
                check_distinct([*seen, name], what="names")
            except ValueError as error:
                raise _fail(config, section, name, None, str(error)) from None
            seen[name] = section


def _check_objectives(config: CampaignConfig) -> None:
    objectives = list(config.objectives)
    for section, settings, keys in (
        ("kernel", config.kernel, ()),
        ("optimization", config.optimization, ("weights", "bounds")),
    ):
        if len(objectives) == 1:
            for key in keys:
                if settings.given(key):
                    raise _fail(
                        config,
                        section,
                        key,
                        getattr(settings, key),
                        "applies only to campaigns with several [objectives]; remove it",
                    )
        try:
            settings.check_objectives(objectives)
        except SettingError as error:
            raise _fail(config, section, error.key, error.value, error.message) from None


def _check_transfer(config: CampaignConfig) -> None:
    transfer = config.transfer
    if transfer.given("warm_start") and (
        config.sampling.method != "ga_adaptive" or not transfer.sources
    ):
        raise _fail(
            config,
            "transfer",
            "warm_start",
            transfer.warm_start,
            'applies only to method = "ga_adaptive" with [transfer] sources; remove it',
        )


def _builtin_kernel(config: CampaignConfig) -> Any:
    """The shipped kernel of a cffi / cupy configuration, checked against it."""
    from mlkaps_gpu.kernels import BUILTIN_KERNELS, load_builtin

    settings = config.kernel
    assert isinstance(settings, (CffiKernelSettings, CupyKernelSettings))
    name = settings.builtin or ""
    if name not in BUILTIN_KERNELS:
        raise _fail(
            config,
            "kernel",
            "builtin",
            name,
            f"unknown kernel (shipped: {', '.join(sorted(BUILTIN_KERNELS))})",
        )
    kernel = load_builtin(name)
    language = {"cffi": "c", "cupy": "cuda"}[settings.executor]
    if kernel.language != language:
        other = "cupy" if kernel.language == "cuda" else "cffi"
        raise _fail(
            config,
            "kernel",
            "builtin",
            name,
            f'a {kernel.language.upper()} kernel: use executor = "{other}"',
        )
    missing = [o for o in config.objectives if o not in kernel.objectives]
    if missing:
        raise _fail(
            config,
            "objectives",
            missing[0],
            None,
            f"the kernel produces only {', '.join(kernel.objectives)}",
        )
    return kernel


def check_constraint_literals(config: CampaignConfig, constraints: Sequence[str]) -> None:
    """Refuse literals the generated C cannot hold: numbers not finite as a C double
    (``1e400``, huge integers) and strings with trigraphs or control characters."""
    for index, text in enumerate(constraints):
        key = f"constraints[{index}]"
        try:
            check_c_text(text, what="constraint")
            tree = ast.parse(text.strip(), mode="eval")
        except ValueError as error:
            raise _fail(config, "design", key, text, str(error)) from None
        except (SyntaxError, RecursionError, MemoryError):
            continue  # the constraint parser reports it, with the position
        for node in _constants(tree):
            value = node.value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    finite = math.isfinite(float(value))
                except OverflowError:
                    finite = False
                if not finite:
                    raise _fail(
                        config,
                        "design",
                        key,
                        text,
                        f"the literal {ast.get_source_segment(text.strip(), node) or value} is "
                        "not a finite C double (at most about 1.8e308)",
                    )
            elif isinstance(value, str):
                try:
                    check_c_text(value, what="string")
                except ValueError as error:
                    raise _fail(config, "design", key, text, str(error)) from None


def _constants(tree: ast.AST) -> list[ast.Constant]:
    found, stack = [], [tree]
    while stack:  # iterative: constraints may nest deeply
        node = stack.pop()
        if isinstance(node, ast.Constant):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def make_parameter(name: str, spec: ParameterSpec | Mapping[str, Any]) -> Parameter:
    """Build a Parameter from its config table (errors are SpaceError)."""
    if isinstance(spec, ParameterSpec):
        spec = spec.model_dump(exclude_unset=True)
    low = high = None
    if "range" in spec:
        low, high = spec["range"]
    values = spec.get("values")
    return Parameter(
        name,
        spec["type"],
        values=tuple(values) if values is not None else None,
        low=low,
        high=high,
        log=bool(spec.get("log", False)),
        levels=spec.get("levels"),
    )


def parameters_from_specs(
    label: str, section: str, specs: Mapping[str, ParameterSpec | Mapping[str, Any]]
) -> list[Parameter]:
    """The parameters of a section's tables (``[inputs]``, ``[design]``)."""
    out = []
    for name, spec in specs.items():
        try:
            out.append(make_parameter(name, spec))
        except (SpaceError, TypeError, ValueError) as error:
            message = str(error).replace(f"parameter '{name}': ", "")
            raise ConfigError(f"{label}: [{section}] {name}: {message}") from None
    return out


def build_space(
    config: CampaignConfig,
    inputs: list[Parameter],
    design: list[Parameter],
) -> Space:
    """The campaign's Space; constraint and space errors become ConfigErrors."""
    label = config.path.name
    names = [p.name for p in inputs]
    for parameter in design:
        if parameter.name in names:
            raise ConfigError(
                f"{label}: [design] {parameter.name}: duplicate parameter name (also an input)"
            )
    from mlkaps_gpu.space import ConstraintError, parse_constraint

    known = {p.name: p for p in [*inputs, *design]}
    for index, text in enumerate(config.constraints):
        try:
            parse_constraint(text, known)
        except ConstraintError as error:
            raise ConfigError(f"{label}: [design] constraints[{index}]: {error}") from None
    try:
        return Space(inputs, design, config.constraints)
    except SpaceError as error:
        raise ConfigError(f"{label}: [design]: {error}") from None


def check_space(config: CampaignConfig, space: Space, *, grid: bool = True) -> None:
    """Checks of the configuration against its space: satisfiable constraints, fixed inputs in
    their domains, the grid, the command's ``{name}`` fields, the design parameters a C source
    is given (before anything is measured).

    Args:
        grid: check the ``[optimization] grid`` (not for a table replay, whose grid is its
            recorded input points).

    Raises:
        ConfigError: naming the key.
    """
    import numpy as np

    try:
        space.check_satisfiable(np.random.default_rng(config.seed))
    except SpaceError:
        raise _fail(
            config,
            "design",
            "constraints",
            None,
            f"no configuration satisfies them ({'; '.join(config.constraints)})",
        ) from None
    fixed = config.sampling.fixed
    if fixed:
        try:
            space.with_fixed_inputs(fixed)
        except SpaceError as error:
            raise _fail(config, "sampling", "fixed", fixed, str(error)) from None

    def axis_length(name: str, size: int) -> int:
        return 1 if name in fixed else len(space.parameters[name].grid(size))

    try:
        if grid:  # (a table replay's grid is its recorded points)
            config.optimization.check_grid(space.input_names, axis_length)
    except SettingError as error:
        raise _fail(config, "optimization", error.key, error.value, error.message) from None
    try:
        config.kernel.check_design(space.design_names)  # a C source's macros, runtime, threads
    except SettingError as error:
        raise _fail(config, "kernel", error.key, error.value, error.message) from None
    kernel = config.kernel
    unknown = [f for f in kernel.command_fields() if f not in space.parameters]
    if unknown:
        assert isinstance(kernel, CommandKernelSettings)  # only a command has fields
        raise _fail(
            config,
            "kernel",
            "command",
            kernel.command,
            f"{{{unknown[0]}}} is not a parameter (parameters: {', '.join(space.names)})",
        )


def check_campaign(config: CampaignConfig) -> None:
    """Every check that spans sections and needs no kernel to run (see ``_config``).

    Raises:
        ConfigError: the first problem, naming its key.
    """
    label = config.path.name
    input_specs = dict(config.inputs)
    design_specs = config.design.parameters()
    check_names(
        config,
        {
            "inputs": list(input_specs),
            "design": list(design_specs),
            "objectives": list(config.objectives),
        },
    )
    _check_objectives(config)
    _check_transfer(config)
    check_constraint_literals(config, config.design.all_constraints())
    inputs = parameters_from_specs(label, "inputs", input_specs)
    design = parameters_from_specs(label, "design", design_specs)
    if config.kernel.executor == "replay":
        if design:
            raise _fail(
                config,
                "design",
                design[0].name,
                None,
                "a replay campaign takes its design parameters from the data; give only "
                "'constraints'",
            )
        return  # the data's parameters are checked when the executor is prepared
    if config.builtin_kernel_name() is not None:
        kernel = _builtin_kernel(config)
        inputs = inputs or list(kernel.inputs)
        design = design or list(kernel.design)
    check_space(config, build_space(config, inputs, design))


__all__ = [
    "STORE_COLUMNS",
    "build_space",
    "check_campaign",
    "check_constraint_literals",
    "check_names",
    "check_space",
    "make_parameter",
    "parameters_from_specs",
]
