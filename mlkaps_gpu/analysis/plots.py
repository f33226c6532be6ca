"""Figures of the analyses (matplotlib is imported only when a figure is drawn)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

Curve = tuple[np.ndarray | Sequence[float], np.ndarray | Sequence[float]]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - matplotlib is a test/plot extra
        raise ImportError("plots need matplotlib: pip install 'mlkaps_gpu[plot]'") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(
    panels: Mapping[str, Mapping[str, Curve]],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    ylabel: str,
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    columns: int = 3,
    logx: bool = False,
    xticks: Sequence[float] | None = None,
    legend_columns: int = 6,
) -> None:
    """One panel per entry of ``panels`` (title -> {label: (x, y)}), saved as ``path``."""
    plt = _pyplot()
    count = max(1, len(panels))
    columns = min(columns, count)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(
        rows, columns, figsize=(5.2 * columns, 3.9 * rows), squeeze=False, sharey=True
    )
    for axis, (title, lines) in zip(axes.ravel(), panels.items(), strict=False):
        for label, (x, y) in lines.items():
            style = dict((styles or {}).get(label, {}))
            axis.plot(x, y, label=label, linewidth=1.4, **style)
        axis.set_title(title)
        axis.set_xlabel(xlabel)
        axis.set_ylabel(ylabel)
        if logx:
            axis.set_xscale("log")
        if xticks is not None:
            axis.set_xticks(list(xticks), [f"{t:g}" for t in xticks])
            axis.minorticks_off()
        axis.grid(True, alpha=0.3)
    for axis in axes.ravel()[len(panels) :]:
        axis.axis("off")
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    ncol = min(legend_columns, max(1, len(labels)))
    legend_rows = (len(labels) + ncol - 1) // ncol
    figure.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
    figure.tight_layout(rect=(0, min(0.4, 0.025 * legend_rows / rows + 0.03), 1, 1))
    figure.savefig(path, dpi=120)
    plt.close(figure)


def plot_proportion_of_centrality(
    curves: Mapping[str, Curve], path: str | os.PathLike[str], *, title: str = ""
) -> None:
    """Proportion of centrality against p (in %) for several search spaces."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 4.4))
    for label, (percentages, proportion) in curves.items():
        axis.plot(100 * np.asarray(percentages), proportion, marker="o", markersize=3, label=label)
    axis.set_xlabel("p: minima within p % of the optimum")
    axis.set_ylabel("proportion of PageRank centrality")
    axis.set_ylim(0, 1.02)
    axis.grid(True, alpha=0.3)
    if title:
        axis.set_title(title)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
