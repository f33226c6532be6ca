"""Bayesian optimization over the valid designs of one input point.

A Gaussian process (``_gaussian_process``) on the embedding of the codes in [0, 1]^N (cell
centres, see ``_embedding``) models the objective (its logarithm when every value is positive).
The acquisition is maximised only over valid designs not yet measured: all of them when there
are at most ``max_candidates``, else a fixed random sample of that many. Failed measurements are
left out of the model (the design is just never proposed again).

The run starts with a Latin hypercube of ``initial_samples`` designs repaired to valid ones. The
hyperparameters are refitted whenever the number of successful observations has grown by the
factor ``refit_growth`` since the last fit; in between observations are added with the
hyperparameters held (an exact rank-one update).

Acquisitions: ``ei``, ``pi``, ``lcb``, and two portfolios of the three (after Willemsen et al.,
"Bayesian Optimization for auto-tuning GPU kernels"):

- ``multi``: every active acquisition proposes its best candidate each iteration and all
  proposals are measured together; each acquisition keeps a discounted score of how its proposal
  ranked (0 best, 1 worst); after ``warmup`` iterations the worst-scoring one is dropped while
  its score exceeds the best one's by more than ``discard_margin`` (one always remains);
- ``advanced_multi``: one proposal per iteration, drawn among the acquisitions' nominees with
  probabilities ``softmax(gains)``, where each acquisition's gain accumulates the negated
  (standardised) posterior mean at its nominee (the GP-Hedge rule of Hoffman et al., 2011).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from threadpoolctl import threadpool_limits

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._embedding import Embedding
from mlkaps_gpu.search._problem import SearchProblem
from mlkaps_gpu.surrogate import (
    ACQUISITIONS,
    CandidateGaussianProcess,
    standardised_acquisition,
)

BOAcquisition = Literal["ei", "pi", "lcb", "multi", "advanced_multi"]
BO_ACQUISITIONS: tuple[str, ...] = (*ACQUISITIONS, "multi", "advanced_multi")


class BayesianOptimization(Strategy):
    """Bayesian optimization with a Gaussian process.

    Args:
        acquisition: ``ei``, ``pi``, ``lcb``, ``multi`` or ``advanced_multi``.
        initial_samples: designs of the initial Latin hypercube.
        refit_growth: refit the hyperparameters when the observations grew by this factor.
        max_candidates: most candidate designs the acquisition is evaluated on.
        exploration: ``xi`` of EI and PI, in standard deviations of the targets.
        kappa: weight of the standard deviation in LCB.
        log_target: model the logarithm of positive objectives.
        discount: per-iteration discount of the ``multi`` scores.
        warmup: iterations before ``multi`` may drop an acquisition.
        discard_margin: score gap above which ``multi`` drops the worst acquisition.
        nu: Matern smoothness.
    """

    def __init__(
        self,
        *,
        acquisition: BOAcquisition = "ei",
        initial_samples: int = 10,
        refit_growth: float = 2.0,
        max_candidates: int = 20_000,
        exploration: float = 0.01,
        kappa: float = 2.0,
        log_target: bool = True,
        discount: float = 0.65,
        warmup: int = 5,
        discard_margin: float = 1.0,
        nu: float = 2.5,
    ) -> None:
        if acquisition not in BO_ACQUISITIONS:
            raise ValueError(f"unknown acquisition {acquisition!r} (allowed: {BO_ACQUISITIONS})")
        if refit_growth <= 1.0:
            raise ValueError("refit_growth must exceed 1")
        self.acquisition = acquisition
        self.initial_samples = initial_samples
        self.refit_growth = refit_growth
        self.max_candidates = max_candidates
        self.exploration = exploration
        self.kappa = kappa
        self.log_target = log_target
        self.discount = discount
        self.warmup = warmup
        self.discard_margin = discard_margin
        self.nu = nu
        self.name = f"bo_{acquisition}"

    def _run(self, problem: SearchProblem, rng: np.random.Generator) -> None:
        # the matrices are small: BLAS threads cost more than they save (many times more on a
        # busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            _BayesianRun(self, problem, rng).run()


class _BayesianRun:
    """State of one Bayesian optimization run."""

    def __init__(
        self, options: BayesianOptimization, problem: SearchProblem, rng: np.random.Generator
    ) -> None:
        self.options = options
        self.problem = problem
        self.rng = rng
        self.embedding = Embedding(problem.sizes)
        if problem.valid_codes is not None and len(problem.valid_codes) <= options.max_candidates:
            codes = problem.valid_codes
        else:
            codes = np.unique(problem.random_valid(options.max_candidates, rng), axis=0)
        self.codes = codes
        self.points = self.embedding.to_unit(codes)
        self.index = {int(key): row for row, key in enumerate(problem.flat(codes))}
        self.available = ~problem.is_measured(codes)
        self.observed_points: list[np.ndarray] = []
        self.observed_values: list[float] = []
        self.model: CandidateGaussianProcess | None = None
        self.fitted_on = 0
        self.use_log = options.log_target
        self.scores = {kind: 0.0 for kind in ACQUISITIONS}
        self.active = list(ACQUISITIONS)
        self.gains = np.zeros(len(ACQUISITIONS))
        self.iterations = 0

    # -------------------------------------------------------------------------- the loop
    def run(self) -> None:
        initial = np.unique(
            self.problem.latin_hypercube(self.options.initial_samples, self.rng, repair=True),
            axis=0,
        )
        self.measure(initial[self.rng.permutation(len(initial))])
        while True:
            if len(self.observed_values) < 2 or not self.available.any():
                self.measure(self.problem.random_valid(1, self.rng, unseen=True))
                continue
            self.update_model()
            self.iterations += 1
            if self.options.acquisition == "multi":
                self.multi_step()
            elif self.options.acquisition == "advanced_multi":
                self.hedge_step()
            else:
                pick = self.best_candidate(self.options.acquisition)  # type: ignore[arg-type]
                self.measure(self.codes[[pick]])

    def measure(self, codes: np.ndarray) -> np.ndarray:
        """Evaluate designs; feed the successful ones to the model."""
        fitness = self.problem.evaluate(codes)
        for code, value in zip(codes, fitness, strict=True):
            row = self.index.get(int(self.problem.flat(code[None, :])[0]))
            if row is not None:
                self.available[row] = False
            if not np.isfinite(value):
                continue
            if self.use_log and value <= 0:
                self.use_log = False
                self.model = None  # targets change scale: refit
            point = self.embedding.to_unit(code)[0]
            self.observed_points.append(point)
            self.observed_values.append(float(value))
            if self.model is not None:
                self.model.add(point, self.target(float(value)))
        return fitness

    def target(self, value: float) -> float:
        return float(np.log(value)) if self.use_log else value

    def update_model(self) -> None:
        n = len(self.observed_values)
        if self.model is not None and n < self.options.refit_growth * self.fitted_on:
            return
        values = np.array(self.observed_values)
        targets = np.log(values) if self.use_log else values
        seed = int(self.rng.integers(2**31))
        self.model = CandidateGaussianProcess(self.points, nu=self.options.nu, seed=seed)
        self.model.fit(np.array(self.observed_points), targets)
        self.fitted_on = n

    # ---------------------------------------------------------------------- acquisitions
    def acquisition(self, kind: str) -> np.ndarray:
        assert self.model is not None
        best = self.target(min(self.observed_values))
        values = standardised_acquisition(
            kind,  # type: ignore[arg-type]
            self.model,
            best,
            exploration=self.options.exploration,
            kappa=self.options.kappa,
        )
        return np.where(self.available, values, -np.inf)

    def best_candidate(self, kind: str) -> int:
        return int(np.argmax(self.acquisition(kind)))

    def multi_step(self) -> None:
        picks = {kind: self.best_candidate(kind) for kind in self.active}
        distinct = list(dict.fromkeys(picks.values()))
        fitness = self.measure(self.codes[distinct])
        observed = dict(zip(distinct, fitness, strict=True))
        values = np.array([observed[picks[kind]] for kind in self.active])
        finite = values[np.isfinite(values)]
        low = finite.min() if len(finite) else 0.0
        high = finite.max() if len(finite) else 1.0
        for kind, value in zip(self.active, values, strict=True):
            rank = 1.0 if not np.isfinite(value) else (value - low) / (high - low or 1.0)
            self.scores[kind] = self.options.discount * self.scores[kind] + rank
        if self.iterations >= self.options.warmup and len(self.active) > 1:
            worst = max(self.active, key=lambda kind: self.scores[kind])
            best = min(self.active, key=lambda kind: self.scores[kind])
            if self.scores[worst] - self.scores[best] > self.options.discard_margin:
                self.active.remove(worst)

    def hedge_step(self) -> None:
        assert self.model is not None
        nominees = [self.best_candidate(kind) for kind in ACQUISITIONS]
        weights = np.exp(self.gains - self.gains.max())
        choice = int(self.rng.choice(len(nominees), p=weights / weights.sum()))
        self.measure(self.codes[[nominees[choice]]])
        if self.model is None:
            return
        standard_mean = (self.model.mean_ - self.model.offset_) / self.model.scale_
        self.gains -= standard_mean[nominees]
