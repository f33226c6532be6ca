"""LightGBM surrogate: gradient-boosted trees, native categoricals, MAE objective by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightgbm as lgb
import numpy as np

from mlkaps_gpu.surrogate._base import Surrogate

#: Defaults tuned for the small sample counts of tuning campaigns (a few hundred rows and up).
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "l1",
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
    """

    def __init__(
        self,
        *,
        categorical_features: Sequence[int] = (),
        n_estimators: int = 300,
        log_target: bool = False,
        seed: int = 0,
        num_threads: int = 0,
        params: dict[str, Any] | None = None,
    ) -> None:
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
        dataset = lgb.Dataset(
            features,
            label=target,
            categorical_feature=self.categorical_features or "auto",
            params={"verbose": -1},
            free_raw_data=False,
        )
        self.booster_ = lgb.train(
            self._lgb_params(len(features)), dataset, num_boost_round=self.n_estimators
        )

    def _predict(self, features: np.ndarray) -> np.ndarray:
        threads = self._threads(len(features))
        prediction = np.asarray(
            self.booster_.predict(features, num_threads=threads), dtype=np.float64
        )
        return np.exp(prediction) if self.log_target else prediction

    def save(self, path: str) -> None:
        """Write the booster as LightGBM's text format (``model_to_string``)."""
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(self.booster_.model_to_string())

    @classmethod
    def load(cls, path: str, *, log_target: bool = False) -> LightGBMSurrogate:
        model = cls(log_target=log_target)
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
