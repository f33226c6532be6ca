"""How well can a model of (input features, configuration) -> time choose at all? The ceiling of
the argmin of LightGBM on an AutoHeuristic table, against which a budgeted campaign's header is
read.

* ``full knowledge``: the shapes split in 5 folds (shape-grouped cross-validation); a model
  fitted on every listed cell of 4 folds (80 % of all cells) chooses at the shapes of the fifth.
* ``random cells``: a model fitted on a random share of all cells chooses at every shape.

Models: LightGBM on log time (1,000 rounds at learning rate 0.05; 31 and 63 leaves), input
features as the file gives them (categoricals as codes) and the configuration's parameters; a
failed cell is left out of the fit and a point whose answer failed scores as its slowest listed
time, as in ``bench_inputs.py``. Geomean of t_opt / t(answer) over every shape of the truth.

    python experiments/ceiling_inputs.py [--case mixedmm_a100|flexattention_a100|all]
        [--data FILE] [--shares 2,5,10,20] [--seeds 0-2] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
from bench_inputs import parse_seeds
from benchkit.inputs_truth import Truth, autoheuristic_truth, point_fractions, summarize_fractions
from benchkit.provenance import header, provenance

CASES = ("mixedmm_a100", "flexattention_a100")
FOLDS = 5
PARAMS = {"n_estimators": 1000, "learning_rate": 0.05, "verbose": -1}


def cells(truth: Truth) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Features, log time (NaN: failed), point and configuration of every listed cell."""
    inputs = truth.inputs.copy()
    for name in truth.categorical_inputs:
        inputs[name] = inputs[name].astype("category").cat.codes
    configs = truth.configs.copy()
    configs["kind"] = configs["kind"].astype("category").cat.codes
    point, config = np.nonzero(~np.isnan(truth.times))
    features = pd.concat(
        [inputs.iloc[point].reset_index(drop=True), configs.iloc[config].reset_index(drop=True)],
        axis=1,
    )
    time = truth.times[point, config]
    return features, np.where(np.isfinite(time), np.log(time), np.nan), point, config


def argmin_geomean(truth: Truth, point: np.ndarray, config: np.ndarray, pred: np.ndarray) -> float:
    order = pd.DataFrame({"p": point, "c": config, "v": pred}).sort_values(["p", "v"])
    best = order.drop_duplicates("p")
    answers = np.full(truth.n_points, -1)
    answers[best["p"].to_numpy()] = best["c"].to_numpy()
    return float(summarize_fractions(point_fractions(truth, answers))["geomean"])


def fitted(features: pd.DataFrame, target: np.ndarray, rows: np.ndarray, leaves: int, seed: int):
    rows = rows & np.isfinite(target)
    model = lgb.LGBMRegressor(num_leaves=leaves, random_state=seed, **PARAMS)
    return model.fit(features[rows], target[rows])


def study(truth: Truth, shares: Sequence[float], seeds: Sequence[int]) -> pd.DataFrame:
    features, target, point, config = cells(truth)
    rows = []
    for seed in seeds:
        fold = np.random.default_rng(seed).integers(0, FOLDS, truth.n_points)[point]
        for leaves in (31, 63):
            pred = np.empty(len(target))
            for f in range(FOLDS):
                model = fitted(features, target, fold != f, leaves, seed)
                pred[fold == f] = model.predict(features[fold == f])
            score = argmin_geomean(truth, point, config, pred)
            rows.append(("full knowledge (80 % of cells, 5-fold by shape)", leaves, seed, score))
            print(f"  seed {seed} leaves {leaves} full knowledge: {score:.4f}", flush=True)
        for share in shares:
            rng = np.random.default_rng([seed, int(share * 100)])
            chosen = np.zeros(len(target), dtype=bool)
            chosen[rng.choice(len(target), int(share / 100 * len(target)), replace=False)] = True
            model = fitted(features, target, chosen, 31, seed)
            pred = model.predict(features)
            pred[chosen & np.isnan(target)] = np.inf  # measured as failed: never chosen
            score = argmin_geomean(truth, point, config, pred)
            rows.append((f"random cells {share:g} %", 31, seed, score))
            print(f"  seed {seed} random cells {share:g} %: {score:.4f}", flush=True)
    return pd.DataFrame(rows, columns=["model", "leaves", "seed", "geomean"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--data", help="an AutoHeuristic file instead of the cases")
    parser.add_argument("--shares", default="2,5,10,20", help="percent of the cells")
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    if args.data:
        paths = {Path(args.data).name.split(".")[0]: Path(args.data)}
    else:
        folder = os.environ.get("MLKAPS_GPU_DATA")
        if not folder:
            print("ceiling_inputs: set MLKAPS_GPU_DATA (the replay data folder)", file=sys.stderr)
            return 2
        names = CASES if args.case == "all" else (args.case,)
        paths = {n: Path(folder) / "autoheuristic" / f"{n}.txt.gz" for n in names}
    shares = [float(s) for s in args.shares.split(",")]
    seeds = parse_seeds(args.seeds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = provenance(list(argv) if argv is not None else None)
    for name, path in paths.items():
        truth = autoheuristic_truth(path, name)
        print(f"{name}: {truth.n_points} shapes, {len(truth.labels)} choices", flush=True)
        table = study(truth, shares, seeds)
        summary = (
            table.groupby(["model", "leaves"], sort=False)["geomean"]
            .agg(["mean", "std", "count"])
            .reset_index()
        )
        rows = [
            f"| {r.model} | {r.leaves} | {r.mean:.4f} ± {r.std:.4f} | {r.count} |"
            for r in summary.itertuples()
        ]
        text = "\n".join(
            [
                f"# ceiling_inputs: {name}",
                "",
                header(lines, markdown=True).rstrip(),
                "",
                "Argmin of LightGBM over every listed configuration, t_opt / t(answer) geomean "
                "over every shape (see the script's docstring).",
                "",
                "| model | leaves | geomean (mean ± sd over seeds) | seeds |",
                "|---|---|---|---|",
                *rows,
                "",
            ]
        )
        print(text)
        (out / f"ceiling_inputs_{name}.md").write_text(text, encoding="utf-8")
        with open(out / f"ceiling_inputs_{name}.csv", "w", encoding="utf-8") as handle:
            handle.write(header(lines))
            table.to_csv(handle, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
