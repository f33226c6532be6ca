"""The decisions stage: from the evidence (measurements, the ensemble with its uncertainty,
neighbouring input points) to one configuration per grid point, then to trees.

The rules themselves live in :mod:`._decisions`; this stage builds the evidence from the
campaign's measurements and fits the trees on the decisions, judged either by the evidence or,
with several objectives or ``prefer_measured = false``, by the saved surrogate's predictions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._decisions import (
    Evidence,
    EvidenceScore,
    decide,
    out_of_bag_error,
)
from mlkaps_gpu.campaign._portfolio import auto_portfolio, limit_configurations
from mlkaps_gpu.campaign._stage_context import StageContext
from mlkaps_gpu.campaign._stage_modeling import TrainingSamples
from mlkaps_gpu.kernels import available_cores
from mlkaps_gpu.surrogate import (
    DEFAULT_MEMBERS,
    BootstrapEnsemble,
    FailureClassifier,
    Surrogate,
    SurrogateSettings,
)
from mlkaps_gpu.trees import (
    FittedSelector,
    RegretOracle,
    Score,
    Selector,
    TreesSettings,
    fit_selector,
)

#: Most boosting rounds of the decisions' ensemble, which keeps the rounds its out-of-bag error
#: asks for from its default on (``BootstrapEnsemble(max_rounds=...)``, decision 0026).
DECISION_MAX_ROUNDS = 1000


@dataclass
class Decided:
    """What the decisions stage returns.

    Attributes:
        optima: one row per grid point with the configuration it ships.
        fitted: the trees fitted on them (``fitted.selector`` answers).
        score: the evidence they were decided and judged with (None when the surrogate's
            predictions judged them).
    """

    optima: pd.DataFrame
    fitted: FittedSelector
    score: EvidenceScore | None = None


class DecisionStage:
    """Decide a configuration per grid point and fit the trees that answer them.

    Args:
        context: the campaign's parts (space, store, objectives, seed).
        settings: the ``[trees]`` section (mode, depth, ``max_configs``).
        ensemble: a new bootstrapped ensemble (the model of the evidence: its estimate from
            centre members that learn from every row, its spread from the bootstrap members;
            decision 0023).
        training: what the ensemble learns from.
    """

    def __init__(
        self,
        context: StageContext,
        settings: TreesSettings,
        *,
        ensemble: Callable[[], BootstrapEnsemble],
        training: TrainingSamples,
    ) -> None:
        self.context = context
        self.settings = settings
        self.ensemble = ensemble
        self.training = training
        self._score: tuple[int, EvidenceScore] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: TreesSettings,
        context: StageContext,
        *,
        surrogate: SurrogateSettings,
        training: TrainingSamples,
    ) -> DecisionStage:
        """The stage of ``[trees]``, its ensemble from ``[surrogate]``."""

        def ensemble() -> BootstrapEnsemble:
            return BootstrapEnsemble.from_settings(
                surrogate,
                categorical_features=context.space.categorical_features,
                seed=context.seed,
                center=DEFAULT_MEMBERS,
                max_rounds=DECISION_MAX_ROUNDS,
                input_features=range(len(context.space.input_names)),
                threads=available_cores(),  # no measurement runs while it predicts
            )

        return cls(context, settings, ensemble=ensemble, training=training)

    def run(self, optima: pd.DataFrame, *, surrogate: Surrogate | None = None) -> Decided:
        """Decide and fit. Without ``surrogate``: every grid point's decision from the
        evidence (measurements and the ensemble fitted now), the trees judged by it; with one
        (several objectives, or ``prefer_measured = false``): the optimizer's optima as they
        are, the trees judged by its predictions."""
        if surrogate is not None:
            return Decided(optima, self.fit_on_predictions(optima, surrogate))
        score = self.evidence_score()
        decided = self.decide(optima, score)
        return Decided(decided, self.fit_on_evidence(decided, score), score)

    def evidence_score(self) -> EvidenceScore:
        """Measurements and the ensemble fitted on every training sample (the transferred ones
        included), for the primary objective, and a classifier of this campaign's failed rows
        (where it has at least two failed and two successful ones); fitted again only once
        measurements were added (the store only grows)."""
        context = self.context
        count = len(context.store)
        if self._score is not None and self._score[0] == count:
            return self._score[1]
        objective = context.objectives[0]
        valid = self.training.table()
        samples = context.store.load()
        evidence = Evidence(samples, context.space, objective, maximize=context.maximize)
        model = self.ensemble()
        target = valid[objective].to_numpy(dtype=float)
        model.log_target = evidence.log_space
        features = context.space.features(valid)
        model.fit(features, target)
        error = out_of_bag_error(model, features, target)
        succeeded = (samples["status"] == "ok").to_numpy() & np.isfinite(
            pd.to_numeric(samples[objective], errors="coerce").to_numpy(dtype=float)
        )
        failures = FailureClassifier.fit_if_informative(
            context.space.features(samples[context.space.names]), ~succeeded, seed=context.seed
        )
        score = EvidenceScore(evidence, model, context.space, model_error=error, failures=failures)
        self._score = (count, score)
        return score

    def decide(self, optima: pd.DataFrame, score: EvidenceScore) -> pd.DataFrame:
        """Every grid point's decision (:func:`decide`), within ``[trees] max_configs``
        distinct configurations (:func:`limit_configurations`; ``auto``: as many as
        :func:`auto_portfolio` finds the evidence tells apart; ``none``: no bound)."""
        space = self.context.space
        decided = decide(optima, score, space, self.context.objectives[0])
        limit = self.settings.max_configs
        if limit is None or limit == "none":
            return decided
        if limit == "auto":
            return auto_portfolio(decided, score, space)
        return limit_configurations(decided, score, space, limit)

    def fit_on_evidence(self, optima: pd.DataFrame, score: EvidenceScore) -> FittedSelector:
        """The trees fitted on the decisions, judged by the evidence: regret from the
        pessimistic estimates (clipped at zero), and never a merge that measurements refute."""
        space = self.context.space
        oracle = RegretOracle(optima, space, score.score, clip=True)
        decisions = optima[space.names].reset_index(drop=True)

        def measured_regret(table: pd.DataFrame) -> np.ndarray:
            return score.measured_regret(table, decisions)

        return self._fit(optima, score.score, oracle=oracle, measured_regret=measured_regret)

    def fit_on_predictions(self, optima: pd.DataFrame, surrogate: Surrogate) -> FittedSelector:
        """The trees fitted on the optima, judged by ``surrogate``'s predictions of the primary
        objective (several objectives, or ``prefer_measured = false``)."""
        sign = -1.0 if self.context.maximize else 1.0
        space = self.context.space

        def score(table: pd.DataFrame) -> np.ndarray:
            return sign * surrogate.predict(space.features(table))

        return self._fit(optima, score)

    def _fit(self, optima: pd.DataFrame, score: Score, **judges: Any) -> FittedSelector:
        settings = self.settings
        return fit_selector(
            optima,
            self.context.space,
            score,
            mode=settings.mode,
            max_depth=settings.max_depth,
            depth_tolerance=settings.depth_tolerance,
            random_state=self.context.seed,
            **judges,
        )

    def answers(self, selector: Selector, optima: pd.DataFrame) -> pd.DataFrame:
        """The selector's configuration at every grid point (inputs and design columns)."""
        space = self.context.space
        inputs = optima[space.input_names].reset_index(drop=True)
        chosen = selector.select(inputs).reset_index(drop=True)
        return pd.concat([inputs, chosen], axis=1)[space.names]


__all__ = ["Decided", "DecisionStage"]
