"""Refit the trees of finished `bench_inputs.py` campaigns with each joint-tree partition, on
the same decisions, and score every tree against the truth: a paired comparison of tree rules
that needs no new measurement.

    python experiments/refit_trees.py --case demo --workdir DIR [--truth CSV]
    python experiments/refit_trees.py --case mixedmm_a100 --workdir DIR

``DIR`` is the ``--workdir`` of a ``bench_inputs.py`` run. Measured cases (``demo``, ``lu``) are
scored on a truth table written by that script (default: the one in ``experiments/results``;
give the run's own with ``--truth``); AutoHeuristic cases on their file under
``MLKAPS_GPU_DATA``. Per campaign: the shipped header's trees (``shipped``) and, per partition,
the trees the campaign's depth sweep fits on its final decisions (the chosen depth, its leaves,
the geomean at every truth point). Prints a markdown table; ``--out`` writes it with its
provenance.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from benchkit.inputs_replay import header_choices
from benchkit.inputs_truth import Truth, autoheuristic_truth, point_fractions, summarize_fractions
from benchkit.provenance import header, provenance

RESULTS = Path(__file__).resolve().parent / "results"
MEASURED = ("demo", "lu")
PARTITIONS = ("codes", "regret")


def load_truth(case: str, truth_csv: Path | None) -> tuple[Truth, bool]:
    """The case's truth and whether it is a measured case (answers mapped by design values)."""
    if case in MEASURED:
        from benchkit import inputs_project as project

        problem = project.demo_problem(64) if case == "demo" else project.lu_problem(10)
        path = truth_csv or RESULTS / f"bench_inputs_truth_{case}.csv"
        return project.truth_of(problem, pd.read_csv(path, comment="#")), True
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root:
        raise SystemExit("the AutoHeuristic cases need MLKAPS_GPU_DATA (the replay data folder)")
    return autoheuristic_truth(Path(root) / "autoheuristic" / f"{case}.txt.gz", case), False


def campaign_dirs(case: str, workdir: Path) -> list[Path]:
    """The campaign folders a ``bench_inputs.py`` run left for the case."""
    if case in MEASURED:
        found = [p for p in (workdir / case).glob("*") if p.is_dir()]
    else:
        found = [p for p in workdir.glob(f"{case}_B*_s*") if p.is_dir()]
    return sorted(found)


def geomean(truth: Truth, measured: bool, chosen: pd.DataFrame) -> float:
    answers = truth.config_index(chosen) if measured else header_choices(truth, chosen)
    return float(summarize_fractions(point_fractions(truth, answers))["geomean"])


def refit(directory: Path, truth: Truth, measured: bool) -> dict[str, Any]:
    """The shipped trees' score and each partition's refitted trees on the same decisions."""
    import mlkaps_gpu
    from mlkaps_gpu.trees import RegretOracle, fit_selector

    campaign = mlkaps_gpu.Campaign.open(directory)
    space = campaign.space
    stage = campaign.stages.decisions()
    score = stage.evidence_score()
    decided = stage.decide(campaign.load_optima(), score)
    decisions = decided[space.names].reset_index(drop=True)
    row: dict[str, Any] = {
        "campaign": directory.name,
        "points": len(decided),
        "shipped": geomean(truth, measured, campaign.load_selector().select(truth.inputs.copy())),
    }
    for partition in PARTITIONS:
        fitted = fit_selector(
            decided,
            space,
            score.score,
            mode=campaign.config.trees.mode,
            random_state=campaign.config.seed,
            oracle=RegretOracle(decided, space, score.score, clip=True),
            measured_regret=lambda t: score.measured_regret(t, decisions),
            partition=partition,
        )
        table = fitted.sweep.table.set_index("depth")
        row[f"{partition} depth"] = fitted.sweep.chosen
        row[f"{partition} leaves"] = int(table.loc[fitted.sweep.chosen, "leaves"])
        row[partition] = geomean(truth, measured, fitted.selector.select(truth.inputs.copy()))
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--truth", type=Path, help="measured cases: the run's truth table")
    parser.add_argument("--out", type=Path, help="markdown file to write")
    args = parser.parse_args(argv)
    truth, measured = load_truth(args.case, args.truth)
    rows = []
    for directory in campaign_dirs(args.case, args.workdir):
        rows.append(refit(directory, truth, measured))
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()})
    if not rows:
        parser.error(f"no campaign of {args.case} under {args.workdir}")
    table = pd.DataFrame(rows)
    difference = table["codes"] - table["regret"]
    shown = table.round(4).astype(str)
    lines = [
        "| " + " | ".join(shown.columns) + " |",
        "|" + "---|" * len(shown.columns),
        *("| " + " | ".join(row) + " |" for row in shown.itertuples(index=False)),
        "",
        f"codes - regret: mean {difference.mean():+.4f}, sd {difference.std(ddof=1):.4f}, "
        f"min {difference.min():+.4f}, max {difference.max():+.4f}; "
        f"shipped == {table['shipped'].eq(table['codes']).sum()} of {len(table)} codes refits",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        argv_list = list(sys.argv) if argv is None else ["refit_trees.py", *argv]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(header(provenance(argv_list), markdown=True) + "\n" + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
