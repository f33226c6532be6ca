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
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.inputs_noise import noise_floor, repeats_table, summary
from benchkit.provenance import header, provenance

CASES = ("mixedmm_a100", "flexattention_a100")


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
    return [*lines, "", f"Mean (range) over the repeats: {summary(floors)}.", ""]


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
