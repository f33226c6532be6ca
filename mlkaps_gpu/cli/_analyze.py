"""``mlkaps-gpu analyze difficulty DATA``: the fitness-flow-graph difficulty of an exhaustive
measurement file (a Kernel Tuner cache, or a CSV table with ``--design-columns``).

Wired into the main command line by ``mlkaps_gpu.cli._main``: ``add_parser(commands)`` in
``build_parser`` and ``run(args)`` for ``args.command == "analyze"``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``analyze`` command (with its ``difficulty`` verb) to ``subparsers``."""
    analyze = subparsers.add_parser("analyze", help="offline analyses of exhaustive data")
    verbs = analyze.add_subparsers(dest="analysis", required=True)
    difficulty = verbs.add_parser(
        "difficulty",
        help="fitness flow graph, local minima and PageRank centrality of an exhaustive space",
    )
    difficulty.add_argument(
        "data", type=Path, help="Kernel Tuner cache or T4 results (.json[.gz]), or CSV"
    )
    difficulty.add_argument(
        "--format",
        choices=["auto", "kernel_tuner", "t4", "csv"],
        default="auto",
        help="file format (auto: csv for *.csv, T4 results for JSON with a 'results' list, "
        "else Kernel Tuner cache)",
    )
    difficulty.add_argument(
        "--design-columns",
        default=None,
        help="CSV: comma-separated configuration columns (default: p0, p1, ... found in it)",
    )
    difficulty.add_argument(
        "--objective-column", default="objective", help="CSV: the measured column"
    )
    difficulty.add_argument(
        "--failure-value",
        type=float,
        action="append",
        default=[],
        metavar="VALUE",
        help="CSV: an objective value that marks a failed run (repeatable; e.g. 1.0 for the "
        "GC_TLA tables); none by default",
    )
    difficulty.add_argument(
        "--neighbourhood",
        choices=["Hamming", "adjacent"],
        default="Hamming",
        help="Hamming: one parameter differs; adjacent: one parameter, by one value",
    )
    difficulty.add_argument(
        "--max-percent", type=int, default=15, help="largest p (in %%) of the table"
    )
    difficulty.add_argument("--plot", type=Path, default=None, help="write the curve as PNG")
    difficulty.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return analyze


def run(args: argparse.Namespace) -> int:
    """Run the ``analyze`` verb named by ``args.analysis``; errors are one line, status 2."""
    if args.analysis != "difficulty":
        print(f"mlkaps-gpu: error: unknown analysis {args.analysis!r}", file=sys.stderr)
        return EXIT_USAGE
    from mlkaps_gpu.executors import ReplayDataError

    try:
        return _difficulty(args)
    except (ReplayDataError, ValueError) as error:
        print(f"mlkaps-gpu: error: {' '.join(str(error).split())}", file=sys.stderr)
        return EXIT_USAGE


def _difficulty(args: argparse.Namespace) -> int:
    import numpy as np

    from mlkaps_gpu.analysis.difficulty import graph_from_table

    if not 0 <= args.max_percent <= 100:
        raise ValueError(f"--max-percent: must lie in 0..100, got {args.max_percent}")
    table = _load(args)
    graph = graph_from_table(table, neighbourhood=args.neighbourhood)
    percentages = np.arange(args.max_percent + 1) / 100.0
    rank = graph.pagerank()
    proportion = graph.proportion_of_centrality(percentages, centrality=rank)
    minima = graph.local_minima
    summary = {
        "data": str(args.data),
        "neighbourhood": args.neighbourhood,
        "nodes": graph.n_nodes,
        "edges": graph.n_edges,
        "local_minima": len(minima),
        "optimum": graph.optimum,
        "proportion_of_centrality": {
            f"{round(100 * p)}%": round(float(value), 6)
            for p, value in zip(percentages, proportion, strict=True)
        },
    }
    if args.plot is not None:
        from mlkaps_gpu.analysis.plots import plot_proportion_of_centrality

        plot_proportion_of_centrality(
            {args.data.name: (percentages, proportion)}, args.plot, title=args.neighbourhood
        )
        summary["plot"] = str(args.plot)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"{args.data.name}: {graph.n_nodes} configurations, {graph.n_edges} edges "
        f"({args.neighbourhood}), {len(minima)} local minima, optimum {graph.optimum:.6g}"
    )
    print("| p | proportion of centrality |")
    print("|---|---|")
    for p, value in zip(percentages, proportion, strict=True):
        print(f"| {round(100 * p)}% | {value:.3f} |")
    if args.plot is not None:
        print(f"plot: {args.plot}")
    return 0


def _load(args: argparse.Namespace) -> Any:
    from mlkaps_gpu.executors import (
        load_kernel_tuner_cache,
        load_replay_csv,
        load_t4_results,
        replay_format,
    )

    path: Path = args.data
    kind = replay_format(path) if args.format == "auto" else args.format
    if kind == "kernel_tuner":
        return load_kernel_tuner_cache(path)
    if kind == "t4":
        return load_t4_results(path)
    if args.design_columns:
        columns = [c.strip() for c in args.design_columns.split(",") if c.strip()]
    else:
        columns = _p_columns(path)
    return load_replay_csv(
        path,
        design_columns=columns,
        objective_column=args.objective_column,
        failure_values=tuple(args.failure_value),
    )


def _p_columns(path: Path) -> list[str]:
    """The ``p0, p1, ...`` columns of a CSV header (the GC_TLA convention)."""
    import csv

    from mlkaps_gpu.executors import ReplayDataError

    if not path.is_file():
        raise ReplayDataError(f"{path}: no such file")
    with path.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    columns = [c.strip() for c in header if c.strip()[:1] == "p" and c.strip()[1:].isdigit()]
    if not columns:
        raise ValueError(f"{path.name}: no p0, p1, ... columns; give --design-columns")
    return sorted(columns, key=lambda c: int(c[1:]))
