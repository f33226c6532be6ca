"""Transfer to a new architecture on the replayed GPU convolution.

For each of the five complete GPUs left out in turn: full campaigns on the other four are the
sources (``[sampling] fixed = {gpu = ...}``, GA-Adaptive, ``--source-budget`` evaluations each);
the left-out GPU is then tuned with b = 10, 25, 50 (and, to see where 0.95 is reached, larger)
evaluations (a) from scratch and (b) with the sources' samples as extra training data of every
surrogate fit (``[transfer] sources``: the GPU is a categorical input of the surrogate, and
sampling stays on the new GPU), GA-Adaptive first measuring the configurations the sources rank
best (``[transfer] warm_start``). Score: fraction of optimum of the configuration the compiled
header selects for the new GPU, over seeds. The last table gives, per GPU, the smallest budget
whose mean fraction reaches ``--target`` (0.95) in each mode, and the evaluations transfer saves.

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/transfer.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from benchkit import provenance
from benchkit.cases import CONFIGS

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.codegen import CompiledHeader

CONFIG = CONFIGS["convolution"]
GPUS = ["A100", "A4000", "MI250X", "W6600", "W7800"]


def make_config(
    gpu: str,
    budget: int,
    seed: int,
    sources: list[Path],
    *,
    transfer_sampling: bool,
    warm_start: float = 0.2,
) -> str:
    text = CONFIG.read_text()
    text = text.replace("budget = 300", f"budget = {budget}").replace("seed = 0", f"seed = {seed}")
    text = text.replace('method = "lhs"', 'method = "ga_adaptive"')
    batch = max(5, budget // 5)
    text = text.replace("batch_size = 50", f'batch_size = {batch}\nfixed = {{ gpu = "{gpu}" }}')
    if transfer_sampling:
        # the transferred model is informed from the first batch: exploit at once
        text = text.replace(
            "[sampling]\n", "[sampling]\nbootstrap = 0.0\neps_initial = 0.5\neps_final = 0.8\n"
        )
    if sources:
        listed = ", ".join(f'"{s}"' for s in sources)
        text += f"\n[transfer]\nsources = [{listed}]\nwarm_start = {warm_start}\n"
    return text.replace("verify_inputs = 2000", "verify_inputs = 200")


def run(text: str, directory: Path) -> Campaign:
    config = parse_config(text, path=CONFIG, label=CONFIG.name)
    campaign = Campaign.create_or_resume(config, directory)
    campaign.run()
    return campaign


def score(campaign: Campaign, gpu: str) -> float:
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=campaign.config.trees.prefix,
        build_dir=campaign.directory / "build",
    )
    chosen = compiled(pd.DataFrame({"gpu": [gpu]}))
    chosen.insert(0, "gpu", [gpu])
    executor = campaign.setup.executor
    measured = executor.run(chosen[campaign.space.names])
    best, _ = executor.optimum(gpu)
    ok = measured["status"].iloc[0] == "ok"
    return float(best / measured["time"].iloc[0]) if ok else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[10, 25, 50, 100, 200])
    parser.add_argument("--gpus", nargs="+", default=GPUS, choices=GPUS, help="left-out GPUs")
    parser.add_argument("--warm-start", type=float, default=0.2)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--source-budget", type=int, default=300)
    parser.add_argument("--out", type=Path, default=None, help="write the raw table as CSV")
    parser.add_argument(
        "--work", type=Path, default=None, help="keep campaigns here (finished ones are reused)"
    )
    args = parser.parse_args()
    if not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        root = args.work or Path(folder)
        sources = {}
        for gpu in GPUS:
            text = make_config(gpu, args.source_budget, 0, [], transfer_sampling=False)
            sources[gpu] = run(text, root / f"source_{gpu}").directory
            print(f"source {gpu} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        for gpu in args.gpus:
            others = [sources[g] for g in GPUS if g != gpu]
            for budget in args.budgets:
                for seed in range(args.seeds):
                    for mode, used in (("scratch", []), ("transfer", others)):
                        text = make_config(
                            gpu,
                            budget,
                            seed,
                            used,
                            transfer_sampling=bool(used),
                            warm_start=args.warm_start,
                        )
                        tag = f"_w{args.warm_start}" if used else ""
                        campaign = run(text, root / f"{gpu}_{budget}_{seed}_{mode}{tag}")
                        rows.append(
                            {
                                "gpu": gpu,
                                "budget": budget,
                                "seed": seed,
                                "mode": mode,
                                "fraction": score(campaign, gpu),
                            }
                        )
            print(f"target {gpu} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    table = pd.DataFrame(rows)
    if args.out:
        provenance.write_csv(table, args.out, index=False)
    summary = table.groupby(["gpu", "mode", "budget"])["fraction"].mean().unstack("budget")
    print(provenance.header(provenance.provenance(), markdown=True), end="")
    print(
        f"\nFraction of optimum on the left-out GPU ({args.seeds} seeds; sources: "
        f"{args.source_budget} evaluations on each other GPU)"
    )
    print("| GPU | mode | " + " | ".join(f"b={b}" for b in args.budgets) + " |")
    print("|---|---|" + "---|" * len(args.budgets))
    for (gpu, mode), values in summary.iterrows():
        print(f"| {gpu} | {mode} | " + " | ".join(f"{values[b]:.3f}" for b in args.budgets) + " |")
    overall = table.groupby(["mode", "budget"])["fraction"].mean().unstack("budget")
    for mode, values in overall.iterrows():
        print(f"| all | {mode} | " + " | ".join(f"{values[b]:.3f}" for b in args.budgets) + " |")
    print(f"\nSmallest budget whose mean fraction reaches {args.target} (of {args.budgets})")
    print("| GPU | scratch | transfer | evaluations saved |")
    print("|---|---|---|---|")
    largest = max(args.budgets)
    for gpu, block in [*summary.groupby(level="gpu"), ("all", overall)]:
        block = block.droplevel("gpu") if gpu != "all" else block
        reach = {}
        for mode in ("scratch", "transfer"):
            hits = [b for b in args.budgets if block.loc[mode, b] >= args.target]
            reach[mode] = min(hits) if hits else None
        cells = [f"{reach[m]}" if reach[m] else f"> {largest}" for m in ("scratch", "transfer")]
        if reach["transfer"] and reach["scratch"]:
            saved = f"{reach['scratch'] - reach['transfer']}"
        elif reach["transfer"]:
            saved = f"> {largest - reach['transfer']}"
        else:
            saved = "not reached"
        print(f"| {gpu} | {cells[0]} | {cells[1]} | {saved} |")
    print(f"\ntotal time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
