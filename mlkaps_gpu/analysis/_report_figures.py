"""Figures of the report's first sections: what the header ships over the inputs, and the search
(best-so-far against evaluations, the surrogate's parameter importance, the samples over the
space as parallel coordinates). PNG bytes; matplotlib is imported when a figure is drawn.

They follow what users of the tuners look at: Optuna's ``plot_optimization_history`` and
``plot_param_importances``, Kernel Tuner's dashboard (best-so-far against evaluations), and
MLKAPS's maps of the chosen configuration over two inputs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.analysis._plots import _input_axis, _map_inputs, _png, _pyplot
from mlkaps_gpu.space import Space

#: Most input values drawn as lines of their own in the best-so-far figure.
BEST_SO_FAR_LINES = 8
#: Most samples drawn in the parallel-coordinates figure (a seeded subset beyond).
PARALLEL_LINES = 2000
#: Most points drawn as bars when no input is numeric.
BAR_POINTS = 40
#: Most configurations named in a legend or on an axis (the most shipped ones).
LEGEND_ENTRIES = 12


def shipped_map(
    points: pd.DataFrame,
    space: Space,
    labels: Sequence[str],
    fraction: np.ndarray,
    speedup: np.ndarray | None = None,
) -> bytes:
    """What the header ships over the inputs: the configuration (one colour per distinct one,
    named in the legend) and the fraction of the best known, and the speed-up over the
    reference where there is one.

    One varying numeric input: step plots along it; two: maps over them (other inputs are
    mixed: each cell shows the last point drawn there); none: bars per point (the first
    :data:`BAR_POINTS`).

    Args:
        points: one row per grid point (the input columns).
        space: the campaign's space (which inputs are log-scaled).
        labels: per point, the name of its shipped configuration (``C1``, ``C2``...).
        fraction: per point, the fraction of the best known (1 = the best known).
        speedup: per point, the speed-up over the reference, or None.
    """
    plt = _pyplot()
    shown = _map_inputs(points, space.input_names)
    # C1, C2, ... C10 in their numeric order (C1: the most shipped)
    names = sorted(set(labels), key=lambda label: (len(label), label))
    code_of = {name: code for code, name in enumerate(names)}
    codes = np.array([code_of[label] for label in labels], dtype=np.int64)
    colours = plt.get_cmap("tab20" if len(names) > 10 else "tab10")
    panels = 2 if speedup is None else 3
    if len(shown) == 2:
        figure, axes = plt.subplots(
            1, panels, figsize=(5.0 * panels, 4.4), layout="constrained", squeeze=False
        )
        x, y = points[shown[0]].to_numpy(), points[shown[1]].to_numpy()
        for code, name in enumerate(names):
            rows = codes == code
            named = name if code < LEGEND_ENTRIES else "_nolegend_"  # the most shipped only
            axes[0, 0].scatter(
                x[rows], y[rows], color=colours(code % 20), marker="s", s=50, label=named
            )
        axes[0, 0].legend(fontsize=7, ncol=2, title="configuration", title_fontsize=7)
        from matplotlib.colors import LogNorm, Normalize

        maps: list[tuple[str, np.ndarray, str, Any]] = [
            ("fraction of the best known", fraction, "viridis", Normalize(0.0, 1.0))
        ]
        if speedup is not None:  # centred on 1 on a log scale
            maps.append(
                ("speed-up over the reference", speedup, "RdBu", LogNorm(*_symmetric_log(speedup)))
            )
        for axis, (title, values, cmap, norm) in zip(axes[0, 1:], maps, strict=True):
            dots = axis.scatter(x, y, c=values, cmap=cmap, marker="s", s=50, norm=norm)
            figure.colorbar(dots, ax=axis, label=title)
            axis.set_title(title)
        for axis in axes[0]:
            axis.set_xlabel(shown[0])
            axis.set_ylabel(shown[1])
            _input_axis(axis, "x", space.parameters[shown[0]].log)
            _input_axis(axis, "y", space.parameters[shown[1]].log)
        axes[0, 0].set_title("shipped configuration")
    elif len(shown) == 1:
        figure, axes = plt.subplots(
            panels,
            1,
            figsize=(9.0, 2.6 * panels + 0.6),
            layout="constrained",
            sharex=True,
            squeeze=False,
        )
        x = points[shown[0]].to_numpy(dtype=float)
        order = np.argsort(x, kind="stable")
        axes[0, 0].step(x[order], codes[order], where="mid", color="#555555", linewidth=0.8)
        for code in range(len(names)):
            rows = codes == code
            axes[0, 0].scatter(x[rows], codes[rows], color=colours(code % 20), s=30, zorder=3)
        step = max(1, len(names) // LEGEND_ENTRIES)  # at most about a dozen names on the axis
        axes[0, 0].set_yticks(range(0, len(names), step), names[::step])
        axes[0, 0].set_ylabel("shipped configuration")
        axes[1, 0].plot(x[order], fraction[order], marker="o", markersize=3, color="#2166ac")
        axes[1, 0].set_ylim(min(0.0, float(np.nanmin(fraction, initial=1.0))), 1.05)
        axes[1, 0].axhline(1.0, color="black", linewidth=0.6)
        axes[1, 0].set_ylabel("fraction of\nthe best known")
        if speedup is not None:
            axes[2, 0].plot(x[order], speedup[order], marker="o", markersize=3, color="#b2182b")
            axes[2, 0].axhline(1.0, color="black", linewidth=0.6)
            axes[2, 0].set_ylabel("speed-up over\nthe reference (x)")
        axes[-1, 0].set_xlabel(shown[0])
        for axis in axes[:, 0]:
            _input_axis(axis, "x", space.parameters[shown[0]].log)
            axis.grid(True, alpha=0.3)
    else:
        count = min(len(points), BAR_POINTS)
        heads = points[space.input_names].head(count)
        point_names = [", ".join(str(v) for v in row) for row in heads.itertuples(index=False)]
        figure, axes = plt.subplots(
            1,
            panels - 1,
            figsize=(5.5 * (panels - 1), max(2.6, 0.9 + 0.28 * count)),
            layout="constrained",
            squeeze=False,
        )
        position = np.arange(count)
        bars = [("fraction of the best known", fraction)]
        if speedup is not None:
            bars.append(("speed-up over the reference (x)", speedup))
        for axis, (title, values) in zip(axes[0], bars, strict=True):
            axis.barh(position, values[:count], color=[colours(c % 20) for c in codes[:count]])
            for index in range(count):
                axis.text(float(values[index]), index, f" {labels[index]}", va="center", fontsize=7)
            axis.axvline(1.0, color="black", linewidth=0.6)
            axis.set_yticks(position, point_names)
            axis.invert_yaxis()
            axis.set_xlabel(title)
        axes[0, 0].set_ylabel(", ".join(space.input_names))
    figure.suptitle("What the header ships, per input value")
    return _png(figure)


def _symmetric_log(values: np.ndarray) -> tuple[float, float]:
    """Colour limits centred on 1 on a log scale: 1/s and s for the largest factor s."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    factor = float(np.exp(np.max(np.abs(np.log(finite))))) if len(finite) else 2.0
    factor = max(factor, 1.1)
    return 1.0 / factor, factor


def best_so_far(
    table: pd.DataFrame, objective: str, inputs: Sequence[str], *, maximize: bool
) -> bytes | None:
    """The best measured value against evaluations: per input value (the
    :data:`BEST_SO_FAR_LINES` most measured ones), as a fraction of the best measured there at
    the end; over all input values, the geometric mean of that fraction over the values
    measured so far, and how many values were measured. None without a successful sample.

    Args:
        table: the stored samples in store order (``status`` and the objective among columns).
        objective: the objective's column.
        inputs: the input columns (an input value is one row of them).
        maximize: whether a larger objective is better.
    """
    evaluations = np.arange(1, len(table) + 1)
    ok = (table["status"] == "ok").to_numpy() & np.isfinite(
        pd.to_numeric(table[objective], errors="coerce").to_numpy(dtype=float)
    )
    if not ok.any():
        return None
    values = pd.to_numeric(table[objective], errors="coerce").to_numpy(dtype=float)
    signed = np.where(ok, -values if maximize else values, np.inf)
    keys = (
        table[list(inputs)].astype(str).agg(" | ".join, axis=1)
        if inputs
        else pd.Series(["all"] * len(table))
    )
    frame = pd.DataFrame({"key": keys.to_numpy(), "signed": signed})
    running = frame.groupby("key")["signed"].cummin().to_numpy()
    final = frame.groupby("key")["signed"].transform("min").to_numpy()
    # the fraction of the best there at the end, in (0, 1]; inf before the value's first success
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.where(
            np.isfinite(running), final / running if not maximize else running / final, np.nan
        )
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9), layout="constrained")
    counts = frame[ok].groupby("key").size().sort_values(ascending=False, kind="stable")
    for key in counts.index[:BEST_SO_FAR_LINES]:
        rows = (frame["key"] == key).to_numpy()
        left.step(evaluations[rows], fraction[rows], where="post", label=f"{key} ({counts[key]})")
    left.set_xlabel("evaluation (store order)")
    left.set_ylabel("best so far / best there at the end")
    left.set_title(
        f"Per input value ({min(len(counts), BEST_SO_FAR_LINES)} most measured of {len(counts)})",
        fontsize=10,
    )
    left.legend(
        fontsize=7, title=", ".join(inputs) + " (samples)", title_fontsize=7, loc="lower right"
    )
    # over all values: the last fraction of each value measured so far, geometric mean
    latest: dict[str, float] = {}
    means, measured = np.full(len(table), np.nan), np.zeros(len(table), dtype=int)
    log_sum = 0.0
    for index, (key, value) in enumerate(zip(frame["key"], fraction, strict=True)):
        if np.isfinite(value):
            log_sum += np.log(value) - np.log(latest.get(key, 1.0))
            latest[key] = value
        measured[index] = len(latest)
        means[index] = np.exp(log_sum / len(latest)) if latest else np.nan
    right.step(evaluations, means, where="post", color="#2166ac", label="geometric mean")
    right.set_xlabel("evaluation (store order)")
    right.set_ylabel("best so far / best at the end\n(geometric mean over values)")
    twin = right.twinx()
    twin.step(evaluations, measured, where="post", color="#9e9e9e", linestyle="--")
    twin.set_ylabel("input values measured", color="#777777")
    right.set_title("Over all input values", fontsize=10)
    for axis in (left, right):
        axis.set_ylim(max(0.0, float(np.nanmin(fraction)) - 0.05), 1.03)
        axis.grid(True, alpha=0.3)
    figure.suptitle(f"Best {objective} measured so far against evaluations")
    return _png(figure)


def parameter_importance(
    names: Sequence[str], importance: np.ndarray, inputs: Sequence[str], *, method: str
) -> bytes:
    """Horizontal bars of each parameter's share of the total importance, inputs in grey;
    ``method`` (how the importance was measured) titles the figure."""
    plt = _pyplot()
    share = np.asarray(importance, dtype=float)
    share = 100 * share / share.sum() if share.sum() > 0 else share
    order = np.argsort(share, kind="stable")
    figure, axis = plt.subplots(figsize=(6.4, 0.9 + 0.32 * len(names)), layout="constrained")
    colours = ["#9e9e9e" if names[i] in inputs else "#2166ac" for i in order]
    axis.barh([names[i] for i in order], share[order], color=colours)
    for position, index in enumerate(order):
        axis.text(share[index], position, f" {share[index]:.1f} %", va="center", fontsize=8)
    axis.set_xlabel("share of the total importance (%)")
    axis.set_xlim(0, max(float(share.max(initial=0.0)) * 1.18, 1.0))
    title = textwrap.fill(f"Parameter importance: {method}", 70)
    axis.set_title(f"{title}\n(blue: design parameter, grey: input)", fontsize=9)
    return _png(figure)


def _unit_coordinates(parameter: Any, column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """A column on [0, 1] (log-scaled where the parameter is; a value list or categories by
    their index) and the tick labels of the axis' ends or values."""
    domain = parameter.domain_values()
    if parameter.kind in ("categorical", "bool") or (
        parameter.values is not None and len(domain) <= 12
    ):
        codes = parameter.codes(column.to_numpy()).astype(float)
        scale = max(len(domain) - 1, 1)
        return codes / scale, [str(v) for v in domain.tolist()]
    values = column.to_numpy(dtype=float)
    low = float(np.nanmin(values)) if parameter.low is None else float(parameter.low)
    high = float(np.nanmax(values)) if parameter.high is None else float(parameter.high)
    if parameter.values is not None:
        low, high = float(np.min(domain)), float(np.max(domain))
    if high == low:
        return np.full(len(values), 0.5), [f"{low:g}"]
    if parameter.log and low > 0:
        return np.log(values / low) / np.log(high / low), [f"{low:g}", f"{high:g}"]
    return (values - low) / (high - low), [f"{low:g}", f"{high:g}"]


def parallel_coordinates(
    table: pd.DataFrame, space: Space, objective: str, *, maximize: bool, seed: int
) -> bytes | None:
    """Every successful sample as a line over one axis per parameter, coloured by the rank of
    its objective (over all samples, or within its input value where values were measured
    three times or more each): where the search went and where the good values lie. At most
    :data:`PARALLEL_LINES` lines (a seeded subset). None without a successful sample."""
    ok = table[table["status"] == "ok"]
    ok = ok[np.isfinite(pd.to_numeric(ok[objective], errors="coerce").to_numpy(dtype=float))]
    if ok.empty:
        return None
    if len(ok) > PARALLEL_LINES:
        picked = np.random.default_rng(seed).choice(len(ok), PARALLEL_LINES, replace=False)
        ok = ok.iloc[np.sort(picked)]
    values = ok[objective].astype(float) * (-1.0 if maximize else 1.0)
    inputs = space.input_names
    per_value = ok.groupby(inputs).size().median() >= 3 if inputs else False
    if per_value:
        rank = values.groupby([ok[n] for n in inputs]).rank(pct=True)
        colour_label = f"rank of {objective} within its input value (0 = best)"
    else:
        rank = values.rank(pct=True)
        colour_label = f"rank of {objective} over all samples (0 = best)"
    plt = _pyplot()
    names = space.names
    figure, axis = plt.subplots(figsize=(max(7.0, 1.05 * len(names)), 4.6), layout="constrained")
    coordinates = np.column_stack([_unit_coordinates(space.parameters[n], ok[n])[0] for n in names])
    colours = plt.get_cmap("viridis_r")
    order = np.argsort(-rank.to_numpy(), kind="stable")  # the best drawn last, on top
    for row in order:
        axis.plot(
            range(len(names)),
            coordinates[row],
            color=colours(rank.iloc[row]),
            alpha=0.35,
            linewidth=0.7,
        )
    for position, name in enumerate(names):
        axis.axvline(position, color="#444444", linewidth=0.8)
        _, ticks = _unit_coordinates(space.parameters[name], ok[name])
        spots = np.linspace(0, 1, len(ticks)) if len(ticks) > 1 else [0.5]
        for spot, tick in zip(spots, ticks, strict=True):
            axis.text(position + 0.04, spot, tick, fontsize=6, va="center")
    axis.set_xticks(
        range(len(names)), [f"{n}\n(input)" if n in inputs else n for n in names], fontsize=8
    )
    axis.set_yticks([])
    axis.set_xlim(-0.2, len(names) - 0.6)
    bar = figure.colorbar(plt.cm.ScalarMappable(cmap=colours, norm=plt.Normalize(0, 1)), ax=axis)
    bar.set_label(colour_label, fontsize=8)
    axis.set_title(f"The {len(ok)} successful samples over the space (one line each)", fontsize=10)
    return _png(figure)
