"""Is a variant of the project better than the defaults? A paired comparison of two
``bench_peers.py`` runs of the project on the same seeds.

Every variant recorded in ``docs/decisions/`` was judged this way: the same seeds run
once with the defaults and once with the variant (``bench_peers.py --tools project
--first-seed S --seeds N``, the variant patched in or set with ``--set``), then per budget b the
variant's header fraction of optimum minus the defaults', seed by seed. Pairing removes most
of the seed-to-seed spread (a seed that misses syr2k's needle with the defaults often misses
it with the variant too), so a difference of 0.01 - 0.02 shows with 50 - 100 seeds, where two
unpaired means would need several hundred.

Prints, per b: the seeds both runs hold, both means, the mean difference with its standard
error and a 95 % interval (Student's t over the paired differences, ``scipy.stats``), how
many seeds got better and worse, and the Wilcoxon signed-rank p-value of the differences; then
per input value the two means and the runs below ``--miss`` (a run that never found the region
of the optimum: syr2k's needle leaves such runs near 0.40). Writes the same as markdown to
``--results`` (default ``experiments/results``) as ``paired_{case}.md`` with ``--name``
appended when given.

Usage::

    python experiments/paired_seeds.py --case syr2k \\
        --base experiments/results/seeds40_139/bench_peers_syr2k.csv \\
        --variant runs/variant/bench_peers_syr2k.csv --name members10
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.metrics import per_run
from benchkit.provenance import markdown_lines, script_command
from benchkit.report import read_case_rows, require_files
from benchkit.tools import HEADER

RESULTS = Path(__file__).resolve().parent / "results"
#: A run below this fraction of optimum at an input value counts as a miss (``--miss``).
DEFAULT_MISS = 0.45


def header_rows(paths: Sequence[Path], case: str, tool: str = HEADER) -> pd.DataFrame:
    """One row per (b, seed, input) of ``tool`` in the files (the first file wins a repeat)."""
    tables = []
    for path in paths:
        table = read_case_rows(path, case)
        tables.append(table[table["tool"] == tool])
    rows = pd.concat(tables, ignore_index=True)
    if rows.empty:
        raise ValueError(f"no {tool!r} rows of case {case!r} in {', '.join(map(str, paths))}")
    rows = rows.astype({"input": str})
    return rows.drop_duplicates(["b", "seed", "input"]).reset_index(drop=True)


def paired(base: pd.DataFrame, variant: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per b, over the seeds both hold: means, the mean paired difference (variant minus
    base) with its standard error and ``level`` t interval, seeds better / worse, and the
    Wilcoxon signed-rank p-value (1 where every difference is 0)."""
    from scipy import stats

    runs = per_run(base).merge(per_run(variant), on=["b", "seed"], suffixes=("_base", "_variant"))
    out = []
    for b, group in runs.groupby("b"):
        difference = (group["fraction_variant"] - group["fraction_base"]).to_numpy(np.float64)
        n = len(difference)
        se = float(np.std(difference, ddof=1) / np.sqrt(n)) if n > 1 else np.nan
        if n > 1 and se > 0:
            half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
        else:
            half = 0.0 if n > 1 else np.nan
        nonzero = difference[np.abs(difference) > 1e-12]
        p = float(stats.wilcoxon(nonzero).pvalue) if len(nonzero) else 1.0
        mean = float(difference.mean())
        out.append(
            {
                "b": int(b),
                "seeds": n,
                "base": float(group["fraction_base"].mean()),
                "variant": float(group["fraction_variant"].mean()),
                "difference": mean,
                "se": se,
                "low": mean - half,
                "high": mean + half,
                "better": int((difference > 1e-12).sum()),
                "worse": int((difference < -1e-12).sum()),
                "wilcoxon_p": p,
            }
        )
    return pd.DataFrame(out)


def per_input(base: pd.DataFrame, variant: pd.DataFrame, miss: float) -> pd.DataFrame:
    """Per (b, input value), over the (seed, input) runs both hold: the two means and the runs
    below ``miss`` on each side."""
    both = base.merge(variant, on=["b", "seed", "input"], suffixes=("_base", "_variant"))
    out = []
    for (b, value), group in both.groupby(["b", "input"]):
        out.append(
            {
                "b": int(b),
                "input": value,
                "runs": len(group),
                "base": float(group["fraction_base"].mean()),
                "variant": float(group["fraction_variant"].mean()),
                "misses_base": int((group["fraction_base"] < miss).sum()),
                "misses_variant": int((group["fraction_variant"] < miss).sum()),
            }
        )
    return pd.DataFrame(out)


def report(base: pd.DataFrame, variant: pd.DataFrame, case: str, miss: float, command: str) -> str:
    table = paired(base, variant)
    inputs = per_input(base, variant, miss)
    lines = [
        f"# paired_seeds: {case}",
        "",
        *markdown_lines(command),
        "",
        "Header fraction of optimum (geomean over input values) per seed, variant minus base on "
        "the seeds both runs hold: mean ± standard error, 95 % t interval, seeds where the "
        "variant is better / worse, Wilcoxon signed-rank p-value.",
        "",
        "| b | seeds | base | variant | difference | 95 % interval | better / worse | p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.to_dict("records"):
        lines.append(
            f"| {row['b']} | {row['seeds']} | {row['base']:.3f} | {row['variant']:.3f} | "
            f"{row['difference']:+.3f} ± {row['se']:.3f} | [{row['low']:+.3f}, "
            f"{row['high']:+.3f}] | {row['better']} / {row['worse']} | {row['wilcoxon_p']:.3f} |"
        )
    lines += [
        "",
        f"Per input value: mean fraction and runs below {miss} (misses).",
        "",
        "| b | input | runs | base | variant | misses base | misses variant |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in inputs.to_dict("records"):
        lines.append(
            f"| {row['b']} | {row['input']} | {row['runs']} | {row['base']:.3f} | "
            f"{row['variant']:.3f} | {row['misses_base']} | {row['misses_variant']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", required=True, help="case name in the CSVs (syr2k, ...)")
    parser.add_argument("--base", type=Path, nargs="+", required=True, help="defaults' runs")
    parser.add_argument("--variant", type=Path, nargs="+", required=True, help="variant's runs")
    parser.add_argument(
        "--miss", type=float, default=DEFAULT_MISS, help=f"miss below (default {DEFAULT_MISS})"
    )
    parser.add_argument("--name", default="", help="appended to the results file's name")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder")
    args = parser.parse_args(argv)
    require_files(parser, [*args.base, *args.variant])
    try:
        base = header_rows(args.base, args.case)
        variant = header_rows(args.variant, args.case)
    except ValueError as error:
        parser.error(str(error))
    if paired(base, variant).empty:
        parser.error("the two runs share no (b, seed): run the variant on the base's seeds")
    command = script_command("paired_seeds.py", argv)
    text = report(base, variant, args.case, args.miss, command)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    suffix = f"_{args.name}" if args.name else ""
    (args.results / f"paired_{args.case}{suffix}.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
