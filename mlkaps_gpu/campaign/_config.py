"""Campaign configuration: TOML turned into typed, validated objects once, at the edge.

Every error is a :class:`ConfigError` whose one-line message names the file, the key and the
problem, e.g. ``lu.toml: [design] nb: range min 64 > max 8``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlkaps_gpu.space import Parameter, Space, SpaceError

EXECUTORS = ("python", "replay", "cffi", "cupy", "command")
SAMPLING_METHODS = ("random", "lhs", "hvs", "hvsr", "bayes", "ga_adaptive")
TREE_MODES = ("joint", "per_parameter")
OPTIMIZATION_METHODS = ("auto", "nsga2", "exhaustive")
DIRECTIONS = ("minimize", "maximize")

_SECTIONS: dict[str, tuple[str, ...]] = {
    "campaign": ("name", "seed"),
    "kernel": (
        "executor",
        "builtin",
        "function",
        "measure",
        "repeats",
        "warmup",
        "files",
        "format",
        "objective",
        "design_columns",
        "options",
        "key_suffix",
        "suffix_keys",
    ),
    "inputs": (),
    "design": (),
    "objectives": (),
    "sampling": (
        "method",
        "budget",
        "batch_size",
        "bootstrap",
        "eps_initial",
        "eps_final",
        "sub_sampler",
        "fixed",
    ),
    "transfer": ("sources", "warm_start"),
    "surrogate": ("n_estimators", "log_target", "params"),
    "optimization": (
        "grid",
        "method",
        "population",
        "generations",
        "weights",
        "bounds",
        "window",
        "prefer_measured",
    ),
    "execution": ("backend", "cluster", "scheduler", "workers", "options", "in_flight"),
    "trees": ("mode", "max_depth", "depth_tolerance", "prefix", "verify_inputs"),
}
_PARAMETER_KEYS = ("type", "range", "values", "log", "levels")


class ConfigError(ValueError):
    """The configuration is wrong; the message is one line naming file, key and problem."""


@dataclass
class KernelConfig:
    executor: str
    builtin: str | None = None
    function: str | None = None
    measure: bool = False
    repeats: int = 1
    warmup: int = 0
    files: Any = None
    format: str = "kernel_tuner"
    objective: str = "time"
    design_columns: list[str] | None = None
    key_suffix: str | None = None
    suffix_keys: list[str] | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class SamplingConfig:
    method: str = "lhs"
    budget: int = 500
    batch_size: int = 50
    bootstrap: float = 0.2
    eps_initial: float = 0.3
    eps_final: float = 0.8
    sub_sampler: str = "lhs"
    fixed: dict[str, Any] = field(default_factory=dict)


@dataclass
class SurrogateConfig:
    n_estimators: int = 300
    log_target: bool = False
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimizationConfig:
    grid: int | dict[str, int] = 16
    method: str = "auto"
    population: int = 40
    generations: int = 40
    weights: list[float] | None = None
    bounds: dict[str, float] = field(default_factory=dict)
    window: int = 10
    prefer_measured: bool = True


@dataclass
class TreesConfig:
    """``max_depth``: a depth, or ``"auto"``: the smallest depth whose mean predicted regret is
    within ``depth_tolerance`` (absolute, 0.01 = one percentage point) of the best depth's."""

    mode: str = "joint"
    max_depth: int | str = "auto"
    depth_tolerance: float = 0.01
    prefix: str = "mlkaps"
    verify_inputs: int = 10_000


@dataclass
class ExecutionConfig:
    """Where measurements run: in this process (``local``) or on Dask workers (``dask``)."""

    backend: str = "local"
    cluster: str = "local"
    scheduler: str | None = None
    workers: int = 1
    in_flight: int = 2
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CampaignConfig:
    """A validated campaign configuration."""

    path: Path
    text: str
    name: str
    seed: int
    kernel: KernelConfig
    input_specs: dict[str, dict[str, Any]]
    design_specs: dict[str, dict[str, Any]]
    constraints: list[str]
    objectives: dict[str, str]
    sampling: SamplingConfig
    surrogate: SurrogateConfig
    optimization: OptimizationConfig
    trees: TreesConfig
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    transfer_sources: list[Path] = field(default_factory=list)
    #: share of the budget first spent on the sources' best configurations (GA-Adaptive)
    transfer_warm_start: float = 0.2

    @property
    def digest(self) -> str:
        """SHA-256 of the configuration text (detects a changed config on resume)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


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
    """Validate configuration text (``path`` resolves relative data files)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{label}: {_describe_toml_error(text, error)}") from None
    reader = _Reader(label)
    for section in data:
        if section not in _SECTIONS:
            reader.fail(section, None, f"unknown section (allowed: {', '.join(_SECTIONS)})")
    for section, allowed in _SECTIONS.items():
        if section in data:
            if not isinstance(data[section], dict):
                reader.fail(section, None, "must be a table")
            if allowed:
                for key in data[section]:
                    if key not in allowed:
                        reader.fail(section, key, f"unknown key (allowed: {', '.join(allowed)})")
    base = path.parent if path is not None else Path.cwd()
    campaign = data.get("campaign", {})
    kernel = _kernel(reader, data.get("kernel"), base)
    design = dict(data.get("design", {}))
    constraints = design.pop("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        reader.fail("design", "constraints", "must be a list of strings")
    objectives = data.get("objectives", {"time": "minimize"}) or {"time": "minimize"}
    for name, direction in objectives.items():
        if not name.isidentifier() or name in ("status", "message", "batch", "timestamp"):
            reader.fail("objectives", name, "objective names must be identifiers")
        if direction not in DIRECTIONS:
            reader.fail("objectives", name, f"must be one of {', '.join(DIRECTIONS)}")
    return CampaignConfig(
        path=path or Path(label),
        text=text,
        name=reader.string(campaign, "campaign", "name", default=label.rsplit(".", 1)[0]),
        seed=reader.integer(campaign, "campaign", "seed", default=0, minimum=0),
        kernel=kernel,
        input_specs=_parameter_specs(reader, "inputs", data.get("inputs", {})),
        design_specs=_parameter_specs(reader, "design", design),
        constraints=list(constraints),
        objectives=dict(objectives),
        sampling=_sampling(reader, data.get("sampling", {})),
        surrogate=_surrogate(reader, data.get("surrogate", {})),
        optimization=_optimization(reader, data.get("optimization", {})),
        trees=_trees(reader, data.get("trees", {})),
        execution=_execution(reader, data.get("execution", {})),
        transfer_sources=_transfer(reader, data.get("transfer", {}), base),
        transfer_warm_start=_warm_start(reader, data.get("transfer", {})),
    )


def _describe_toml_error(text: str, error: tomllib.TOMLDecodeError) -> str:
    """Name the line (and, for a repeated key, the key) of a TOML syntax error."""
    match = re.search(r"line (\d+)", str(error))
    if not match:
        return f"invalid TOML ({error})"
    number = int(match.group(1))
    lines = text.splitlines()
    line = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    problem = str(error).split(" (at ")[0]
    key = re.match(r"([A-Za-z0-9_\-\.\"']+)\s*=", line)
    if "overwrite" in problem.lower() and key:
        return f"line {number}: key '{key.group(1)}' is defined twice (duplicate parameter name?)"
    return f"line {number}: invalid TOML ({problem}): {line[:80]}"


class _Reader:
    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, section: str, key: str | None, problem: str) -> None:
        where = f"[{section}]" + (f" {key}" if key else "")
        raise ConfigError(f"{self.label}: {where}: {problem}")

    def integer(
        self,
        table: Mapping[str, Any],
        section: str,
        key: str,
        *,
        default: int,
        minimum: int | None = None,
    ) -> int:
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(section, key, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(section, key, f"must be >= {minimum}, got {value}")
        return int(value)

    def string(
        self,
        table: Mapping[str, Any],
        section: str,
        key: str,
        *,
        default: str | None = None,
        allowed: tuple[str, ...] | None = None,
    ) -> str:
        value = table.get(key, default)
        if not isinstance(value, str):
            self.fail(section, key, f"must be a string, got {value!r}")
        if allowed is not None and value not in allowed:
            self.fail(section, key, f"'{value}' is not allowed (allowed: {', '.join(allowed)})")
        return str(value)

    def boolean(self, table: Mapping[str, Any], section: str, key: str, *, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            self.fail(section, key, f"must be true or false, got {value!r}")
        return bool(value)


def _expand(value: str, reader: _Reader, key: str, section: str = "kernel") -> str:
    """Expand ``${VAR}`` from the environment in a data path."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            reader.fail(section, key, f"environment variable {name} is not set")
        return os.environ[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", replace, value)


def _kernel(reader: _Reader, table: Any, base: Path) -> KernelConfig:
    if table is None:
        reader.fail("kernel", None, "missing section")
    executor = reader.string(table, "kernel", "executor", default=None, allowed=EXECUTORS)
    config = KernelConfig(executor=executor)
    if "builtin" in table:
        config.builtin = reader.string(table, "kernel", "builtin")
    if "function" in table:
        config.function = reader.string(table, "kernel", "function")
    config.measure = reader.boolean(table, "kernel", "measure", default=False)
    config.repeats = reader.integer(table, "kernel", "repeats", default=1, minimum=1)
    config.warmup = reader.integer(table, "kernel", "warmup", default=0, minimum=0)
    config.format = reader.string(
        table, "kernel", "format", default="kernel_tuner", allowed=("kernel_tuner", "csv")
    )
    config.objective = reader.string(table, "kernel", "objective", default="time")
    if "options" in table:
        if not isinstance(table["options"], dict):
            reader.fail("kernel", "options", "must be a table")
        config.options = dict(table["options"])
    if "design_columns" in table:
        config.design_columns = list(table["design_columns"])
    if "key_suffix" in table:
        config.key_suffix = reader.string(table, "kernel", "key_suffix")
        config.suffix_keys = list(table.get("suffix_keys", []))
    if executor == "replay":
        files = table.get("files")
        if files is None:
            reader.fail("kernel", "files", "a replay kernel needs 'files'")
        config.files = _resolve_files(reader, files, base)
    if executor == "python" and not (config.function or config.builtin):
        reader.fail("kernel", "function", "a python kernel needs 'function' (module:function)")
    if executor in ("cffi", "cupy") and not config.builtin:
        reader.fail("kernel", "builtin", f"a {executor} kernel needs 'builtin' (shipped kernel)")
    return config


def _resolve_files(reader: _Reader, files: Any, base: Path) -> Any:
    def resolve(value: Any, key: str) -> str:
        if not isinstance(value, str):
            reader.fail("kernel", key, f"must be a file path, got {value!r}")
        path = Path(_expand(value, reader, key))
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            reader.fail("kernel", key, f"replay file not found: {path}")
        return str(path)

    if isinstance(files, str):
        return resolve(files, "files")
    if isinstance(files, dict) and len(files) == 1:
        ((input_name, mapping),) = files.items()
        if not isinstance(mapping, dict) or not mapping:
            reader.fail("kernel", f"files.{input_name}", "must map input values to files")
        return {
            input_name: {
                value: resolve(file, f"files.{input_name}.{value}")
                for value, file in mapping.items()
            }
        }
    reader.fail("kernel", "files", "must be a path or {input = {value = path, ...}}")
    return None


def _parameter_specs(reader: _Reader, section: str, table: Any) -> dict[str, dict[str, Any]]:
    specs: dict[str, dict[str, Any]] = {}
    for name, spec in table.items():
        if not isinstance(spec, dict):
            reader.fail(section, name, 'must be a table like { type = "int", range = [1, 8] }')
        for key in spec:
            if key not in _PARAMETER_KEYS:
                reader.fail(
                    section, name, f"unknown key '{key}' (allowed: {', '.join(_PARAMETER_KEYS)})"
                )
        if "type" not in spec:
            reader.fail(section, name, "missing 'type' (int, float, categorical, bool)")
        if "range" in spec:
            bounds = spec["range"]
            if not isinstance(bounds, list) or len(bounds) != 2:
                reader.fail(section, name, "'range' must be [min, max]")
        if "values" in spec and not isinstance(spec["values"], list):
            reader.fail(section, name, "'values' must be a list")
        specs[name] = dict(spec)
    return specs


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


def _sampling(reader: _Reader, table: Mapping[str, Any]) -> SamplingConfig:
    method = reader.string(table, "sampling", "method", default="lhs", allowed=SAMPLING_METHODS)
    budget = reader.integer(table, "sampling", "budget", default=500)
    if budget <= 0:
        reader.fail("sampling", "budget", f"must be a positive number of evaluations, got {budget}")
    batch = reader.integer(table, "sampling", "batch_size", default=min(50, budget), minimum=1)
    fractions = {}
    for key, default in (("bootstrap", 0.2), ("eps_initial", 0.3), ("eps_final", 0.8)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            reader.fail("sampling", key, f"must be a fraction in [0, 1], got {value!r}")
        fractions[key] = float(value)
    sub_sampler = reader.string(
        table,
        "sampling",
        "sub_sampler",
        default="lhs",
        allowed=("lhs", "random", "hvs", "hvsr", "bayes"),
    )
    fixed = table.get("fixed", {})
    if not isinstance(fixed, dict):
        reader.fail("sampling", "fixed", "must be a table {input = value} held during sampling")
    return SamplingConfig(
        method=method,
        budget=budget,
        batch_size=batch,
        sub_sampler=sub_sampler,
        fixed=dict(fixed),
        **fractions,
    )


def _surrogate(reader: _Reader, table: Mapping[str, Any]) -> SurrogateConfig:
    params = table.get("params", {})
    if not isinstance(params, dict):
        reader.fail("surrogate", "params", "must be a table of LightGBM parameters")
    return SurrogateConfig(
        n_estimators=reader.integer(table, "surrogate", "n_estimators", default=300, minimum=1),
        log_target=reader.boolean(table, "surrogate", "log_target", default=False),
        params=dict(params),
    )


def _optimization(reader: _Reader, table: Mapping[str, Any]) -> OptimizationConfig:
    grid = table.get("grid", 16)
    if isinstance(grid, bool) or not isinstance(grid, (int, dict)):
        reader.fail("optimization", "grid", "must be a size or a table {input = size}")
    sizes = grid.values() if isinstance(grid, dict) else [grid]
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            reader.fail("optimization", "grid", f"sizes must be positive integers, got {size!r}")
    weights = table.get("weights")
    if weights is not None and (
        not isinstance(weights, list) or not all(isinstance(w, (int, float)) for w in weights)
    ):
        reader.fail("optimization", "weights", "must be a list of numbers")
    return OptimizationConfig(
        grid=grid,
        method=reader.string(
            table, "optimization", "method", default="auto", allowed=OPTIMIZATION_METHODS
        ),
        population=reader.integer(table, "optimization", "population", default=40, minimum=4),
        generations=reader.integer(table, "optimization", "generations", default=40, minimum=1),
        weights=weights,
        prefer_measured=reader.boolean(table, "optimization", "prefer_measured", default=True),
        bounds=_bounds(reader, table.get("bounds", {})),
        window=reader.integer(table, "optimization", "window", default=10, minimum=1),
    )


def _trees(reader: _Reader, table: Mapping[str, Any]) -> TreesConfig:
    mode = reader.string(table, "trees", "mode", default="joint", allowed=TREE_MODES)
    prefix = reader.string(table, "trees", "prefix", default="mlkaps")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix):
        reader.fail("trees", "prefix", f"'{prefix}' is not a C identifier")
    max_depth: int | str = "auto"
    if table.get("max_depth", "auto") != "auto":
        max_depth = reader.integer(table, "trees", "max_depth", default=8, minimum=1)
    tolerance = table.get("depth_tolerance", 0.01)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        reader.fail(
            "trees", "depth_tolerance", f"must be a number >= 0 (e.g. 0.01), got {tolerance!r}"
        )
    return TreesConfig(
        mode=mode,
        max_depth=max_depth,
        depth_tolerance=float(tolerance),
        prefix=prefix,
        verify_inputs=reader.integer(table, "trees", "verify_inputs", default=10_000, minimum=1),
    )


def _execution(reader: _Reader, table: Mapping[str, Any]) -> ExecutionConfig:
    backend = reader.string(
        table, "execution", "backend", default="local", allowed=("local", "dask")
    )
    cluster = reader.string(
        table, "execution", "cluster", default="local", allowed=("local", "slurm")
    )
    scheduler = table.get("scheduler")
    if scheduler is not None and (
        not isinstance(scheduler, str) or not re.fullmatch(r"(tcp|tls|inproc)://\S+", scheduler)
    ):
        reader.fail(
            "execution", "scheduler", f"must be an address like tcp://host:8786, got {scheduler!r}"
        )
    options = table.get("options", {})
    if not isinstance(options, dict):
        reader.fail("execution", "options", "must be a table (passed to the Dask cluster)")
    return ExecutionConfig(
        backend=backend,
        cluster=cluster,
        scheduler=scheduler,
        workers=reader.integer(table, "execution", "workers", default=1, minimum=1),
        in_flight=reader.integer(table, "execution", "in_flight", default=2, minimum=1),
        options=dict(options),
    )


def _transfer(reader: _Reader, table: Mapping[str, Any], base: Path) -> list[Path]:
    sources = table.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        reader.fail("transfer", "sources", "must be a list of campaign directories")
    paths = []
    for index, source in enumerate(sources):
        path = Path(_expand(source, reader, f"sources[{index}]", "transfer"))
        path = path if path.is_absolute() else base / path
        if not (path / "campaign.json").is_file() or not (path / "samples.sqlite").is_file():
            reader.fail("transfer", f"sources[{index}]", f"not a campaign directory: {path}")
        paths.append(path)
    return paths


def _warm_start(reader: _Reader, table: Mapping[str, Any]) -> float:
    value = table.get("warm_start", 0.2)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        reader.fail("transfer", "warm_start", f"must be a fraction in [0, 1], got {value!r}")
    return float(value)


def _bounds(reader: _Reader, bounds: Any) -> dict[str, float]:
    if not isinstance(bounds, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in bounds.values()
    ):
        reader.fail("optimization", "bounds", "must be a table {objective = number}")
    return {str(k): float(v) for k, v in bounds.items()}
