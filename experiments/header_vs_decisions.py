"""Where a replay campaign's header loses on an AutoHeuristic table: its decisions or its trees.

A replay campaign decides a configuration at every grid point (``optima.csv``: the recorded
shapes), then fits the trees that the header compiles. This script runs one campaign per seed
on a table at a share of its cells and scores, against the table's truth at every shape
(``t_opt / t(answer)``, as ``bench_inputs.py`` scores; a failed or unlisted answer scores as the
shape's slowest), both the decisions and the header's answers. Where the header is below its
own decisions, the trees lost what the decisions knew; where both are low, the decisions (the
sampling and the model) are what to mend. The depth sweep of each campaign is printed beside
(``mean_regret`` at the points the trees were fitted on, ``cv_regret`` at held-out points
where the code computes it).

    python experiments/header_vs_decisions.py --case mixedmm_a100 --share 5 --seeds 0-2
    python experiments/header_vs_decisions.py --data FILE --share 5 --seeds 0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import bench_inputs
import numpy as np
import pandas as pd
from benchkit.inputs_replay import header_choices
from benchkit.inputs_truth import (
    Truth,
    autoheuristic_truth,
    input_features,
    point_fractions,
    summarize_fractions,
)
from benchkit.metrics import geomean
from benchkit.provenance import header, provenance
from benchkit.report import frame_markdown

HERE = Path(__file__).resolve().parent
SWEEP_COLUMNS = ("depth", "leaves", "mean_regret", "cv_regret", "measured_over", "cv_measured_over")


def decision_answers(truth: Truth, optima: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The truth's configuration index of each shape's decision (``optima.csv``'s design
    columns: those between the inputs and ``predicted_*``) and whether a measurement decided it
    (``source`` is ``measured``), in the truth's shape order."""
    inputs = list(truth.inputs.columns)
    rows = truth.inputs.merge(optima.assign(_row=np.arange(len(optima))), on=inputs, how="left")
    if rows["_row"].isna().any():
        raise ValueError(f"{int(rows['_row'].isna().sum())} shapes have no decision")
    decided = optima.iloc[rows["_row"].astype(int).to_numpy()].reset_index(drop=True)
    columns = list(decided.columns)
    first = next(i for i, c in enumerate(columns) if c.startswith("predicted_"))
    measured = decided["source"].astype(str).to_numpy() == "measured"
    return header_choices(truth, decided[columns[len(inputs) : first]]), measured


def config_fractions(truth: Truth, configurations: np.ndarray) -> np.ndarray:
    """``shapes x configurations``: each configuration's fraction of the optimum at each shape
    (as a tool answering it everywhere is scored)."""
    return np.column_stack(
        [point_fractions(truth, np.full(truth.n_points, c)) for c in configurations]
    )


def learnable_ceiling(
    truth: Truth, configurations: np.ndarray, seed: int, folds: int = 5
) -> np.ndarray:
    """Per shape: the fraction of the optimum of the answer a random forest gives there when
    fitted, on the other folds' shapes, to the best of ``configurations`` at each shape with
    full knowledge of the truth: what a classifier of the inputs carries to a shape never
    measured when every other shape is known exactly. A comparison, not a bound: a model of
    the time over inputs and configuration can carry more."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import KFold

    fractions = config_fractions(truth, configurations)
    labels = np.asarray(configurations)[fractions.argmax(axis=1)]
    if len(np.unique(labels)) == 1:
        return fractions.max(axis=1)
    features = input_features(truth, truth.inputs)
    answers = np.empty_like(labels)
    split = KFold(folds, shuffle=True, random_state=seed).split(features)
    for fitted, held in split:
        forest = RandomForestClassifier(300, min_samples_leaf=2, random_state=seed, n_jobs=1)
        answers[held] = forest.fit(features[fitted], labels[fitted]).predict(features[held])
    return point_fractions(truth, answers)


def one_seed(
    case: str,
    path: Path,
    truth: Truth,
    share: float,
    seed: int,
    workdir: Path,
    max_configs: int | str | None = None,
) -> tuple[dict, pd.DataFrame]:
    """The campaign of one seed: its row of figures and its depth sweep."""
    budget = max(1, int(round(share / 100 * truth.n_cells)))
    replay = bench_inputs.replay_config(case, path)
    if replay is None:
        raise SystemExit("this checkout cannot replay AutoHeuristic tables")
    answers = bench_inputs.replay_header_answers(
        case, replay, truth, budget, seed, workdir, max_configs
    )[1]
    bounded = "" if max_configs is None else f"_k{max_configs}"
    folder = workdir / f"{case}_B{budget}_s{seed}{bounded}"
    decided, measured = decision_answers(truth, pd.read_csv(folder / "optima.csv"))
    header_fractions = point_fractions(truth, answers)
    decision_fractions = point_fractions(truth, decided)
    differ = answers != decided
    configurations = np.unique(answers[answers >= 0])
    best_of = config_fractions(truth, configurations).max(axis=1)
    ceiling = learnable_ceiling(truth, configurations, seed)
    trees = json.loads((folder / "campaign.json").read_text())["details"]["trees"]
    sweep = pd.DataFrame(trees.get("depth_sweep", []))
    row = {
        "case": case,
        "share": share,
        "seed": seed,
        "decisions": summarize_fractions(decision_fractions)["geomean"],
        "header": summarize_fractions(header_fractions)["geomean"],
        "header_below_0.67": int(np.sum(header_fractions < 0.67)),
        "decisions_below_0.67": int(np.sum(decision_fractions < 0.67)),
        "shapes_answered_otherwise": int(differ.sum()),
        "there_decisions": geomean(decision_fractions[differ]),
        "there_header": geomean(header_fractions[differ]),
        "measured_shapes": int(measured.sum()),
        "decisions_measured": geomean(decision_fractions[measured]),
        "decisions_modelled": geomean(decision_fractions[~measured]),
        "best_of_its_configs": geomean(best_of),
        "ceiling_modelled": geomean(ceiling[~measured]),
        "ceiling": geomean(ceiling),
        "depth": trees.get("depth"),
        "configs": len(np.unique(answers)),
    }
    shown = sweep[[c for c in SWEEP_COLUMNS if c in sweep.columns]].assign(seed=seed)
    return row, shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(bench_inputs.AH_FILES), default="mixedmm_a100")
    parser.add_argument("--data", type=Path, help="an AutoHeuristic file instead of --case")
    parser.add_argument("--share", type=float, default=5.0, help="percent of the cells")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--tag", default="")
    parser.add_argument(
        "--max-configs", help='[trees] max_configs of the campaigns (an integer, "auto", "none")'
    )
    parser.add_argument("--workdir", type=Path, help="campaign folders (default: temporary)")
    args = parser.parse_args(argv)
    if args.data is not None:
        if not args.data.is_file():
            parser.error(f"--data {args.data}: no such file")
        case, path = args.data.name.split(".")[0], args.data
    else:
        root = os.environ.get("MLKAPS_GPU_DATA")
        if not root:
            parser.error("set MLKAPS_GPU_DATA to the replay data folder, or give --data FILE")
        case, path = args.case, Path(root) / "autoheuristic" / bench_inputs.AH_FILES[args.case]
    if not 0 < args.share <= 100:
        parser.error(f"--share {args.share}: a percentage in (0, 100]")
    seeds = bench_inputs.parse_seeds(args.seeds)
    max_configs: int | str | None = args.max_configs
    if max_configs is not None and max_configs not in ("auto", "none"):
        try:
            max_configs = int(max_configs)
        except ValueError:
            parser.error(f'--max-configs {max_configs}: an integer, "auto" or "none"')
    truth = autoheuristic_truth(path, name=case)
    recorded = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    rows, sweeps = [], []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        for seed in seeds:
            row, sweep = one_seed(case, path, truth, args.share, seed, workdir, max_configs)
            print(
                f"{case} {args.share:g} % seed {seed}: decisions {row['decisions']:.4f}, "
                f"header {row['header']:.4f}, depth {row['depth']}",
                file=sys.stderr,
            )
            rows.append(row)
            sweeps.append(sweep)
    table = pd.DataFrame(rows)
    sweep = pd.concat(sweeps, ignore_index=True)
    lines = [f"# header against its decisions: {case} at {args.share:g} %", ""]
    lines += [f"> {line}  " for line in provenance(recorded)]
    lines += [
        "",
        "Geomean of t_opt / t(answer) over every shape of the table. `decisions`: the "
        "configuration the campaign decided at each shape (`optima.csv`); `header`: the "
        "compiled header's answer there; `there_*`: the same two at the shapes where they "
        "differ. `decisions_measured` / `decisions_modelled`: the decisions at the shapes "
        "where a measurement decided (`source = measured`) and elsewhere (the model). "
        "`best_of_its_configs`: each shape's best among the header's configurations, with "
        "full knowledge. `ceiling`: a random forest fitted to those best choices with full "
        "knowledge of the other folds' shapes (5-fold cross-validation), scored at each "
        "held-out shape (`ceiling_modelled`: at the shapes the model decided): what the inputs "
        "alone tell of the choice at a shape never measured.",
        "",
        frame_markdown(table),
        "",
        "## Depth sweeps",
        "",
        frame_markdown(sweep),
        "",
    ]
    print("\n".join(lines[4:]))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"header_vs_decisions_{case}{args.tag}"
    (args.out / f"{stem}.md").write_text("\n".join(lines))
    (args.out / f"{stem}.csv").write_text(header(provenance(recorded)) + table.to_csv(index=False))
    print(f"wrote {args.out / stem}.md and .csv", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
