"""Benchmark the project against peer tuners on replayed exhaustive data (issue 18, Build 6).

Protocol. For every evaluation budget ``b`` per input value (default 25, 50, 100, 200) and seed
(default 5 seeds), each tool tunes the replayed kernel; its choice for every input value is
looked up in the exhaustive data. Fraction of optimum = ``t_opt / t(choice)`` per input value
(0 when the choice failed); the geometric mean over the input values (0 as soon as one is 0) is one
run's score; tables give mean ± sd (ddof=1) of that score over the seeds.

Cases: ``convolution`` (5 GPUs, the GPU a categorical input; ``configs/convolution_replay.toml``)
and ``syr2k`` (N = 130 and N = 2000, N a categorical input; ``configs/syr2k_replay.toml``), or
``--config FILE.toml``: a replay config of one's own (``executor = "replay"``, ``files`` mapping
one input to a Kernel Tuner cache or CSV table per value; one value is enough), scored the same
way on its data (case name: the file's stem; ``MLKAPS_GPU_DATA`` is then not needed).

Tools:

* ``project header``: one campaign per (b, seed) with total budget ``B = n_inputs * b`` and the
  configuration's *problem* only (kernel and data, design constraints, objectives, seed, header
  prefix): every method setting (sampling method, batch size, log target, grid, tree mode and
  depth, verification size...) is stripped so that the project's defaults are what is measured.
  ``--set section.key=value`` / ``--config-extra file.toml`` put settings back. The header is
  compiled (cffi) and its answer per input value is looked up in the data.
* ``project best measured``: the best configuration the same campaign measured per input value
  (its sample store). The Done-when-2 counts compare the header with it: runs (input, seed) where
  ``t(best measured) / t(header) < 0.99`` and ``< 0.9``.
* ``KT <strategy>``: Kernel Tuner in simulation mode on the same data, one search per input
  value with ``max_fevals = b`` (genetic_algorithm, simulated_annealing, diff_evo, pso, bayes_opt,
  random_sample; numpy and random seeded before each call, and scipy's Latin hypercube, which
  diff_evo and bayes_opt use for their first samples, given a generator from the same seed).
  bayes_opt's default method ("multi-ultrafast") decides when to refit its model from measured
  wall-clock durations, so its results can still vary with the machine's load. Convolution uses
  the original cache files (decompressed to a temporary folder) and the case's constraints as
  restrictions; syr2k's CSV tables are converted to Kernel Tuner caches (categorical values coded
  0, 1, ...; the runner's failure rows become ``RuntimeFailedConfig``); a config of one's own
  without constraints, whose data are not the whole product of the parameters' values, keeps
  Kernel Tuner to the configurations in the data. Score: best time among
  the evaluated configurations. KT's simulated_annealing ends its schedule at about 0.75 b
  distinct evaluations (its design); the md lists evaluations below b.
* ``Optuna TPE``: one TPE study per input value (categorical distributions over the design
  values, ``TPESampler(seed)``, ask/tell). A configuration absent from the data (it violates the
  constraints) is told a penalty (10 x the worst time of that input) and does not count; a
  repeated configuration is told its time again and does not count; a failed one counts and is
  told the penalty. So ``b`` counts distinct valid configurations (at most ``50 b`` asks). TPE
  does not depend on the total trial count, so one study to the largest ``b`` gives the result at
  every smaller ``b`` (its best after the first ``b`` distinct valid configurations).
* ``random search (exact)``: per input value the exact expectation, over ``b`` distinct uniform
  draws among all configurations of the data (the valid ones; recorded failures count as
  fraction 0), of the fraction of optimum of the best draw: ``E[max_i t_opt / t_i]`` (not
  ``t_opt / E[min t]``). The row is the geometric mean over input values of these expectations;
  it has no seeds (sd 0).

Input values. ``--only V [V ...]`` keeps those input values of the case (one campaign over them;
the case is named ``<case>_<V>_...``). ``--separately`` gives each input value its own project
campaign of ``b`` evaluations, with nothing learnt from the other values (the peers search each
value alone anyway): the tuner of one architecture, or of one problem size, alone. Scores are
then geomeans over the values of the separate campaigns (case ``<case>_separately``).

Outputs: ``experiments/results/bench_peers_<case>.{csv,md,png}`` (``bench_peers_quick_*`` with
``--quick``). Kernel Tuner and Optuna are optional (``pip install -e ".[bench]"``); rows of a
missing one say "not installed".

    export MLKAPS_GPU_DATA=../shared/data/replay
    python experiments/bench_peers.py --quick --case convolution
    python experiments/bench_peers.py --case all
    python experiments/bench_peers.py --config my_kernel_replay.toml --budgets 25 50
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as _dt
import gzip
import hashlib
import io
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
CONFIGS = {
    "convolution": HERE / "configs" / "convolution_replay.toml",
    "syr2k": HERE / "configs" / "syr2k_replay.toml",
}
RESULTS = HERE / "results"
DEFAULT_BUDGETS = (25, 50, 100, 200)
QUICK_BUDGETS = (25, 50)
KT_STRATEGIES = (
    "genetic_algorithm",
    "simulated_annealing",
    "diff_evo",
    "pso",
    "bayes_opt",
    "random_sample",
)
HEADER = "project header"
BEST_MEASURED = "project best measured"
OPTUNA = "Optuna TPE"
RANDOM = "random search (exact)"
#: tool ids of --tools, in table order (``project`` gives the header and best-measured rows)
TOOL_IDS = ("project", *(f"kt_{s}" for s in KT_STRATEGIES), "optuna_tpe", "random_search")
TOOL_ALIASES = {"kernel_tuner": tuple(f"kt_{s}" for s in KT_STRATEGIES), "kt": None}
#: what a campaign config keeps (the problem); everything else is a method choice and is stripped
KEEP: dict[str, tuple[str, ...] | None] = {
    "campaign": ("name", "seed"),
    "kernel": None,  # all of it: executor, files, format, objective, columns...
    "inputs": None,
    "design": None,  # constraints (and parameter specs, for non-replay kernels)
    "objectives": None,
    "sampling": ("budget",),
    "trees": ("prefix",),
}
#: Optuna asks at most this many trials per counted evaluation
OPTUNA_MAX_ASKS_PER_EVAL = 50
SEED_STRIDE = 1009


# ------------------------------------------------------------------------------ pure helpers
def fraction_of_optimum(optimum: float, time_value: float) -> float:
    """``optimum / time_value``; 0 when the time is missing, not finite or not positive."""
    try:
        value = float(time_value)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(value) or value <= 0 or not math.isfinite(optimum):
        return 0.0
    return float(optimum) / value


def geomean(values: Iterable[float]) -> float:
    """Geometric mean; 0 when any value is 0 (a failed choice), NaN for no values."""
    array = np.asarray(list(values), dtype=np.float64)
    if array.size == 0:
        return math.nan
    if np.any(~np.isfinite(array)):
        return math.nan
    if np.any(array <= 0):
        return 0.0
    return float(np.exp(np.mean(np.log(array))))


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0 for a single value)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return math.nan, math.nan
    sd = float(np.std(array, ddof=1)) if array.size > 1 else 0.0
    return float(np.mean(array)), sd


def _expected_max_exact(scores: np.ndarray, draws: int) -> float:
    """``E[max]`` of ``draws`` distinct uniform draws from ``scores`` (hypergeometric order
    statistics; the same formula as ``mlkaps_gpu.analysis.expected_best_random_search``)."""
    from scipy.special import gammaln

    ordered = np.sort(np.asarray(scores, dtype=np.float64))[::-1]  # best first
    size = len(ordered)
    if not 1 <= draws <= size:
        raise ValueError(f"draws must lie in 1..{size}, got {draws}")
    missed = np.arange(size + 1)  # the i best values are all missed with probability S(i)
    remaining = size - missed
    log_survival = np.full(size + 1, -np.inf)
    feasible = remaining >= draws
    log_survival[feasible] = (
        gammaln(remaining[feasible] + 1)
        - gammaln(remaining[feasible] - draws + 1)
        - gammaln(size + 1)
        + gammaln(size - draws + 1)
    )
    survival = np.exp(log_survival)
    return float(ordered @ (survival[:-1] - survival[1:]))


def expected_fraction_random_search(times: Sequence[float], draws: Sequence[int]) -> np.ndarray:
    """Exact ``E[max over the draws of t_opt / t]`` for ``k`` distinct uniform draws among
    ``times`` (every configuration of the data; NaN / non-finite = failed = fraction 0), per k.

    Uses ``mlkaps_gpu.analysis.expected_best_random_search`` (expected *minimum*) on the negated
    fractions when it can be imported, else the same formula here."""
    values = np.asarray(times, dtype=np.float64)
    finite = np.isfinite(values) & (values > 0)
    if not finite.any():
        return np.zeros(len(draws))
    optimum = float(values[finite].min())
    fractions = np.where(finite, optimum / np.where(finite, values, 1.0), 0.0)
    try:
        from mlkaps_gpu.analysis import expected_best_random_search
    except ImportError:  # package being restructured: same formula, locally
        return np.array([_expected_max_exact(fractions, int(k)) for k in draws])
    return -np.asarray(expected_best_random_search(-fractions, list(draws)), dtype=np.float64)


def per_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (tool, b, seed): the geomean of the fraction over input values."""
    return rows.groupby(["tool", "b", "seed"], sort=False)["fraction"].apply(geomean).reset_index()


def summarize_runs(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (tool, b, seed): the geomean over input values; then per (tool, b): mean, sd, n."""
    runs = per_run(rows)
    out = []
    for (tool, b), group in runs.groupby(["tool", "b"], sort=False):
        mean, sd = mean_sd(group["fraction"].to_list())
        out.append({"tool": tool, "b": int(b), "mean": mean, "sd": sd, "n": len(group)})
    return pd.DataFrame(out, columns=["tool", "b", "mean", "sd", "n"])


def _difference_of_means(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean of the first sample minus the mean of the second."""
    return np.mean(first, axis=axis) - np.mean(second, axis=axis)


def lead_over_best_peer(rows: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per b: the header's mean fraction minus the best peer's (the peer with the highest mean),
    over seeds, with a ``level`` bootstrap confidence interval of that difference
    (``scipy.stats.bootstrap``, percentile method, the two tools' seeds resampled independently;
    the exact random-search expectation counts as a constant). ``verdict`` says whether the
    interval lies above 0, below 0, or holds 0 (the seeds cannot tell the two apart)."""
    from scipy import stats

    columns = ["b", "peer", "header", "best_peer", "difference", "low", "high", "verdict"]
    out = []
    for b, at in per_run(rows).groupby("b"):
        header = at.loc[at["tool"] == HEADER, "fraction"].to_numpy(dtype=np.float64)
        peers = at[~at["tool"].isin([HEADER, BEST_MEASURED])]
        if len(header) < 2 or peers.empty:
            continue
        means = peers.groupby("tool", sort=False)["fraction"].mean()
        peer = str(means.idxmax())
        other = peers.loc[peers["tool"] == peer, "fraction"].to_numpy(dtype=np.float64)
        # a one-value peer (the exact expectation) is a constant: resample the header alone
        samples: tuple[np.ndarray, ...] = (header, other)
        statistic: Callable[..., Any] = _difference_of_means
        if len(other) == 1:
            samples, statistic = (header - other[0],), np.mean
        result = stats.bootstrap(
            samples,
            statistic,
            confidence_level=level,
            method="percentile",
            rng=np.random.default_rng(int(b)),
        )
        low, high = (float(v) for v in result.confidence_interval)
        difference = float(header.mean() - other.mean())
        verdict = "above" if low > 0 else "below" if high < 0 else "within noise"
        out.append(
            {
                "b": int(b),
                "peer": peer,
                "header": float(header.mean()),
                "best_peer": float(other.mean()),
                "difference": difference,
                "low": low,
                "high": high,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(out, columns=columns)


def lead_per_input(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (b, input value): the header's mean fraction over seeds and the best peer's at that
    input value (the peer with the highest mean there, which may differ from one value to the
    next): where the header's lead comes from, and which input values a peer tunes better."""
    columns = ["b", "input", "header", "peer", "best_peer", "difference"]
    means = rows.groupby(["b", "input", "tool"], sort=False)["fraction"].mean()
    out = []
    for (b, value), at in means.groupby(level=["b", "input"], sort=False):
        at = at.droplevel(["b", "input"])
        peers = at.drop([HEADER, BEST_MEASURED], errors="ignore")
        if HEADER not in at.index or peers.empty:
            continue
        peer = str(peers.idxmax())
        header = float(at[HEADER])
        out.append(
            {
                "b": int(b),
                "input": str(value),
                "header": header,
                "peer": peer,
                "best_peer": float(peers[peer]),
                "difference": header - float(peers[peer]),
            }
        )
    table = pd.DataFrame(out, columns=columns)
    # input values in the order the rows first give them (numeric values stay in numeric order)
    first = {value: index for index, value in enumerate(pd.unique(rows["input"].astype(str)))}
    table["_order"] = table["input"].map(first)
    table = table.sort_values(["_order", "b"], kind="stable").drop(columns="_order")
    return table.reset_index(drop=True)


def lead_per_input_markdown(rows: pd.DataFrame) -> list[str]:
    """The :func:`lead_per_input` table as markdown lines (empty without a header or a peer)."""
    lead = lead_per_input(rows)
    if lead.empty:
        return []
    lines = [
        "",
        "Per input value: the header's mean fraction over seeds against the best peer at that "
        "value (the peer with the highest mean there).",
        "",
        "| input | b | header | best peer there | peer | difference |",
        "|---|---|---|---|---|---|",
    ]
    for row in lead.to_dict("records"):
        lines.append(
            f"| {row['input']} | {row['b']} | {row['header']:.3f} | {row['peer']} | "
            f"{row['best_peer']:.3f} | {row['difference']:+.3f} |"
        )
    return lines


def done_when_2_counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Per b: (input, seed) runs where the header is below 0.99x and 0.9x of the campaign's best
    measured configuration (ratio = t(best measured) / t(header), 0 if the header's choice
    failed)."""
    header = rows[rows["tool"] == HEADER].set_index(["b", "seed", "input"])["time"]
    best = rows[rows["tool"] == BEST_MEASURED].set_index(["b", "seed", "input"])["time"]
    joined = pd.concat({"header": header, "best": best}, axis=1).dropna(subset=["best"])
    if joined.empty:
        return pd.DataFrame(columns=["b", "runs", "below_0.99", "below_0.9", "min_ratio"])
    ratio = [
        fraction_of_optimum(b, h) for h, b in zip(joined["header"], joined["best"], strict=True)
    ]
    joined = joined.assign(ratio=ratio).reset_index()
    out = []
    for b, group in joined.groupby("b"):
        out.append(
            {
                "b": int(b),
                "runs": len(group),
                "below_0.99": int((group["ratio"] < 0.99).sum()),
                "below_0.9": int((group["ratio"] < 0.9).sum()),
                "min_ratio": float(group["ratio"].min()),
            }
        )
    return pd.DataFrame(out)


def kernel_tuner_cache_from_table(
    records: pd.DataFrame,
    keys: Sequence[str],
    objective: str,
    *,
    name: str,
    ok: str = "ok",
) -> tuple[dict[str, Any], dict[str, dict[Any, int]]]:
    """A Kernel Tuner cache (dict, ready for ``json.dump``) from a replay table.

    ``records`` has one row per configuration: the ``keys`` columns, the ``objective`` column
    and ``status``. Numeric columns keep their values; any other column is coded 0, 1, ... in
    sorted order (the second return value maps each such column's values to their codes), since
    Kernel Tuner joins values with commas into its keys. A row whose status is not ``ok`` is
    stored with ``time = "RuntimeFailedConfig"`` (Kernel Tuner reads it as a failure).
    """
    keys = list(keys)
    tune_params: dict[str, list[Any]] = {}
    codes: dict[str, dict[Any, int]] = {}
    columns: dict[str, list[Any]] = {}
    for key in keys:
        column = records[key]
        numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
        if numeric:
            values = [v.item() if hasattr(v, "item") else v for v in column.to_list()]
            tune_params[key] = sorted(set(values))
            columns[key] = values
        else:
            distinct = sorted({str(v) for v in column.to_list()})
            codes[key] = {value: index for index, value in enumerate(distinct)}
            tune_params[key] = list(range(len(distinct)))
            columns[key] = [codes[key][str(v)] for v in column.to_list()]
    status = records["status"].to_list()
    times = records[objective].to_numpy(dtype=np.float64)
    cache: dict[str, dict[str, Any]] = {}
    for row in range(len(records)):
        values = [columns[key][row] for key in keys]
        entry: dict[str, Any] = dict(zip(keys, values, strict=True))
        good = status[row] == ok and math.isfinite(times[row])
        entry[objective] = float(times[row]) if good else "RuntimeFailedConfig"
        if objective != "time":
            entry["time"] = entry[objective]
        cache[",".join(str(v) for v in values)] = entry
    document = {
        "device_name": name,
        "kernel_name": name,
        "problem_size": [1],
        "tune_params_keys": keys,
        "tune_params": tune_params,
        "objective": objective,
        "cache": cache,
    }
    return document, codes


def best_time_of_results(
    results: Sequence[Any], keys: Sequence[str], objective: str = "time"
) -> tuple[float, int]:
    """Best finite objective among Kernel Tuner results (errors, ``None`` and the old ``1e20``
    failure marker excluded) and the number of distinct configurations (``keys``) evaluated."""
    best = math.inf
    seen = set()
    for result in results:
        if not result:
            continue
        seen.add(tuple(str(result.get(key)) for key in keys))
        if "__error__" in result:
            continue
        value = result.get(objective)
        if isinstance(value, (int, float)) and math.isfinite(value) and value < 1e19:
            best = min(best, float(value))
    return best, len(seen)


def strip_config(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Keep only what defines the problem (:data:`KEEP`); returns the stripped table and the
    dotted names of what was removed."""
    kept: dict[str, Any] = {}
    removed: list[str] = []
    for section, table in data.items():
        if section not in KEEP:
            removed.append(section)
            continue
        allowed = KEEP[section]
        if allowed is None:
            kept[section] = copy.deepcopy(dict(table))
            continue
        part = {k: copy.deepcopy(v) for k, v in table.items() if k in allowed}
        removed.extend(f"{section}.{k}" for k in table if k not in allowed)
        if part:
            kept[section] = part
    return kept, removed


def parse_value(text: str) -> Any:
    """A ``--set`` value: a TOML value (number, true/false, "string", [list], {table}), else
    the text itself."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """Apply ``section.key=value`` (dots go deeper: ``optimization.grid.gpu=5``)."""
    if "=" not in assignment:
        raise ValueError(f"--set {assignment!r}: expected KEY=VALUE, e.g. sampling.method=random")
    key, _, text = assignment.partition("=")
    path = [part.strip() for part in key.strip().split(".")]
    if len(path) < 2 or not all(path):
        raise ValueError(f"--set {assignment!r}: the key must be section.key")
    table = data
    for part in path[:-1]:
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ValueError(f"--set {assignment!r}: {part} is not a table")
    table[path[-1]] = parse_value(text.strip())


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def toml_value(value: Any) -> str:
    """One TOML value (tables inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def to_toml(data: Mapping[str, Any]) -> str:
    """TOML text of a ``{section: {key: value}}`` table (what :func:`tomllib.loads` reads back)."""
    lines: list[str] = []
    for section, table in data.items():
        lines.append(f"[{_toml_key(section)}]")
        for key, value in table.items():
            lines.append(f"{_toml_key(str(key))} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def format_cell(mean: float, sd: float, exact: bool = False) -> str:
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.3f} (exact)" if exact else f"{mean:.3f} ± {sd:.3f}"


# --------------------------------------------------------------------------------- the data
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
            tuple(_py(v) for v in config): float(t)
            for config, t in zip(tuples, self.times, strict=True)
        }

    @property
    def worst(self) -> float:
        finite = self.times[np.isfinite(self.times)]
        return float(finite.max()) if finite.size else 1.0


@dataclass
class Case:
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
        return [land.value for land in self.landscapes]


def _py(value: Any) -> Any:
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
    domains = {p.name: [_py(v) for v in p.domain_values()] for p in executor.design_parameters()}
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


# ------------------------------------------------------------------------------ the project
def _compiled_header_class() -> Any:
    try:
        from mlkaps_gpu.codegen import CompiledHeader
    except ImportError:
        from mlkaps_gpu.trees._compiled import CompiledHeader  # before the move to codegen/
    return CompiledHeader


def project_config_text(case: Case, b: int, seed: int) -> str:
    data = copy.deepcopy(case.base)
    data.setdefault("campaign", {})["seed"] = seed
    data.setdefault("sampling", {})["budget"] = len(case.landscapes) * b
    return to_toml(data)


def run_project(case: Case, b: int, seed: int, workdir: Path) -> tuple[list[dict], float]:
    """One campaign (budget n_inputs * b): header rows and best-measured rows; tune seconds.
    A ``separate`` case runs one campaign of b per input value (tune seconds: their sum)."""
    if case.separate:
        rows: list[dict] = []
        seconds = 0.0
        for land in case.landscapes:
            alone = replace(
                case,
                base=restrict_files(case.base, [land.value], case.config_path.name),
                landscapes=[land],
                separate=False,
            )
            new, spent = run_project(alone, b, seed, workdir)
            rows += new
            seconds += spent
        return rows, seconds
    from mlkaps_gpu.campaign import Campaign, SampleStore, parse_config

    text = project_config_text(case, b, seed)
    config = parse_config(text, path=case.config_path, label=case.config_path.name)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    directory = workdir / case.name / f"b{b}_s{seed}_{digest}"
    sidecar = directory.with_name(directory.name + ".tune.json")
    started = time.perf_counter()
    campaign = Campaign.create_or_resume(config, directory)
    already = campaign.done("trees") if hasattr(campaign, "done") else False
    campaign.run()
    tune_seconds = time.perf_counter() - started
    if already and sidecar.exists():
        tune_seconds = float(json.loads(sidecar.read_text())["tune_seconds"])
    else:
        sidecar.write_text(json.dumps({"tune_seconds": tune_seconds}))
    compiled = _compiled_header_class()(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=config.trees.prefix,
        build_dir=directory / "build",
    )
    executor = campaign.setup.executor
    space = campaign.space
    objective = config.kernel.objective
    values = list(space.parameters[case.input_name].domain_values())
    chosen = compiled(pd.DataFrame({case.input_name: values}))
    chosen.insert(0, case.input_name, values)
    measured = executor.run(chosen[space.names])
    store = getattr(campaign, "store", None)
    if store is None:
        store = SampleStore(directory / "samples.sqlite", space, [objective])
    samples = store.load()
    ok = samples[samples["status"] == "ok"]
    by_value = {land.value: land for land in case.landscapes}
    rows = []
    for index, value in enumerate(values):
        land = by_value[str(value)]
        status = str(measured["status"].iloc[index])
        header_time = float(measured[objective].iloc[index]) if status == "ok" else math.nan
        mine = ok[ok[case.input_name].astype(str) == str(value)]
        best_time = float(mine[objective].min()) if len(mine) else math.nan
        n_measured = int((samples[case.input_name].astype(str) == str(value)).sum())
        common = {"case": case.name, "b": b, "seed": seed, "input": str(value)}
        common |= {"optimum": land.optimum, "n_evaluated": n_measured}
        rows.append(
            common
            | {
                "tool": HEADER,
                "time": header_time,
                "fraction": fraction_of_optimum(land.optimum, header_time),
                "status": status,
            }
        )
        rows.append(
            common
            | {
                "tool": BEST_MEASURED,
                "time": best_time,
                "fraction": fraction_of_optimum(land.optimum, best_time),
                "status": "ok" if math.isfinite(best_time) else "none",
            }
        )
    return rows, tune_seconds


# -------------------------------------------------------------------------------- the peers
def prepare_kernel_tuner_caches(case: Case, folder: Path) -> dict[str, tuple[Path, dict]]:
    """Uncompressed Kernel Tuner cache per input value (original caches decompressed; CSV
    tables converted); returns path and the cache header (without its entries)."""
    from mlkaps_gpu.executors import OK

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, tuple[Path, dict]] = {}
    for index, land in enumerate(case.landscapes):
        target = folder / f"{case.name}_{index}.json"
        if case.kernel_format == "kernel_tuner":
            opener = gzip.open if land.source.suffix == ".gz" else open
            with opener(land.source, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
                text = handle.read()
            target.write_text(text, encoding="utf-8")
            try:
                document = json.loads(text)
            except json.JSONDecodeError:  # an unfinished cache (appended by Kernel Tuner)
                document = json.loads(text.rstrip().rstrip(",") + "}\n}")
        else:
            records = land.configs.assign(
                time=land.times, status=np.where(np.isfinite(land.times), OK, "runtime_error")
            )
            document, _ = kernel_tuner_cache_from_table(
                records, land.keys, "time", name=f"{case.name}_{land.value}"
            )
            target.write_text(json.dumps(document), encoding="utf-8")
        meta = {k: v for k, v in document.items() if k != "cache"}
        meta["measured_keys"] = frozenset(document["cache"])
        out[land.value] = (target, meta)
    return out


def kernel_tuner_restrictions(case: Case, meta: Mapping[str, Any]) -> list[Any] | None:
    """What Kernel Tuner may propose: the case's constraints; without any, where the data are
    not the whole product of the parameters' values, the configurations in the data (Kernel
    Tuner's simulation mode stops at the first configuration that its cache lacks)."""
    if case.constraints:
        return list(case.constraints)
    measured = meta["measured_keys"]
    keys = list(meta["tune_params_keys"])
    product = math.prod(len(meta["tune_params"][key]) for key in keys)
    if len(measured) >= product:
        return None

    def in_the_data(params: Mapping[str, Any]) -> bool:
        return ",".join(str(params[key]) for key in keys) in measured

    return [in_the_data]


@contextlib.contextmanager
def seeded_latin_hypercube(seed: int) -> Any:
    """Make ``scipy.stats.qmc.LatinHypercube`` draw from a generator seeded with ``seed`` while
    Kernel Tuner runs: its LHS samples (diff_evo's first population, bayes_opt's initial sample)
    ignore the global numpy seed and would differ from run to run."""
    try:
        import inspect

        from scipy.stats import qmc
    except ImportError:
        yield
        return
    original = qmc.LatinHypercube
    parameters = inspect.signature(original.__init__).parameters
    keyword = "rng" if "rng" in parameters else "seed"
    generator = np.random.default_rng(seed)

    class Seeded(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("rng") is None and kwargs.get("seed") is None:
                kwargs[keyword] = generator
            super().__init__(*args, **kwargs)

    qmc.LatinHypercube = Seeded
    try:
        yield
    finally:
        qmc.LatinHypercube = original


def run_kernel_tuner(
    case: Case,
    caches: Mapping[str, tuple[Path, dict]],
    strategy: str,
    b: int,
    seed: int,
) -> list[dict]:
    import kernel_tuner

    rows = []
    for index, land in enumerate(case.landscapes):
        path, meta = caches[land.value]
        run_seed = seed * SEED_STRIDE + index
        np.random.seed(run_seed)
        random.seed(run_seed)
        sink = io.StringIO()
        with (
            warnings.catch_warnings(),
            np.errstate(all="ignore"),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            seeded_latin_hypercube(run_seed),
        ):
            warnings.simplefilter("ignore")
            results, _ = kernel_tuner.tune_kernel(
                meta["kernel_name"],
                "",
                tuple(meta["problem_size"]),
                [],
                meta["tune_params"],
                restrictions=kernel_tuner_restrictions(case, meta),
                simulation_mode=True,
                cache=str(path),
                strategy=strategy,
                strategy_options={"max_fevals": b},
                quiet=True,
            )
        best, n_evaluated = best_time_of_results(results, meta["tune_params_keys"])
        rows.append(
            {
                "case": case.name,
                "b": b,
                "seed": seed,
                "input": land.value,
                "optimum": land.optimum,
                "n_evaluated": n_evaluated,
                "tool": f"KT {strategy}",
                "time": best if math.isfinite(best) else math.nan,
                "fraction": fraction_of_optimum(land.optimum, best),
                "status": "ok" if math.isfinite(best) else "none",
            }
        )
    return rows


def run_optuna(
    land: Landscape, budgets: Sequence[int], seed: int
) -> dict[int, tuple[float, int, int]]:
    """One TPE study to max(budgets) distinct valid configurations; per b: the best time after
    the first b of them, b itself (or fewer if the asks ran out) and the asks used so far."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {
        key: optuna.distributions.CategoricalDistribution(land.domains[key]) for key in land.keys
    }
    penalty = 10.0 * land.worst
    largest = max(budgets)
    sampler = optuna.samplers.TPESampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(direction="minimize", sampler=sampler)
        evaluated: dict[tuple[Any, ...], float] = {}
        best = math.inf
        asks = 0
        out: dict[int, tuple[float, int, int]] = {}
        wanted = sorted(set(budgets))
        while len(evaluated) < largest and asks < OPTUNA_MAX_ASKS_PER_EVAL * largest:
            trial = study.ask(distributions)
            asks += 1
            config = tuple(_py(trial.params[key]) for key in land.keys)
            if config not in land.lookup:
                study.tell(trial, penalty)  # violates the constraints: not an evaluation
                continue
            value = land.lookup[config]
            study.tell(trial, value if math.isfinite(value) else penalty)
            if config in evaluated:
                continue
            evaluated[config] = value
            if math.isfinite(value):
                best = min(best, value)
            if len(evaluated) in wanted:
                out[len(evaluated)] = (best, len(evaluated), asks)
    for b in wanted:  # asks ran out: what was found
        out.setdefault(b, (best, len(evaluated), asks))
    return out


def random_search_rows(case: Case, budgets: Sequence[int]) -> list[dict]:
    rows = []
    for land in case.landscapes:
        draws = [min(b, len(land.times)) for b in budgets]
        expected = expected_fraction_random_search(land.times, draws)
        for b, value in zip(budgets, expected, strict=True):
            rows.append(
                {
                    "case": case.name,
                    "b": b,
                    "seed": -1,
                    "input": land.value,
                    "optimum": land.optimum,
                    "n_evaluated": b,
                    "tool": RANDOM,
                    "time": land.optimum / value if value > 0 else math.nan,
                    "fraction": float(value),
                    "status": "exact",
                }
            )
    return rows


# ------------------------------------------------------------------------------- reporting
def git_commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=HERE,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    cores = os.cpu_count() or 0
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        names = re.findall(r"^model name\s*:\s*(.+)$", text, flags=re.M)
        if names:
            model = names[0].strip()
        cores = len(re.findall(r"^processor\s*:", text, flags=re.M)) or cores
    return f"{cores} cores, {model}; GPU: none (replayed measurements)"


def provenance_lines(command: str) -> list[str]:
    """The first lines of every results file of these scripts: command, commit, date, machine."""
    return [
        f"- command: `{command}`",
        f"- commit: {git_commit()}",
        f"- date: {_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {machine()}",
    ]


def script_command(script: str, argv: Sequence[str] | None) -> str:
    """The command line that ran ``experiments/<script>`` (``argv``: None for ``sys.argv``)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    return f"python experiments/{script} " + shlex.join(raw)


def require_files(parser: argparse.ArgumentParser, paths: Iterable[Path]) -> None:
    """Exit 2 through ``parser`` naming the first of ``paths`` that is no file."""
    for path in paths:
        if not path.is_file():
            parser.error(f"no such file: {path}")


def read_case_rows(path: Path, case: str) -> pd.DataFrame:
    """The rows of ``case`` in a CSV this script wrote (ValueError naming the file when it is
    not one)."""
    table = pd.read_csv(path)
    missing = {"tool", "case", "b", "seed", "input", "fraction"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: not a bench_peers CSV (no {', '.join(sorted(missing))})")
    return table[table["case"] == case]


def versions() -> str:
    parts = []
    for module in ("mlkaps_gpu", "kernel_tuner", "optuna", "lightgbm", "numpy"):
        try:
            from importlib.metadata import version

            parts.append(f"{module} {version(module)}")
        except Exception:  # noqa: BLE001 - not installed
            parts.append(f"{module} not installed")
    return ", ".join(parts)


def table_markdown(
    summary: pd.DataFrame, budgets: Sequence[int], order: Sequence[str], missing: Mapping[str, str]
) -> list[str]:
    lines = [
        "| tool | " + " | ".join(f"b = {b}" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for tool in order:
        if tool in missing:
            lines.append(f"| {tool} | " + " | ".join(missing[tool] for _ in budgets) + " |")
            continue
        part = summary[summary["tool"] == tool].set_index("b")
        if part.empty:
            continue
        cells = []
        for b in budgets:
            if b in part.index:
                row = part.loc[b]
                cells.append(format_cell(row["mean"], row["sd"], exact=tool == RANDOM))
            else:
                cells.append("n/a")
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    peers = summary[~summary["tool"].isin([HEADER, BEST_MEASURED])]
    if not peers.empty and (summary["tool"] == HEADER).any():
        cells = []
        for b in budgets:
            at = peers[peers["b"] == b]
            if at.empty:
                cells.append("n/a")
                continue
            top = at.loc[at["mean"].idxmax()]
            header = summary[(summary["tool"] == HEADER) & (summary["b"] == b)]
            verdict = ""
            if not header.empty:
                verdict = " (header above)" if header["mean"].iloc[0] > top["mean"] else ""
            cells.append(f"{top['mean']:.3f} {top['tool']}{verdict}")
        lines.append("| best peer (mean) | " + " | ".join(cells) + " |")
    return lines


def write_figure(summary: pd.DataFrame, order: Sequence[str], path: Path, title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(9.5, 4.8))
    for tool in order:
        part = summary[summary["tool"] == tool].sort_values("b")
        if part.empty:
            continue
        style = {"linewidth": 2.4} if tool.startswith("project") else {"linewidth": 1.2}
        if tool == RANDOM:
            style |= {"linestyle": "--", "color": "black"}
        axes.errorbar(
            part["b"], part["mean"], yerr=part["sd"], marker="o", capsize=3, label=tool, **style
        )
    axes.set_xscale("log")
    budgets = sorted(summary["b"].unique())
    axes.set_xticks(budgets)
    axes.set_xticks([], minor=True)
    axes.set_xticklabels([str(b) for b in budgets])
    axes.set_xlabel("evaluations per input value (b)")
    axes.set_ylabel("fraction of optimum (geomean over inputs)")
    axes.set_ylim(0, 1.02)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


# ------------------------------------------------------------------------------------ main
def parse_tools(items: Sequence[str]) -> list[str]:
    chosen: list[str] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part in ("kernel_tuner", "kt"):
                expanded: Sequence[str] = TOOL_ALIASES["kernel_tuner"] or ()
            elif part in ("optuna",):
                expanded = ("optuna_tpe",)
            elif part in ("random",):
                expanded = ("random_search",)
            elif part in KT_STRATEGIES:
                expanded = (f"kt_{part}",)
            elif part in TOOL_IDS:
                expanded = (part,)
            else:
                raise SystemExit(f"--tools: unknown tool {part!r} (known: {', '.join(TOOL_IDS)})")
            chosen.extend(t for t in expanded if t not in chosen)
    return [t for t in TOOL_IDS if t in chosen]


def tool_rows_order(tools: Sequence[str]) -> list[str]:
    order = []
    for tool in tools:
        if tool == "project":
            order += [HEADER, BEST_MEASURED]
        elif tool.startswith("kt_"):
            order.append(f"KT {tool[3:]}")
        elif tool == "optuna_tpe":
            order.append(OPTUNA)
        else:
            order.append(RANDOM)
    return order


def installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bench_case(
    case: Case,
    budgets: Sequence[int],
    seeds: Sequence[int],
    tools: Sequence[str],
    workdir: Path,
    started: float,
) -> tuple[pd.DataFrame, dict[str, float], dict[int, list[float]], dict[str, str]]:
    rows: list[dict] = []
    wall: dict[str, float] = {}
    tune: dict[int, list[float]] = {b: [] for b in budgets}
    missing: dict[str, str] = {}

    def done(tool: str, b: int | str, seed: int | str, new: list[dict], seconds: float) -> None:
        wall[tool] = wall.get(tool, 0.0) + seconds
        shown = HEADER if tool == "project" else tool
        score = geomean(r["fraction"] for r in new if r["tool"] == shown)
        log(
            f"[{case.name}] {tool} b={b} seed={seed}: geomean {score:.3f} "
            f"({seconds:.1f} s; elapsed {time.perf_counter() - started:.0f} s)"
        )

    if "random_search" in tools:
        begin = time.perf_counter()
        new = random_search_rows(case, budgets)
        rows += new
        at_largest = [r for r in new if r["b"] == max(budgets)]
        done(RANDOM, max(budgets), "exact", at_largest, time.perf_counter() - begin)

    if "project" in tools:
        for b in budgets:
            for seed in seeds:
                begin = time.perf_counter()
                for attempt in range(3):
                    try:
                        new, tune_seconds = run_project(case, b, seed, workdir)
                        break
                    except ImportError as error:  # the package is being restructured
                        if attempt == 2:
                            raise
                        log(f"project import failed ({error}); retrying in 60 s")
                        time.sleep(60)
                rows += new
                tune[b].append(tune_seconds)
                done("project", b, seed, new, time.perf_counter() - begin)

    kt_tools = [t for t in tools if t.startswith("kt_")]
    if kt_tools:
        if not installed("kernel_tuner"):
            for tool in kt_tools:
                missing[f"KT {tool[3:]}"] = "not installed"
        else:
            caches = prepare_kernel_tuner_caches(case, workdir / "kernel_tuner" / case.name)
            for tool in kt_tools:
                strategy = tool[3:]
                name = f"KT {strategy}"
                for b in budgets:
                    for seed in seeds:
                        begin = time.perf_counter()
                        try:
                            new = run_kernel_tuner(case, caches, strategy, b, seed)
                        except Exception as error:  # noqa: BLE001 - reported, not fatal
                            missing[name] = f"failed: {type(error).__name__}: {error}"[:120]
                            log(f"[{case.name}] {name} b={b} seed={seed} failed: {error}")
                            break
                        rows += new
                        done(name, b, seed, new, time.perf_counter() - begin)
                    if name in missing:
                        break

    if "optuna_tpe" in tools:
        if not installed("optuna"):
            missing[OPTUNA] = "not installed"
        else:
            for seed in seeds:
                begin = time.perf_counter()
                new = []
                for index, land in enumerate(case.landscapes):
                    found = run_optuna(land, budgets, seed * SEED_STRIDE + index)
                    for b in budgets:
                        best, count, asks = found[b]
                        new.append(
                            {
                                "case": case.name,
                                "b": b,
                                "seed": seed,
                                "input": land.value,
                                "optimum": land.optimum,
                                "n_evaluated": count,
                                "tool": OPTUNA,
                                "time": best if math.isfinite(best) else math.nan,
                                "fraction": fraction_of_optimum(land.optimum, best),
                                "status": f"ok ({asks} asks)" if math.isfinite(best) else "none",
                            }
                        )
                rows += new
                at_largest = [r for r in new if r["b"] == max(budgets)]
                done(OPTUNA, f"<={max(budgets)}", seed, at_largest, time.perf_counter() - begin)
    columns = ["tool", "case", "b", "seed", "input", "fraction", "time", "optimum"]
    columns += ["n_evaluated", "status"]
    table = pd.DataFrame(rows, columns=columns)
    return table, wall, tune, missing


def report_case(
    case: Case,
    table: pd.DataFrame,
    wall: Mapping[str, float],
    tune: Mapping[int, list[float]],
    missing: Mapping[str, str],
    args: argparse.Namespace,
    budgets: Sequence[int],
    seeds: Sequence[int],
    tools: Sequence[str],
    case_seconds: float,
    results: Path,
    stem: str,
) -> str:
    order = tool_rows_order(tools)
    summary = summarize_runs(table) if len(table) else pd.DataFrame(columns=["tool", "b"])
    counts = done_when_2_counts(table) if "project" in tools else pd.DataFrame()
    lines = [
        f"# bench_peers: {case.name}",
        "",
        *provenance_lines(args.command_line),
        f"- versions: {versions()}",
        "- data: "
        + ", ".join(f"{land.value}: `{data_path_label(land.source)}`" for land in case.landscapes),
        f"- input `{case.input_name}` ({len(case.landscapes)} values), budgets b per input value "
        f"{list(budgets)}, seeds {list(seeds)}; "
        + (
            "each input value is its own project campaign of b evaluations (`--separately`: "
            "nothing learnt from the other values)"
            if case.separate
            else f"a project campaign gets B = {len(case.landscapes)} b evaluations"
        ),
        f"- project config: `{case.config_path.name}` stripped to the problem "
        f"(removed: {', '.join(case.removed) or 'nothing'})"
        + (f"; overrides: {', '.join(args.set)}" if args.set else "")
        + (f"; extra: {Path(args.config_extra).name}" if args.config_extra else ""),
        "",
        "Fraction of optimum t_opt / t(choice) (0 if the choice failed), geomean over input "
        "values, mean ± sd (ddof=1) over seeds. Random search: exact expectation of the best of b "
        "distinct uniform draws, E[t_opt / t], per input value, then geomean (no seeds).",
        "",
    ]
    lines += table_markdown(summary, budgets, order, missing)
    if len(counts):
        lines += [
            "",
            "Header vs the best configuration the same campaign measured (issue 18, Done when 2): "
            "(input, seed) runs where t(best measured) / t(header) < 0.99 and < 0.9.",
            "",
            "| b | runs | below 0.99 | below 0.9 | min ratio |",
            "|---|---|---|---|---|",
        ]
        for row in counts.to_dict("records"):
            lines.append(
                f"| {int(row['b'])} | {int(row['runs'])} | {int(row['below_0.99'])} | "
                f"{int(row['below_0.9'])} | {row['min_ratio']:.3f} |"
            )
        total = counts[["runs", "below_0.99", "below_0.9"]].sum().astype(int)
        lines.append(
            f"| all | {total['runs']} | {total['below_0.99']} | {total['below_0.9']} | "
            f"{counts['min_ratio'].min():.3f} |"
        )
    with_header = "project" in tools and len(table) > 0
    lead = lead_over_best_peer(table) if with_header else pd.DataFrame()
    if len(lead):
        lines += [
            "",
            "Header minus the best peer (highest mean at that b), mean fraction over seeds, with "
            "a 95 % bootstrap confidence interval (seeds resampled; `within noise`: the interval "
            f"holds 0, these {len(seeds)} seeds cannot tell the two apart).",
            "",
            "| b | best peer | header | peer | difference | 95 % interval | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in lead.to_dict("records"):
            lines.append(
                f"| {row['b']} | {row['peer']} | {row['header']:.3f} | {row['best_peer']:.3f} | "
                f"{row['difference']:+.3f} | [{row['low']:+.3f}, {row['high']:+.3f}] | "
                f"{row['verdict']} |"
            )
    if with_header:
        lines += lead_per_input_markdown(table)
    if any(tune.values()):
        lines += [
            "",
            "Project `tune` wall time per "
            + (
                "run (the sum of its campaigns, one per input value; "
                if case.separate
                else "campaign ("
            )
            + "create, sample, model, optimize, trees, verified header), seconds:",
            "",
            "| b | B | mean | sd | max |",
            "|---|---|---|---|---|",
        ]
        for b, values in tune.items():
            if values:
                mean, sd = mean_sd(values)
                lines.append(
                    f"| {b} | {len(case.landscapes) * b} | {mean:.1f} | {sd:.1f} | "
                    f"{max(values):.1f} |"
                )
    if len(table):
        used = table.groupby(["tool", "b"], sort=False)["n_evaluated"].mean().reset_index()
        short = used[used["n_evaluated"] < used["b"] - 1e-9]
        if len(short):
            lines += [
                "",
                "Evaluations per input value below b (mean over runs): "
                + ", ".join(
                    f"{row['tool']} {row['n_evaluated']:.1f} of {int(row['b'])}"
                    for row in short.to_dict("records")
                ),
            ]
    lines += ["", "Wall time per tool (all budgets and seeds of this case), seconds:", ""]
    lines += ["| tool | seconds |", "|---|---|"]
    for tool, seconds in wall.items():
        label = "project (tune + header evaluation)" if tool == "project" else tool
        lines.append(f"| {label} | {seconds:.1f} |")
    lines.append(f"| case total | {case_seconds:.1f} |")
    text = "\n".join(lines) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    table.to_csv(results / f"{stem}_{case.name}.csv", index=False, float_format="%.6g")
    figure = results / f"{stem}_{case.name}.png"
    title = f"{case.name}: fraction of optimum vs evaluations per input"
    if len(summary) and write_figure(summary, order, figure, title):
        text += f"\nFigure: `{figure.name}`.\n"
    (results / f"{stem}_{case.name}.md").write_text(text, encoding="utf-8")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--case",
        choices=["convolution", "syr2k", "all"],
        default=None,
        help="a built-in case (default: all)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE.toml",
        help='a replay config of your own as the case instead (executor = "replay", files '
        "mapping one input to a Kernel Tuner cache or CSV table per value)",
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=None, help="b per input value")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5)")
    parser.add_argument(
        "--tools",
        nargs="+",
        default=["project", "kernel_tuner", "optuna_tpe", "random_search"],
        help=f"subset of {', '.join(TOOL_IDS)} (kernel_tuner = every kt_*)",
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="first seed (default 0): fresh seeds check a result away from the ones that chose "
        "the defaults",
    )
    parser.add_argument("--quick", action="store_true", help="2 seeds, b = 25 and 50")
    parser.add_argument("--workdir", type=Path, default=None, help="keep campaigns here")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="project setting over the defaults, e.g. sampling.method=ga_adaptive",
    )
    parser.add_argument("--config-extra", default=None, help="TOML merged over the problem")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="VALUE",
        help="keep only these values of the case's input (e.g. --only A100 MI250X)",
    )
    parser.add_argument(
        "--separately",
        action="store_true",
        help="one project campaign of b evaluations per input value, nothing shared",
    )
    args = parser.parse_args(argv)
    args.command_line = script_command("bench_peers.py", argv)
    if args.config is not None and args.case is not None:
        log("give --case (a built-in case) or --config (a replay config of yours), not both")
        return 2
    if args.config is None and not os.environ.get("MLKAPS_GPU_DATA"):
        log("MLKAPS_GPU_DATA is not set: point it at the replay data folder")
        return 2
    budgets = args.budgets or list(QUICK_BUDGETS if args.quick else DEFAULT_BUDGETS)
    count = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    if count < 1 or args.first_seed < 0:
        log("--seeds must be >= 1 and --first-seed >= 0")
        return 2
    seeds = list(range(args.first_seed, args.first_seed + count))
    tools = parse_tools(args.tools)
    extra = tomllib.loads(Path(args.config_extra).read_text()) if args.config_extra else None
    stem = "bench_peers_quick" if args.quick else "bench_peers"
    chosen = args.case or "all"
    if args.only and args.config is None and chosen == "all":
        log("--only names values of one case's input: give --case convolution or --case syr2k")
        return 2
    cases: list[tuple[str, Path | None]]
    if args.config is not None:
        cases = [(case_name_of(args.config), args.config)]
    else:
        names = ["convolution", "syr2k"] if chosen == "all" else [chosen]
        cases = [(name, None) for name in names]
    np.seterr(all="ignore")
    started = time.perf_counter()
    temporary = None
    if args.workdir is None:
        temporary = tempfile.mkdtemp(prefix="bench_peers_")
        workdir = Path(temporary)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        for name, path in cases:
            case_started = time.perf_counter()
            try:
                case = load_case(name, args.set, extra, args.only, args.separately, path)
            except CaseError as error:
                log(str(error))
                return 2
            table, wall, tune, missing = bench_case(case, budgets, seeds, tools, workdir, started)
            text = report_case(
                case,
                table,
                wall,
                tune,
                missing,
                args,
                budgets,
                seeds,
                tools,
                time.perf_counter() - case_started,
                args.results,
                stem,
            )
            print(text, flush=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    log(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
