"""A model of the objective on the inputs, fitted before the trees (decisions 0036, 0037).

A kernel's time depends on its input sizes by orders of magnitude, roughly as a power law
(``m n k`` for a matrix product), and on its configuration by a few percent to a few times.
Trees fitted on ``log(time)`` directly spend most of their splits on the sizes and learn the
configurations' effects from what is left in small leaves; at a budget of one or two
measurements per input point, those effects are what the decisions compare. Fitting the
inputs' trend first (a ridge regression on the logs of the positive numeric inputs, the raw
value of the others, their squares and pairwise products, one-hot categorical inputs) leaves
the trees the configurations and their interactions with the inputs. A smooth model cannot
memorise the configuration measured at one input point, as an inputs-only tree model would.

The second-order terms follow a trend that is no pure power law: a fixed cost (a GPU kernel's
launch, a library call) flattens ``log(time)`` at small sizes and the work's power law takes
over at large ones. A plane in the logs misplaces both ends, and the trees, which must then
learn that bend per configuration from one or two measurements per size, rank the
configurations at small sizes by it (decision 0037).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Ridge penalty per row on the standardised features (a guard against collinear inputs; the
#: fit is otherwise least squares).
RIDGE = 1e-3


class InputBaseline:
    """Ridge regression of a target on some feature columns (the inputs'), to second order in
    the numeric ones.

    Args:
        columns: positions of the feature columns the baseline uses.
        categorical: positions (among all features) of categorical columns (category
            indices): one-hot encoded over the levels seen in training (an unseen level adds
            nothing).
    """

    def __init__(self, columns: Sequence[int], categorical: Sequence[int] = ()) -> None:
        self.columns = [int(c) for c in columns]
        self.categorical = [c for c in self.columns if c in set(categorical)]

    def fit(self, features: np.ndarray, target: np.ndarray) -> InputBaseline:
        """Fit on ``features`` (all columns; the baseline reads its own) and ``target``."""
        features = np.asarray(features, dtype=np.float64)
        target = np.asarray(target, dtype=np.float64)
        self.logs_ = [
            c
            for c in self.columns
            if c not in self.categorical and bool((features[:, c] > 0).all())
        ]
        self.levels_ = {c: np.unique(features[:, c]) for c in self.categorical}
        numeric = [c for c in self.columns if c not in self.categorical]
        self.low_ = features[:, numeric].min(axis=0)
        self.high_ = features[:, numeric].max(axis=0)
        # second-order terms of the centred numeric inputs: nearly uncorrelated with the
        # first-order ones, so the ridge does not share a straight trend between them
        self.centre_ = np.array([values.mean() for values in self._numeric(features)])
        design = self._design(features)
        self.mean_ = design.mean(axis=0)
        self.scale_ = design.std(axis=0)
        self.scale_[self.scale_ == 0] = 1.0
        design = (design - self.mean_) / self.scale_
        gram = design.T @ design + RIDGE * len(design) * np.eye(design.shape[1])
        self.coef_ = np.linalg.solve(gram, design.T @ (target - target.mean()))
        self.intercept_ = float(target.mean())
        return self

    def _numeric(self, features: np.ndarray) -> list[np.ndarray]:
        """The numeric input columns, held within their training range, in the logs where
        positive in training. A second-order fit has no meaning outside the range it was
        fitted on: a value past it (a 0 where training held only positive values, whose log
        is -708) takes the trend at the nearest end, as the trees do, instead of a square
        that overflows the prediction. (A baseline pickled before the range was kept is not
        held.)"""
        numeric = [c for c in self.columns if c not in self.categorical]
        low, high = getattr(self, "low_", None), getattr(self, "high_", None)
        columns = []
        for i, c in enumerate(numeric):
            values = features[:, c]
            if low is not None and high is not None:
                values = np.clip(values, low[i], high[i])
            if c in self.logs_:
                values = np.log(np.maximum(values, np.finfo(np.float64).tiny))
            columns.append(values)
        return columns

    def _design(self, features: np.ndarray) -> np.ndarray:
        parts: list[np.ndarray] = []
        for column in self.categorical:
            values = features[:, column]
            parts.extend((values == level).astype(np.float64) for level in self.levels_[column])
        numeric = self._numeric(features)
        parts += numeric
        # their squares and pairwise products, centred (an older baseline has no centre_:
        # first order only, as it was fitted)
        centre = getattr(self, "centre_", None)
        if centre is not None:
            centred = [values - mid for values, mid in zip(numeric, centre, strict=True)]
            parts += [
                centred[i] * centred[j] for i in range(len(centred)) for j in range(i, len(centred))
            ]
        if not parts:
            return np.zeros((len(features), 0))
        return np.column_stack(parts)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """The baseline of each row of ``features`` (all columns)."""
        features = np.asarray(features, dtype=np.float64)
        design = (self._design(features) - self.mean_) / self.scale_
        return np.asarray(self.intercept_ + design @ self.coef_, dtype=np.float64)
