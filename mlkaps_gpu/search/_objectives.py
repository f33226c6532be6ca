"""What a strategy optimizes: a callable on a design table returning values and statuses.

An *objective* is any callable ``objective(designs) -> (values, statuses)`` where ``designs`` has
one column per design parameter, ``values`` are float64 (to minimise; NaN where the measurement
failed) and ``statuses`` are executor statuses (``"ok"`` or a failure). Three ready-made ones:

- :class:`ExecutorObjective`: measure with an executor (direct tuning of one input point);
- :class:`SurrogateObjective`: predict with a fitted surrogate (tuning the model);
- :class:`TabulatedObjective`: every design of an exhaustive replay looked up in one array, so
  code-level evaluation (``evaluate_codes``) is one indexing operation (for studies).

A strategy uses ``evaluate_codes(codes)`` when the objective has it, and the table call otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.executors import INVALID, OK, Executor, ReplayExecutor
from mlkaps_gpu.space import Space, radix
from mlkaps_gpu.surrogate import Surrogate

Objective = Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]]


def input_table(space: Space, inputs: Mapping[str, Any], n: int) -> pd.DataFrame:
    """The input point repeated ``n`` times, one column per input parameter."""
    missing = [name for name in space.input_names if name not in inputs]
    if missing:
        raise ValueError(f"input point lacks value(s) for {missing}")
    return pd.DataFrame(
        {
            name: np.repeat(np.asarray([inputs[name]], dtype=object), n)
            for name in space.input_names
        },
        index=range(n),
    )


def full_rows(space: Space, inputs: Mapping[str, Any], designs: pd.DataFrame) -> pd.DataFrame:
    """Rows of the whole space (inputs then design columns) for designs of one input point."""
    codes = space.design_codes(designs)
    if (codes < 0).any():
        raise ValueError("a design value lies outside its parameter's domain")
    return space.assemble(input_table(space, inputs, len(designs)), codes)


class ExecutorObjective:
    """Measure designs of one input point with an executor.

    Args:
        executor: the executor.
        space: the search space (its input columns are filled from ``inputs``).
        inputs: the input point, one value per input parameter.
        objective: the objective column (default: the executor's first).
    """

    def __init__(
        self,
        executor: Executor,
        space: Space,
        inputs: Mapping[str, Any],
        *,
        objective: str | None = None,
    ) -> None:
        self.executor = executor
        self.space = space
        self.inputs = dict(inputs)
        self.objective = objective or executor.objectives[0]
        input_table(space, self.inputs, 0)  # fail early on a missing input

    def __call__(self, designs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        results = self.executor.run(full_rows(self.space, self.inputs, designs))
        values = results[self.objective].to_numpy(dtype=np.float64)
        statuses = results["status"].to_numpy(dtype=object)
        return np.where(statuses == OK, values, np.nan), statuses


class SurrogateObjective:
    """Predict designs of one input point with a fitted surrogate (every prediction is ``ok``
    unless it is not finite)."""

    def __init__(self, surrogate: Surrogate, space: Space, inputs: Mapping[str, Any]) -> None:
        self.surrogate = surrogate
        self.space = space
        self.inputs = dict(inputs)
        input_table(space, self.inputs, 0)

    def __call__(self, designs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        rows = full_rows(self.space, self.inputs, designs)
        values = np.asarray(self.surrogate.predict(self.space.features(rows)), dtype=np.float64)
        finite = np.isfinite(values)
        statuses = np.where(finite, OK, "runtime_error").astype(object)
        return np.where(finite, values, np.nan), statuses


class TabulatedObjective:
    """Values and statuses of every design of the Cartesian product, in one array each.

    Indexed by the row-major flat index of the design codes (see :func:`flat_index`). Build it
    with :meth:`from_replay`; a design the data lacks is ``invalid``.
    """

    def __init__(self, space: Space, values: np.ndarray, statuses: np.ndarray) -> None:
        if len(values) != space.design_product or len(statuses) != space.design_product:
            raise ValueError("one value and one status per design of the Cartesian product")
        self.space = space
        self.values = np.asarray(values, dtype=np.float64)
        self.statuses = np.asarray(statuses, dtype=object)
        self._radix = radix(space.design_sizes)

    @classmethod
    def from_replay(
        cls, executor: ReplayExecutor, space: Space, inputs: Mapping[str, Any]
    ) -> TabulatedObjective:
        """Look every valid design of ``inputs`` up in the replay at once (enumerable spaces)."""
        if not isinstance(executor, ReplayExecutor):
            raise TypeError("TabulatedObjective.from_replay needs a ReplayExecutor")
        if not space.enumerable:
            raise ValueError("TabulatedObjective needs an enumerable design space")
        valid = space.valid_design_codes(dict(inputs)).astype(np.int64)
        values = np.full(space.design_product, np.nan)
        statuses = np.full(space.design_product, INVALID, dtype=object)
        if len(valid):
            designs = space.design_from_codes(valid)
            measured, status = ExecutorObjective(executor, space, inputs)(designs)
            index = flat_index(valid, radix(space.design_sizes))
            values[index] = measured
            statuses[index] = status
        return cls(space, values, statuses)

    def evaluate_codes(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values and statuses of designs given as integer codes (one row per design), by
        one lookup in the tables."""
        index = flat_index(np.asarray(codes, dtype=np.int64), self._radix)
        return self.values[index], self.statuses[index]

    def __call__(self, designs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        codes = self.space.design_codes(designs)
        if (codes < 0).any():
            raise ValueError("a design value lies outside its parameter's domain")
        return self.evaluate_codes(codes)


def flat_index(codes: np.ndarray, place_values: np.ndarray) -> np.ndarray:
    """Row-major flat index of each row of design codes."""
    return np.asarray(codes, dtype=np.int64) @ place_values
