"""Table-level entry to the Bayesian-optimization core, for samplers over the whole space.

:func:`unit_features` places rows of the space (inputs and designs) in the unit cube: a design
parameter at the centre of its value's cell (as the strategies' embedding), a numeric input by
its position between its bounds (geometric when ``log``), a categorical input at its code's
cell centre. :func:`propose_rows` then fits the GP to the measured rows and returns the
candidates to measure next.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import Acquisition, propose


def unit_features(space: Space, table: pd.DataFrame) -> np.ndarray:
    """Rows of ``table`` as points of [0, 1]^(parameters with more than one value)."""
    columns = []
    for parameter in [*space.inputs, *space.design]:
        column = _unit_column(parameter, table[parameter.name].to_numpy(), space)
        if column is not None:
            columns.append(column)
    return np.column_stack(columns) if columns else np.zeros((len(table), 0))


def _unit_column(parameter: Parameter, values: np.ndarray, space: Space) -> np.ndarray | None:
    is_design = parameter.name in space.design_names
    if is_design or parameter.values is not None:
        size = parameter.n_values
        if size == 1:
            return None
        codes = parameter.codes(values)
        if (codes < 0).any():
            raise ValueError(f"'{parameter.name}': a value lies outside its value list")
        return (codes + 0.5) / size
    assert parameter.low is not None and parameter.high is not None
    low, high = float(parameter.low), float(parameter.high)
    if high == low:
        return None
    numbers = values.astype(np.float64)
    if parameter.log:
        return (np.log(numbers) - np.log(low)) / (np.log(high) - np.log(low))
    return (numbers - low) / (high - low)


def propose_rows(
    space: Space,
    measured: pd.DataFrame,
    values: np.ndarray | Sequence[float],
    candidates: pd.DataFrame,
    k: int = 1,
    *,
    acquisition: Acquisition | Sequence[Acquisition] = "ei",
    log_target: bool = True,
    seed: int = 0,
) -> np.ndarray:
    """Positions (in ``candidates``) of the ``k`` rows to measure next.

    Args:
        space: the search space.
        measured: measured rows (one column per parameter).
        values: their objective values (to minimise); non-finite ones (failed, invalid) are
            left out of the model.
        candidates: the rows to choose from (valid and not yet measured, as the caller knows).
        k: how many to propose (a batch spread by the kriging believer).
        acquisition: ``ei``, ``pi``, ``lcb`` or a sequence used in turn.
        log_target: model the logarithm of the values when all are positive.
        seed: seed of the hyperparameter fit.
    """
    values = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values)
    if keep.sum() < 2:
        raise ValueError("propose_rows: needs at least two successful measurements")
    targets = values[keep]
    if log_target and (targets > 0).all():
        targets = np.log(targets)
    points = unit_features(space, measured.reset_index(drop=True).loc[keep])
    return propose(
        points,
        targets,
        unit_features(space, candidates),
        k,
        acquisition=acquisition,
        seed=seed,
    )
