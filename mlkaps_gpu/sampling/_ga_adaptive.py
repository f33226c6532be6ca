"""GA-Adaptive sampling (MLKAPS, Fig. 4): exploit a model of the measurements, explore with a
sub-sampler.

0. Warm start (transfer only): with ``extra_training`` (measurements of other architectures),
   the first ``warm_start`` fraction of the budget measures the configurations that did best
   there (ranked by their mean log-ratio to each source input point's best; a configuration not
   measured at a source point counts as that sources' median) on the new machine.
1. Bootstrap: the next ``bootstrap`` fraction of the budget comes from LHS (by default 0.2
   where the inputs take a few values, 0.05 where they take many: decision 0030).
2. Then, per batch, a share ``eps`` of the rows is exploitation and the rest comes from the
   sub-sampler; ``eps`` moves linearly from ``eps_initial`` to ``eps_final`` with the completed
   fraction of the budget. Exploitation (:class:`~mlkaps_gpu.sampling._exploit.Exploiter`)
   refits a bootstrapped LightGBM ensemble on every measurement (one model, the categorical
   inputs as features, so that what one GPU teaches serves the others) and spreads the rows
   over the exploitation points (the campaign's grid, or every value of inputs that take few
   values; where inputs take many values and the points outnumber a batch's rows, two rows at
   each of half as many, so that configurations are compared at one input:
   ``ExploitSettings.contrast``, decision 0027; those points are the half, of twice as many
   drawn at random, where the ensemble's choice is least certain:
   ``ExploitSettings.focus``, decision 0046): at each, the predicted optimum, the optimum
   predicted by a model of the point's own rows alone (a hedge against sharing where a value's
   optimum lies elsewhere), one incumbent of another point, and the best
   ``mean - kappa * sd`` among the valid one-parameter neighbours of the point's incumbent,
   crossovers of good configurations and a random pool of valid configurations (``kappa``
   shrinks over the last evaluations per point; where inputs take many values it is held at
   ``ExploitSettings.spread_kappa``, decision 0032).

By default ``eps`` = 1 throughout: every row after the bootstrap is exploitation, and the
ensemble's spread and the random candidate pool explore (why: ``docs/decisions/0008``).
Proposals already measured are never measured again; every row is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlkaps_gpu.sampling._base import Sampler, SamplerParts
from mlkaps_gpu.sampling._exploit import (
    Exploiter,
    ExploitSettings,
    finite_input_points,
    input_key,
)
from mlkaps_gpu.sampling._random import LHSSampler
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import (
    BootstrapEnsemble,
    FailureClassifier,
    LightGBMSurrogate,
    Surrogate,
)

if TYPE_CHECKING:
    from mlkaps_gpu.sampling._settings import SamplingSettings

#: Default share of the budget sampled by LHS before any exploitation, where the inputs take a
#: few values (every point is revisited batch after batch; the design is what to explore).
DEFAULT_BOOTSTRAP = 0.2
#: The same where the inputs take many values (a size range, a table of shapes): exploitation
#: spreads its batches over random input points, two configurations compared at each
#: (``ExploitSettings.contrast``), and explores the inputs itself; an LHS row is one
#: configuration at one point, evidence about that configuration alone (decision 0030).
MANY_INPUTS_BOOTSTRAP = 0.05
#: Default exploitation shares right after the bootstrap and at the end of the budget (MLKAPS
#: uses 0.3 / 0.8; here no row goes to the sub-sampler unless these are set lower).
DEFAULT_EPS_INITIAL = 1.0
DEFAULT_EPS_FINAL = 1.0
#: The model of one input point's own rows (``ExploitSettings.own_rows``): one LightGBM model
#: of 60 trees (learning rate 0.25), a fifth of an ensemble member's cost, refitted at every
#: exploitation batch for every point of the grid.
OWN_MODEL_TREES = 60
OWN_MODEL_PARAMS = {"learning_rate": 0.25}


class GAAdaptiveSampler(Sampler):
    """Exploitation of surrogate optima mixed with a sub-sampler.

    Args:
        space: the search space.
        seed: random seed.
        budget: total evaluations the campaign will spend (drives the bootstrap and ``eps``).
        objective: the objective column the surrogate learns (minimised unless ``maximize``).
        maximize: whether the objective is maximised.
        bootstrap: fraction of the budget sampled by LHS before any exploitation (None:
            :data:`DEFAULT_BOOTSTRAP` where the inputs take a few values,
            :data:`MANY_INPUTS_BOOTSTRAP` where they take many).
        eps_initial: exploitation share right after the bootstrap.
        eps_final: exploitation share at the end of the budget.
        sub_sampler: ``"lhs"`` (the default: MLKAPS uses HVSr, which did no better in
            ``experiments/sampler_study.py`` and worse than random at two budgets of the ``lu``
            case), ``"hvsr"``, ``"random"``, ``"hvs"`` or ``"bayes"``, or a Sampler factory
            ``(space, seed) -> Sampler``. The sub-sampler is told every measurement (the
            adaptive ones learn from them) and learns the same ``objective``.
        model_factory: builds the bootstrapped ensemble refitted before each exploitation
            batch (default: :class:`BootstrapEnsemble` on the feature space, log target
            when ``log_target``).
        log_target: whether the default ensemble learns ``log(objective)``.
        exploit: how exploitation ranks candidates (:class:`ExploitSettings`).
        points: the input points exploitation measures at (e.g. the campaign's grid); default:
            every input point when the inputs take few values, else random input points.
        feature_space: the space whose feature encoding the surrogate uses (default: ``space``;
            a campaign that samples a restricted space, e.g. one architecture of several,
            passes the full space so that categorical codes agree with ``extra_training``).
        extra_training: measurements taken elsewhere (other campaigns, other architectures)
            added to every surrogate fit, never measured or proposed again (transfer).
        warm_start: fraction of the budget spent first on the configurations that did best in
            ``extra_training`` (default: 0.2 with ``extra_training``, else 0).
    """

    uses_campaign_data = True

    @classmethod
    def from_parts(
        cls, space: Space, parts: SamplerParts, settings: SamplingSettings | None = None
    ) -> Sampler:
        """GA-Adaptive from ``[sampling]`` (bootstrap, exploitation shares, sub-sampler) and
        the campaign's parts: budget, primary objective, model, grid, transferred samples
        (:meth:`Sampler.from_parts`)."""
        shares: dict[str, Any] = {}
        if settings is not None:
            shares = {
                "bootstrap": settings.bootstrap,
                "eps_initial": settings.eps_initial,
                "eps_final": settings.eps_final,
                "sub_sampler": settings.sub_sampler,
            }
        return cls(
            space,
            seed=parts.seed,
            budget=parts.budget,
            objective=parts.objective,
            maximize=parts.maximize,
            model_factory=parts.model_factory,
            points=parts.points,
            feature_space=parts.feature_space,
            extra_training=parts.extra_training,
            warm_start=parts.warm_start,
            **shares,
        )

    def __init__(
        self,
        space: Space,
        *,
        seed: int = 0,
        budget: int = 1000,
        objective: str = "time",
        maximize: bool = False,
        bootstrap: float | None = None,
        eps_initial: float = DEFAULT_EPS_INITIAL,
        eps_final: float = DEFAULT_EPS_FINAL,
        sub_sampler: str | Callable[[Space, int], Sampler] = "lhs",
        model_factory: Callable[[], BootstrapEnsemble] | None = None,
        log_target: bool = True,
        exploit: ExploitSettings | None = None,
        points: pd.DataFrame | None = None,
        feature_space: Space | None = None,
        extra_training: pd.DataFrame | None = None,
        warm_start: float | None = None,
    ) -> None:
        super().__init__(space, seed=seed)
        if budget < 1:
            raise ValueError(f"budget must be positive, got {budget}")
        has_extra = extra_training is not None and len(extra_training) > 0
        if warm_start is None:
            warm_start = 0.2 if has_extra else 0.0
        finite = finite_input_points(space)
        if bootstrap is None:
            bootstrap = DEFAULT_BOOTSTRAP if finite is not None else MANY_INPUTS_BOOTSTRAP
        _check_shares(
            warm_start=warm_start, bootstrap=bootstrap, eps_initial=eps_initial, eps_final=eps_final
        )
        self.budget = budget
        self.objective = objective
        self.maximize = maximize
        self.bootstrap = bootstrap
        self.eps_initial = eps_initial
        self.eps_final = eps_final
        self.sub_sampler = _make_sub_sampler(sub_sampler, space, seed, objective, maximize)
        self.bootstrap_sampler = LHSSampler(space, seed=seed + 2)
        self.feature_space = feature_space or space
        self.model_factory = model_factory or (
            lambda: BootstrapEnsemble(
                categorical_features=self.feature_space.categorical_features,
                log_target=log_target,
                seed=seed,
            )
        )
        self.exploiter = Exploiter(
            space,
            feature_space=self.feature_space,
            objective=objective,
            maximize=maximize,
            settings=exploit,
        )
        self.points = points if points is not None else finite
        self._finite_inputs = finite is not None
        self.n_told = 0
        self.extra_training = extra_training
        self.warm_start = warm_start if has_extra else 0.0
        self._warm_ranking: pd.DataFrame | None = None

    @property
    def _warm_rows(self) -> int:
        return int(round(self.warm_start * self.budget))

    def eps(self) -> float:
        """Exploitation share at the current progress."""
        start = (self.warm_start + self.bootstrap) * self.budget
        if self.n_told < start:
            return 0.0
        progress = min(1.0, (self.n_told - start) / max(1.0, self.budget - start))
        return self.eps_initial + (self.eps_final - self.eps_initial) * progress

    def _tell(self, told: pd.DataFrame) -> None:
        self.n_told += len(told)
        rows = told[self.space.names]
        self.sub_sampler.tell(rows, told.drop(columns=self.space.names))
        self.bootstrap_sampler._seen.update(self.space.key(rows))

    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        warm = min(n, self._warm_rows - self.n_told)
        if warm > 0:
            rows = self._warm(warm, rng)
            if len(rows) == n:
                return rows
            rest = self._ask_after_warm(n - len(rows), rng)
            return pd.concat([rows, rest], ignore_index=True)
        return self._ask_after_warm(n, rng)

    def _ask_after_warm(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        eps = self.eps()
        n_exploit = int(round(eps * n))
        if self.n_told < (self.warm_start + self.bootstrap) * self.budget or n_exploit == 0:
            sampler: Sampler = self.bootstrap_sampler if eps == 0.0 else self.sub_sampler
            return sampler._ask(n, rng)  # (ask() filters what was seen)
        exploit = self._exploit(n_exploit, rng)
        explore = self.sub_sampler._ask(n - len(exploit), rng)
        return pd.concat([exploit, explore], ignore_index=True)

    def warm_ranking(self) -> pd.DataFrame:
        """Design configurations of ``extra_training``, best first, with their ``score``: the
        mean over the source input points of log(value / best value at that point)
        (minimisation; inverted when maximising), a point where the configuration was not
        measured counting as that point's median."""
        if self._warm_ranking is not None:
            return self._warm_ranking
        design = self.space.design_names
        inputs = self.feature_space.input_names
        data = self.extra_training
        assert data is not None
        data = data[np.isfinite(data[self.objective]) & (data[self.objective] > 0)]
        value = np.log(data[self.objective].to_numpy(dtype=float))
        if self.maximize:
            value = -value
        frame = data[[*inputs, *design]].assign(_v=value)
        group = frame.groupby(inputs, sort=False, dropna=False)["_v"]
        frame["_rel"] = frame["_v"] - group.transform("min")
        median = frame.groupby(inputs, sort=False, dropna=False)["_rel"].median()
        n_points = len(median)
        per_config = frame.groupby(design, sort=False, dropna=False)["_rel"].agg(["sum", "count"])
        # unmeasured source points count as a typical (median) configuration there
        fill = float(median.mean()) if n_points else 0.0
        score = (per_config["sum"] + (n_points - per_config["count"]) * fill) / max(n_points, 1)
        ranking = score.rename("score").reset_index().sort_values("score", kind="stable")
        self._warm_ranking = ranking.reset_index(drop=True)
        return self._warm_ranking

    def _warm(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """The best-ranked source configurations not measured yet, valid here, at random input
        points of this campaign's (restricted) space."""
        ranking = self.warm_ranking()
        space = self.space
        points = space.sample_inputs(n, rng).reset_index(drop=True)
        chosen: list[pd.DataFrame] = []
        taken: set[tuple[Any, ...]] = set()
        start = 0
        design = ranking[space.design_names]
        for index in range(len(points)):
            point = points.iloc[[index]].reset_index(drop=True)
            # the candidates in rank order, in blocks, until one is valid and new here
            while start < len(design):
                block = design.iloc[start : start + 256].reset_index(drop=True)
                rows = pd.concat(
                    [point.iloc[[0] * len(block)].reset_index(drop=True), block], axis=1
                )
                rows = rows[space.names]
                valid = space.is_valid(rows)
                keys = space.key(rows)
                found = None
                for row in range(len(rows)):
                    if valid[row] and keys[row] not in self._seen and keys[row] not in taken:
                        found = row
                        break
                if found is None:
                    start += len(block)
                    continue
                taken.add(keys[found])
                chosen.append(rows.iloc[[found]])
                break
        if not chosen:
            return space.empty_table()
        return pd.concat(chosen, ignore_index=True)[space.names]

    def _model(self, measured: pd.DataFrame, features: np.ndarray) -> BootstrapEnsemble | None:
        """The ensemble fitted on ``measured`` (``_measured()``: every successful measurement
        and the transferred ones) and its ``features``."""
        if len(measured) < 5:
            return None
        target = measured[self.objective].to_numpy(dtype=float)
        model = self.model_factory()
        if model.log_target and (target <= 0).any():
            model.log_target = False  # a log needs a positive objective
        return model.fit(features, target)

    def _failure_model(self) -> FailureClassifier | None:
        """A classifier of this campaign's failed rows (any status but ``ok``, or no finite
        objective) against its successful ones, or None while either is too rare."""
        history = self.history_
        if history.empty or self.objective not in history:
            return None
        failed = ~self._succeeded(history)
        if not failed.any():
            return None
        features = self.feature_space.features(history[self.space.names])
        return FailureClassifier.fit_if_informative(features, failed)

    def _succeeded(self, history: pd.DataFrame) -> np.ndarray:
        """Which rows of ``history`` succeeded: status ``ok`` and a finite objective."""
        value = history[self.objective].to_numpy(dtype=float)
        return (history["status"] == "ok").to_numpy() & np.isfinite(value)

    def _measured(self) -> pd.DataFrame:
        """Successful measurements with a finite objective, transferred ones first."""
        history = self.history_
        names = [*self.space.names, self.objective]
        tables = []
        if self.extra_training is not None and len(self.extra_training):
            tables.append(self.extra_training[names])
        if not history.empty and self.objective in history:
            tables.append(history.loc[self._succeeded(history), names])
        if not tables:
            return pd.DataFrame(columns=names)
        return pd.concat(tables, ignore_index=True)

    def _exploit(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` rows of model-based exploitation (see :class:`Exploiter`), spread evenly over
        the exploitation points (a random subset of them when there are more than ``n``)."""
        measured = self._measured()
        features = self.feature_space.features(measured)
        model = self._model(measured, features)
        if model is None:
            return self.space.empty_table()
        # inputs that take few values (GPUs, a list of sizes) are each revisited batch after
        # batch, and their rows compare configurations there by themselves
        contrast = 1 if self._finite_inputs else self.exploiter.settings.contrast
        if self.points is not None and len(self.points):
            points = self.points.reset_index(drop=True)
            counts = _spread(n, len(points), contrast, rng)
            if not self._finite_inputs:
                counts = self._focus(counts, model, measured, points, rng)
        else:
            points = self.space.sample_inputs(-(-n // contrast), rng)
            counts = _spread(n, len(points), contrast, rng)
        left = (self.budget - self.n_told) / len(counts)
        own = self._own_models(measured, features, points, log_target=model.log_target)
        return self.exploiter.propose(
            model,
            measured,
            points,
            counts,
            self._seen,
            rng,
            left=left,
            spread=not self._finite_inputs,
            failures=self._failure_model(),
            own=own,
            turn=self._n_asks,
        )

    def _focus(
        self,
        counts: np.ndarray,
        model: BootstrapEnsemble,
        measured: pd.DataFrame,
        points: pd.DataFrame,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """``counts`` (rows per exploitation point) moved, the same rows per point, to the
        points where the ensemble's choice is least certain (:meth:`Exploiter.choice_regret`)
        among ``focus`` times as many drawn at random (``ExploitSettings.focus``, decision
        0046); as they are where every point gets rows."""
        chosen = np.flatnonzero(counts > 0)
        size = min(len(points), self.exploiter.settings.focus * len(chosen))
        if size <= len(chosen):
            return counts
        pool = rng.choice(len(points), size, replace=False)
        regret = self.exploiter.choice_regret(model, measured, points.iloc[pool])
        top = pool[np.argsort(-regret, kind="stable")[: len(chosen)]]
        out = np.zeros_like(counts)
        out[top] = counts[chosen]
        return out

    def _own_models(
        self,
        measured: pd.DataFrame,
        features: np.ndarray,
        points: pd.DataFrame,
        *,
        log_target: bool,
    ) -> dict[tuple[Any, ...], Surrogate]:
        """Per exploitation point with at least ``own_rows`` successful rows of its own, a
        model of those rows alone. None when the campaign has a single point, or an input
        that takes more than finitely many values: the hedge is between distinct input values
        (GPUs, a list of sizes), while points of a grid over a continuous input are best
        modelled together (and a model per grid point would cost a fit per point and batch).
        ``features`` are those of ``measured``; ``log_target`` is the shared ensemble's."""
        minimum = self.exploiter.settings.own_rows
        space = self.space
        if minimum == 0 or not self._finite_inputs or len(points) < 2 or measured.empty:
            return {}
        wanted = {input_key(space, row) for row in points.to_dict("records")}
        target = measured[self.objective].to_numpy(dtype=float)
        groups = measured.groupby(space.input_names, sort=False, dropna=False).indices
        models: dict[tuple[Any, ...], Surrogate] = {}
        for values, members in groups.items():
            values = values if isinstance(values, tuple) else (values,)
            key = input_key(space, dict(zip(space.input_names, values, strict=True)))
            if key in wanted and len(members) >= minimum:
                model = LightGBMSurrogate(
                    categorical_features=self.feature_space.categorical_features,
                    n_estimators=OWN_MODEL_TREES,
                    log_target=log_target,
                    seed=self.seed,
                    params=dict(OWN_MODEL_PARAMS),
                )
                models[key] = model.fit(features[members], target[members])
        return models

    def describe(self) -> dict[str, Any]:
        """Warm-start, bootstrap and exploitation shares and rows told (progress lines)."""
        return {
            "warm_start": self.warm_start,
            "bootstrap": self.bootstrap,
            "eps": self.eps(),
            "told": self.n_told,
        }


def _spread(n: int, n_points: int, contrast: int, rng: np.random.Generator) -> np.ndarray:
    """Rows per point for ``n`` rows over ``n_points`` points: evenly where every point gets
    one or more; where the points outnumber the rows, ``contrast`` rows at each of
    ``ceil(n / contrast)`` random points (the last one the rest), so that configurations are
    compared at one input point (``ExploitSettings.contrast``)."""
    counts = np.zeros(n_points, dtype=np.int64)
    if n >= n_points:
        counts += n // n_points
        counts[rng.choice(n_points, n % n_points, replace=False)] += 1
        return counts
    per = max(1, min(contrast, n))
    chosen = rng.choice(n_points, min(n_points, -(-n // per)), replace=False)
    counts[chosen] = per
    counts[chosen[-1]] -= per * len(chosen) - n
    return counts


def _check_shares(**shares: float) -> None:
    for name, value in shares.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {value}")


def _make_sub_sampler(
    kind: str | Callable[[Space, int], Sampler],
    space: Space,
    seed: int,
    objective: str,
    maximize: bool,
) -> Sampler:
    """GA-Adaptive's exploration sampler (seeded ``seed + 1``): a callable's, or the
    registered sampler of that name."""
    if callable(kind):
        return kind(space, seed + 1)
    from mlkaps_gpu.sampling._registry import SAMPLERS, SUB_SAMPLERS

    if kind not in SUB_SAMPLERS:
        raise ValueError(f"unknown sub_sampler {kind!r} (allowed: {', '.join(SUB_SAMPLERS)})")
    parts = SamplerParts(seed=seed + 1, objective=objective, maximize=maximize)
    return SAMPLERS[kind].from_parts(space, parts)
