"""Search-space difficulty (fitness flow graph, PageRank centrality of the local minima) of the
five complete convolution GPUs and the two exhaustive syr2k sizes, compared with how the
strategies fared on the GPUs.

For each space and each neighbourhood (Hamming, adjacent): nodes, edges, local minima and the
proportion of the minima's PageRank centrality held by minima within p of the optimum,
p = 0..15 %. The GPUs are then ordered by that proportion (its mean over p) and by the
strategies study's results (``results/strategies_runs.csv`` and ``strategies_scores.csv``,
written by ``strategies_study.py``): the mean fraction of optimum the constraint-aware
strategies reached, and their mean performance score; Spearman's rank correlation says whether
the orders agree.

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/difficulty_study.py

Writes ``experiments/results/difficulty.md`` and ``difficulty_<neighbourhood>.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd
from benchkit.provenance import header, provenance
from scipy.stats import spearmanr

from mlkaps_gpu.analysis import DEFAULT_PERCENTAGES, graph_from_table
from mlkaps_gpu.analysis.plots import plot_proportion_of_centrality
from mlkaps_gpu.executors import load_kernel_tuner_cache, load_replay_csv

RESULTS = Path(__file__).parent / "results"
GPUS = ("A100", "A4000", "MI250X", "W6600", "W7800")
SYR2K = {"syr2k N130": "all_SM_N130.csv", "syr2k N2000": "all_XL_N2000.csv"}
SHOWN = (0, 1, 2, 5, 10, 15)


def load_tables(root: Path) -> dict[str, object]:
    tables: dict[str, object] = {}
    for gpu in GPUS:
        tables[gpu] = load_kernel_tuner_cache(root / "convolution_6gpu" / f"{gpu}.json.gz")
    columns = [f"p{i}" for i in range(6)]
    for label, name in SYR2K.items():
        tables[label] = load_replay_csv(
            root / "syr2k_cpu" / name, design_columns=columns, failure_values=(1.0,)
        )
    return tables


def strategy_results(out: Path) -> pd.DataFrame | None:
    """Per GPU: mean fraction of optimum at budgets 100 and 400, and the mean score, of the
    constraint-aware strategies of the strategies study, random search excluded (None if it
    has not run)."""
    runs_path, scores_path = out / "strategies_runs.csv", out / "strategies_scores.csv"
    if not runs_path.is_file() or not scores_path.is_file():
        return None
    runs = pd.read_csv(runs_path, comment="#")
    runs = runs[~runs["strategy"].str.contains("unaware") & (runs["strategy"] != "random_search")]
    root = Path(os.environ["MLKAPS_GPU_DATA"])
    optimum = {
        gpu: load_kernel_tuner_cache(root / "convolution_6gpu" / f"{gpu}.json.gz").best()
        for gpu in GPUS
    }
    runs = runs.assign(fraction=runs["gpu"].map(optimum) / runs["best"])
    fraction = runs.groupby(["gpu", "budget"])["fraction"].mean().unstack("budget")
    scores = pd.read_csv(scores_path, index_col="strategy", comment="#")
    aware = scores.loc[
        [s for s in scores.index if "unaware" not in s and s != "random_search"], list(GPUS)
    ]
    table = pd.DataFrame(
        {
            "fraction b=100": fraction[100],
            "fraction b=400": fraction[400],
            "mean score": aware.mean(axis=0),
        }
    )
    return table.loc[list(GPUS)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    started = time.perf_counter()
    tables = load_tables(Path(os.environ["MLKAPS_GPU_DATA"]))
    percentages = DEFAULT_PERCENTAGES
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# difficulty_study.py",
        "",
        "Fitness flow graph: one node per successfully measured configuration, an edge to each "
        "better neighbour; PageRank with damping 0.85. Proportion of centrality at p: share of "
        "the local minima's PageRank held by minima within p of the optimum.",
        "",
    ]
    mean_proportion: dict[str, dict[str, float]] = {}
    for neighbourhood in ("Hamming", "adjacent"):
        curves = {}
        lines += [
            f"## {neighbourhood} neighbourhood",
            "",
            "| space | nodes | edges | local minima | "
            + " | ".join(f"p={p}%" for p in SHOWN)
            + " | mean p=0..15% |",
            "|---|---|---|---|" + "---|" * (len(SHOWN) + 1),
        ]
        mean_proportion[neighbourhood] = {}
        for label, table in tables.items():
            graph = graph_from_table(table, neighbourhood=neighbourhood)  # type: ignore[arg-type]
            proportion = graph.proportion_of_centrality(percentages)
            curves[label] = (percentages, proportion)
            mean_proportion[neighbourhood][label] = float(proportion.mean())
            cells = " | ".join(f"{proportion[p]:.3f}" for p in SHOWN)
            lines.append(
                f"| {label} | {graph.n_nodes} | {graph.n_edges} | {len(graph.local_minima)} | "
                f"{cells} | {proportion.mean():.3f} |"
            )
        lines.append("")
        plot_proportion_of_centrality(
            curves,
            args.out / f"difficulty_{neighbourhood.lower()}.png",
            title=f"{neighbourhood} neighbourhood",
        )

    results = strategy_results(args.out)
    lines += ["## Do the proportions order the GPUs as the strategies' results do?", ""]
    if results is None:
        lines.append("(run strategies_study.py first: its results are missing)")
    else:
        for neighbourhood, means in mean_proportion.items():
            results[f"centrality {neighbourhood}"] = [means[gpu] for gpu in GPUS]
        lines += [
            "| GPU | " + " | ".join(results.columns) + " |",
            "|---|" + "---|" * len(results.columns),
        ]
        for gpu, row in results.iterrows():
            lines.append(f"| {gpu} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
        lines += ["", "Spearman rank correlation over the five GPUs (easier = higher):", ""]
        for neighbourhood in mean_proportion:
            column = results[f"centrality {neighbourhood}"]
            for target in ("fraction b=100", "fraction b=400", "mean score"):
                rho = spearmanr(column, results[target]).statistic
                lines.append(f"- centrality ({neighbourhood}) vs {target}: rho = {rho:+.2f}")
        lines.append("")
        for column in results.columns:
            order = " > ".join(results[column].sort_values(ascending=False).index)
            lines.append(f"- order by {column}: {order}")
    lines += ["", f"Total time {time.perf_counter() - started:.0f} s.", ""]
    report = "\n".join(lines)
    report = header(provenance(), markdown=True) + report
    (args.out / "difficulty.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
