"""LightGBM surrogate: gradient-boosted trees, native categoricals, squared error by default.

On the log scale every campaign of positive times learns on, the squared error estimates the
mean log time (the geometric mean the project scores answers by); see decision record 0021."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import lightgbm as lgb
import numpy as np

from mlkaps_gpu.surrogate._base import Surrogate
from mlkaps_gpu.surrogate._compiled import CompiledForest, compile_model

if TYPE_CHECKING:
    from mlkaps_gpu.surrogate._settings import SurrogateSettings

#: Defaults tuned for the small sample counts of tuning campaigns (a few hundred rows and up).
#: ``l2``: the absolute error (``l1``) ranked configurations worse on every table measured,
#: with a larger out-of-bag error (decision record 0021).
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "l2",
    "learning_rate": 0.05,
    "num_leaves": 31,
    "min_data_in_leaf": 3,
    "min_data_in_bin": 1,
    "min_data_per_group": 1,
    "cat_smooth": 1.0,
    "feature_fraction": 1.0,
    "verbose": -1,
    "deterministic": True,
    "force_col_wise": True,
}

#: Rows below which training and prediction run on one thread unless ``num_threads`` says.
_SMALL_DATA_ROWS = 20_000
#: Rows of a prediction from which ``engine="auto"`` compiles a model: reading a model's
#: tables costs about as much as LightGBM predicting this many rows.
_COMPILE_FROM_ROWS = 2_000
Engine = Literal["auto", "compiled", "lightgbm"]
ENGINES: tuple[str, ...] = ("auto", "compiled", "lightgbm")


def training_dataset(
    features: np.ndarray,
    target: np.ndarray,
    categorical_features: Sequence[int],
    weight: np.ndarray | None = None,
) -> lgb.Dataset:
    """The LightGBM dataset every model of the package trains on (quiet, raw data kept)."""
    return lgb.Dataset(
        features,
        label=target,
        weight=weight,
        categorical_feature=list(categorical_features) or "auto",
        params={"verbose": -1},
        free_raw_data=False,
    )


class LightGBMSurrogate(Surrogate):
    """One LightGBM regressor of one objective.

    Args:
        categorical_features: column positions holding category indices.
        n_estimators: boosting rounds.
        log_target: learn ``log(y)`` (for positive objectives spanning orders of magnitude).
        seed: LightGBM's seed.
        num_threads: threads for training and prediction (0: one thread below 20,000 rows,
            LightGBM's default above).
        params: extra LightGBM parameters, overriding ``DEFAULT_PARAMS``.
        engine: who predicts: ``auto`` (the compiled engine of ``_compiled.py`` from the first
            prediction of 2,000 rows or more, LightGBM before and wherever the engine cannot be
            built), ``compiled`` (always; an error where it cannot be built) or ``lightgbm``.
            All give the same numbers, to the bit.
        cache_dir: where the compiled engine and the model's tables are kept between runs
            (a folder of this process when ``None``).
    """

    @classmethod
    def from_settings(
        cls,
        settings: SurrogateSettings,
        *,
        categorical_features: Sequence[int] = (),
        seed: int = 0,
        log_target: bool | None = None,
    ) -> LightGBMSurrogate:
        """The campaign's model of one objective, from ``[surrogate]`` (``log_target``, when
        given, overrides the section's: a campaign learns non-positive objectives as they
        are)."""
        return cls(
            categorical_features=categorical_features,
            n_estimators=settings.n_estimators,
            log_target=settings.log_target if log_target is None else log_target,
            seed=seed,
            params=settings.params,
        )

    def __init__(
        self,
        *,
        categorical_features: Sequence[int] = (),
        n_estimators: int = 300,
        log_target: bool = False,
        seed: int = 0,
        num_threads: int = 0,
        params: dict[str, Any] | None = None,
        engine: Engine = "auto",
        cache_dir: str | Path | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown prediction engine '{engine}' (allowed: {ENGINES})")
        self.engine = engine
        self.cache_dir = cache_dir
        self.categorical_features = list(categorical_features)
        self.n_estimators = n_estimators
        self.log_target = log_target
        self.seed = seed
        self.num_threads = num_threads
        self.params = dict(params or {})

    def _lgb_params(self, n_rows: int) -> dict[str, Any]:
        params = {**DEFAULT_PARAMS, **self.params, "seed": self.seed}
        params["num_threads"] = self._threads(n_rows)
        return params

    def _threads(self, n_rows: int) -> int:
        """``num_threads``, or when it is 0: one thread for small data (an OpenMP team costs more
        than it saves there, and many times more on a busy machine), LightGBM's default else."""
        if self.num_threads:
            return self.num_threads
        return 1 if n_rows < _SMALL_DATA_ROWS else 0

    def _fit(self, features: np.ndarray, target: np.ndarray) -> None:
        if self.log_target:
            if (target <= 0).any():
                raise ValueError("log_target needs a positive objective")
            target = np.log(target)
        dataset = training_dataset(features, target, self.categorical_features)
        self.booster_ = lgb.train(
            self._lgb_params(len(features)), dataset, num_boost_round=self.n_estimators
        )
        self.__dict__.pop("_compiled", None)

    def _predict(self, features: np.ndarray) -> np.ndarray:
        threads = self._threads(len(features))
        compiled = self.compiled(len(features))
        if compiled is not None and features.ndim == 2 and features.shape[1] == compiled.n_features:
            prediction = compiled.predict(features, threads=threads or (os.cpu_count() or 1))
        else:
            prediction = np.asarray(
                self.booster_.predict(features, num_threads=threads), dtype=np.float64
            )
        return np.exp(prediction) if self.log_target else prediction

    def compiled(self, n_rows: int = _COMPILE_FROM_ROWS) -> CompiledForest | None:
        """The compiled predictor of the fitted booster, built on first need (``None``: LightGBM
        predicts; with ``engine="auto"``, also for predictions of fewer than 2,000 rows until
        one is built)."""
        if self.engine == "lightgbm":
            return None
        if "_compiled" not in self.__dict__:
            if self.engine == "auto" and n_rows < _COMPILE_FROM_ROWS:
                return None
            self._compiled = compile_model(
                self.booster_.model_to_string(), cache_dir=self.cache_dir
            )
            if self._compiled is None and self.engine == "compiled":
                raise RuntimeError("engine='compiled': the compiled engine is unavailable here")
        return self._compiled

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_compiled", None)  # a loaded C library: rebuilt (from the cache) on need
        return state

    def save(self, path: str) -> None:
        """Write the booster as LightGBM's text format (``model_to_string``)."""
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.booster_.model_to_string())

    @classmethod
    def load(
        cls, path: str, *, log_target: bool = False, engine: Engine = "auto"
    ) -> LightGBMSurrogate:
        """A booster saved by :meth:`save`; its compiled engine and tables are cached in the
        model's folder."""
        model = cls(log_target=log_target, engine=engine, cache_dir=Path(path).parent)
        model.booster_ = lgb.Booster(model_file=path)
        return model


def accuracy(prediction: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """MAE and MAPE (in %) of a prediction against measured values (finite ones only)."""
    prediction = np.asarray(prediction, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    keep = np.isfinite(truth) & np.isfinite(prediction)
    error = np.abs(prediction[keep] - truth[keep])
    nonzero = truth[keep] != 0
    return {
        "mae": float(error.mean()) if keep.any() else float("nan"),
        "mape": float(100 * (error[nonzero] / np.abs(truth[keep][nonzero])).mean())
        if nonzero.any()
        else float("nan"),
        "n": int(keep.sum()),
    }
