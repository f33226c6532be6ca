"""Benchmark cases: a replay config stripped to its problem, with the exhaustive data of each
value of its one input (:class:`Landscape`), which every tool is scored on."""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchkit.configs import apply_override, deep_merge, strip_config, to_toml

EXPERIMENTS = Path(__file__).resolve().parent.parent


CONFIGS = {
    "convolution": EXPERIMENTS / "configs" / "convolution_replay.toml",
    "syr2k": EXPERIMENTS / "configs" / "syr2k_replay.toml",
}


@dataclass
class Landscape:
    """The exhaustive data of one input value."""

    value: str
    keys: tuple[str, ...]
    domains: dict[str, list[Any]]
    configs: pd.DataFrame  # the design columns of every configuration in the data
    times: np.ndarray  # NaN where the configuration failed
    optimum: float
    source: Path
    lookup: dict[tuple[Any, ...], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        columns = [self.configs[k].to_list() for k in self.keys]
        tuples = zip(*columns, strict=True)
        self.lookup = {
            tuple(python_value(v) for v in config): float(t)
            for config, t in zip(tuples, self.times, strict=True)
        }

    @property
    def worst(self) -> float:
        """The slowest successful time (1 when none succeeded): what a penalty is scaled by."""
        finite = self.times[np.isfinite(self.times)]
        return float(finite.max()) if finite.size else 1.0


@dataclass
class Case:
    """A benchmark case: the problem's config table, its one input and the data of each value."""

    name: str
    config_path: Path
    base: dict[str, Any]  # the stripped config table
    removed: list[str]
    input_name: str
    landscapes: list[Landscape]
    constraints: list[str]
    kernel_format: str
    #: each input value is its own project campaign of b evaluations (``--separately``)
    separate: bool = False

    @property
    def inputs(self) -> list[str]:
        """The input values, in the order of the data."""
        return [land.value for land in self.landscapes]


def python_value(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (anything else unchanged)."""
    return value.item() if hasattr(value, "item") else value


def data_path_label(path: str | os.PathLike[str]) -> str:
    """``$MLKAPS_GPU_DATA/...`` for a file under the data folder (no machine paths in results)."""
    root = os.environ.get("MLKAPS_GPU_DATA")
    path = Path(path)
    if root:
        with contextlib.suppress(ValueError):
            return "$MLKAPS_GPU_DATA/" + path.resolve().relative_to(Path(root).resolve()).as_posix()
    return path.name


class CaseError(ValueError):
    """A command-line choice the case cannot take (the message says what is allowed)."""


def restrict_files(data: dict[str, Any], values: Sequence[str], label: str) -> dict[str, Any]:
    """A copy of the config table whose ``[kernel] files`` keep only the given input values
    (in that order); unknown values raise :class:`CaseError` naming the known ones."""
    data = copy.deepcopy(data)
    files = data.get("kernel", {}).get("files")
    if not isinstance(files, dict) or len(files) != 1:
        raise CaseError(f"{label}: [kernel] files must map one input to one file per value")
    ((input_name, table),) = files.items()
    unknown = [v for v in values if v not in table]
    if unknown or not values:
        missing = ", ".join(map(repr, unknown)) or "(none given)"
        allowed = ", ".join(map(str, table))
        raise CaseError(f"{label}: input {input_name} has no value {missing} (allowed: {allowed})")
    data["kernel"]["files"] = {input_name: {v: table[v] for v in dict.fromkeys(values)}}
    return data


def case_name_of(path: Path) -> str:
    """The case name of a user's config file: its stem, in letters, digits, ``_`` and ``-``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", path.stem).strip("_") or "case"


def read_config_table(path: Path) -> dict[str, Any]:
    """A config file's TOML table; :class:`CaseError` (naming the file) when it cannot be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CaseError(f"{path}: cannot be read ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise CaseError(f"{path}: not valid TOML ({error})") from None


def load_case(
    name: str,
    overrides: Sequence[str],
    extra: Mapping[str, Any] | None,
    values: Sequence[str] | None = None,
    separately: bool = False,
    path: Path | None = None,
) -> Case:
    """Read the case's config (``path``: a user's replay config instead of a built-in case's),
    strip it to the problem, apply the overrides, load the data (only the input ``values``
    when given; ``separately``: one project campaign per value)."""
    from mlkaps_gpu.campaign import ConfigError, parse_config, prepare
    from mlkaps_gpu.executors import OK, ReplayExecutor

    path = CONFIGS[name] if path is None else path
    stripped, removed = strip_config(read_config_table(path))
    if extra:
        deep_merge(stripped, extra)
    for assignment in overrides:
        apply_override(stripped, assignment)
    if values:
        stripped = restrict_files(stripped, values, path.name)
        name = "_".join([name, *dict.fromkeys(values)])
    if separately:
        name += "_separately"
    kernel_table = stripped.get("kernel", {})
    if kernel_table.get("executor") != "replay" or not isinstance(kernel_table.get("files"), dict):
        raise CaseError(
            f"{path.name}: [kernel] must be a replay kernel whose files map one input to a file "
            'per value (executor = "replay", files = {gpu = {A100 = "a100.json.gz", ...}}; '
            "one value is enough), since the peers are scored on the replayed data"
        )
    try:  # the campaign's own checks and executor: errors name the file and the key
        config = parse_config(to_toml(stripped), path=path, label=path.name)
        executor = prepare(config).executor
    except ConfigError as error:
        raise CaseError(str(error)) from None
    kernel = config.kernel
    assert isinstance(executor, ReplayExecutor) and isinstance(kernel.files, dict)
    ((input_name, files),) = kernel.files.items()
    landscapes = []
    domains = {
        p.name: [python_value(v) for v in p.domain_values()] for p in executor.design_parameters()
    }
    for value, table in executor.tables.items():
        records = table.records
        times = records[executor.objective].to_numpy(dtype=np.float64, copy=True)
        times[(records["status"] != OK).to_numpy()] = np.nan
        optimum, _ = executor.optimum(value)
        landscapes.append(
            Landscape(
                value=str(value),
                keys=tuple(executor.keys),
                domains=domains,
                configs=records[list(executor.keys)].reset_index(drop=True),
                times=times,
                optimum=float(optimum),
                source=Path(files[value]),
            )
        )
    return Case(
        name=name,
        config_path=path,
        base=stripped,
        removed=removed,
        input_name=str(input_name),
        landscapes=landscapes,
        constraints=list(config.constraints),
        kernel_format=kernel.format,
        separate=separately,
    )
