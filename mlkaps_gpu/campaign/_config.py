"""Campaign configuration: the TOML file as one typed model, validated once, before anything runs.

:class:`ConfigFile` is the model of the whole file; each section's model belongs to the package
it configures (``KernelSettings`` and ``ExecutionSettings`` in ``executors``, ``ParameterSpec``
in ``space``, ``SamplingSettings`` in ``sampling``, ``SurrogateSettings`` in ``surrogate``,
``OptimizationSettings`` in ``optimize``, ``TreesSettings`` in ``trees``). :func:`load_config`
validates the file against it and then checks what spans sections: names (C identifiers that are
not reserved, not the store's columns, distinct up to case), the space the parameters and
constraints make (parsed, satisfiable, fixed inputs in their domains, grid keys and size), the
objectives against the kernel and the optimizer, the builtin kernel. What needs the kernel itself
(the data of a replay campaign, the import of a Python function) is checked by ``prepare``, still
before any directory is created.

Every error is a :class:`ConfigError` whose one-line message names the file, the section, the key,
the value and what is allowed, e.g. ``lu.toml: [sampling] budget: 0: must be an integer from 1 to
10000000``. ``docs/config.md`` is generated from these models (``scripts/config_reference.py``).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
import tomllib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mlkaps_gpu.campaign._store import _BOOKKEEPING
from mlkaps_gpu.executors import (
    EXECUTOR_NAMES,
    RESULT_COLUMNS,
    CffiKernelSettings,
    CommandKernelSettings,
    CupyKernelSettings,
    ExecutionSettings,
    KernelSettings,
    expand_path,
)
from mlkaps_gpu.optimize import OptimizationSettings
from mlkaps_gpu.sampling import SamplingSettings
from mlkaps_gpu.space import (
    Parameter,
    ParameterSpec,
    SettingError,
    SettingsModel,
    Space,
    SpaceError,
    check_c_text,
    check_distinct,
    check_identifier,
    describe_allowed,
    load_t1,
)
from mlkaps_gpu.surrogate import SurrogateSettings
from mlkaps_gpu.trees import TreesSettings

SAMPLING_METHODS = ("random", "lhs", "hvs", "hvsr", "bayes", "ga_adaptive")
TREE_MODES = ("joint", "per_parameter")
OPTIMIZATION_METHODS = ("auto", "nsga2", "exhaustive")
DIRECTIONS = ("minimize", "maximize")

#: Columns of the store and of ``optima.csv`` besides the parameters and objectives; no
#: parameter or objective may take their names (ignoring case, as SQLite does).
STORE_COLUMNS: tuple[str, ...] = ("id", *RESULT_COLUMNS, *_BOOKKEEPING, "n_valid", "source")
#: Most input plus design parameters, constraints and objectives of one campaign.
MAX_PARAMETERS = 256
MAX_CONSTRAINTS = 1_000
MAX_OBJECTIVES = 16
#: Largest seed (LightGBM seeds are 32-bit).
MAX_SEED = 2**31 - 1
#: Longest campaign name (it is written into the header's comment).
MAX_NAME_LENGTH = 200


class ConfigError(ValueError):
    """The configuration is wrong; the message is one line naming file, key and problem."""


class CampaignSection(SettingsModel):
    """``[campaign]``: the campaign's name and seed."""

    name: str | None = Field(
        default=None,
        max_length=MAX_NAME_LENGTH,
        description=(
            "Name shown in reports and in the header's comment (default: the configuration "
            "file's name without `.toml`); no trigraphs or control characters."
        ),
        json_schema_extra={"allowed": f"a string of at most {MAX_NAME_LENGTH} characters"},
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=MAX_SEED,
        description="Seed of every random choice (sampling, LightGBM, optimizer, trees).",
    )

    @field_validator("name")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_c_text(value, what="campaign name")
            except ValueError as error:
                raise SettingError("name", str(error), value) from None
        return value


class DesignSection(SettingsModel):
    """``[design]``: the design parameters (one table each, like ``[inputs]``) and the
    constraints over inputs and design."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, ParameterSpec] = Field(init=False)  # type: ignore[assignment]

    constraints: list[str] = Field(
        default_factory=list,
        max_length=MAX_CONSTRAINTS,
        description=(
            "Conditions every configuration satisfies, in the constraint language (numbers, "
            "parameter names, `+ - * / // % **`, comparisons, `and or not`, `min max abs`, "
            'string equality for categoricals), e.g. `["block <= n"]`. Parsed at load; '
            "literals must be finite in C (no `1e400`) and strings free of trigraphs."
        ),
        json_schema_extra={"allowed": f"a list of up to {MAX_CONSTRAINTS} strings"},
    )

    t1: str | None = Field(
        default=None,
        description=(
            "A T1 search-space description (`.json`, the auto-tuning community's input format, "
            "e.g. published beside T4 results or Kernel Tuner caches) whose `Conditions` are "
            "added to `constraints`, translated as Kernel Tuner restrictions (`x in [a, b]`, "
            "`True`); `${VAR}` is expanded, a relative path is relative to the configuration "
            "file. Its parameters are not taken: they come from the data (replay) or the tables "
            "of this section."
        ),
        json_schema_extra={"allowed": "a path to a T1 JSON file"},
    )

    _t1_constraints: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _read_t1(self, info: ValidationInfo) -> DesignSection:
        if self.t1 is not None:
            base = Path((info.context or {}).get("base") or Path.cwd())
            path = expand_path(self.t1, "t1", base)
            try:
                self._t1_constraints = load_t1(path).constraints
            except SpaceError as error:
                raise SettingError("t1", str(error), self.t1) from None
        return self

    def parameters(self) -> dict[str, ParameterSpec]:
        """The design parameter tables, by name."""
        return dict(self.__pydantic_extra__ or {})

    def all_constraints(self) -> list[str]:
        """``constraints``, then the T1 file's conditions."""
        return [*self.constraints, *self._t1_constraints]


class TransferSettings(SettingsModel):
    """``[transfer]``: learn from other campaigns' measurements too."""

    sources: list[str] = Field(
        default_factory=list,
        description=(
            "Campaign directories (other architectures) whose measurements are added to every "
            "surrogate fit; `${VAR}` is expanded, relative to the configuration file."
        ),
    )
    warm_start: float = Field(
        default=0.2,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "GA-Adaptive with sources only: share of the budget first spent on the sources' "
            "best configurations."
        ),
    )

    @field_validator("sources")
    @classmethod
    def _campaign_directories(cls, sources: list[str], info: ValidationInfo) -> list[str]:
        base = Path((info.context or {}).get("base") or Path.cwd())
        resolved = []
        for index, source in enumerate(sources):
            path = expand_path(source, f"sources[{index}]", base)
            if not (path / "campaign.json").is_file() or not (path / "samples.sqlite").is_file():
                raise SettingError(f"sources[{index}]", f"not a campaign directory: {path}", source)
            resolved.append(str(path))
        return resolved


Direction = Literal["minimize", "maximize"]


class ConfigFile(SettingsModel):
    """A campaign configuration file: one table per section."""

    campaign: CampaignSection = Field(default_factory=lambda: CampaignSection())
    kernel: KernelSettings = Field(
        description="What measures a configuration (required).",
        json_schema_extra={
            "allowed": "a [kernel] table with executor = "
            + ", ".join(f'"{name}"' for name in EXECUTOR_NAMES)
        },
    )
    inputs: dict[str, ParameterSpec] = Field(
        default_factory=dict,
        max_length=MAX_PARAMETERS,
        description="Input parameters (the problem: sizes, the GPU ...), one table each.",
    )
    design: DesignSection = Field(default_factory=lambda: DesignSection())
    objectives: dict[str, Direction] = Field(
        default_factory=lambda: {"time": "minimize"},  # type: ignore[arg-type,return-value]
        max_length=MAX_OBJECTIVES,
        description="Objectives and their directions; the first is the primary objective.",
        json_schema_extra={"allowed": 'a table {name = "minimize" or "maximize"}'},
    )
    sampling: SamplingSettings = Field(default_factory=lambda: SamplingSettings())
    transfer: TransferSettings = Field(default_factory=lambda: TransferSettings())
    surrogate: SurrogateSettings = Field(default_factory=lambda: SurrogateSettings())
    optimization: OptimizationSettings = Field(default_factory=lambda: OptimizationSettings())
    execution: ExecutionSettings = Field(default_factory=lambda: ExecutionSettings())
    trees: TreesSettings = Field(default_factory=lambda: TreesSettings())

    @model_validator(mode="before")
    @classmethod
    def _known_sections_only(cls, data: Any) -> Any:
        for section in data if isinstance(data, dict) else ():
            if section not in cls.model_fields:
                raise SettingError(
                    str(section), f"unknown section (allowed: {', '.join(cls.model_fields)})"
                )
        return data


@dataclass
class CampaignConfig:
    """A validated campaign configuration (the attributes the pipeline reads)."""

    path: Path
    text: str
    name: str
    seed: int
    kernel: KernelSettings
    input_specs: dict[str, dict[str, Any]]
    design_specs: dict[str, dict[str, Any]]
    constraints: list[str]
    objectives: dict[str, str]
    sampling: SamplingSettings
    surrogate: SurrogateSettings
    optimization: OptimizationSettings
    trees: TreesSettings
    execution: ExecutionSettings = field(default_factory=lambda: ExecutionSettings())
    transfer_sources: list[Path] = field(default_factory=list)
    #: share of the budget first spent on the sources' best configurations (GA-Adaptive)
    transfer_warm_start: float = 0.2

    @property
    def digest(self) -> str:
        """SHA-256 of the configuration text (detects a changed config on resume)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


# Names the rest of the code used for the section classes before they were models.
KernelConfig = KernelSettings
SamplingConfig = SamplingSettings
SurrogateConfig = SurrogateSettings
OptimizationConfig = OptimizationSettings
TreesConfig = TreesSettings
ExecutionConfig = ExecutionSettings


def load_config(path: str | Path) -> CampaignConfig:
    """Read and validate a TOML campaign configuration."""
    path = Path(path)
    label = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read ({error})") from None
    return parse_config(text, path=path, label=label)


def parse_config(text: str, *, path: Path | None = None, label: str = "<config>") -> CampaignConfig:
    """Validate configuration text (``path`` resolves relative data files).

    Raises:
        ConfigError: the first problem found, in one line.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{label}: {_describe_toml_error(text, error)}") from None
    base = path.parent if path is not None else Path.cwd()
    try:
        model = ConfigFile.model_validate(data, context={"base": str(base)})
    except ValidationError as error:
        raise ConfigError(f"{label}: {describe_validation_error(error, data)}") from None
    config = _campaign_config(model, text, path or Path(label), label)
    check_campaign(config, model)
    return config


def _campaign_config(model: ConfigFile, text: str, path: Path, label: str) -> CampaignConfig:
    return CampaignConfig(
        path=path,
        text=text,
        name=model.campaign.name or label.rsplit(".", 1)[0],
        seed=model.campaign.seed,
        kernel=model.kernel,
        input_specs={n: s.model_dump(exclude_unset=True) for n, s in model.inputs.items()},
        design_specs={
            n: s.model_dump(exclude_unset=True) for n, s in model.design.parameters().items()
        },
        constraints=model.design.all_constraints(),
        objectives=dict(model.objectives) or {"time": "minimize"},
        sampling=model.sampling,
        surrogate=model.surrogate,
        optimization=model.optimization,
        trees=model.trees,
        execution=model.execution,
        transfer_sources=[Path(s) for s in model.transfer.sources],
        transfer_warm_start=model.transfer.warm_start,
    )


def _describe_toml_error(text: str, error: tomllib.TOMLDecodeError) -> str:
    """Name the line (and, for a repeated key, the key) of a TOML syntax error."""
    match = re.search(r"line (\d+)", str(error))
    if not match:
        return f"invalid TOML ({error})"
    number = int(match.group(1))
    lines = text.split("\n")  # TOML counts lines by newlines only
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
    problem = str(error).split(" (at ")[0]
    key = re.match(r"([A-Za-z0-9_\-\.\"']+)\s*=", line)
    if "overwrite" in problem.lower() and key:
        return f"line {number}: key '{key.group(1)}' is defined twice (duplicate parameter name?)"
    return f"line {number}: invalid TOML ({problem}): {line[:80]}"


# ------------------------------------------------------------------------- error messages
def show_value(value: Any, limit: int = 80) -> str:
    """A value as TOML would write it, shortened to ``limit`` characters."""

    def render(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, float) and not math.isfinite(item):
            return "nan" if item != item else ("inf" if item > 0 else "-inf")
        if isinstance(item, (int, float)):
            return repr(item)
        if isinstance(item, str):
            return json.dumps(item, ensure_ascii=False)
        if isinstance(item, (list, tuple)):
            return "[" + ", ".join(render(v) for v in item) + "]"
        if isinstance(item, dict):
            return "{ " + ", ".join(f"{k} = {render(v)}" for k, v in item.items()) + " }"
        return repr(item)

    text = " ".join(render(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MISSING = object()


def _walk(loc: Sequence[Any], data: Any, *, missing: bool) -> tuple[list[Any], Any]:
    """The part of ``loc`` that indexes ``data`` (dropping pydantic's union tags), and the value
    there (``_MISSING`` for a missing key)."""
    path: list[Any] = []
    node = data
    for index, item in enumerate(loc):
        if isinstance(node, dict) and item in node:
            node = node[item]
        elif isinstance(node, list) and isinstance(item, int) and 0 <= item < len(node):
            node = node[item]
        elif missing and index == len(loc) - 1:
            path.append(item)
            return path, _MISSING
        else:
            continue
        path.append(item)
    return path, node


def _field_at(path: Sequence[Any]) -> Any:
    """The pydantic FieldInfo that governs ``path`` (the deepest one found), or None."""
    model: Any = ConfigFile
    found = None
    for index, item in enumerate(path):
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            if model is dict:
                model = ParameterSpec
                continue
            break
        info = model.model_fields.get(item) if isinstance(item, str) else None
        if info is None:
            if model.model_config.get("extra") == "allow":  # [design] parameter tables
                model = ParameterSpec
                continue
            break
        found = info
        annotation = _member_with(info.annotation, path[index + 1 : index + 2])
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif (
            typing.get_origin(annotation) is dict
            and typing.get_args(annotation)[1] is ParameterSpec
        ):
            model = dict
        else:
            break
    return found


def _member_with(annotation: Any, key: Sequence[Any]) -> Any:
    """Of a union of models (``[kernel]``: one model per executor), the first member that has
    ``key``; any other annotation as it is."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else ()
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel) and key:
            if key[0] in member.model_fields:
                return member
    return annotation


def _key_text(path: Sequence[Any]) -> str:
    text = ""
    for item in path:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
    return text


def _split_key(key: str) -> list[str]:
    """``"files.gpu.A100"`` -> ``["files", "gpu", "A100"]`` (``"command[0]"`` stays whole)."""
    return [part for part in key.split(".") if part]


def describe_validation_error(error: ValidationError, data: Any) -> str:
    """One line for the first problem of a validation error: ``[section] key: value: what is
    allowed``."""
    errors = error.errors(include_url=False)
    first_top = tuple(errors[0]["loc"][:2])
    candidates = [e for e in errors if tuple(e["loc"][:2]) == first_top]
    resolved = [(_walk(e["loc"], data, missing=e["type"] == "missing"), e) for e in candidates]
    (path, value), chosen = max(resolved, key=lambda item: len(item[0][0]))
    cause = (chosen.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        parts = _split_key(cause.key)
        if parts and path and str(path[-1]) == parts[0].split("[")[0]:
            path = path[:-1]
        full = [*path, *parts]
        raw_path, raw = _walk(full, data, missing=False)
        if raw_path == full and parts:
            shown = raw  # the value as written, not as validated
        else:
            shown = cause.value if cause.value is not None else None
        if shown is None and not parts and value is not _MISSING:
            shown = value
        return _line(str(full[0]) if full else "", _key_text(full[1:]), shown, cause.message)
    section = str(path[0]) if path else ""
    key = _key_text(path[1:])
    info = _field_at(path)
    if chosen["type"] == "missing":
        allowed = f": {describe_allowed(info)}" if info is not None else ""
        return _line(section, key, None, f"missing, required{allowed}")
    if info is not None and chosen["type"] not in ("too_long", "too_short"):
        problem = f"must be {describe_allowed(info)}"
    else:
        problem = str(chosen["msg"]).replace("Input should be", "must be")
    return _line(section, key, value, problem)


def _line(section: str, key: str, value: Any, problem: str) -> str:
    where = f"[{section}]" + (f" {key}" if key else "")
    shown = f" {show_value(value)}:" if value is not None and value is not _MISSING else ""
    return f"{where}:{shown} {problem}"


# -------------------------------------------------------------------------- cross-section checks
def _fail(config: CampaignConfig, section: str, key: str, value: Any, problem: str) -> ConfigError:
    return ConfigError(f"{config.path.name}: {_line(section, key, value, problem)}")


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


def _check_transfer(config: CampaignConfig, model: ConfigFile) -> None:
    if model.transfer.given("warm_start") and (
        config.sampling.method != "ga_adaptive" or not config.transfer_sources
    ):
        raise _fail(
            config,
            "transfer",
            "warm_start",
            config.transfer_warm_start,
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


def make_parameter(name: str, spec: Mapping[str, Any]) -> Parameter:
    """Build a Parameter from its config table (errors are SpaceError)."""
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
    label: str, section: str, specs: Mapping[str, Mapping[str, Any]]
) -> list[Parameter]:
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


def check_campaign(config: CampaignConfig, model: ConfigFile | None = None) -> None:
    """Every check that spans sections and needs no kernel to run (see the module docstring).

    Raises:
        ConfigError: the first problem, naming its key.
    """
    label = config.path.name
    check_names(
        config,
        {
            "inputs": list(config.input_specs),
            "design": list(config.design_specs),
            "objectives": list(config.objectives),
        },
    )
    _check_objectives(config)
    if model is not None:
        _check_transfer(config, model)
    check_constraint_literals(config, config.constraints)
    inputs = parameters_from_specs(label, "inputs", config.input_specs)
    design = parameters_from_specs(label, "design", config.design_specs)
    constraints = config.constraints
    executor = config.kernel.executor
    if executor == "replay":
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
    settings = config.kernel
    if isinstance(settings, CupyKernelSettings) or (
        isinstance(settings, CffiKernelSettings) and settings.source is None
    ):
        kernel = _builtin_kernel(config)
        inputs = inputs or list(kernel.inputs)
        design = design or list(kernel.design)
        constraints = constraints or list(kernel.constraints)
    probe = CampaignConfig(**{**config.__dict__, "constraints": list(constraints)})
    check_space(probe, build_space(probe, inputs, design))


__all__ = [
    "STORE_COLUMNS",
    "CampaignConfig",
    "CampaignSection",
    "ConfigError",
    "ConfigFile",
    "DesignSection",
    "TransferSettings",
    "build_space",
    "check_campaign",
    "check_names",
    "check_space",
    "load_config",
    "make_parameter",
    "parameters_from_specs",
    "parse_config",
]
