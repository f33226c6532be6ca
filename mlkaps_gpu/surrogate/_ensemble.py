"""A bootstrapped LightGBM ensemble: a mean and a spread for every prediction.

Each member is one LightGBM model trained on all rows with its own Poisson(1) bootstrap weights
(the online bootstrap: a row gets weight 0 in about 37 % of the members, 2 or more in about
26 %). The members' disagreement is the uncertainty that acquisitions (lowest mean - k sd) and
evidence-based decisions use. LightGBM's own bagging (``bagging_fraction``) subsamples rows
per tree inside one boosted model, so its trees correct each other and the resulting models
agree far too much to tell explored from unexplored regions.

With ``log_target`` (the default: run times span orders of magnitude) the members learn
``log(y)``; :meth:`BootstrapEnsemble.predict_log` returns the members' mean and standard
deviation in that space, and :meth:`~mlkaps_gpu.surrogate.Surrogate.predict` the geometric mean
prediction ``exp(mean)``.

With ``center`` members (the decisions' ensemble: decision 0023) the estimate itself comes from
other models: ``center`` LightGBM models trained on every row with weight 1 and LightGBM's
row subsampling per tree (``bagging_fraction`` 0.8), averaged. A bootstrap member sees about
63 % of the distinct rows, so the bootstrap members' mean is a worse estimate than models that
learn from every row; their spread still says where the data are thin. The ensemble then
predicts the centre members' mean with the bootstrap members' standard deviation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightgbm as lgb
import numpy as np
import pandas as pd

from mlkaps_gpu.surrogate._base import Surrogate
from mlkaps_gpu.surrogate._baseline import InputBaseline
from mlkaps_gpu.surrogate._compiled import CompiledForest, compile_model
from mlkaps_gpu.surrogate._lightgbm import DEFAULT_PARAMS, ENGINES, Engine, training_dataset

if TYPE_CHECKING:
    from mlkaps_gpu.surrogate._settings import SurrogateSettings

#: Members of the default ensemble.
DEFAULT_MEMBERS = 5
#: Row share each boosting round of a centre member learns from (LightGBM ``bagging_fraction``).
CENTER_BAGGING = 0.8
#: Rows from which ``engine="auto"`` compiles the members (a few milliseconds per member).
_COMPILE_FROM_ROWS = 1000
#: Rounds between two points of the out-of-bag error curve (``max_rounds``).
OOB_STEP = 25
#: Relative excess out-of-bag error that more rounds are not worth (``max_rounds``): on
#: thousands of rows a 0.1 % gain is significant and costs twice the rounds.
OOB_TOLERANCE = 0.01


class BootstrapEnsemble(Surrogate):
    """``members`` LightGBM models, each on its own Poisson bootstrap weighting of the rows.

    Args:
        members: number of models.
        categorical_features: column positions holding category indices.
        n_estimators: boosting rounds per member.
        learning_rate: LightGBM's learning rate.
        log_target: learn ``log(y)`` (positive objectives only).
        seed: seeds the bootstrap weights and LightGBM.
        center: models trained on every row (row subsampling per tree) whose mean is the
            estimate (0: the bootstrap members' mean is).
        max_rounds: when set, the number of boosting rounds is chosen from the data instead of
            ``n_estimators`` alone: the bootstrap members grow up to ``max_rounds``, and the
            rounds kept (by every member, the centre ones included) are the fewest, from
            ``n_estimators`` on, whose out-of-bag error exceeds the smallest on the curve
            (every :data:`OOB_STEP` rounds) by at most one standard error of the excess over
            the same rows (Breiman's one-standard-error rule, paired) or
            :data:`OOB_TOLERANCE` of it, whichever is larger. A model of thousands of rows
            with structure left keeps learning; one of a few hundred rows keeps
            ``n_estimators`` unless more rounds are clearly better out of bag (decision
            0026).
        params: extra LightGBM parameters, overriding ``DEFAULT_PARAMS``.
        engine: who predicts, as for :class:`~mlkaps_gpu.surrogate.LightGBMSurrogate`:
            ``auto`` compiles the members (the branch-free C walk, same numbers to the bit)
            from the first prediction of 1,000 rows or more.
        cache_dir: where the compiled engine is kept between runs (``None``: a folder of this
            process).
        threads: row chunks each compiled member predicts at once (the engine releases the
            GIL; the same numbers). 1 where predictions may run beside measurements
            (GA-Adaptive's model); the decisions, which never do, use every core.
        baseline_features: positions of the input features: where given, an
            :class:`~mlkaps_gpu.surrogate._baseline.InputBaseline` (a ridge regression of the
            target on them, to second order in the logs) is fitted first, every member learns
            what it leaves, and every prediction adds it back (decisions 0036, 0037). Empty:
            the members learn the target.

    Attributes (after ``fit``):
        rounds_: the boosting rounds every member kept.
        oob_curve_: with ``max_rounds``, the out-of-bag curve the rounds were chosen on
            (``rounds``, ``oob_mse``, ``excess``, ``excess_se``; empty when no row was out
            of bag).
    """

    @classmethod
    def from_settings(
        cls,
        settings: SurrogateSettings,
        *,
        categorical_features: Sequence[int] = (),
        seed: int = 0,
        center: int = 0,
        max_rounds: int | None = None,
        input_features: Sequence[int] = (),
        threads: int = 1,
    ) -> BootstrapEnsemble:
        """The bootstrapped ensemble a campaign decides with (GA-Adaptive's model, the
        decisions, the trees' score): its own size, ``[surrogate] log_target``, the members'
        LightGBM parameters overridden by ``[surrogate] params`` as the surrogate's are, the
        inputs' baseline with ``[surrogate] input_baseline`` where one of ``input_features``
        is numeric (categorical inputs alone have no trend of sizes to take out: a per-value
        mean before the trees cost the convolution replay 0.06 at b = 100, decision 0036)."""
        categorical = set(categorical_features)
        numeric = any(c not in categorical for c in input_features)
        return cls(
            categorical_features=categorical_features,
            log_target=settings.log_target,
            seed=seed,
            center=center,
            max_rounds=max_rounds,
            params=settings.params,
            baseline_features=input_features if settings.input_baseline and numeric else (),
            threads=threads,
        )

    def __init__(
        self,
        *,
        members: int = DEFAULT_MEMBERS,
        categorical_features: Sequence[int] = (),
        n_estimators: int = 150,
        learning_rate: float = 0.1,
        log_target: bool = True,
        seed: int = 0,
        center: int = 0,
        max_rounds: int | None = None,
        params: dict[str, Any] | None = None,
        engine: Engine = "auto",
        cache_dir: str | Path | None = None,
        baseline_features: Sequence[int] = (),
        threads: int = 1,
    ) -> None:
        if members < 2:
            raise ValueError(f"an ensemble needs at least 2 members, got {members}")
        if center < 0:
            raise ValueError(f"center must be 0 or more, got {center}")
        if max_rounds is not None and max_rounds < 1:
            raise ValueError(f"max_rounds must be 1 or more, got {max_rounds}")
        if threads < 1:
            raise ValueError(f"threads must be 1 or more, got {threads}")
        if engine not in ENGINES:
            raise ValueError(f"unknown prediction engine '{engine}' (allowed: {ENGINES})")
        self.engine = engine
        self.cache_dir = cache_dir
        self.members = members
        self.categorical_features = list(categorical_features)
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.log_target = log_target
        self.seed = seed
        self.center = center
        self.max_rounds = max_rounds
        self.params = dict(params or {})
        self.baseline_features = [int(c) for c in baseline_features]
        self.threads = int(threads)

    def _fit(self, features: np.ndarray, target: np.ndarray) -> None:
        if self.log_target:
            if (target <= 0).any():
                raise ValueError("log_target needs a positive objective")
            target = np.log(target)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, len(target)]))
        params = {
            **DEFAULT_PARAMS,
            "learning_rate": self.learning_rate,
            **self.params,
            "num_threads": 1,
        }
        self.baseline_: InputBaseline | None = None
        if self.baseline_features:
            self.baseline_ = InputBaseline(self.baseline_features, self.categorical_features)
            target = target - self.baseline_.fit(features, target).predict(features)
        self.boosters_: list[lgb.Booster] = []
        self._compiled: list[CompiledForest] | None = None
        self.weights_ = np.empty((self.members, len(target)))
        grown = self.max_rounds or self.n_estimators
        for member in range(self.members):
            weights = rng.poisson(1.0, len(target)).astype(np.float64)
            if weights.sum() < 2:
                weights = np.ones(len(target))
            self.weights_[member] = weights
            keep = weights > 0  # zero-weight rows only cost time
            dataset = training_dataset(
                features[keep], target[keep], self.categorical_features, weights[keep]
            )
            member_params = {**params, "seed": self.seed + 7919 * member}
            self.boosters_.append(lgb.train(member_params, dataset, num_boost_round=grown))
        self.rounds_ = self.n_estimators
        if self.max_rounds is not None:
            self.rounds_, self.oob_curve_ = self._choose_rounds(features, target)
            self.boosters_ = [
                lgb.Booster(model_str=b.model_to_string(num_iteration=self.rounds_))
                for b in self.boosters_
            ]
        self.center_boosters_: list[lgb.Booster] = []
        self._compiled_center: list[CompiledForest] | None = None
        if self.center:
            dataset = training_dataset(features, target, self.categorical_features)
            for member in range(self.center):
                member_params = {
                    **params,
                    "bagging_fraction": CENTER_BAGGING,
                    "bagging_freq": 1,
                    "seed": self.seed + 104729 + 7919 * member,
                }
                self.center_boosters_.append(
                    lgb.train(member_params, dataset, num_boost_round=self.rounds_)
                )

    def _choose_rounds(self, features: np.ndarray, target: np.ndarray) -> tuple[int, pd.DataFrame]:
        """The rounds kept (see ``max_rounds``) and the out-of-bag curve: per number of
        rounds, the mean squared out-of-bag error, its excess over the best number's on the
        same rows and the standard error of that excess."""
        assert self.max_rounds is not None
        start = min(self.n_estimators, self.max_rounds)
        steps = list(range(start, self.max_rounds, OOB_STEP)) + [self.max_rounds]
        errors = []
        for booster, weights in zip(self.boosters_, self.weights_, strict=True):
            unseen = weights == 0
            if not unseen.any():
                continue
            rows = features[unseen]
            prediction = np.zeros(len(rows))
            squared, done = [], 0
            for step in steps:  # staged: each call adds the next rounds' trees
                prediction += booster.predict(
                    rows, start_iteration=done, num_iteration=step - done, num_threads=1
                )
                done = step
                squared.append((prediction - target[unseen]) ** 2)
            errors.append(np.array(squared))
        if not errors:
            return self.max_rounds, pd.DataFrame()
        matrix = np.hstack(errors)  # steps x out-of-bag rows of every member
        mean = matrix.mean(axis=1)
        best = int(np.argmin(mean))
        # paired over the same rows: each step's excess error over the best step, and its
        # standard error
        excess = matrix - matrix[best]
        count = matrix.shape[1]
        se = excess.std(axis=1, ddof=1) / np.sqrt(count) if count > 1 else np.zeros(len(steps))
        tolerance = np.maximum(se, OOB_TOLERANCE * mean[best])
        chosen = steps[int(np.flatnonzero(excess.mean(axis=1) <= tolerance)[0])]
        curve = pd.DataFrame(
            {"rounds": steps, "oob_mse": mean, "excess": excess.mean(axis=1), "excess_se": se}
        )
        return chosen, curve

    def predict_members(self, features: np.ndarray) -> np.ndarray:
        """Every member's prediction in the model's space (``log(y)`` with ``log_target``):
        members x rows."""
        return self._predict_all(self.boosters_, features, center=False) + self._baseline(features)

    def _baseline(self, features: np.ndarray) -> np.ndarray | float:
        """The inputs' baseline of each row (0 without one: ``baseline_features`` empty, or
        an ensemble made before baselines)."""
        baseline = getattr(self, "baseline_", None)
        return 0.0 if baseline is None else baseline.predict(features)

    def _predict_all(
        self, boosters: list[lgb.Booster], features: np.ndarray, *, center: bool
    ) -> np.ndarray:
        """Every one of ``boosters``' predictions (compiled where the engine allows)."""
        features = np.asarray(features, dtype=np.float64)
        compiled = self._compiled_members(boosters, len(features), center=center)
        if compiled:
            return np.vstack(
                [member.predict(features, threads=self.threads) for member in compiled]
            )
        return np.vstack([b.predict(features, num_threads=1) for b in boosters])

    def _compiled_members(
        self, boosters: list[lgb.Booster], n_rows: int, *, center: bool = False
    ) -> list[CompiledForest]:
        """``boosters`` compiled on first need (empty: LightGBM predicts)."""
        if self.engine == "lightgbm":
            return []
        cached = self._compiled_center if center else self._compiled
        if cached is None:
            if self.engine == "auto" and n_rows < _COMPILE_FROM_ROWS:
                return []
            compiled = [
                compile_model(b.model_to_string(), cache_dir=self.cache_dir) for b in boosters
            ]
            if any(member is None for member in compiled):
                if self.engine == "compiled":
                    raise RuntimeError("the compiled prediction engine is not available")
                cached = []
            else:
                cached = [member for member in compiled if member is not None]
            if center:
                self._compiled_center = cached
            else:
                self._compiled = cached
        return cached

    def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation in the model's space: over the members, or the centre
        members' mean with the bootstrap members' spread (``center``)."""
        values = self.predict_members(features)
        return self._estimate(features, values), values.std(axis=0, ddof=1)

    def _estimate(self, features: np.ndarray, members: np.ndarray | None = None) -> np.ndarray:
        """The estimate in the model's space: the centre members' mean where there are any,
        else the bootstrap members' (``members``: their predictions, when already made)."""
        if getattr(self, "center_boosters_", None):  # absent on ensembles made before them
            centre = self._predict_all(self.center_boosters_, features, center=True)
            return centre.mean(axis=0) + self._baseline(features)
        values = self.predict_members(features) if members is None else members
        return values.mean(axis=0)

    def out_of_bag(self, features: np.ndarray) -> np.ndarray:
        """Per training row, the mean prediction of the members that gave it weight 0 (NaN
        where every member saw it), in the model's space: ``features`` must be the training
        rows, in order."""
        values = self.predict_members(features)
        unseen = self.weights_ == 0
        count = unseen.sum(axis=0)
        total = np.where(unseen, values, 0.0).sum(axis=0)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def _predict(self, features: np.ndarray) -> np.ndarray:
        mean = self._estimate(features)
        return np.exp(mean) if self.log_target else mean


__all__ = ["DEFAULT_MEMBERS", "BootstrapEnsemble"]
