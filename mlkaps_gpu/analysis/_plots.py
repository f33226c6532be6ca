"""Figures of validation, merge and the campaign report, as PNG bytes.

matplotlib is imported when a figure is drawn, never at import. Speedup maps follow the MLKAPS
paper's Fig. 10: a heat map over two inputs, the diverging colormap centred on a speedup of 1
(log scale, symmetric limits), so gains and losses of the same factor get the same intensity.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import geometric_mean
from mlkaps_gpu.space import Space

VERDICT_COLOURS = {
    "progression": "#2166ac",
    "neutral": "#9e9e9e",
    "regression": "#b2182b",
    "same": "#d9d9d9",
    "failed": "#000000",
}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - matplotlib is the plot extra
        raise ImportError("figures need matplotlib: pip install 'mlkaps_gpu[plot]'") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _speedup_axis(axis: Any, which: str) -> None:
    """Log-scaled speedup axis labelled 0.5x, 1x, 2x rather than powers."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    target = axis.xaxis if which == "x" else axis.yaxis
    (axis.set_xscale if which == "x" else axis.set_yscale)("log")
    target.set_major_locator(LogLocator(base=2))
    target.set_minor_locator(LogLocator(base=2, subs=(1.25, 1.5, 1.75)))
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    target.set_minor_formatter(FuncFormatter(lambda value, _: ""))


def _input_axis(axis: Any, which: str, log: bool) -> None:
    """An input axis: logarithmic for log-scaled inputs, labelled with plain numbers."""
    from matplotlib.ticker import FuncFormatter

    if not log:
        return
    (axis.set_xscale if which == "x" else axis.set_yscale)("log")
    target = axis.xaxis if which == "x" else axis.yaxis
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    target.set_minor_formatter(FuncFormatter(lambda value, _: ""))


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    _pyplot().close(figure)
    return buffer.getvalue()


def _edges(values: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted centre values (geometric midpoints when ``log``)."""
    centres = np.log(values) if log else values.astype(np.float64)
    if len(centres) == 1:
        half = 0.5 if not log else 0.1
        edges = np.array([centres[0] - half, centres[0] + half])
    else:
        middle = (centres[1:] + centres[:-1]) / 2
        edges = np.concatenate(
            [[2 * centres[0] - middle[0]], middle, [2 * centres[-1] - middle[-1]]]
        )
    return np.exp(edges) if log else edges


def _map_inputs(points: pd.DataFrame, inputs: Sequence[str]) -> list[str]:
    """Numeric inputs that vary over the points (at most the first two)."""
    varying = [
        n for n in inputs if points[n].nunique() > 1 and pd.api.types.is_numeric_dtype(points[n])
    ]
    return varying[:2]


#: How the heat map marks points whose verdict is not a clear speedup.
_VERDICT_MARKS: dict[str, dict[str, Any]] = {
    "neutral": {"marker": ".", "s": 6, "color": "black"},
    "same": {"marker": "o", "s": 10, "facecolors": "none", "edgecolors": "#555555"},
    "regression": {"marker": "x", "s": 22, "color": "black"},
}


def _speedup_curve(table: pd.DataFrame, name: str, *, log: bool, title: str, noise: float) -> bytes:
    """The speedup along one input: the geometric-mean curve and every point by verdict, the
    noise band shaded."""
    figure, axis = _pyplot().subplots(figsize=(6.4, 3.8), layout="constrained")
    curve = table.groupby(name)["log2_speedup"].mean()
    axis.plot(curve.index, 2.0 ** curve.to_numpy(), color="#333333", linewidth=1)
    for verdict, colour in VERDICT_COLOURS.items():
        rows = table[table["verdict"] == verdict]
        if len(rows):
            axis.scatter(rows[name], rows["speedup"], color=colour, s=22, label=verdict)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.axhspan(1.0 / (1.0 + noise), 1.0 + noise, color="#ffd54f", alpha=0.35)
    _speedup_axis(axis, "y")
    axis.legend(fontsize=8)
    axis.set_xlabel(name)
    axis.set_ylabel("speedup")
    _input_axis(axis, "x", log)
    axis.set_title(title)
    return _png(figure)


def _speedup_colour_bar(figure: Any, mesh: Any, axis: Any, limit: float) -> None:
    """A colour bar for log2 speedups in [-limit, limit], labelled as speedups."""
    bar = figure.colorbar(mesh, ax=axis)
    step = 0.5 if limit <= 2 else (1.0 if limit <= 5 else 2.0)
    ticks = np.arange(-np.ceil(limit), np.ceil(limit) + step, step)
    ticks = ticks[np.abs(ticks) <= limit]
    bar.set_ticks(ticks)
    bar.set_ticklabels([f"{2.0**t:.3g}x" for t in ticks])
    bar.set_label("speedup (log scale, centred on 1)")


def _speedup_heat_map(
    points: pd.DataFrame,
    table: pd.DataFrame,
    shown: Sequence[str],
    log_inputs: Sequence[str],
    *,
    title: str,
    limit: float,
) -> bytes:
    """The mean log2 speedup over two inputs, coloured symmetrically in [-limit, limit], with
    the points of :data:`_VERDICT_MARKS` marked."""
    from matplotlib.colors import Normalize

    x_name, y_name = shown
    grid = table.groupby([y_name, x_name])["log2_speedup"].mean().unstack(x_name)
    xs, ys = grid.columns.to_numpy(), grid.index.to_numpy()
    figure, axis = _pyplot().subplots(figsize=(6.8, 5.4), layout="constrained")
    mesh = axis.pcolormesh(
        _edges(xs, x_name in log_inputs),
        _edges(ys, y_name in log_inputs),
        grid.to_numpy(dtype=float),
        cmap="RdBu",
        norm=Normalize(-limit, limit),
        shading="flat",
    )
    for verdict, style in _VERDICT_MARKS.items():
        cells = points[points["verdict"] == verdict]
        if len(cells):
            axis.scatter(cells[x_name], cells[y_name], linewidths=0.8, **style)
    _input_axis(axis, "x", x_name in log_inputs)
    _input_axis(axis, "y", y_name in log_inputs)
    axis.set_xlabel(x_name)
    axis.set_ylabel(y_name)
    axis.set_title(
        f"{title}\n(. no significant difference, o same configuration, x regression)",
        fontsize=10,
    )
    _speedup_colour_bar(figure, mesh, axis, limit)
    return _png(figure)


def speedup_map(
    points: pd.DataFrame,
    inputs: Sequence[str],
    log_inputs: Sequence[str],
    *,
    title: str,
    noise: float,
) -> bytes | None:
    """Heat map (two varying inputs) or curve (one) of the speedup; None with no numeric input.

    Other inputs are averaged over (geometric mean of the speedups).
    """
    shown = _map_inputs(points, inputs)
    if not shown:
        return None
    table = points[points["verdict"] != "failed"].assign(
        log2_speedup=lambda t: np.log2(t["speedup"].astype(float))
    )
    if len(shown) == 1:
        log = shown[0] in log_inputs
        return _speedup_curve(table, shown[0], log=log, title=title, noise=noise)
    limit = max(float(np.nanmax(np.abs(table["log2_speedup"]))) if len(table) else 0.0, 0.2)
    return _speedup_heat_map(points, table, shown, log_inputs, title=title, limit=limit)


def speedup_histogram(points: pd.DataFrame, *, title: str, noise: float) -> bytes:
    """Histogram of the per-point speedups, stacked by verdict, noise band shaded."""
    plt = _pyplot()
    table = points[points["verdict"] != "failed"]
    speedup = table["speedup"].to_numpy(dtype=float)
    figure, axis = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    if len(speedup):
        low = min(float(speedup.min()), 1.0 / (1.0 + noise)) * 0.97
        high = max(float(speedup.max()), 1.0 + noise) * 1.03
        bins = np.geomspace(low, high, 40)
        verdicts = [
            v
            for v in ("regression", "same", "neutral", "progression")
            if (table["verdict"] == v).any()
        ]
        axis.hist(
            [table[table["verdict"] == v]["speedup"].to_numpy(dtype=float) for v in verdicts],
            bins=bins,
            stacked=True,
            color=[VERDICT_COLOURS[v] for v in verdicts],
            label=verdicts,
        )
        geomean = geometric_mean(speedup)
        axis.axvline(
            geomean, color="black", linestyle="--", linewidth=1, label=f"geomean {geomean:.3f}x"
        )
    axis.axvspan(1.0 / (1.0 + noise), 1.0 + noise, color="#ffd54f", alpha=0.35, label="noise band")
    axis.axvline(1.0, color="black", linewidth=0.8)
    _speedup_axis(axis, "x")
    axis.set_xlabel("speedup over the reference")
    axis.set_ylabel("points")
    axis.set_title(title)
    axis.legend(fontsize=8)
    return _png(figure)


def speedup_figures(
    points: pd.DataFrame, summary: Mapping[str, Any], space: Space, folder: Path
) -> list[Path]:
    """``speedup_map.png`` (when an input varies) and ``speedup_histogram.png`` in ``folder``."""
    title = f"{summary.get('tuned')} vs {summary.get('reference')}"
    noise = float(summary.get("noise_threshold", 0.0))
    log_inputs = [p.name for p in space.inputs if p.log]
    written = []
    image = speedup_map(points, space.input_names, log_inputs, title=title, noise=noise)
    if image is not None:
        written.append(folder / "speedup_map.png")
        written[-1].write_bytes(image)
    written.append(folder / "speedup_histogram.png")
    written[-1].write_bytes(speedup_histogram(points, title=title, noise=noise))
    return written


def samples_over_time(
    table: pd.DataFrame, objective: str, origin: pd.Series, *, wall_time: bool = True
) -> bytes:
    """Objective of every stored sample in order, coloured by origin; with ``wall_time``, the
    count over wall time (a replay answers at once: nothing to show there)."""
    plt = _pyplot()
    if wall_time:
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    else:
        figure, left = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
        right = None
    index = np.arange(len(table))
    values = table[objective].to_numpy(dtype=float)
    colours = plt.get_cmap("tab10")
    for position, name in enumerate(pd.unique(origin)):
        rows = (origin == name).to_numpy()
        left.scatter(index[rows], values[rows], s=4, color=colours(position % 10), label=name)
        if right is None:
            continue
        stamps = table["timestamp"].to_numpy(dtype=float)
        start = float(np.nanmin(stamps)) if len(stamps) else 0.0
        right.plot(
            (stamps[rows] - start) / 60.0,
            index[rows] + 1,
            ".",
            markersize=2,
            color=colours(position % 10),
            label=name,
        )
    if np.all(values[np.isfinite(values)] > 0):
        left.set_yscale("log")
    left.set_xlabel("sample (store order)")
    left.set_ylabel(objective)
    left.legend(fontsize=8, markerscale=3)
    if right is not None:
        right.set_xlabel("minutes since the first sample")
        right.set_ylabel("samples stored")
    figure.suptitle("Samples over time")
    return _png(figure)


def predicted_vs_measured(measured: np.ndarray, predicted: np.ndarray, objective: str) -> bytes:
    """Cross-validated predictions against measurements, log-log where positive."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5.2, 5.0), layout="constrained")
    axis.scatter(measured, predicted, s=5, alpha=0.5, color="#2166ac")
    finite = np.concatenate([measured, predicted])
    finite = finite[np.isfinite(finite)]
    if len(finite):
        low, high = float(finite.min()), float(finite.max())
        axis.plot([low, high], [low, high], color="black", linewidth=0.8)
        if low > 0:
            axis.set_xscale("log")
            axis.set_yscale("log")
    axis.set_xlabel(f"measured {objective}")
    axis.set_ylabel(f"predicted {objective} (out of fold)")
    axis.set_title("Surrogate accuracy (cross-validated)")
    return _png(figure)


def optimum_maps(optima: pd.DataFrame, space: Space) -> bytes | None:
    """One panel per design parameter: its optimal value over the (first two varying) inputs.

    With more than two varying inputs, the others are held at their middle grid value.
    """
    shown = _map_inputs(optima, space.input_names)
    if not shown:
        return None
    table = optima
    for name in space.input_names:
        if name not in shown and table[name].nunique() > 1:
            values = np.sort(table[name].unique())
            table = table[table[name] == values[len(values) // 2]]
    plt = _pyplot()
    count = len(space.design)
    columns = min(3, count)
    rows = (count + columns - 1) // columns
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.8 * rows), squeeze=False, layout="constrained"
    )
    for axis, parameter in zip(axes.ravel(), space.design, strict=False):
        # a value list (or categories) is shown by its codes with one colour per value
        discrete = parameter.values is not None or parameter.kind in ("categorical", "bool")
        labels = [str(v) for v in parameter.domain_values().tolist()] if discrete else []
        if discrete:
            colour = parameter.codes(table[parameter.name].to_numpy()).astype(float)
            base = "tab10" if parameter.kind in ("categorical", "bool") else "viridis"
            cmap = plt.get_cmap(base).resampled(max(len(labels), 2))
            limits = {"vmin": -0.5, "vmax": len(labels) - 0.5}
        else:
            colour = parameter.numeric(table[parameter.name].to_numpy())
            cmap, limits = plt.get_cmap("viridis"), {}
        if len(shown) == 1:
            order = np.argsort(table[shown[0]].to_numpy())
            axis.step(table[shown[0]].to_numpy()[order], colour[order], where="mid")
            axis.set_xlabel(shown[0])
            axis.set_ylabel(parameter.name)
            if discrete:
                axis.set_yticks(range(len(labels)), labels)
        else:
            dots = axis.scatter(
                table[shown[0]], table[shown[1]], c=colour, cmap=cmap, s=60, marker="s", **limits
            )
            axis.set_xlabel(shown[0])
            axis.set_ylabel(shown[1])
            bar = figure.colorbar(dots, ax=axis)
            if discrete:
                bar.set_ticks(range(len(labels)))
                bar.set_ticklabels(labels)
        for index, name in enumerate(shown):
            _input_axis(axis, "xy"[index], space.parameters[name].log)
        axis.set_title(parameter.name)
    for axis in axes.ravel()[count:]:
        axis.axis("off")
    figure.suptitle("Optimal configuration over the optimization grid")
    return _png(figure)


def depth_sweep(records: Sequence[Mapping[str, Any]], chosen: int | None) -> bytes | None:
    """Predicted mean / p90 regret, the largest measured regret (where the sweep recorded it)
    and the leaves against the tree depth."""
    if not records:
        return None
    plt = _pyplot()
    table = pd.DataFrame(records)
    figure, axis = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    axis.plot(table["depth"], 100 * table["mean_regret"], marker="o", label="mean regret")
    if "p90_regret" in table:
        axis.plot(table["depth"], 100 * table["p90_regret"], marker=".", label="p90 regret")
    if "measured_max" in table:
        axis.plot(
            table["depth"],
            100 * table["measured_max"],
            marker="x",
            color="#b2182b",
            label="largest measured regret",
        )
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.set_xlabel("depth limit")
    axis.set_ylabel("regret against the best (%)")
    other = axis.twinx()
    other.plot(
        table["depth"], table["leaves"], color="#9e9e9e", linestyle="--", marker="s", label="leaves"
    )
    other.set_ylabel("leaves")
    if chosen is not None:
        axis.axvline(chosen, color="black", linewidth=0.8)
    axis.legend(loc="upper center", fontsize=8)
    axis.set_title("Tree depth sweep (predicted on the grid, measured where known)")
    return _png(figure)
