"""Peer tuners on a case's replayed data: Kernel Tuner (simulation mode), Optuna TPE, and the
exact expectation of random search."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import random
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchkit.cases import Case, Landscape, python_value
from benchkit.metrics import expected_fraction_random_search, fraction_of_optimum
from benchkit.tools import OPTUNA, RANDOM

#: Optuna asks at most this many trials per counted evaluation
OPTUNA_MAX_ASKS_PER_EVAL = 50
SEED_STRIDE = 1009


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
    """Kernel Tuner's ``strategy``, ``b`` evaluations per input value (seeded); a row per value."""
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
            config = tuple(python_value(trial.params[key]) for key in land.keys)
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


def optuna_rows(case: Case, budgets: Sequence[int], seed: int) -> list[dict]:
    """Optuna TPE's rows of one seed: one study per input value (:func:`run_optuna`)."""
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
    return new


def random_search_rows(case: Case, budgets: Sequence[int]) -> list[dict]:
    """The exact expectation of random search per input value and budget (seed -1: no seeds)."""
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
