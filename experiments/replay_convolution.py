"""Tune the replayed GPU convolution with the GPU as input; score the header's choices.

For each total budget (default 150, 300, 600 evaluations shared by the five complete GPUs) and
seed, a full campaign runs (sampling, LightGBM, grid optimization, trees, compiled and verified
header); the configuration the compiled header selects for each GPU is then looked up in the
exhaustive data. Fraction of optimum = best measured time / time of the selected configuration
(0 when the selected configuration failed on that GPU).

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/replay_convolution.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit import provenance
from benchkit.cases import CONFIGS

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.codegen import CompiledHeader

CONFIG = CONFIGS["convolution"]


def run_one(text: str, budget: int, seed: int, method: str, workdir: Path) -> pd.DataFrame:
    text = text.replace("budget = 300", f"budget = {budget}").replace("seed = 0", f"seed = {seed}")
    text = text.replace('method = "lhs"', f'method = "{method}"')
    config = parse_config(text, path=CONFIG, label=CONFIG.name)
    directory = workdir / f"b{budget}_s{seed}_{method}"
    campaign = Campaign.create_or_resume(config, directory)
    campaign.run()
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=config.trees.prefix,
        build_dir=directory / "build",
    )
    executor = campaign.setup.executor
    gpus = list(campaign.space.parameters["gpu"].domain_values())
    chosen = compiled(pd.DataFrame({"gpu": gpus}))
    chosen.insert(0, "gpu", gpus)
    measured = executor.run(chosen[campaign.space.names])
    rows = []
    for index, gpu in enumerate(gpus):
        best, _ = executor.optimum(gpu)
        ok = measured["status"].iloc[index] == "ok"
        selected = measured["time"].iloc[index]
        rows.append(
            {
                "gpu": gpu,
                "budget": budget,
                "seed": seed,
                "method": method,
                "fraction": best / selected if ok else 0.0,
                "status": measured["status"].iloc[index],
            }
        )
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--method", default="ga_adaptive", choices=["lhs", "random", "ga_adaptive"])
    parser.add_argument("--out", type=Path, default=None, help="write the raw table as CSV")
    args = parser.parse_args()
    if not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    text = CONFIG.read_text()
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for budget in args.budgets:
            for seed in range(args.seeds):
                results.append(run_one(text, budget, seed, args.method, Path(folder)))
                print(
                    f"budget {budget} seed {seed} done ({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                )
    table = pd.concat(results, ignore_index=True)
    if args.out:
        table.to_csv(args.out, index=False)
    grouped = table.groupby(["gpu", "budget"])["fraction"]
    summary = pd.concat(
        {"mean": grouped.mean(), "std": grouped.std(ddof=0), "min": grouped.min()}, axis=1
    ).unstack("budget")
    print(provenance.header(provenance.provenance(), markdown=True), end="")
    print(f"\nFraction of optimum per GPU (sampler {args.method}, {args.seeds} seeds)")
    header = "| GPU | " + " | ".join(f"b={b}: mean ± std (min)" for b in args.budgets) + " |"
    print(header)
    print("|---|" + "---|" * len(args.budgets))
    for gpu in summary.index:  # noqa: B007
        cells = []
        for budget in args.budgets:
            mean = summary[("mean", budget)][gpu]
            std = summary[("std", budget)][gpu]
            low = summary[("min", budget)][gpu]
            cells.append(f"{mean:.3f} ± {std:.3f} ({low:.3f})")
        print(f"| {gpu} | " + " | ".join(cells) + " |")
    overall = table.groupby("budget")["fraction"].mean()
    print("| all | " + " | ".join(f"{overall[b]:.3f}" for b in args.budgets) + " |")
    failed = int((table["status"] != "ok").sum())
    print(f"\nselected configurations that failed on their GPU: {failed} of {len(table)}")
    print(f"total time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
