"""The noise floor of an AutoHeuristic table: what its own repeated measurements say a tool can
reach at best.

Most (shape, choice) cells of PyTorch's AutoHeuristic files were measured three times. The
truth of ``bench_inputs.py`` is the median of the repeats, and a tool is scored against it; but
a cell measured again gives another value. Two figures per file, geomean over the shapes of
``t_opt / t(answer)`` as in ``bench_inputs.py`` (cells that failed in a repeat left out):

* ``repeat a -> repeat b``: the fastest choice of each shape by repeat a, scored on repeat b
  (every ordered pair of the first three repeats): how far one measurement's optimum is from
  another's;
* ``every cell once``: the fastest choice by repeat a, scored on the geometric mean of the
  other repeats: a tool that measured 100 % of the cells once, judged out of sample. A
  budgeted header that scores close to it is at the table's noise floor.

    python experiments/noise_floor_inputs.py [--case mixedmm_a100|flexattention_a100|all]
        [--data FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.inputs_truth import read_autoheuristic
from benchkit.provenance import header, provenance

CASES = ("mixedmm_a100", "flexattention_a100")
REPEATS = 3


def repeats_table(path: Path) -> pd.DataFrame:
    """One row per (shape, choice), one column per repeat (0, 1, ...: the order of the file;
    ``inf`` = failed, NaN = not measured that many times), ``shape`` the shape's number."""
    meta, table = read_autoheuristic(path)
    features = [*meta.get("numerical_features", []), *meta.get("categorical_features", [])]
    table = table.copy()
    table["feedback"] = pd.to_numeric(table["feedback"], errors="coerce").fillna(np.inf)
    table["_repeat"] = table.groupby([*features, "choice"], sort=False).cumcount()
    table["shape"] = table.groupby(features, sort=False).ngroup()
    wide = table.pivot_table(
        index=["shape", "choice"], columns="_repeat", values="feedback", aggfunc="first"
    )
    return wide.reset_index()


def chosen_fraction(wide: pd.DataFrame, chosen_by: str | int, scored_on: pd.Series) -> float:
    """Geomean over the shapes of the best ``scored_on`` value over the value of the choice
    that is fastest by ``chosen_by``; cells where either is missing or failed are left out,
    and shapes with fewer than two such cells."""
    frame = pd.DataFrame(
        {"shape": wide["shape"], "by": wide[chosen_by], "on": scored_on}, index=wide.index
    )
    frame = frame[np.isfinite(frame["by"]) & np.isfinite(frame["on"])]
    frame = frame[frame.groupby("shape")["shape"].transform("size") >= 2]
    if frame.empty:
        return float("nan")
    picked = frame.loc[frame.groupby("shape")["by"].idxmin()].set_index("shape")["on"]
    best = frame.groupby("shape")["on"].min()
    return float(np.exp(np.mean(np.log(best.loc[picked.index] / picked))))


def noise_floor(wide: pd.DataFrame) -> pd.DataFrame:
    """The two figures of the module docstring, one row per (figure, repeat pair)."""
    repeats = [c for c in wide.columns if isinstance(c, int | np.integer)][:REPEATS]
    if len(repeats) < 2:
        raise ValueError("the table has no repeated measurements: no noise floor")
    rows = []
    for a, b in itertools.permutations(repeats, 2):
        rows.append(
            {
                "figure": "repeat a -> repeat b",
                "a": a,
                "b": b,
                "geomean": chosen_fraction(wide, a, wide[b]),
            }
        )
    for a in repeats:
        others = [r for r in repeats if r != a]
        with np.errstate(divide="ignore"):
            pooled = np.exp(np.log(wide[others].astype(np.float64)).mean(axis=1, skipna=False))
        rows.append(
            {
                "figure": "every cell once",
                "a": a,
                "b": "+".join(str(r) for r in others),
                "geomean": chosen_fraction(wide, a, pooled),
            }
        )
    return pd.DataFrame(rows)


def markdown(name: str, wide: pd.DataFrame, floors: pd.DataFrame) -> list[str]:
    repeats = [c for c in wide.columns if isinstance(c, int | np.integer)]
    counts = wide[repeats].notna().sum(axis=1).value_counts().sort_index()
    lines = [
        f"### {name}",
        "",
        f"{wide['shape'].nunique()} shapes, {len(wide)} cells; repeats per cell: "
        + ", ".join(f"{int(k)}: {int(v)} cells" for k, v in counts.items()),
        "",
        "| figure | chosen by | scored on | geomean |",
        "|---|---|---|---|",
    ]
    for row in floors.itertuples():
        lines.append(f"| {row.figure} | repeat {row.a} | repeat {row.b} | {row.geomean:.4f} |")
    summary = floors.groupby("figure", sort=False)["geomean"].agg(["mean", "min", "max"])
    lines.append("")
    for figure, row in summary.iterrows():
        lines.append(
            f"- {figure}: mean {row['mean']:.4f} (from {row['min']:.4f} to {row['max']:.4f})"
        )
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--data", type=Path, help="an AutoHeuristic file instead of the cases")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    if args.data is not None:
        if not args.data.is_file():
            parser.error(f"--data {args.data}: no such file")
        files = {args.data.name.split(".")[0]: args.data}
    else:
        root = os.environ.get("MLKAPS_GPU_DATA")
        if not root:
            parser.error("set MLKAPS_GPU_DATA to the replay data folder, or give --data FILE")
        cases = CASES if args.case == "all" else (args.case,)
        files = {c: Path(root) / "autoheuristic" / f"{c}.txt.gz" for c in cases}
    recorded = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    lines = ["# noise floor of AutoHeuristic tables", ""]
    lines += [f"> {line}  " for line in provenance(recorded)]
    lines += ["", (__doc__ or "").split("\n\n")[1].replace("\n", " "), ""]
    frames = []
    for name, path in files.items():
        try:
            wide = repeats_table(path)
            floors = noise_floor(wide)
        except ValueError as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
        lines += markdown(name, wide, floors)
        frames.append(floors.assign(case=name))
        print("\n".join(markdown(name, wide, floors)))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "noise_floor_inputs" if args.data is None else f"noise_floor_inputs_{next(iter(files))}"
    (args.out / f"{stem}.md").write_text("\n".join(lines))
    (args.out / f"{stem}.csv").write_text(
        header(provenance(recorded)) + pd.concat(frames).to_csv(index=False)
    )
    print(f"wrote {args.out / stem}.md and .csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
