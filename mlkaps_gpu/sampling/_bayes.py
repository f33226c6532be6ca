"""Bayesian sampling of the joint input x design space (after Willemsen et al., "Bayesian
Optimization for auto-tuning GPU kernels", as Kernel Tuner's ``bayes_opt``).

Per batch:

1. **Model.** A Gaussian process (the GP core of ``mlkaps_gpu.search``: scikit-learn's
   ``GaussianProcessRegressor``, ``Constant * Matern(2.5) + White``, hyperparameters fitted) on
   the unit-cube position of every successful measurement (codes as cell centres, range inputs
   as the samplers draw them, categoricals one-hot), target ``log(objective)`` where every value
   is positive. Failed or invalid measurements are left out, never given made-up values. Beyond
   ``gp_limit`` successful measurements, where the O(n^3) GP stops paying off, an ensemble of
   bagged LightGBM models gives the mean and spread instead.
2. **Candidates.** Only valid, never measured nor handed out configurations: all of them when
   the valid rows can be enumerated (at most ``max_candidates``, a random subset beyond),
   otherwise every valid design (or ``designs_per_context`` random ones) of random input points.
3. **Contexts.** Rows sharing their inputs form a context; each context's incumbent is the best
   of its measurements and of the model's mean over its candidates, and acquisitions measure
   improvement over the candidate's own context, so fast inputs do not take the whole batch.
4. **Acquisition** ``ei``, ``pi`` or ``lcb``, with the *contextual-variance* exploration factor
   ``xi = (mean std now / mean std of the first model) / (initial mean / incumbent mean)``
   (Jasrasaria and Pyzer-Knapp, as Kernel Tuner), used as EI/PI's margin (standardised units)
   and LCB's weight; or a portfolio of the three:

   - ``multi``: each round every active acquisition nominates its best candidate; an
     acquisition that nominated a duplicate in ``skip_after`` of its last rounds is dropped
     unless its discounted score is the best of those eligible;
   - ``advanced_multi``: the acquisitions nominate in turn (no duplicates); an acquisition whose
     discounted score is more than ``required_improvement`` worse than the mean of the active
     ones ``skip_after`` times is dropped, one that is that much better ``skip_after`` times
     is kept alone.

   An acquisition's score of a measured nominee is ``objective / incumbent of its context``
   (lower is better; a failed nominee counts as the median score), discounted by ``discount``
   per round (a discounted mean, so rounds cut by the end of a batch do not bias it).
5. **Batch.** After every round the nominees join the model at their predicted mean ("kriging
   believer", a rank-one update of the posterior), so the rest of the batch spreads out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from scipy.stats import qmc
from threadpoolctl import threadpool_limits

from mlkaps_gpu.sampling._base import Sampler, SamplerParts, _enumerate_valid_rows
from mlkaps_gpu.sampling._hvs import unit_coordinates
from mlkaps_gpu.sampling._random import LHSSampler
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import CandidateGaussianProcess, LightGBMSurrogate, acquisition_values

if TYPE_CHECKING:
    from mlkaps_gpu.sampling._settings import SamplingSettings

BayesAcquisition = Literal["ei", "pi", "lcb", "multi", "advanced_multi"]
BAYES_ACQUISITIONS: tuple[str, ...] = ("ei", "pi", "lcb", "multi", "advanced_multi")
#: The portfolio of the multi modes, in Kernel Tuner's order (the first one is never skipped
#: by ``multi`` unless another one scores better).
PORTFOLIO: tuple[str, ...] = ("ei", "pi", "lcb")
#: Most float64 entries of the GP's candidate cross-covariance (memory bound, ~160 MB).
_CROSS_ENTRIES = 20_000_000
#: Bounds of the contextual exploration factor.
_XI_RANGE = (0.0, 5.0)


def model_features(space: Space, table: pd.DataFrame) -> np.ndarray:
    """Unit-cube features of rows for the GP: ``unit_coordinates`` with every categorical of
    more than two values one-hot (scaled so two categories lie 1 apart, as the cube's side)."""
    unit = unit_coordinates(space, table)
    columns = []
    for index, name in enumerate(space.names):
        parameter = space.parameters[name]
        if parameter.kind == "categorical" and parameter.n_values > 2:
            codes = parameter.codes(table[name].to_numpy())
            columns.append(np.eye(parameter.n_values)[codes] / np.sqrt(2.0))
        else:
            columns.append(unit[:, [index]])
    return np.hstack(columns) if columns else np.zeros((len(table), 0))


class _EnsembleModel:
    """Mean and spread of bagged LightGBM models over fixed candidates (large data)."""

    def __init__(self, candidates: np.ndarray, *, members: int, seed: int) -> None:
        self.candidates = candidates
        self.members = members
        self.seed = seed

    def fit(self, points: np.ndarray, targets: np.ndarray) -> _EnsembleModel:
        self.offset_ = float(targets.mean())
        self.scale_ = float(targets.std()) or 1.0
        params = {"bagging_fraction": 0.7, "bagging_freq": 1, "feature_fraction": 0.8}
        predictions = np.array(
            [
                LightGBMSurrogate(n_estimators=150, seed=self.seed + m, params=params)
                .fit(points, targets)
                .predict(self.candidates)
                for m in range(self.members)
            ]
        )
        self.mean_ = predictions.mean(axis=0)
        self.std_ = predictions.std(axis=0)
        return self

    def add(self, point: np.ndarray, target: float) -> None:
        """No believer update: the ensemble's spread does not shrink around nominees."""


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}")


class BayesianSampler(Sampler):
    """Bayesian sampling: acquisitions of a surrogate with uncertainty choose every batch.

    Args:
        space: the search space.
        seed: random seed.
        objective: the objective column modelled.
        maximize: whether the objective is maximised.
        acquisition: ``ei``, ``pi``, ``lcb``, ``multi`` or ``advanced_multi``.
        initial: successful measurements gathered by LHS before the first model.
        log_target: model ``log(objective)`` (None: when every value is positive).
        max_candidates: most candidate rows the acquisition is evaluated on per batch.
        designs_per_context: designs per random input point (spaces not enumerated).
        gp_limit: most successful measurements modelled by the GP; an ensemble beyond.
        ensemble_members: LightGBM models of the ensemble.
        discount: per-round discount of the portfolio scores (None: 0.65 for ``multi``, 0.95
            for ``advanced_multi``, Kernel Tuner's values).
        required_improvement: relative margin of ``advanced_multi``'s comparisons.
        skip_after: rounds of evidence before a portfolio member is dropped or kept alone.
    """

    @classmethod
    def from_parts(
        cls, space: Space, parts: SamplerParts, settings: SamplingSettings | None = None
    ) -> Sampler:
        """This sampler on the primary objective and its direction
        (:meth:`Sampler.from_parts`)."""
        return cls(space, seed=parts.seed, objective=parts.objective, maximize=parts.maximize)

    def __init__(
        self,
        space: Space,
        *,
        seed: int = 0,
        objective: str = "time",
        maximize: bool = False,
        acquisition: BayesAcquisition = "advanced_multi",
        initial: int = 20,
        log_target: bool | None = None,
        max_candidates: int = 10_000,
        designs_per_context: int = 256,
        gp_limit: int = 1000,
        ensemble_members: int = 8,
        discount: float | None = None,
        required_improvement: float = 0.1,
        skip_after: int = 5,
    ) -> None:
        super().__init__(space, seed=seed)
        if acquisition not in BAYES_ACQUISITIONS:
            raise ValueError(
                f"unknown acquisition {acquisition!r} (allowed: {', '.join(BAYES_ACQUISITIONS)})"
            )
        _check_positive(
            initial=initial,
            max_candidates=max_candidates,
            designs_per_context=designs_per_context,
            gp_limit=gp_limit,
            ensemble_members=ensemble_members,
            skip_after=skip_after,
        )
        self.objective = objective
        self.maximize = maximize
        self.acquisition = acquisition
        self.initial = initial
        self.log_target = log_target
        self.max_candidates = max_candidates
        self.designs_per_context = designs_per_context
        self.gp_limit = gp_limit
        self.ensemble_members = ensemble_members
        self.discount = (
            discount if discount is not None else (0.65 if acquisition == "multi" else 0.95)
        )
        self.required_improvement = required_improvement
        self.skip_after = skip_after
        self._initial_sampler = LHSSampler(space, seed=seed)
        self._first_std: float | None = None
        self._initial_mean: float | None = None
        self.exploration_: float | None = None
        self._reset_portfolio()

    def _reset_portfolio(self) -> None:
        """The acquisition portfolio's initial state (every member active, no evidence)."""
        self.active_: list[str] = list(PORTFOLIO)
        self.single_: str | None = None
        self._scores: dict[str, list[float]] = {kind: [] for kind in PORTFOLIO}
        self._duplicates: dict[str, list[int]] = {kind: [] for kind in PORTFOLIO}
        self._worse = dict.fromkeys(PORTFOLIO, 0)
        self._better = dict.fromkeys(PORTFOLIO, 0)
        self._pending: dict[tuple[Any, ...], tuple[int, str, float]] = {}
        self._rounds: dict[int, dict[str, Any]] = {}
        self._round_counter = 0

    def restore(self, rows: pd.DataFrame, results: pd.DataFrame, *, asks: int) -> None:
        """Resume exactly: the model's reference values and the portfolio's state depend on
        the path, so the stored batches (``results["batch"]``) are asked again, with the same
        random streams and the same history, and told as stored. Without batch numbers (or
        when they do not match ``asks``) the history is told at once and the state restarts."""
        batches = results["batch"].to_numpy() if "batch" in results else None
        order = pd.unique(batches) if batches is not None else []
        if batches is None or len(order) != asks:
            super().restore(rows, results, asks=asks)
            return
        rows, results = rows.reset_index(drop=True), results.reset_index(drop=True)
        for index, batch in enumerate(order):
            chosen = np.flatnonzero(batches == batch)
            self._n_asks = index
            self._ask(len(chosen), self._rng())
            self.tell(rows.iloc[chosen], results.iloc[chosen])
        self._n_asks = int(asks)

    # -------------------------------------------------------------------------- targets
    def _targets(self, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Which rows are successful measurements, and their targets (to minimise)."""
        values = pd.to_numeric(table[self.objective], errors="coerce").to_numpy(np.float64)
        ok = (table["status"] == "ok").to_numpy() & np.isfinite(values)
        if self._use_log():
            ok &= values > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.log(values)
        return ok, (-values if self.maximize else values)

    def _use_log(self) -> bool:
        if self.log_target is not None:
            return self.log_target
        history = self.history_
        values = pd.to_numeric(history[self.objective], errors="coerce")
        values = values[(history["status"] == "ok") & np.isfinite(values)]
        return bool(len(values)) and bool((values > 0).all())

    def _score_scale(self, targets: np.ndarray) -> float:
        return 1.0 if self._use_log() else float(np.std(targets)) or 1.0

    # ---------------------------------------------------------------------------- asking
    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        history = self.history_
        ready = not history.empty and {self.objective, "status"} <= set(history.columns)
        ok, targets = self._targets(history) if ready else (np.zeros(0, bool), np.zeros(0))
        if ok.sum() < max(self.initial, 2):
            return self._initial_sampler._ask(n, rng)
        if self._initial_mean is None:
            self._initial_mean = float(targets[ok].mean())
        pool = self._pool(rng, int(ok.sum()))
        if len(pool) == 0:
            return self.space.empty_table()
        # small dense algebra: a BLAS thread team costs more than it saves there, and many
        # times more on a busy machine (measured 50x on a 150 x 150 Cholesky, 2 loaded cores)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._choose(pool, history, ok, targets, n, rng)

    def _choose(
        self,
        pool: pd.DataFrame,
        history: pd.DataFrame,
        ok: np.ndarray,
        targets: np.ndarray,
        n: int,
        rng: np.random.Generator,
    ) -> pd.DataFrame:
        model = self._model(
            model_features(self.space, pool),
            model_features(self.space, history.loc[ok, self.space.names]),
            targets[ok],
            seed=int(rng.integers(2**31 - 1)),
        )
        groups, incumbents = self._incumbents(pool, model.mean_, history[ok], targets[ok])
        self.exploration_ = self._exploration(model, incumbents)
        picks = self._select(model, groups, incumbents, n, pool)
        return pool.iloc[picks].reset_index(drop=True)

    def _model(
        self, candidates: np.ndarray, points: np.ndarray, targets: np.ndarray, *, seed: int
    ) -> CandidateGaussianProcess | _EnsembleModel:
        if len(targets) > self.gp_limit:
            return _EnsembleModel(candidates, members=self.ensemble_members, seed=seed).fit(
                points, targets
            )
        return CandidateGaussianProcess(candidates, seed=seed).fit(points, targets)

    def _pool(self, rng: np.random.Generator, n_observed: int) -> pd.DataFrame:
        """Valid rows never measured nor handed out, where the acquisition is evaluated."""
        limit = int(min(self.max_candidates, max(1000, _CROSS_ENTRIES // (2 * n_observed + 16))))
        if self._finite_rows is None:
            self._finite_rows = _enumerate_valid_rows(self.space)
        if isinstance(self._finite_rows, pd.DataFrame):
            rows = self._filter_new(self._finite_rows)
        else:
            rows = self._filter_new(self._context_rows(rng, limit))
        if len(rows) > limit:
            rows = rows.iloc[np.sort(rng.choice(len(rows), size=limit, replace=False))]
        return rows.reset_index(drop=True)

    def _context_rows(self, rng: np.random.Generator, limit: int) -> pd.DataFrame:
        """Valid designs of random input points (Latin hypercube over the inputs)."""
        space = self.space
        contexts = max(1, limit // self.designs_per_context)
        if space.inputs:
            unit = qmc.LatinHypercube(d=len(space.inputs), rng=rng).random(contexts)
            # (a table replay's space snaps each point to the nearest recorded input point)
            inputs = space.inputs_from_unit(unit)
        else:
            inputs = pd.DataFrame(index=range(1))
        owners, blocks = [], []
        for index in range(len(inputs)):
            point = inputs.iloc[[index]].reset_index(drop=True)
            if space.enumerable:
                codes = space.valid_design_codes(point.iloc[0].to_dict())
                if len(codes) > self.designs_per_context:
                    codes = codes[rng.choice(len(codes), self.designs_per_context, replace=False)]
            else:
                repeated = point.iloc[np.zeros(self.designs_per_context, dtype=np.int64)]
                codes, found = space.sample_designs(repeated, rng, max_rounds=20)
                codes = np.unique(codes[found], axis=0)
            owners.append(np.full(len(codes), index, dtype=np.int64))
            blocks.append(np.asarray(codes, dtype=np.int64).reshape(-1, len(space.design)))
        rows = np.concatenate(owners)
        if len(rows) == 0:
            return space.empty_table()
        return space.assemble(inputs.iloc[rows].reset_index(drop=True), np.concatenate(blocks))

    def _incumbents(
        self, pool: pd.DataFrame, mean: np.ndarray, measured: pd.DataFrame, targets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Context of each candidate, and each context's incumbent (the best of its
        measurements and of the model's mean over its candidates)."""
        names = self.space.input_names
        if not names:
            groups = np.zeros(len(pool), dtype=np.int64)
            best = min(float(mean.min()), float(targets.min()))
            return groups, np.array([best])
        keys = pd.MultiIndex.from_frame(pool[names])
        groups, uniques = pd.factorize(keys)
        incumbents = pd.Series(mean).groupby(groups).min().to_numpy()
        observed = pd.Series(targets, index=pd.MultiIndex.from_frame(measured[names]))
        best_observed = observed.groupby(level=list(range(len(names)))).min()
        matched = best_observed.reindex(pd.MultiIndex.from_tuples(list(uniques), names=names))
        return groups, np.fmin(incumbents, matched.to_numpy(dtype=np.float64))

    def _exploration(
        self, model: CandidateGaussianProcess | _EnsembleModel, incumbents: np.ndarray
    ) -> float:
        """Contextual variance: shrinks as the model grows certain and the incumbents improve
        on the initial sample (Kernel Tuner's ``explorationfactor = "CV"``)."""
        spread = float(np.mean(model.std_))
        if self._first_std is None:
            self._first_std = spread or 1.0
        assert self._initial_mean is not None
        if self._use_log():
            improvement = float(np.exp(self._initial_mean - incumbents.mean()))
        elif self._initial_mean > 0 and incumbents.mean() > 0:
            improvement = self._initial_mean / float(incumbents.mean())
        else:
            improvement = 1.0
        xi = spread / self._first_std / max(improvement, 1e-12)
        return float(np.clip(xi, *_XI_RANGE))

    # ------------------------------------------------------------------------- selection
    def _values(
        self,
        kind: str,
        model: CandidateGaussianProcess | _EnsembleModel,
        groups: np.ndarray,
        incumbents: np.ndarray,
        available: np.ndarray,
    ) -> np.ndarray:
        """Acquisition of each candidate relative to its context's incumbent (standardised)."""
        gap = (model.mean_ - incumbents[groups]) / model.scale_
        xi = self.exploration_ or 0.0
        values = acquisition_values(
            kind,  # type: ignore[arg-type]
            gap,
            model.std_ / model.scale_,
            0.0,
            exploration=xi,
            kappa=xi,
        )
        return np.where(available, values, -np.inf)

    def _select(
        self,
        model: CandidateGaussianProcess | _EnsembleModel,
        groups: np.ndarray,
        incumbents: np.ndarray,
        n: int,
        pool: pd.DataFrame,
    ) -> list[int]:
        available = np.ones(len(pool), dtype=bool)
        points = model.candidates
        picks: list[int] = []
        keys = self.space.key(pool)
        while len(picks) < n and available.any():
            kinds: list[str]
            if self.acquisition in PORTFOLIO:
                kinds = [str(self.acquisition)]
            else:
                kinds = [self.single_] if self.single_ is not None else list(self.active_)
            nominees: list[tuple[int, str]] = []
            duplicates: list[tuple[str, str]] = []
            for kind in kinds:
                if len(picks) + len(nominees) >= n or not available.any():
                    break
                best = int(np.argmax(self._values(kind, model, groups, incumbents, available)))
                earlier = [k for index, k in nominees if index == best]
                if earlier:  # only ``multi`` nominates from the same state: a duplicate
                    duplicates.append((kind, earlier[0]))
                    continue
                nominees.append((best, kind))
                if self.acquisition != "multi":
                    available[best] = False
            for best, _ in nominees:
                available[best] = False
                picks.append(best)
                model.add(points[best], float(model.mean_[best]))
            if self.acquisition not in PORTFOLIO:
                self._register_round(nominees, duplicates, keys, groups, incumbents)
        return picks

    # -------------------------------------------------------------------------- portfolio
    def _register_round(
        self,
        nominees: list[tuple[int, str]],
        duplicates: list[tuple[str, str]],
        keys: list[tuple[Any, ...]],
        groups: np.ndarray,
        incumbents: np.ndarray,
    ) -> None:
        number = self._round_counter
        self._round_counter += 1
        self._rounds[number] = {
            "remaining": len(nominees),
            "scores": {},
            "nominated": [kind for _, kind in nominees],
            "duplicates": duplicates,
        }
        for best, kind in nominees:
            self._pending[keys[best]] = (number, kind, float(incumbents[groups[best]]))

    def _tell(self, told: pd.DataFrame) -> None:
        if self.acquisition in PORTFOLIO or not self._pending:
            return
        if self.objective not in told or "status" not in told:
            return
        ok, targets = self._targets(told)
        scale = self._score_scale(targets[ok]) if ok.any() else 1.0
        for key, good, target in zip(self.space.key(told), ok, targets, strict=True):
            entry = self._pending.pop(key, None)
            if entry is None:
                continue
            number, kind, incumbent = entry
            record = self._rounds[number]
            record["scores"][kind] = float(np.exp((target - incumbent) / scale)) if good else None
            record["remaining"] -= 1
            if record["remaining"] == 0:
                self._close_round(self._rounds.pop(number))

    def _close_round(self, record: dict[str, Any]) -> None:
        recorded = [s for scores in self._scores.values() for s in scores]
        fallback = float(np.median(recorded)) if recorded else 1.0
        scores = {k: (fallback if s is None else s) for k, s in record["scores"].items()}
        for kind, score in scores.items():
            self._scores[kind].append(score)
        for kind, original in record["duplicates"]:
            self._scores[kind].append(scores[original])
        if self.acquisition == "multi":
            self._update_multi(record)
        elif self.single_ is None:
            self._update_advanced()

    def _discounted(self, kind: str) -> float:
        scores = np.array(self._scores[kind])
        if len(scores) == 0:
            return float("nan")
        weights = self.discount ** np.arange(len(scores) - 1, -1, -1, dtype=np.float64)
        return float((weights * scores).sum() / weights.sum())

    def _update_multi(self, record: dict[str, Any]) -> None:
        involved = {k for pair in record["duplicates"] for k in pair}
        for kind in self.active_:
            window = self._duplicates[kind]
            window.append(1 if kind in involved else 0)
            del window[: -self.skip_after]
        eligible = [k for k in self.active_ if sum(self._duplicates[k]) >= self.skip_after]
        if len(eligible) > 1:
            keep = min(eligible, key=self._discounted)
            self._duplicates[keep] = []
            self.active_ = [k for k in self.active_ if k == keep or k not in eligible]

    def _update_advanced(self) -> None:
        discounted = {k: self._discounted(k) for k in self.active_}
        if any(np.isnan(v) for v in discounted.values()):
            return
        mean = float(np.mean(list(discounted.values())))
        for kind, value in discounted.items():
            if value > mean * (1 + self.required_improvement):
                self._worse[kind] += 1
            elif value < mean * (1 - self.required_improvement):
                self._better[kind] += 1
        worst = max(self.active_, key=lambda k: (self._worse[k], discounted[k]))
        if self._worse[worst] >= self.skip_after:
            self.active_.remove(worst)
            self._worse = dict.fromkeys(PORTFOLIO, 0)
            self._better = dict.fromkeys(PORTFOLIO, 0)
            if len(self.active_) == 1:
                self.single_ = self.active_[0]
            return
        best = max(self.active_, key=lambda k: (self._better[k], -discounted[k]))
        if self._better[best] >= self.skip_after:
            self.single_ = best

    def describe(self) -> dict[str, Any]:
        """The acquisition and the Gaussian process's active parameters (progress lines)."""
        return {
            "acquisition": self.acquisition,
            "active": list(self.active_),
            "single": self.single_,
            "exploration": self.exploration_,
        }
