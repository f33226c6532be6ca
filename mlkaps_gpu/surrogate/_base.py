"""The surrogate extension point: ``fit(X, y)`` then ``predict(X)`` on numeric feature matrices.

Feature matrices come from ``Space.features`` (one column per input and design parameter,
categoricals as their index), so a surrogate never sees tables and the hot path (``predict``
inside the optimizers) is a plain float64 array.
"""

from __future__ import annotations

import abc
from typing import Self

import numpy as np


class Surrogate(abc.ABC):
    """Base class of every surrogate model of one objective."""

    def fit(self, features: np.ndarray, target: np.ndarray) -> Self:
        """Learn ``target`` from ``features`` (one row per value); rows whose target is not
        finite (failed measurements) are left out.

        Returns:
            The surrogate itself, fitted.

        Raises:
            ValueError: features not 2-D with one row per target value, or fewer than two
                finite target values.
        """
        features = np.asarray(features, dtype=np.float64)
        target = np.asarray(target, dtype=np.float64)
        if features.ndim != 2 or len(features) != len(target):
            raise ValueError("fit: features must be 2-D with one row per target value")
        keep = np.isfinite(target)
        if keep.sum() < 2:
            raise ValueError("fit: fewer than two finite target values to learn from")
        self._fit(features[keep], target[keep])
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Predicted objective of every row of ``features`` (a 2-D float array, columns as
        ``Space.features`` makes them)."""
        return self._predict(np.asarray(features, dtype=np.float64))

    @abc.abstractmethod
    def _fit(self, features: np.ndarray, target: np.ndarray) -> None: ...

    @abc.abstractmethod
    def _predict(self, features: np.ndarray) -> np.ndarray: ...
