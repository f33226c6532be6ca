"""Are the project rows of a ``bench_peers.py`` run the same as a reference's? (issue 41, Done
when 6: a rebuild changes no decision, and the replays are deterministic.)

Compares exactly, row by row, the ``project header`` and ``project best measured`` rows (tool,
case, b, seed, input, fraction, time, optimum, n_evaluated, status) of the reference CSV with
those of the ``bench_peers*_<case>.csv`` files of a results folder, for the cases the reference
holds. Prints the rows that differ; exit status 0 when none does, 1 otherwise.

    python experiments/bench_peers.py --case all --quick --results <scratch>
    python experiments/same_project_rows.py experiments/results/rebuild_identical_before.csv \\
        <scratch>
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from benchkit.tools import BEST_MEASURED, HEADER

COLUMNS = ["tool", "case", "b", "seed", "input", "fraction", "time", "optimum", "n_evaluated"]
COLUMNS += ["status"]
KEYS = ["tool", "case", "b", "seed", "input"]


def project_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The project's rows of a bench_peers table, in a fixed order."""
    rows = table[table["tool"].isin([HEADER, BEST_MEASURED])][COLUMNS].copy()
    rows["input"] = rows["input"].astype(str)
    return rows.sort_values(KEYS, kind="stable").reset_index(drop=True)


def differences(reference: pd.DataFrame, run: pd.DataFrame) -> pd.DataFrame:
    """The rows of either side that the other lacks or holds with other values (``side``:
    ``reference`` or ``run``); empty when the two are the same."""
    merged = project_rows(reference).merge(
        project_rows(run), how="outer", on=COLUMNS, indicator=True
    )
    changed = merged[merged["_merge"] != "both"].copy()
    changed["side"] = changed["_merge"].map({"left_only": "reference", "right_only": "run"})
    return changed.drop(columns="_merge").sort_values([*KEYS, "side"]).reset_index(drop=True)


def read_run(folder: Path, cases: Sequence[str]) -> pd.DataFrame:
    """The rows of ``cases`` in the folder's ``bench_peers*_<case>.csv`` files."""
    frames = []
    for case in cases:
        found = sorted(folder.glob(f"bench_peers*_{case}.csv"))
        if not found:
            raise FileNotFoundError(f"{folder}: no bench_peers*_{case}.csv")
        frames.append(pd.read_csv(found[0], comment="#"))
    return pd.concat(frames, ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Compare; 0 when the project rows are the same, 1 when not, 2 for missing files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reference", type=Path, help="CSV of the project rows to compare with")
    parser.add_argument("results", type=Path, help="folder of a bench_peers.py run")
    args = parser.parse_args(argv)
    try:
        reference = pd.read_csv(args.reference, comment="#")
        cases = list(dict.fromkeys(reference["case"].astype(str)))
        run = read_run(args.results, cases)
    except (OSError, KeyError) as error:
        print(f"same_project_rows: {error}", file=sys.stderr)
        return 2
    changed = differences(reference, run)
    count = len(project_rows(reference))
    if changed.empty:
        print(f"the {count} project rows of {', '.join(cases)} are the same")
        return 0
    print(f"{len(changed)} rows differ (of {count} in the reference):")
    print(changed.to_string(index=False))
    return 1


if __name__ == "__main__":
    sys.exit(main())
