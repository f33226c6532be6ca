"""Gaussian-process core of Bayesian optimization over a finite candidate set.

Reusable outside the strategies (a Bayesian *sampler* needs the same): features are points of
the unit cube (normalised codes), targets are values to minimise, and
:func:`propose` returns the candidates to measure next. Only successful measurements may be given
as targets; failed or invalid ones are simply left out (never replaced by made-up values).

The model is scikit-learn's ``GaussianProcessRegressor`` with a ``Constant * Matern + White``
kernel whose hyperparameters it fits; :class:`CandidateGaussianProcess` then keeps the posterior
over the candidate set and adds observations one at a time with the hyperparameters held (a
rank-one Cholesky update, O(n * candidates) per observation instead of a refit).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import ndtr
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Kernel, Matern, WhiteKernel
from threadpoolctl import threadpool_limits

Acquisition = Literal["ei", "pi", "lcb"]
ACQUISITIONS: tuple[str, ...] = ("ei", "pi", "lcb")
#: Added to the diagonal for numerical stability (targets are standardised).
_JITTER = 1e-8
#: Most observations the hyperparameters are fitted on (a random subset beyond).
_MAX_FIT_POINTS = 150


def default_kernel(nu: float = 2.5) -> Kernel:
    """``Constant * Matern(nu) + White`` with bounds suited to standardised targets on [0, 1]."""
    return ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
        length_scale=0.3, length_scale_bounds=(1e-2, 1e1), nu=nu
    ) + WhiteKernel(1e-4, (1e-8, 1.0))


class CandidateGaussianProcess:
    """GP posterior (mean and standard deviation of the latent function) over fixed candidates.

    Args:
        candidates: points of the unit cube (n_candidates x d) the posterior is kept on.
        nu: smoothness of the Matern kernel.
        seed: seed of scikit-learn's hyperparameter optimizer and of the fitting subset.

    Attributes (after :meth:`fit`):
        mean_: posterior mean of each candidate, in target units.
        std_: posterior standard deviation of each candidate, in target units.
        kernel_: the fitted kernel.
        offset_, scale_: the standardisation of the targets (mean and standard deviation of
            the targets given to :meth:`fit`).
    """

    def __init__(self, candidates: np.ndarray, *, nu: float = 2.5, seed: int = 0) -> None:
        self.candidates = np.asarray(candidates, dtype=np.float64)
        self.nu = nu
        self.seed = seed

    # --------------------------------------------------------------------------- fitting
    def fit(self, points: np.ndarray, targets: np.ndarray) -> CandidateGaussianProcess:
        """Fit the hyperparameters on (a subset of) the observations and compute the posterior
        of every candidate from all of them."""
        points = np.asarray(points, dtype=np.float64)
        targets = np.asarray(targets, dtype=np.float64)
        if len(points) < 1 or not np.isfinite(targets).all():
            raise ValueError("fit: needs at least one observation, all finite")
        self.offset_ = float(targets.mean())
        self.scale_ = float(targets.std()) or 1.0
        standard = (targets - self.offset_) / self.scale_
        subset = np.arange(len(points))
        if len(points) > _MAX_FIT_POINTS:
            subset = np.random.default_rng(self.seed).choice(len(points), _MAX_FIT_POINTS, False)
        model = GaussianProcessRegressor(
            default_kernel(self.nu), alpha=_JITTER, random_state=self.seed
        )
        with warnings.catch_warnings():
            # hyperparameters at their bounds are expected on rugged tuning landscapes
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(points[subset], standard[subset])
        self.kernel_ = model.kernel_
        self._signal = self.kernel_.k1
        self._noise = float(self.kernel_.k2.noise_level) + _JITTER
        self._prior = float(self._signal.diag(self.candidates[:1])[0])
        self._set_posterior(points, standard)
        return self

    def _set_posterior(self, points: np.ndarray, standard: np.ndarray) -> None:
        n = len(points)
        capacity = max(16, 2 * n)
        gram = self._signal(points) + self._noise * np.eye(n)
        lower = np.linalg.cholesky(gram)
        self._lower = np.zeros((capacity, capacity))
        self._lower[:n, :n] = lower
        self._cross = np.zeros((capacity, len(self.candidates)))
        self._cross[:n] = solve_triangular(lower, self._signal(points, self.candidates), lower=True)
        self._whitened = np.zeros(capacity)
        self._whitened[:n] = solve_triangular(lower, standard, lower=True)
        self._points = np.zeros((capacity, points.shape[1]))
        self._points[:n] = points
        self._n = n
        self._mean = self._cross[:n].T @ self._whitened[:n]
        self._variance = self._prior - (self._cross[:n] ** 2).sum(axis=0)

    def add(self, point: np.ndarray, target: float) -> None:
        """Condition on one more observation, the hyperparameters held."""
        point = np.asarray(point, dtype=np.float64).reshape(1, -1)
        n = self._n
        if n == len(self._whitened):
            self._grow()
        across = self._signal(self._points[:n], point)[:, 0]
        row = solve_triangular(self._lower[:n, :n], across, lower=True)
        pivot = float(self._signal.diag(point)[0]) + self._noise - float(row @ row)
        pivot = np.sqrt(max(pivot, self._noise * 1e-3))
        new_cross = (self._signal(point, self.candidates)[0] - row @ self._cross[:n]) / pivot
        standard = (float(target) - self.offset_) / self.scale_
        new_whitened = (standard - float(row @ self._whitened[:n])) / pivot
        self._lower[n, :n] = row
        self._lower[n, n] = pivot
        self._cross[n] = new_cross
        self._whitened[n] = new_whitened
        self._points[n] = point[0]
        self._n = n + 1
        self._mean += new_cross * new_whitened
        self._variance -= new_cross**2

    def _grow(self) -> None:
        n = self._n
        capacity = 2 * n
        lower = np.zeros((capacity, capacity))
        lower[:n, :n] = self._lower[:n, :n]
        cross = np.zeros((capacity, len(self.candidates)))
        cross[:n] = self._cross[:n]
        whitened = np.zeros(capacity)
        whitened[:n] = self._whitened[:n]
        points = np.zeros((capacity, self._points.shape[1]))
        points[:n] = self._points[:n]
        self._lower, self._cross, self._whitened, self._points = lower, cross, whitened, points

    # ------------------------------------------------------------------------- posterior
    @property
    def mean_(self) -> np.ndarray:
        """Posterior mean at every candidate, in the target's units."""
        return self.offset_ + self.scale_ * self._mean

    @property
    def std_(self) -> np.ndarray:
        """Posterior standard deviation at every candidate, in the target's units."""
        return self.scale_ * np.sqrt(np.maximum(self._variance, 0.0))

    def predict(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at arbitrary points (for checks)."""
        n = self._n
        points = np.asarray(points, dtype=np.float64)
        gram_lower = self._lower[:n, :n]
        cross = solve_triangular(gram_lower, self._signal(self._points[:n], points), lower=True)
        mean = cross.T @ self._whitened[:n]
        variance = self._signal.diag(points) - (cross**2).sum(axis=0)
        return (
            self.offset_ + self.scale_ * mean,
            self.scale_ * np.sqrt(np.maximum(variance, 0.0)),
        )


# ------------------------------------------------------------------------------ acquisition
def acquisition_values(
    kind: Acquisition,
    mean: np.ndarray,
    std: np.ndarray,
    best: float,
    *,
    exploration: float = 0.01,
    kappa: float = 2.0,
) -> np.ndarray:
    """Acquisition of each candidate (higher is better) for minimisation.

    ``ei``: expected improvement over ``best``; ``pi``: probability of improving ``best`` by
    ``exploration``; ``lcb``: the negated lower confidence bound ``-(mean - kappa std)``.
    ``exploration`` is in units of ``std`` 's scale (pass standardised values).
    """
    if kind == "lcb":
        return -(mean - kappa * std)
    safe = np.maximum(std, 1e-12)
    gain = best - mean - exploration
    z = gain / safe
    if kind == "pi":
        return ndtr(z)
    if kind == "ei":
        density = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
        return np.where(std > 1e-12, gain * ndtr(z) + safe * density, np.maximum(gain, 0.0))
    raise ValueError(f"unknown acquisition {kind!r} (allowed: {ACQUISITIONS})")


def standardised_acquisition(
    kind: Acquisition, model: CandidateGaussianProcess, best: float, **options: float
) -> np.ndarray:
    """Acquisition over the model's candidates computed in standardised target units."""
    scale = model.scale_
    mean = (model.mean_ - model.offset_) / scale
    std = model.std_ / scale
    return acquisition_values(kind, mean, std, (best - model.offset_) / scale, **options)


def propose(
    points: np.ndarray,
    targets: np.ndarray,
    candidates: np.ndarray,
    k: int = 1,
    *,
    acquisition: Acquisition | Sequence[Acquisition] = "ei",
    exclude: np.ndarray | None = None,
    seed: int = 0,
    nu: float = 2.5,
) -> np.ndarray:
    """Indices of the ``k`` candidates to measure next.

    Fits the GP on ``(points, targets)`` (successful measurements only), then picks ``k``
    candidates one at a time, each time conditioning on the previous pick at its posterior mean
    (the "kriging believer"), so a batch spreads out. A sequence of acquisitions is used in
    turn (``("ei", "pi", "lcb")`` is the round-robin "multi" of Kernel Tuner).

    Args:
        points: measured points of the unit cube (n x d).
        targets: their values, to minimise.
        candidates: the candidate points (valid, not yet measured ones).
        k: how many to propose (at most the number of candidates).
        acquisition: ``ei``, ``pi``, ``lcb`` or a sequence of them.
        exclude: boolean mask of candidates never to propose.
        seed: seed of the hyperparameter fit.
        nu: Matern smoothness.
    """
    candidates = np.asarray(candidates, dtype=np.float64)
    available = np.ones(len(candidates), dtype=bool) if exclude is None else ~np.asarray(exclude)
    k = int(min(k, available.sum()))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kinds = [acquisition] if isinstance(acquisition, str) else list(acquisition)
    chosen: list[int] = []
    with threadpool_limits(limits=1, user_api="blas"):
        model = CandidateGaussianProcess(candidates, nu=nu, seed=seed).fit(points, targets)
        best = float(np.min(targets))
        for step in range(k):
            values = standardised_acquisition(kinds[step % len(kinds)], model, best)
            values = np.where(available, values, -np.inf)
            pick = int(np.argmax(values))
            chosen.append(pick)
            available[pick] = False
            model.add(candidates[pick], float(model.mean_[pick]))
    return np.array(chosen, dtype=np.int64)
