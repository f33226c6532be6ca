"""Which configurations fail: a small LightGBM classifier of a campaign's failed rows.

Model-based sampling that learns from successful measurements only extends their times into a
region whose configurations fail (a resource limit beside the fastest tiles, say) and keeps
measuring it. Constrained Bayesian optimisation models feasibility apart from the objective
(Gelbart et al., 2014): here a classifier of failed against successful rows, whose probability
of failure screens the candidates of exploitation (``Exploiter.propose``). The objective's model
is left as it was: imputing failures into it as the worst measured time was tried and made the
regions beside failures look slow (``docs/decisions/0011-failures-screen-candidates.md``).
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np

#: Fewest failed and fewest successful rows a classifier is fitted on.
MIN_ROWS_PER_CLASS = 2
#: A configuration more likely than this to fail is treated as failing where it was never run:
#: exploitation does not propose it, and the decisions rule it out (decision 0041).
FAILURE_LIMIT = 0.5


class FailureClassifier:
    """Probability that a configuration fails, from the features of measured rows.

    Args:
        seed: LightGBM's seed.
    """

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self._model = lgb.LGBMClassifier(
            n_estimators=50,
            learning_rate=0.1,
            num_leaves=8,
            min_child_samples=2,
            random_state=seed,
            n_jobs=1,
            verbose=-1,
        )

    @classmethod
    def fit_if_informative(
        cls, features: np.ndarray, failed: np.ndarray, *, seed: int = 0
    ) -> FailureClassifier | None:
        """A fitted classifier, or None while there are fewer than ``MIN_ROWS_PER_CLASS`` failed
        or successful rows (nothing to tell apart)."""
        failed = np.asarray(failed, dtype=bool)
        if min(int(failed.sum()), int((~failed).sum())) < MIN_ROWS_PER_CLASS:
            return None
        classifier = cls(seed=seed)
        classifier._model.fit(np.asarray(features, dtype=np.float64), failed.astype(np.int64))
        return classifier

    def probability(self, features: np.ndarray) -> np.ndarray:
        """Probability of failure of each row of ``features``."""
        if len(features) == 0:
            return np.zeros(0)
        both = np.asarray(self._model.predict_proba(np.asarray(features, dtype=np.float64)))
        return both[:, 1]

    def likely(self, features: np.ndarray) -> np.ndarray:
        """Whether each row of ``features`` is more likely than :data:`FAILURE_LIMIT` to
        fail."""
        return self.probability(features) > FAILURE_LIMIT
