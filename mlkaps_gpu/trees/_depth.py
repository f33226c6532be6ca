"""Choosing the tree depth: sweep ``max_depth``, report regret and size, keep the smallest depth
whose regret is within a tolerance of the best.

The regret is the score's (with :class:`RegretOracle`'s ``clip``, never below zero). Given
``measured_regret`` (the regret that measurements alone establish at the optima's points: the
selected configuration and the point's decision both measured there), the depths within
``tolerance`` of the best predicted regret are narrowed to those with the fewest points whose
measured regret exceeds ``tolerance``: where the trees that reproduce every decision are among
them (they have none), two input values whose best measured configurations differ beyond the
tolerance are never merged into one leaf, whatever the model predicts. The guard only narrows:
a violation counts where a tree's answer was measured, so a shallow tree of rarely measured
answers shows few, and it must not win over trees the model rates far better (decision 0027).

:func:`fit_selector` is the one-call entry the campaign uses: it builds the selector of a mode
(``joint`` or ``per_parameter``) at a fixed depth or at the depth the sweep chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space
from mlkaps_gpu.trees._diagnostics import predicted_regret
from mlkaps_gpu.trees._joint import DEFAULT_PARTITION, JointSelector
from mlkaps_gpu.trees._regret import RegretOracle, Score
from mlkaps_gpu.trees._selector import PerParameterSelector, Selector

MODES = ("joint", "per_parameter")
#: Depths tried by ``max_depth="auto"``.
DEFAULT_DEPTHS: tuple[int, ...] = tuple(range(1, 13))
#: Default tolerance on the mean relative regret (0.01: one percentage point).
DEFAULT_TOLERANCE = 0.01
#: ``measured_regret(selected)``: per row of the selected table (inputs and configuration at
#: the optima's points, in their order), the regret measurements establish (NaN: unknown).
MeasuredRegret = Callable[[pd.DataFrame], np.ndarray]


def make_selector(
    mode: str,
    max_depth: int,
    *,
    random_state: int = 0,
    min_samples_leaf: int = 1,
    partition: str | None = None,
) -> Selector:
    """An unfitted selector of a tree mode (``partition``: the joint tree's, default its own)."""
    if mode == "joint":
        return JointSelector(
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            random_state=random_state,
            partition=DEFAULT_PARTITION if partition is None else partition,
        )
    if mode == "per_parameter":
        return PerParameterSelector(
            max_depth=max_depth, min_samples_leaf=min_samples_leaf, random_state=random_state
        )
    raise ValueError(f"unknown tree mode {mode!r} (allowed: {', '.join(MODES)})")


def tree_size(selector: Selector) -> dict[str, int]:
    """Leaves, nodes and actual depth summed / maxed over the selector's trees."""
    trees = selector.model_.trees
    return {
        "leaves": sum(t.n_leaves for t in trees),
        "nodes": sum(len(t.children_left) for t in trees),
        "depth": max(t.depth for t in trees),
    }


@dataclass(frozen=True)
class DepthSweep:
    """Per depth: predicted regret at the optima's points and tree size; the chosen depth.

    Attributes:
        table: one row per depth tried: ``depth``, ``mean_regret``, ``p90_regret``,
            ``max_regret``, ``leaves``, ``nodes``, ``actual_depth``, ``tree_invalid``
            (points whose raw tree configuration violates a constraint) and, with measured
            regret, ``measured_max`` (largest measured regret, 0 with none known) and
            ``measured_over`` (points whose measured regret exceeds the tolerance).
        chosen: among the depths whose mean regret is at most the best + ``tolerance``, the
            smallest with the fewest ``measured_over``.
        tolerance: absolute tolerance on the mean relative regret.
        selectors: the fitted selector of every depth tried (only the chosen one ranks its
            configurations per leaf).
    """

    table: pd.DataFrame
    chosen: int
    tolerance: float
    selectors: dict[int, Selector] = field(repr=False, compare=False)

    @property
    def selector(self) -> Selector:
        """The selector fitted at the chosen depth."""
        return self.selectors[self.chosen]

    def records(self) -> list[dict[str, float | int]]:
        """The table as JSON-ready rows."""
        return [
            {k: (float(v) if k in _REGRET_COLUMNS else int(v)) for k, v in row.items()}
            for row in self.table.to_dict("records")
        ]

    def __str__(self) -> str:
        shown = self.table.assign(
            **{
                c: self.table[c].map(lambda v: f"{100 * v:.2f}%")
                for c in _REGRET_COLUMNS
                if c in self.table
            }
        )
        marks = ["<- chosen" if d == self.chosen else "" for d in self.table["depth"]]
        return shown.assign(choice=marks).to_string(index=False)


_REGRET_COLUMNS = ("mean_regret", "p90_regret", "max_regret", "measured_max")


def sweep_depths(
    optima: pd.DataFrame,
    space: Space,
    score: Score,
    *,
    mode: str = "joint",
    depths: Sequence[int] = DEFAULT_DEPTHS,
    tolerance: float = DEFAULT_TOLERANCE,
    random_state: int = 0,
    oracle: RegretOracle | None = None,
    measured_regret: MeasuredRegret | None = None,
    partition: str | None = None,
) -> DepthSweep:
    """Fit one selector per depth and choose the smallest depth within ``tolerance`` of the
    best mean regret (see the module docstring for ``measured_regret``). Depths past the first
    whose trees stopped growing short of their limit give the same trees and are skipped."""
    depths = sorted({int(d) for d in depths})
    if not depths or depths[0] < 1:
        raise ValueError(f"depths must be positive integers, got {depths}")
    if tolerance < 0:
        raise ValueError(f"depth tolerance must be >= 0, got {tolerance}")
    oracle = oracle or RegretOracle(optima, space, score)
    rows, selectors = [], {}
    for depth in depths:
        selector = make_selector(mode, depth, random_state=random_state, partition=partition)
        selector.fit(
            optima, space.inputs, space.design, space=space, score=score, oracle=oracle, rank=False
        )
        rows.append(_depth_row(depth, selector, oracle, measured_regret, tolerance))
        selectors[depth] = selector
        if selector.grown_depth() < depth:
            # the growth stopped on its own (pure or unsplittable nodes): deeper limits grow the
            # same trees. The fitted model's own depth is no such evidence: sibling leaves with
            # the same configuration are merged, so a partition that needs two more levels to
            # pay off collapses to a shallow tree at one limit and not at the next
            break
    table = pd.DataFrame(rows)
    # the depths within the tolerance of the best predicted regret, then the fewest refuted by
    # measurements among them (module docstring)
    within = table[table["mean_regret"] <= float(table["mean_regret"].min()) + tolerance]
    if measured_regret is not None:
        within = within[within["measured_over"] == within["measured_over"].min()]
    chosen = int(within["depth"].min())
    selectors[chosen].rank_configurations()  # the one that ships: the others are not ranked
    return DepthSweep(table, chosen, tolerance, selectors)


def _depth_row(
    depth: int,
    selector: Selector,
    oracle: RegretOracle,
    measured_regret: MeasuredRegret | None,
    tolerance: float,
) -> dict[str, float | int]:
    """One row of the sweep's table (see :class:`DepthSweep`)."""
    regret = predicted_regret(selector, oracle)
    raw = predicted_regret(selector, oracle, fallback=False)
    size = tree_size(selector)
    return {
        "depth": depth,
        "mean_regret": regret.mean,
        "p90_regret": regret.p90,
        "max_regret": regret.max,
        "leaves": size["leaves"],
        "nodes": size["nodes"],
        "actual_depth": size["depth"],
        "tree_invalid": raw.n_invalid,
        **_measured_columns(selector, oracle, measured_regret, tolerance),
    }


def _measured_columns(
    selector: Selector,
    oracle: RegretOracle,
    measured_regret: MeasuredRegret | None,
    tolerance: float,
) -> dict[str, float | int]:
    """``measured_max`` and ``measured_over`` of a fitted selector (none without
    ``measured_regret``)."""
    if measured_regret is None:
        return {}
    chosen = selector.select(oracle.inputs)
    table = pd.concat([oracle.inputs, chosen.reset_index(drop=True)], axis=1)
    regret = np.asarray(measured_regret(table), dtype=np.float64)
    known = regret[np.isfinite(regret)]
    return {
        "measured_max": float(known.max()) if len(known) else 0.0,
        "measured_over": int(np.count_nonzero(known > tolerance)),
    }


@dataclass(frozen=True)
class FittedSelector:
    """A selector chosen by :func:`fit_selector`, with the sweep that chose its depth."""

    selector: Selector
    sweep: DepthSweep


def fit_selector(
    optima: pd.DataFrame,
    space: Space,
    score: Score,
    *,
    mode: str = "joint",
    max_depth: int | str = "auto",
    depth_tolerance: float = DEFAULT_TOLERANCE,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    random_state: int = 0,
    oracle: RegretOracle | None = None,
    measured_regret: MeasuredRegret | None = None,
    partition: str | None = None,
) -> FittedSelector:
    """Fit the selector of ``mode`` on the optima, at ``max_depth`` or, with ``"auto"``, at the
    depth :func:`sweep_depths` chooses (``oracle``, ``measured_regret`` and ``partition`` as
    there). The space's constraints are checked at run time."""
    if mode not in MODES:
        raise ValueError(f"unknown tree mode {mode!r} (allowed: {', '.join(MODES)})")
    if max_depth == "auto":
        tried = depths
    elif isinstance(max_depth, int) and not isinstance(max_depth, bool) and max_depth >= 1:
        tried = [max_depth]
    else:
        raise ValueError(f"max_depth must be a positive integer or 'auto', got {max_depth!r}")
    sweep = sweep_depths(
        optima,
        space,
        score,
        mode=mode,
        depths=tried,
        tolerance=depth_tolerance,
        random_state=random_state,
        oracle=oracle,
        measured_regret=measured_regret,
        partition=partition,
    )
    return FittedSelector(sweep.selector, sweep)
