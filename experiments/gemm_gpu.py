"""A small GEMM campaign on the GPU (CuPy), merged with the expert default (16 x 16 blocks,
tile_k 16), then the campaign's header, the merged header and the expert measured at random
sizes off both grids (the optimization grid and the merge's validation grid).

Steps: tune ``experiments/configs/gemm_cuda.toml`` (a finished campaign directory is resumed),
``merge`` with the expert on a ``--merge-grid`` validation grid (cell centres; the merge's
own before / after validation is measured at those points), then ``--heldout`` sizes drawn
log-uniformly over the inputs' ranges, each configuration measured ``--rounds`` times
interleaved, the median kept. Prints the table and, with ``--results``, writes it as markdown
(provenance first) and CSV.

    python experiments/gemm_gpu.py --out runs/gemm_cuda --results experiments/results/gemm_gpu.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit.provenance import header, provenance, write_csv
from scipy.stats import gmean

from mlkaps_gpu.campaign import Campaign, load_config
from mlkaps_gpu.validation import (
    describe_merge,
    expert_reference,
    merge,
    parse_grid,
    write_merge,
)

CONFIG = Path(__file__).parent / "configs" / "gemm_cuda.toml"


def heldout_sizes(campaign: Campaign, count: int, seed: int) -> pd.DataFrame:
    """``count`` integer sizes per input, log-uniform over each input's range."""
    rng = np.random.default_rng(seed)
    columns = {}
    for parameter in campaign.space.inputs:
        low, high = np.log(float(parameter.low)), np.log(float(parameter.high))
        columns[parameter.name] = np.round(np.exp(rng.uniform(low, high, count))).astype(np.int64)
    return pd.DataFrame(columns)


def label(table: pd.DataFrame) -> list[str]:
    """One short text per configuration: its design values joined by '/'."""
    return ["/".join(map(str, row)) for row in table.itertuples(index=False)]


def measure(
    campaign: Campaign, points: pd.DataFrame, choices: dict[str, pd.DataFrame], rounds: int
) -> dict[str, np.ndarray]:
    """Median time per point of each choice, ``rounds`` interleaved measurements."""
    executor = campaign.setup.executor
    names = campaign.space.names
    tables = {
        name: pd.concat([points, chosen.reset_index(drop=True)], axis=1)[names]
        for name, chosen in choices.items()
    }
    times: dict[str, list[np.ndarray]] = {name: [] for name in choices}
    for _ in range(rounds):
        for name, table in tables.items():
            times[name].append(executor.run(table)["time"].to_numpy(dtype=np.float64))
    return {name: np.median(np.vstack(rows), axis=0) for name, rows in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="campaign directory")
    parser.add_argument("--config", type=Path, default=CONFIG, help="campaign configuration")
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--merge-grid", default="5", help="merge's validation grid (0: no merge)")
    parser.add_argument("--heldout", type=int, default=48, help="random sizes measured at the end")
    parser.add_argument("--rounds", type=int, default=5, help="measurements per size and choice")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random sizes")
    parser.add_argument("--results", type=Path, default=None, help="markdown file to write")
    args = parser.parse_args()
    lines = provenance()
    config = load_config(args.config)
    if args.budget:
        config.sampling.budget = args.budget
    started = time.perf_counter()
    campaign = Campaign.create_or_resume(config, args.out)
    summary = campaign.run()
    wall = time.perf_counter() - started
    executor_seconds = summary.get("sampling", {}).get("executor_seconds", float("nan"))
    report = [f"campaign wall time {wall:.1f} s, of which executor {executor_seconds} s"]
    expert = expert_reference(campaign)
    points = heldout_sizes(campaign, args.heldout, args.seed)
    expert_table = expert.configurations(points)
    choices = {"tuned": campaign.load_selector().select(points), "expert": expert_table}
    merge_summary: dict[str, Any] | None = None
    if args.merge_grid != "0":
        started = time.perf_counter()
        result = merge(
            campaign, expert, sizes=parse_grid(args.merge_grid, campaign.sampling_space), seed=0
        )
        write_merge(result, campaign.directory / "merge", campaign.space)
        merge_summary = result.summary
        report.append(
            f"merge [{time.perf_counter() - started:.0f} s]\n{describe_merge(merge_summary)}"
        )
        choices["merged"] = (
            result.selector.select(points) if result.header is not None else expert_table
        )
    medians = measure(campaign, points, choices, args.rounds)
    campaign.setup.executor.close()
    table = points.copy()
    for name in choices:
        if name != "expert":
            table[name] = label(choices[name])
    for name, value in medians.items():
        table[f"{name}_ms"] = value * 1e3
    for name in choices:
        if name != "expert":
            table[f"{name}_speedup"] = medians["expert"] / medians[name]
    text = table.to_string(index=False, float_format=lambda v: f"{v:.3f}")
    expert_labels = label(expert_table)
    for name in choices:
        if name == "expert":
            continue
        speedup = table[f"{name}_speedup"]
        report.append(
            f"{name}: geomean {gmean(speedup):.3f}x over the expert on {len(table)} random "
            f"sizes; below 0.97x at {int((speedup < 0.97).sum())}, worst {speedup.min():.3f}x; "
            f"above 1.03x at {int((speedup > 1.03).sum())}; the expert's configuration at "
            f"{int((table[name] == expert_labels).sum())}"
        )
    print(text)
    print("\n".join(report))
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        write_csv(table, args.results.with_suffix(".csv"), index=False)
        body = [
            header(lines, markdown=True),
            "```\n" + "\n".join(report) + "\n```\n",
            "Per random size (times are medians of the rounds, ms):\n",
            "```\n" + text + "\n```\n",
        ]
        if merge_summary is not None:
            merged = {k: merge_summary[k] for k in ("kept_tuned", "kept_expert", "shipped")}
            body.append(
                "Merge: "
                + json.dumps(merged)
                + "; depth sweep (depth, leaves, mean regret): "
                + ", ".join(
                    f"({row['depth']}, {row['leaves']}, {row['mean_regret']:.4f})"
                    for row in merge_summary["tree"]["depth_sweep"]
                )
                + "\n"
            )
        args.results.write_text("\n".join(body), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
