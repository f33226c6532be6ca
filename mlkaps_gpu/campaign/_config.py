"""Campaign configuration: the TOML file as one typed model, validated once, before anything runs.

:class:`CampaignConfig` is the model of the whole file, and what the code reads; each section's
model belongs to the package it configures (``KernelSettings`` and ``ExecutionSettings`` in
``executors``, ``ParameterSpec`` in ``space``, ``SamplingSettings`` in ``sampling``,
``SurrogateSettings`` in ``surrogate``, ``OptimizationSettings`` in ``optimize``,
``TreesSettings`` in ``trees``). :func:`load_config` validates the file against it and then
checks what spans sections (:mod:`._config_checks`). What needs the kernel itself (the data of a
replay campaign, the import of a Python function) is checked by ``prepare``, still before any
directory is created.

Every error is a :class:`ConfigError` whose one-line message names the file, the section, the key,
the value and what is allowed, e.g. ``lu.toml: [sampling] budget: 0: must be an integer from 1 to
10000000`` (:mod:`._config_errors`). ``docs/config.md`` is generated from these models
(``scripts/config_reference.py``).
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mlkaps_gpu.campaign._config_checks import STORE_COLUMNS, check_campaign
from mlkaps_gpu.campaign._config_errors import (
    ConfigError,
    describe_toml_error,
    describe_validation_error,
    show_value,
)
from mlkaps_gpu.executors import (
    EXECUTOR_NAMES,
    CffiKernelSettings,
    CupyKernelSettings,
    ExecutionSettings,
    KernelSettings,
    expand_path,
)
from mlkaps_gpu.optimize import OptimizationSettings
from mlkaps_gpu.sampling import SamplingSettings
from mlkaps_gpu.space import (
    ParameterSpec,
    SettingError,
    SettingsModel,
    SpaceError,
    check_c_text,
    load_t1,
)
from mlkaps_gpu.surrogate import SurrogateSettings
from mlkaps_gpu.trees import TreesSettings

#: Most input plus design parameters, constraints and objectives of one campaign.
MAX_PARAMETERS = 256
MAX_CONSTRAINTS = 1_000
MAX_OBJECTIVES = 16
#: Largest seed (LightGBM seeds are 32-bit).
MAX_SEED = 2**31 - 1
#: Longest campaign name (it is written into the header's comment).
MAX_NAME_LENGTH = 200
#: The objectives of a configuration that names none.
DEFAULT_OBJECTIVES = {"time": "minimize"}


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


class CampaignConfig(SettingsModel):
    """A campaign configuration: one table per section, validated; built by
    :func:`load_config` / :func:`parse_config`, which also bind it to its text and file
    (:attr:`path`, :attr:`text`, :attr:`digest`)."""

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
        default_factory=lambda: dict(DEFAULT_OBJECTIVES),  # type: ignore[arg-type,return-value]
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

    _path: Path = PrivateAttr(default=Path("<config>"))
    _text: str = PrivateAttr(default="")
    _label: str = PrivateAttr(default="<config>")
    _kernel_constraints: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _known_sections_only(cls, data: Any) -> Any:
        for section in data if isinstance(data, dict) else ():
            if section not in cls.model_fields:
                raise SettingError(
                    str(section), f"unknown section (allowed: {', '.join(cls.model_fields)})"
                )
        return data

    @field_validator("objectives")
    @classmethod
    def _time_when_none(cls, objectives: dict[str, Direction]) -> dict[str, Direction]:
        return objectives or dict(DEFAULT_OBJECTIVES)  # type: ignore[arg-type]

    def bind(self, text: str, path: Path, label: str) -> CampaignConfig:
        """Attach the text the configuration was read from and its file (``label``: the name
        shown in messages); returns the configuration."""
        self._text, self._path, self._label = text, Path(path), label
        return self

    @property
    def path(self) -> Path:
        """The configuration file (relative paths in it are relative to its folder)."""
        return self._path

    @property
    def text(self) -> str:
        """The configuration's text, as read."""
        return self._text

    @property
    def digest(self) -> str:
        """SHA-256 of the configuration text (detects a changed config on resume)."""
        return hashlib.sha256(self._text.encode()).hexdigest()

    @property
    def name(self) -> str:
        """``[campaign] name``, or the file's name without ``.toml``."""
        return self.campaign.name or self._label.rsplit(".", 1)[0]

    @property
    def seed(self) -> int:
        """``[campaign] seed``."""
        return self.campaign.seed

    def builtin_kernel_name(self) -> str | None:
        """The shipped kernel a cffi / cupy configuration measures (``""`` where none is
        named), or None for every other kernel (a C ``source``, python, replay ...)."""
        kernel = self.kernel
        if isinstance(kernel, CupyKernelSettings) or (
            isinstance(kernel, CffiKernelSettings) and kernel.source is None
        ):
            return kernel.builtin or ""
        return None

    @property
    def constraints(self) -> list[str]:
        """The constraints: ``[design] constraints`` then the T1 file's conditions, or, where
        none is given, those of the shipped kernel the configuration measures."""
        given = self.design.all_constraints()
        if given:
            return given
        if self._kernel_constraints is None:
            from mlkaps_gpu.kernels import BUILTIN_KERNELS, load_builtin

            name = self.builtin_kernel_name() or ""
            shipped = name in BUILTIN_KERNELS
            self._kernel_constraints = tuple(load_builtin(name).constraints) if shipped else ()
        return list(self._kernel_constraints)


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
        raise ConfigError(f"{label}: {describe_toml_error(text, error)}") from None
    base = path.parent if path is not None else Path.cwd()
    try:
        config = CampaignConfig.model_validate(data, context={"base": str(base)})
    except ValidationError as error:
        problem = describe_validation_error(error, data, CampaignConfig)
        raise ConfigError(f"{label}: {problem}") from None
    config.bind(text, path or Path(label), label)
    check_campaign(config)
    return config


__all__ = [
    "MAX_CONSTRAINTS",
    "MAX_NAME_LENGTH",
    "MAX_OBJECTIVES",
    "MAX_PARAMETERS",
    "STORE_COLUMNS",
    "CampaignConfig",
    "CampaignSection",
    "ConfigError",
    "DesignSection",
    "TransferSettings",
    "load_config",
    "parse_config",
    "show_value",
]
