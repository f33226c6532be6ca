"""A small GEMM campaign on the GPU (CuPy), then the header's choices measured against the
expert default (16 x 16 blocks, tile_k 16) at sizes not on the optimization grid.

    python experiments/gemm_gpu.py --out runs/gemm_cuda
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign, load_config
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.kernels import load_builtin

CONFIG = Path(__file__).parent / "configs" / "gemm_cuda.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=int, default=None)
    args = parser.parse_args()
    config = load_config(CONFIG)
    if args.budget:
        config.sampling.budget = args.budget
    started = time.perf_counter()
    campaign = Campaign.create_or_resume(config, args.out)
    summary = campaign.run()
    wall = time.perf_counter() - started
    print(json.dumps(summary, indent=1, default=str))
    print(
        f"campaign wall time {wall:.1f} s, of which executor "
        f"{summary.get('sampling', {}).get('executor_seconds', float('nan'))} s"
    )
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=config.trees.prefix,
        build_dir=args.out / "build",
    )
    sizes = [96, 200, 500, 1000, 2500]
    rng = np.random.default_rng(1)
    points = pd.DataFrame(
        {"m": rng.choice(sizes, 12), "n": rng.choice(sizes, 12), "k": rng.choice(sizes, 12)}
    )
    tuned = pd.concat([points, compiled(points)], axis=1)
    expert_config = load_builtin("gemm_cuda").expert_for({})
    expert = points.assign(**expert_config)
    executor = campaign.setup.executor
    measured_tuned = executor.run(tuned[campaign.space.names])
    measured_expert = executor.run(expert[campaign.space.names])
    table = points.copy()
    table["tuned"] = [
        f"{a}x{b}/{c}"
        for a, b, c in tuned[["block_x", "block_y", "tile_k"]].itertuples(index=False)
    ]
    table["tuned_ms"] = measured_tuned["time"] * 1e3
    table["expert_ms"] = measured_expert["time"] * 1e3
    table["speedup"] = table["expert_ms"] / table["tuned_ms"]
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ok = table["speedup"].notna()
    print(
        f"geometric-mean speedup over the expert: "
        f"{float(np.exp(np.log(table['speedup'][ok]).mean())):.3f} on {int(ok.sum())} points; "
        f"statuses tuned {measured_tuned['status'].value_counts().to_dict()}, expert "
        f"{measured_expert['status'].value_counts().to_dict()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
