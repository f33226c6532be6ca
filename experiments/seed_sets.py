"""How much can a benchmark of a few seeds say? Pools the per-seed results of several
``bench_peers.py`` runs and measures how often a run of ``k`` seeds would put the project's
header above every peer (and above given thresholds).

A seed of ``bench_peers.py`` is one independent campaign (or one peer search) per budget, so the
per-seed fractions of optimum (geomean over input values) of one tool at one budget are
independent draws of that tool's result. This script takes the header's rows from the files of
``--header`` (runs of the current code, any seeds) and the peers' rows from the files of
``--peers``, and prints per budget b:

- every tool's mean over all its seeds and the header minus the best peer with a 95 % bootstrap
  interval (``benchkit.metrics.lead_over_best_peer``, on the pooled seeds);
- the share of resampled ``k``-seed sets (``k`` seeds drawn with replacement from each tool's
  seeds, independently per tool, 20,000 times) in which the header's mean is above the mean of
  every peer at once, and in which it reaches each of ``--thresholds``.

Usage::

    python experiments/seed_sets.py --case syr2k \\
        --header experiments/results/bench_peers_syr2k.csv \\
                 experiments/results/seeds20_39/bench_peers_syr2k.csv \\
        --peers experiments/results/seeds20/bench_peers_syr2k.csv \\
                experiments/results/seeds20_39/bench_peers_syr2k.csv

Writes ``seed_sets_{case}.md`` to ``--results`` (default ``experiments/results``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.metrics import lead_over_best_peer, per_run
from benchkit.provenance import markdown_lines, script_command
from benchkit.report import lead_per_input_markdown, read_case_rows, require_files
from benchkit.tools import BEST_MEASURED, HEADER, RANDOM

RESULTS = Path(__file__).resolve().parent / "results"
DRAWS = 20_000


def load_rows(header: Sequence[Path], peers: Sequence[Path], case: str) -> pd.DataFrame:
    """The header's rows from ``header`` files, the peers' rows from ``peers`` files (the
    project's best-measured rows from neither), one row per (tool, b, seed, input)."""
    tables = []
    for paths, keep_header in ((header, True), (peers, False)):
        for path in paths:
            table = read_case_rows(path, case)
            is_header = table["tool"] == HEADER
            table = table[is_header if keep_header else ~is_header]
            tables.append(table[table["tool"] != BEST_MEASURED])
    rows = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    if rows.empty:
        raise ValueError(f"no rows of case {case!r} in the given files")
    return rows.drop_duplicates(["tool", "b", "seed", "input"]).reset_index(drop=True)


def seed_set_shares(
    rows: pd.DataFrame, k: int, thresholds: Sequence[float], seed: int = 0
) -> pd.DataFrame:
    """Per b: how many seeds each side has, and the shares of resampled ``k``-seed sets in
    which the header's mean is above every peer's (``above_all``) and at least each threshold
    (``at_least_<t>``, thresholds matched to the budgets in order)."""
    runs = per_run(rows)
    rng = np.random.default_rng(seed)
    budgets = sorted(int(b) for b in runs["b"].unique())
    out = []
    for index, b in enumerate(budgets):
        at = runs[runs["b"] == b]
        header = at.loc[at["tool"] == HEADER, "fraction"].to_numpy(dtype=np.float64)
        if len(header) == 0:
            continue
        mean_header = rng.choice(header, (DRAWS, k)).mean(axis=1)
        best_peer = np.full(DRAWS, -np.inf)
        peers = at[at["tool"] != HEADER]
        sampled = peers[peers["tool"] != RANDOM]  # the exact expectation: one constant
        for _, group in peers.groupby("tool", sort=False):
            values = group["fraction"].to_numpy(dtype=np.float64)
            best_peer = np.maximum(best_peer, rng.choice(values, (DRAWS, k)).mean(axis=1))
        row = {
            "b": b,
            "header_seeds": len(header),
            "peer_seeds": int(sampled.groupby("tool")["seed"].nunique().min())
            if len(sampled)
            else 0,
            "above_all": float(np.mean(mean_header > best_peer)) if len(peers) else np.nan,
        }
        if index < len(thresholds):
            row["threshold"] = thresholds[index]
            row["at_least"] = float(np.mean(mean_header >= thresholds[index]))
        out.append(row)
    return pd.DataFrame(out)


def report(rows: pd.DataFrame, k: int, thresholds: Sequence[float], case: str, command: str) -> str:
    runs = per_run(rows)
    means = runs.groupby(["tool", "b"])["fraction"].agg(["mean", "std", "count"]).reset_index()
    lead = lead_over_best_peer(rows)
    shares = seed_set_shares(rows, k, thresholds)
    lines = [
        f"# seed_sets: {case}",
        "",
        *markdown_lines(command),
        "",
        "Per-seed fraction of optimum (geomean over input values), all seeds of the given files: "
        "mean ± standard error (seeds).",
        "",
        "| tool | " + " | ".join(f"b = {b}" for b in sorted(means["b"].unique())) + " |",
        "|---|" + "---|" * means["b"].nunique(),
    ]
    budgets = sorted(means["b"].unique())
    for tool, group in means.groupby("tool", sort=False):
        part = group.set_index("b")
        cells = []
        for b in budgets:
            if b not in part.index:
                cells.append("n/a")
                continue
            row = part.loc[b]
            se = row["std"] / np.sqrt(row["count"]) if row["count"] > 1 else 0.0
            cells.append(f"{row['mean']:.3f} ± {se:.3f} ({int(row['count'])})")
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Header minus the best peer over all seeds, 95 % bootstrap interval:",
        "",
        "| b | best peer | difference | 95 % interval | verdict |",
        "|---|---|---|---|---|",
    ]
    for row in lead.to_dict("records"):
        lines.append(
            f"| {row['b']} | {row['peer']} | {row['difference']:+.3f} | "
            f"[{row['low']:+.3f}, {row['high']:+.3f}] | {row['verdict']} |"
        )
    lines += lead_per_input_markdown(rows)
    lines += [
        "",
        f"Resampled {k}-seed sets ({DRAWS} per b, seeds drawn with replacement, independently "
        f"per tool): share where the header's mean is above every peer's mean at once, and "
        f"where it reaches the threshold.",
        "",
        "| b | header seeds | fewest peer seeds | above every peer | threshold | reached |",
        "|---|---|---|---|---|---|",
    ]
    for row in shares.to_dict("records"):
        threshold = row.get("threshold", np.nan)
        reached = "-" if pd.isna(threshold) else f"{row['at_least']:.2f}"
        lines.append(
            f"| {row['b']} | {row['header_seeds']} | {row['peer_seeds']} | "
            f"{row['above_all']:.2f} | {'-' if pd.isna(threshold) else threshold} | {reached} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", required=True, help="case name in the CSVs (syr2k, ...)")
    parser.add_argument("--header", type=Path, nargs="+", required=True, help="header runs")
    parser.add_argument("--peers", type=Path, nargs="+", required=True, help="peer runs")
    parser.add_argument("--k", type=int, default=5, help="seeds per resampled run (default 5)")
    parser.add_argument(
        "--thresholds", type=float, nargs="*", default=(), help="per budget, in budget order"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder")
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error(f"--k must be >= 1, got {args.k}")
    require_files(parser, [*args.header, *args.peers])
    try:
        rows = load_rows(args.header, args.peers, args.case)
    except ValueError as error:
        parser.error(str(error))
    command = script_command("seed_sets.py", argv)
    text = report(rows, args.k, args.thresholds, args.case, command)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"seed_sets_{args.case}.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
