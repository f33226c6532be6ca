"""How a campaign builds its stages: each from its own settings section and the parts the
campaign holds (store, executor, spaces, transferred samples), with the Dask backend plugged in
where the configuration asks for it.

:class:`CampaignStages` is the only place that knows which section configures which stage; the
stages themselves (``_stage_*.py``) know only their settings and the
:class:`~._stage_context.StageContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu.campaign._config import CampaignConfig
from mlkaps_gpu.campaign._setup import Setup
from mlkaps_gpu.campaign._stage_codegen import CodegenStage
from mlkaps_gpu.campaign._stage_confirmation import ConfirmationStage
from mlkaps_gpu.campaign._stage_context import Progress, StageContext
from mlkaps_gpu.campaign._stage_decisions import DecisionStage
from mlkaps_gpu.campaign._stage_modeling import ModelingStage, TrainingSamples
from mlkaps_gpu.campaign._stage_optimization import Cluster, OptimizationStage
from mlkaps_gpu.campaign._stage_sampling import Remote, SamplingStage
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.sampling import SAMPLERS, Sampler, SamplerParts
from mlkaps_gpu.space import Space, validity_edges
from mlkaps_gpu.surrogate import BootstrapEnsemble

#: Largest grid whose points GA-Adaptive exploits at (random input points beyond).
EXPLOIT_GRID_LIMIT = 100_000


class CampaignStages:
    """The stages of one campaign, built on demand.

    Args:
        config: the validated configuration (one section per stage).
        setup: the space and executor it runs with.
        directory: the campaign directory.
        store: its measurements.
    """

    def __init__(
        self, config: CampaignConfig, setup: Setup, directory: Path, store: SampleStore
    ) -> None:
        self.config = config
        self.setup = setup
        self.directory = directory
        self.store = store
        self._sampling_space: Space | None = None
        self._training: TrainingSamples | None = None
        self._decisions: DecisionStage | None = None
        self._edges: dict[float, pd.DataFrame] = {}  # per confirmation share, found once

    @property
    def sampling_space(self) -> Space:
        """The full space, or one with fixed inputs, and where the executor knows which
        configurations exist (a replay's data) and they leave out some that the constraints
        allow, those only (built on first use)."""
        if self._sampling_space is None:
            fixed = self.config.sampling.fixed
            space = self.setup.space
            space = space.with_fixed_inputs(fixed) if fixed else space
            known = self.setup.executor.known_designs()
            if known is not None:
                restricted = space.with_allowed_designs(*known)
                if restricted.allowed_designs_restrict():
                    space = restricted
            self._sampling_space = space
        return self._sampling_space

    def grid(self) -> pd.DataFrame:
        """The input grid of ``[optimization] grid`` over the sampling space (a table replay:
        its recorded input points)."""
        space = self.sampling_space
        if space.listed_rows is not None:  # a table replay: its recorded input points
            return space.listed_points()
        return space.grid(self.config.optimization.grid)

    def context(self, progress: Progress | None = None) -> StageContext:
        """What every stage is handed (a load probe only where this process measures the
        kernel itself)."""
        local = self.config.execution.backend == "local"
        return StageContext(
            directory=self.directory,
            space=self.setup.space,
            sampling_space=self.sampling_space,
            objectives=list(self.setup.objectives),
            directions=list(self.setup.directions),
            seed=self.config.seed,
            store=self.store,
            executor=self.setup.executor,
            measure_load=local and self.config.kernel.executor != "replay",
            progress=progress,
        )

    @property
    def training(self) -> TrainingSamples:
        """What the models learn from (the ``[transfer]`` sources read once)."""
        if self._training is None:
            self._training = TrainingSamples(
                self.store,
                self.setup.space,
                self.setup.objectives,
                [Path(source) for source in self.config.transfer.sources],
            )
        return self._training

    def ensemble(self) -> BootstrapEnsemble:
        """A new bootstrapped ensemble: GA-Adaptive's model, the decisions' and the trees'."""
        space = self.setup.space
        return BootstrapEnsemble.from_settings(
            self.config.surrogate,
            categorical_features=space.categorical_features,
            seed=self.config.seed,
            input_features=range(len(space.input_names)),
        )

    def sampler(self, budget: int) -> Sampler:
        """A new sampler of ``[sampling] method`` over the sampling space; one that reads
        campaign data (GA-Adaptive) also gets the ensemble, the grid (at most
        :data:`EXPLOIT_GRID_LIMIT` points) and the transferred samples."""
        setup = self.setup
        parts = SamplerParts(
            seed=self.config.seed,
            budget=budget,
            objective=setup.objectives[0],
            maximize=setup.directions[0] == "maximize",
        )
        if SAMPLERS[self.config.sampling.method].uses_campaign_data:
            transfer = self.training.transferred()
            grid = self.grid()
            parts = replace(
                parts,
                model_factory=self.ensemble,
                points=grid if 0 < len(grid) <= EXPLOIT_GRID_LIMIT else None,
                feature_space=setup.space,
                extra_training=transfer if len(transfer) else None,
                warm_start=self.config.transfer.warm_start if len(transfer) else 0.0,
            )
        return Sampler.from_settings(self.config.sampling, self.sampling_space, parts)

    def sampling(
        self,
        budget: int,
        progress: Progress | None = None,
        on_stored: Callable[[], None] | None = None,
    ) -> SamplingStage:
        """The sampling stage of ``[sampling]`` (measuring on Dask workers with the ``dask``
        backend)."""
        return SamplingStage.from_settings(
            self.config.sampling,
            self.context(progress),
            self.sampler(budget),
            budget=budget,
            remote=self._remote(),
            on_stored=on_stored,
        )

    def _remote(self) -> Remote | None:
        if self.config.execution.backend != "dask":
            return None
        # imported here: the Dask backend is optional (mlkaps_gpu[dist])
        from mlkaps_gpu.campaign._distributed import sample_distributed

        def remote(sampler: Sampler, done: int, budget: int, progress: Progress | None) -> float:
            return sample_distributed(
                self.config,
                sampler,
                self.store,
                objectives=self.setup.objectives,
                done=done,
                progress=progress,
                budget=budget,
            )

        return remote

    def modeling(self) -> ModelingStage:
        """The modeling stage of ``[surrogate]``."""
        return ModelingStage.from_settings(self.config.surrogate, self.context(), self.training)

    def decisions(self) -> DecisionStage:
        """The decisions and trees stage of ``[trees]``, one per campaign object: the
        optimization stage and the confirmation share its evidence while no measurement was
        added."""
        if self._decisions is None:
            self._decisions = DecisionStage.from_settings(
                self.config.trees,
                self.context(),
                surrogate=self.config.surrogate,
                training=self.training,
            )
        return self._decisions

    def optimization(
        self, progress: Progress | None = None, *, from_evidence: bool = False
    ) -> OptimizationStage:
        """The optimization stage of ``[optimization]`` (the decisions' evidence may replace
        its optima with ``from_evidence``; NSGA-II chunks on Dask workers with ``dask``)."""
        cluster: Cluster | None = None
        if self.config.execution.backend == "dask":
            from mlkaps_gpu.campaign._distributed import connect

            def cluster() -> Any:
                return connect(self.config.execution, label=self.config.path.name)

        return OptimizationStage.from_settings(
            self.config.optimization,
            self.context(progress),
            decisions=self.decisions() if from_evidence else None,
            cluster=cluster,
        )

    def confirmation(self, decisions: DecisionStage, confirm_share: float) -> ConfirmationStage:
        """The confirmation of ``decisions``'s trees within ``[sampling]``'s budget."""
        return ConfirmationStage.from_settings(
            self.config.sampling,
            decisions.context,
            decisions,
            confirm_share=confirm_share,
            remeasure=self.config.kernel.executor != "replay",
            edges=self.edges(confirm_share),
        )

    def edges(self, confirm_share: float) -> pd.DataFrame:
        """The cells the confirmation measures first, taken from the sampling's budget: each
        configuration where it becomes valid along the grid (:func:`validity_edges`), at most
        as many as the confirmation's reserve (none without one)."""
        if confirm_share not in self._edges:
            reserve = int(round(confirm_share * self.config.sampling.budget))
            self._edges[confirm_share] = (
                validity_edges(self.sampling_space, self.grid(), self.config.seed).head(reserve)
                if reserve > 0
                else self.sampling_space.empty_table()
            )
        return self._edges[confirm_share].copy()

    def codegen(self) -> CodegenStage:
        """The header stage of ``[trees]``."""
        return CodegenStage.from_settings(self.config.trees, self.directory, seed=self.config.seed)


__all__ = ["EXPLOIT_GRID_LIMIT", "CampaignStages"]
