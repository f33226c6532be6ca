"""GA-Adaptive sampling (MLKAPS, Fig. 4): exploit the current surrogate's optima, explore with a
sub-sampler.

0. Warm start (transfer only): with ``extra_training`` (measurements of other architectures),
   the first ``warm_start`` fraction of the budget measures the configurations that did best
   there (ranked by their mean log-ratio to each source input point's best; a configuration not
   measured at a source point counts as that sources' median) on the new machine.
1. Bootstrap: the next ``bootstrap`` fraction of the budget comes from LHS.
2. Then, per batch, a share ``eps`` of the rows are the surrogate's best *not yet measured*
   configurations at random input points (exploitation, using the grid optimizer's machinery),
   and the rest come from the sub-sampler (exploration). ``eps`` moves linearly from
   ``eps_initial`` to ``eps_final`` with the completed fraction of the budget.

Proposals already measured are never measured again; every row is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.sampling._base import Sampler
from mlkaps_gpu.sampling._bayes import BayesianSampler
from mlkaps_gpu.sampling._hvs import HVSrSampler, HVSSampler
from mlkaps_gpu.sampling._random import LHSSampler, RandomSampler
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import LightGBMSurrogate, Surrogate

#: Names of the sub-samplers GA-Adaptive builds itself.
SUB_SAMPLERS: tuple[str, ...] = ("lhs", "random", "hvs", "hvsr", "bayes")
#: Largest valid design set ranked exhaustively per exploitation point.
_EXHAUSTIVE_LIMIT = 200_000


class GAAdaptiveSampler(Sampler):
    """Exploitation of surrogate optima mixed with a sub-sampler.

    Args:
        space: the search space.
        seed: random seed.
        budget: total evaluations the campaign will spend (drives the bootstrap and ``eps``).
        objective: the objective column the surrogate learns (minimised unless ``maximize``).
        maximize: whether the objective is maximised.
        bootstrap: fraction of the budget sampled by LHS before any exploitation.
        eps_initial: exploitation share right after the bootstrap.
        eps_final: exploitation share at the end of the budget.
        sub_sampler: ``"lhs"`` (the default: MLKAPS uses HVSr, which did no better in
            ``experiments/sampler_study.py`` and worse than random at two budgets of the ``lu``
            case), ``"hvsr"``, ``"random"``, ``"hvs"`` or ``"bayes"``, or a Sampler factory
            ``(space, seed) -> Sampler``. The sub-sampler is told every measurement (the
            adaptive ones learn from them) and learns the same ``objective``.
        surrogate_factory: builds the surrogate refitted before each batch.
        feature_space: the space whose feature encoding the surrogate uses (default: ``space``;
            a campaign that samples a restricted space, e.g. one architecture of several,
            passes the full space so that categorical codes agree with ``extra_training``).
        extra_training: measurements taken elsewhere (other campaigns, other architectures)
            added to every surrogate fit, never measured or proposed again (transfer).
        warm_start: fraction of the budget spent first on the configurations that did best in
            ``extra_training`` (default: 0.2 with ``extra_training``, else 0).
    """

    def __init__(
        self,
        space: Space,
        *,
        seed: int = 0,
        budget: int = 1000,
        objective: str = "time",
        maximize: bool = False,
        bootstrap: float = 0.2,
        eps_initial: float = 0.3,
        eps_final: float = 0.8,
        sub_sampler: str | Callable[[Space, int], Sampler] = "lhs",
        surrogate_factory: Callable[[], Surrogate] | None = None,
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
        for name, value in (
            ("warm_start", warm_start),
            ("bootstrap", bootstrap),
            ("eps_initial", eps_initial),
            ("eps_final", eps_final),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value}")
        self.budget = budget
        self.objective = objective
        self.maximize = maximize
        self.bootstrap = bootstrap
        self.eps_initial = eps_initial
        self.eps_final = eps_final
        if callable(sub_sampler):
            self.sub_sampler = sub_sampler(space, seed + 1)
        elif sub_sampler in ("lhs", "random"):
            kind = LHSSampler if sub_sampler == "lhs" else RandomSampler
            self.sub_sampler = kind(space, seed=seed + 1)
        elif sub_sampler in ("hvs", "hvsr"):
            adaptive = HVSSampler if sub_sampler == "hvs" else HVSrSampler
            self.sub_sampler = adaptive(space, seed=seed + 1, objective=objective)
        elif sub_sampler == "bayes":
            self.sub_sampler = BayesianSampler(
                space, seed=seed + 1, objective=objective, maximize=maximize
            )
        else:
            raise ValueError(
                f"unknown sub_sampler {sub_sampler!r} (allowed: {', '.join(SUB_SAMPLERS)})"
            )
        self.bootstrap_sampler = LHSSampler(space, seed=seed + 2)
        self.surrogate_factory = surrogate_factory or (
            lambda: LightGBMSurrogate(
                categorical_features=space.categorical_features, log_target=False, seed=seed
            )
        )
        self.n_told = 0
        self.feature_space = feature_space or space
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

    def _model(self) -> Surrogate | None:
        history = self.history_
        if history.empty or self.objective not in history:
            return None
        ok = history[(history["status"] == "ok") & np.isfinite(history[self.objective])]
        names = [*self.space.names, self.objective]
        if self.extra_training is not None and len(self.extra_training):
            ok = pd.concat([self.extra_training[names], ok[names]], ignore_index=True)
        if len(ok) < 5:
            return None
        return self.surrogate_factory().fit(
            self.feature_space.features(ok), ok[self.objective].to_numpy()
        )

    def _exploit(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        model = self._model()
        if model is None:
            return self.space.empty_table()
        space = self.space
        points = space.sample_inputs(n, rng)
        taken: set[tuple[Any, ...]] = set()
        chosen: list[pd.DataFrame] = []
        sign = -1.0 if self.maximize else 1.0
        if space.enumerable and space.design_product <= _EXHAUSTIVE_LIMIT:
            # every point's valid designs in one table, one prediction for all of them
            blocks = [space.valid_design_codes(row) for row in points.to_dict(orient="records")]
            sizes = np.array([len(b) for b in blocks])
            if sizes.sum() == 0:
                return space.empty_table()
            owner = np.repeat(np.arange(len(points)), sizes)
            candidates = space.assemble(
                points.iloc[owner].reset_index(drop=True),
                np.vstack([b for b in blocks if len(b)]),
            )
            predicted = sign * model.predict(self.feature_space.features(candidates))
            keys = space.key(candidates)
            order = np.lexsort((predicted, owner))  # by point, best prediction first
            done = np.zeros(len(points), dtype=bool)
            for row in order:
                point = owner[row]
                if done[point]:
                    continue
                key = keys[row]
                if key not in self._seen and key not in taken:
                    taken.add(key)
                    chosen.append(candidates.iloc[[row]])
                    done[point] = True
        else:
            optimizer = GridOptimizer(
                space,
                objectives=[self.objective],
                directions=["maximize" if self.maximize else "minimize"],
                method="nsga2",
                population=20,
                generations=15,
                seed=int(rng.integers(2**31 - 1)),
            )
            optima = optimizer.run([model], points)
            optima = optima[optima["n_valid"] != 0][space.names]
            for index in range(len(optima)):
                key = tuple(optima.iloc[index].tolist())
                if key not in self._seen and key not in taken:
                    taken.add(key)
                    chosen.append(optima.iloc[[index]])
        if not chosen:
            return space.empty_table()
        return pd.concat(chosen, ignore_index=True)[space.names]

    def describe(self) -> dict[str, Any]:
        return {
            "warm_start": self.warm_start,
            "bootstrap": self.bootstrap,
            "eps": self.eps(),
            "told": self.n_told,
        }
