"""The project as a benchmarked tool: one campaign per (budget, seed) on a case's problem; its
compiled header and its best measured configuration scored per input value."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from benchkit.cases import Case, restrict_files
from benchkit.configs import to_toml
from benchkit.metrics import fraction_of_optimum
from benchkit.tools import BEST_MEASURED, HEADER

if TYPE_CHECKING:
    from mlkaps_gpu.campaign import Campaign
    from mlkaps_gpu.codegen import CompiledHeader


def project_config_text(case: Case, b: int, seed: int) -> str:
    """The case's stripped config with this seed and the budget ``n_inputs * b``, as TOML."""
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
    from mlkaps_gpu.campaign import Campaign, parse_config
    from mlkaps_gpu.codegen import CompiledHeader

    text = project_config_text(case, b, seed)
    config = parse_config(text, path=case.config_path, label=case.config_path.name)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    directory = workdir / case.name / f"b{b}_s{seed}_{digest}"
    sidecar = directory.with_name(directory.name + ".tune.json")
    started = time.perf_counter()
    campaign = Campaign.create_or_resume(config, directory)
    already = campaign.done("trees")
    campaign.run()
    tune_seconds = time.perf_counter() - started
    if already and sidecar.exists():
        tune_seconds = float(json.loads(sidecar.read_text())["tune_seconds"])
    else:
        sidecar.write_text(json.dumps({"tune_seconds": tune_seconds}))
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=config.trees.prefix,
        build_dir=directory / "build",
    )
    rows = scored_rows(case, campaign, compiled, config.kernel.objective, b, seed)
    return rows, tune_seconds


def scored_rows(
    case: Case,
    campaign: Campaign,
    compiled: CompiledHeader,
    objective: str,
    b: int,
    seed: int,
) -> list[dict]:
    """The header's answer for each input value, measured on the replay, and the best
    configuration the campaign measured there: two rows per value, scored on the case's data."""
    executor = campaign.setup.executor
    space = campaign.space
    values = list(space.parameters[case.input_name].domain_values())
    chosen = compiled(pd.DataFrame({case.input_name: values}))
    chosen.insert(0, case.input_name, values)
    measured = executor.run(chosen[space.names])
    samples = campaign.store.load()
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
    return rows
