"""The optimization stage: the surrogates' best configuration at every grid point, written to
``optima.csv`` (and the Pareto fronts to ``pareto.csv`` with several objectives).

Points that admit no valid configuration are dropped; with a decisions stage (decisions from
evidence), a measured configuration replaces the predicted optimum where the measurements say
it is better (``source`` column: ``surrogate`` or ``measured``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu.campaign._decisions import decide
from mlkaps_gpu.campaign._directory import atomic_csv
from mlkaps_gpu.campaign._stage_context import StageContext
from mlkaps_gpu.campaign._stage_decisions import DecisionStage
from mlkaps_gpu.optimize import GridOptimizer, OptimizationSettings
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import Surrogate

#: optima.csv columns read back as numbers (empty: NaN).
NUMERIC_PREFIXES = ("predicted_", "measured_", "best_measured_", "uncertainty", "header_")

#: A connection to a Dask cluster: a context manager giving ``(client, workers)``.
Cluster = Callable[[], AbstractContextManager[tuple[Any, int]]]


class OptimizationStage:
    """Optimize the surrogates over the grid and write the optima.

    Args:
        context: the campaign's parts (directory, space, objectives).
        optimizer: the grid optimizer.
        decisions: the decisions stage whose evidence may replace predicted optima (None:
            the predictions decide).
        cluster: Dask workers the NSGA-II grid chunks go to (None: this process).
    """

    def __init__(
        self,
        context: StageContext,
        optimizer: GridOptimizer,
        *,
        decisions: DecisionStage | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self.context = context
        self.optimizer = optimizer
        self.decisions = decisions
        self.cluster = cluster

    @classmethod
    def from_settings(
        cls,
        settings: OptimizationSettings,
        context: StageContext,
        *,
        decisions: DecisionStage | None = None,
        cluster: Cluster | None = None,
    ) -> OptimizationStage:
        """The stage of ``[optimization]``, reporting ``("optimization", done, total)``."""

        def report(done: int, total: int) -> None:
            context.report("optimization", done, total)

        optimizer = GridOptimizer.from_settings(
            settings,
            context.space,
            objectives=context.objectives,
            directions=context.directions,
            seed=context.seed,
            progress=report,
        )
        return cls(context, optimizer, decisions=decisions, cluster=cluster)

    def run(self, models: Sequence[Surrogate], grid: pd.DataFrame) -> dict[str, Any]:
        """Optimize ``models`` (one per objective) at every point of ``grid``; returns the
        stage's details: ``grid_points``, ``from_measurements``, ``method`` (the one ``auto``
        chose) and ``seconds``."""
        context, optimizer = self.context, self.optimizer
        started = time.perf_counter()
        optima = self._optimize(list(models), grid)
        method = optima.attrs.get("method", optimizer.method)
        optima = optima[optima["n_valid"] != 0].reset_index(drop=True)
        optima["source"] = "surrogate"
        if self.decisions is not None:
            score = self.decisions.evidence_score()
            optima = decide(optima, score, context.space, context.objectives[0])
        atomic_csv(optima, context.directory / "optima.csv")
        if len(context.objectives) > 1 and len(optimizer.fronts_):
            atomic_csv(optimizer.fronts_, context.directory / "pareto.csv")
        return {
            "grid_points": len(optima),
            "from_measurements": int((optima["source"] == "measured").sum()),
            "method": method,
            "seconds": round(time.perf_counter() - started, 3),
        }

    def _optimize(self, models: list[Surrogate], grid: pd.DataFrame) -> pd.DataFrame:
        """The optima; NSGA-II grid chunks go to the cluster's workers where there is one."""
        optimizer = self.optimizer
        if self.cluster is not None and optimizer.chosen_method(grid) == "nsga2":
            # grid chunks on the Dask workers: each chunk carries its own seed, so the result
            # is the single-process one whatever the number of workers
            with self.cluster() as (client, _):
                optimizer.map_chunks = lambda function, items: client.gather(
                    client.map(function, items, pure=False)
                )
                return optimizer.run(models, grid)
        return optimizer.run(models, grid)


def read_optima(path: Path, space: Space) -> pd.DataFrame:
    """``optima.csv`` read back with the types it was written with: every parameter column in
    its parameter's type (categoricals as strings, booleans as ``bool``), the predicted,
    measured and header columns as floats (NaN where empty)."""
    optima = pd.read_csv(path, keep_default_na=False)
    for name in space.names:
        parameter = space.parameters[name]
        kind = parameter.kind
        if kind == "categorical":
            optima[name] = optima[name].astype(str).astype(object)
        elif kind == "bool":
            optima[name] = optima[name].map(
                lambda v: v if isinstance(v, bool) else str(v) == "True"
            )
        else:
            optima[name] = optima[name].astype(parameter.dtype)
    for column in optima.columns:
        if column.startswith(NUMERIC_PREFIXES):
            optima[column] = pd.to_numeric(optima[column], errors="coerce")
    return optima


__all__ = ["OptimizationStage", "read_optima"]
