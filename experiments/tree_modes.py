"""Joint versus per-parameter trees at equal depth: predicted regret, size and validity.

For each shipped kernel (optima and scores from the analytic cost models of
``scripts/kernel_models.py``) and, when ``$MLKAPS_GPU_DATA`` is set, the replayed GPU convolution
(optima and scores from the exhaustive measurements, ``scripts/replay_models.py``), both modes
are fitted at each depth; the table gives the mean / 90th-percentile / max predicted relative
regret of what ``select`` returns at the optima points, the total leaves (summed over the
per-parameter trees), and the fraction of a dense input grid (100 points per input; 22 per input
for gemm's three inputs) where the trees' raw configuration violates a constraint (what a header
without the run-time check would return). ``--partitions`` also compares the joint partitions.

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/tree_modes.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from benchkit import provenance
from benchkit.repo_scripts import script_module

from mlkaps_gpu.trees import (
    JointSelector,
    RegretOracle,
    Selector,
    constraint_violations,
    make_selector,
    predicted_regret,
    tree_size,
)

kernel_models = script_module("kernel_models")
replay_models = script_module("replay_models")
KernelModel = kernel_models.KernelModel
kernel_model = kernel_models.kernel_model
convolution_model = replay_models.convolution_model
replay_available = replay_models.replay_available


def dense_grid(model: KernelModel) -> pd.DataFrame:
    return model.space.grid(100 if len(model.space.inputs) <= 2 else 22)


def row_of(
    model: KernelModel, label: str, depth: int, selector: Selector, oracle: RegretOracle
) -> dict[str, object]:
    regret = predicted_regret(selector, oracle)
    violations = constraint_violations(selector, model.space, dense_grid(model))
    size = tree_size(selector)
    return {
        "kernel": model.name,
        "mode": label,
        "depth": depth,
        "mean %": round(100 * regret.mean, 2),
        "p90 %": round(100 * regret.p90, 2),
        "max %": round(100 * regret.max, 1),
        "leaves": size["leaves"],
        "invalid trees %": round(100 * violations.fraction_invalid_trees, 2),
        "invalid select": violations.n_invalid_selected,
    }


def compare(model: KernelModel, depths: list[int], partitions: bool) -> list[dict[str, object]]:
    space = model.space
    oracle = RegretOracle(model.optima, space, model.cost)
    rows = []
    for depth in depths:
        for mode in ("joint", "per_parameter"):
            selector = make_selector(mode, depth)
            selector.fit(model.optima, space.inputs, space.design, space=space, oracle=oracle)
            rows.append(row_of(model, mode, depth, selector, oracle))
        if partitions:
            for partition in ("regressor", "codes"):
                joint = JointSelector(max_depth=depth, partition=partition)
                joint.fit(model.optima, space.inputs, space.design, space=space, oracle=oracle)
                rows.append(row_of(model, f"joint/{partition}", depth, joint, oracle))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    parser.add_argument("--kernels", nargs="+", default=["matsum", "lu", "gemm", "convolution"])
    parser.add_argument("--partitions", action="store_true", help="also joint/regressor, codes")
    parser.add_argument("--out", type=Path, default=None, help="write the table as CSV")
    args = parser.parse_args()
    rows = []
    for name in args.kernels:
        if name == "convolution":
            if not replay_available():
                print("convolution skipped: set MLKAPS_GPU_DATA to the replay data folder")
                continue
            model = convolution_model()
            depths = [d for d in args.depths if d <= 4] or [1]
            depths = sorted({1, *depths})
        else:
            model = kernel_model(name)
            depths = args.depths
        rows += compare(model, depths, args.partitions)
    table = pd.DataFrame(rows)
    print(provenance.header(provenance.provenance(), markdown=True), end="")
    print(
        "Predicted relative regret at the optima points (of what select returns), total leaves,"
        " and % of a dense grid where the raw trees break a constraint."
    )
    print(table.to_string(index=False))
    if args.out is not None:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
