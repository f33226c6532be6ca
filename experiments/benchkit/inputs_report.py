"""The tables and the figure of ``bench_inputs.py``: mean and sd over the seeds per (budget,
tool), markdown tables, fraction of optimum against input size."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from benchkit.inputs_truth import LOW_FRACTIONS, Truth


def summarize_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd (ddof=1) over the seeds of every metric, per (budget, tool)."""
    metrics = ["geomean", "worst", *(f"below_{level:g}" for level in LOW_FRACTIONS)]
    grouped = rows.groupby(["budget", "B", "tool"], sort=False)[metrics]
    mean = grouped.mean()
    sd = grouped.std(ddof=1).fillna(0.0)
    out = mean.join(sd.add_suffix("_sd")).join(grouped.size().rename("runs"))
    if "tune_seconds" in rows:
        seconds = rows.groupby(["budget", "B", "tool"], sort=False)["tune_seconds"].mean()
        out = out.join(seconds)
    return out.reset_index()


def markdown_tables(summary: pd.DataFrame) -> list[str]:
    lines: list[str] = []
    for (budget, _), table in summary.groupby(["budget", "B"], sort=False):
        lines += [f"### {budget}", ""]
        lines.append(
            "| tool | geomean | worst point | points < 0.67 | points < 0.9 | runs | tuning (s) |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for values in table.sort_values("geomean", ascending=False).to_dict("records"):
            cells = [
                f"{values['geomean']:.3f} ± {values['geomean_sd']:.3f}",
                f"{values['worst']:.3f} ± {values['worst_sd']:.3f}",
                f"{values['below_0.67']:.1f} ± {values['below_0.67_sd']:.1f}",
                f"{values['below_0.9']:.1f} ± {values['below_0.9_sd']:.1f}",
            ]
            seconds = values.get("tune_seconds", math.nan)
            tuning = f"{seconds:.0f}" if np.isfinite(seconds) else ""
            lines.append(
                f"| {values['tool']} | {' | '.join(cells)} | {values['runs']} | {tuning} |"
            )
        lines.append("")
    return lines


def write_figure(truth: Truth, curves: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Fraction of optimum against input size per tool (a binned geomean for many points)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size, label = truth.size_axis()
    figure, axes = plt.subplots(figsize=(11, 5))
    # one colour per tool (matplotlib's default cycle repeats after ten); the project's rows
    # drawn thicker, the rows measured live dashed
    # (tab20's ten strong hues first, then their light pairs)
    colours = plt.get_cmap("tab20").colors
    palette = colours[0::2] + colours[1::2]
    order = np.argsort(size, kind="stable")
    bins = None
    if truth.n_points > 120:
        edges = np.geomspace(max(size.min(), 1e-12), size.max() * 1.0001, 25)
        bins = np.clip(np.searchsorted(edges, size, side="right") - 1, 0, len(edges) - 2)
    lowest = 1.0
    ranked = sorted(curves.items(), key=lambda item: -np.mean(np.log(np.maximum(item[1], 1e-300))))
    for number, (tool, fractions) in enumerate(ranked):
        style = {
            "marker": "o",
            "markersize": 3,
            "linewidth": 2.0 if tool.startswith("project") else 1.0,
            "linestyle": "--" if "measured live" in tool else "-",
            "color": palette[number % len(palette)],
            "label": tool,
        }
        if bins is None:
            axes.plot(size[order], fractions[order], **style)
            lowest = min(lowest, float(fractions.min()))
            continue
        used = np.unique(bins)
        centres = [np.exp(np.mean(np.log(size[bins == b]))) for b in used]
        geomeans = [np.exp(np.mean(np.log(np.maximum(fractions[bins == b], 1e-300)))) for b in used]
        axes.plot(centres, geomeans, **style)
        lowest = min(lowest, min(geomeans))
    axes.set_xscale("log")
    axes.set_xlabel(label + (" (geomean per log bin)" if bins is not None else ""))
    axes.set_ylabel("fraction of the optimum (t_opt / t)")
    axes.set_ylim(max(0.0, math.floor(lowest * 10) / 10 - 0.05), 1.01)
    axes.set_title(title)
    # beside the axes, not over the curves (a fixed default low on the plot is hidden below)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
