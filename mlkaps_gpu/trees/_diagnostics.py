"""How good and how valid a fitted selector's answers are: predicted regret at the optima's
points, and how often the trees' raw configuration violates a constraint on a dense grid."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space
from mlkaps_gpu.trees._model import DecisionModel
from mlkaps_gpu.trees._regret import RegretOracle, RegretSummary, summarize
from mlkaps_gpu.trees._selector import Selector


def model_of(selector: Selector | DecisionModel) -> DecisionModel:
    """The decision model of a fitted selector (or the model itself).

    Raises:
        RuntimeError: the selector is not fitted.
    """
    if isinstance(selector, DecisionModel):
        return selector
    model = getattr(selector, "model_", None)
    if model is None:
        raise RuntimeError(f"{type(selector).__name__} is not fitted: call fit() first")
    return model


def predicted_regret(
    selector: Selector | DecisionModel, oracle: RegretOracle, *, fallback: bool = True
) -> RegretSummary:
    """Predicted relative regret of the selector's configurations at the oracle's points.

    Args:
        selector: a fitted selector or its model.
        oracle: the optima's points and the objective predictor.
        fallback: score what ``select`` returns (True) or the trees' raw answer.
    """
    model = model_of(selector)
    codes = model.select_codes(oracle.inputs, fallback=fallback)
    points = np.arange(oracle.n_points)
    regret = oracle.regret(points, codes)
    invalid = ~oracle.valid(points, codes) if oracle.space.constraints else np.zeros(0, bool)
    return summarize(regret, invalid)


@dataclass(frozen=True)
class ViolationReport:
    """How many input points get a configuration that violates a constraint.

    Attributes:
        n_points: points checked.
        n_invalid_trees: points where the trees' raw configuration is invalid (what a selector
            without a run-time check would return).
        n_invalid_selected: points where the checked answer (``select``) is still invalid
            (only where no configuration at all is valid).
    """

    n_points: int
    n_invalid_trees: int
    n_invalid_selected: int

    @property
    def fraction_invalid_trees(self) -> float:
        """Share of the points whose raw tree configuration is invalid (0 without points)."""
        return self.n_invalid_trees / self.n_points if self.n_points else 0.0

    def __str__(self) -> str:
        return (
            f"{self.n_invalid_trees} of {self.n_points} points "
            f"({100 * self.fraction_invalid_trees:.2f}%) get an invalid configuration from the "
            f"trees; {self.n_invalid_selected} after the run-time check"
        )


def constraint_violations(
    selector: Selector | DecisionModel, space: Space, inputs_table: pd.DataFrame
) -> ViolationReport:
    """Check the selector's configurations on input points (e.g. ``space.grid(100)``).

    Per-parameter trees choose each parameter on its own and can combine values into a
    configuration that violates a constraint; this counts how often, before and after the
    run-time check (see :mod:`mlkaps_gpu.trees._validity`).
    """
    model = model_of(selector)
    inputs_table = inputs_table[space.input_names].reset_index(drop=True)
    counts = []
    for fallback in (False, True):
        chosen = model.predict(inputs_table, fallback=fallback)
        table = pd.concat([inputs_table, chosen.reset_index(drop=True)], axis=1)
        counts.append(int(np.count_nonzero(~space.is_valid(table[space.names]))))
    return ViolationReport(len(inputs_table), counts[0], counts[1])
