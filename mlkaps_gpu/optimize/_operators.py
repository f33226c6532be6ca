"""pymoo's SBX crossover and polynomial mutation on design codes, without their bookkeeping.

The batched NSGA-II applies them to the matings of every grid point at once. pymoo's functions
(``cross_sbx``, ``mut_pm``) tile the bounds and the parameters to full matrices on every call,
which cost more than the operators themselves at this size. These functions keep pymoo's
formulas, operation for operation, and draw the same random numbers in the same order, so the
children are pymoo's to the bit (``tests/optimize/test_operators.py`` checks it), for bounds
``[0, upper]`` and constant parameters.
"""

from __future__ import annotations

import numpy as np

#: pymoo's setting for integer codes, as in its examples.
ETA = 3.0
#: SBX: probability that a variable of a mating is crossed, and that children swap.
CROSS_PROBABILITY = 0.5
SWAP_PROBABILITY = 0.5
#: SBX: parents closer than this in a variable are not crossed there.
_TOO_CLOSE = 1.0e-14


def simulated_binary_crossover(
    parents: np.ndarray, upper: np.ndarray, rng: np.random.Generator, *, eta: float = ETA
) -> np.ndarray:
    """Two children per mating, ``(2, matings, variables)``, from parents of the same shape.

    pymoo's ``SBX(prob_var=0.5, eta=eta)`` with ``prob_exch=1`` on bounds ``[0, upper]``.
    """
    parents = np.asarray(parents, dtype=np.float64)
    n_matings, n_variables = parents.shape[1:]
    rng.random((n_matings, 1))  # pymoo's exchange draw; with prob_exch = 1 it changes nothing
    cross = rng.random((n_matings, n_variables)) < CROSS_PROBABILITY
    cross &= np.abs(parents[0] - parents[1]) > _TOO_CLOSE
    cross[:, upper == 0] = False
    where = np.flatnonzero(cross)  # row-major: pymoo's boolean-mask order
    first, second = parents[0].ravel()[where], parents[1].ravel()[where]
    smaller = first < second
    low = np.where(smaller, first, second)
    high = np.where(smaller, second, first)
    bound_high = upper[where % n_variables]
    rand = rng.random(len(where))
    delta = high - low
    betaq = _betaq(1.0 + (2.0 * (low - 0.0) / delta), eta, rand)
    child_low = 0.5 * ((low + high) - betaq * delta)
    betaq = _betaq(1.0 + (2.0 * (bound_high - high) / delta), eta, rand)
    child_high = 0.5 * ((low + high) + betaq * delta)
    child_first = np.where(smaller, child_low, child_high)
    child_second = np.where(smaller, child_high, child_low)
    swap = np.bitwise_xor(rng.random(len(where)) < SWAP_PROBABILITY, first > second)
    children = parents.copy()
    # pymoo clamps both children whole; the values not crossed are parents', inside already
    children[0].ravel()[where] = _clamp(np.where(swap, child_second, child_first), bound_high)
    children[1].ravel()[where] = _clamp(np.where(swap, child_first, child_second), bound_high)
    return children


def _betaq(beta: np.ndarray, eta: float, rand: np.ndarray) -> np.ndarray:
    """pymoo's ``calc_betaq`` (both branches computed, one kept: no masked copies)."""
    alpha = 2.0 - np.power(beta, -(eta + 1.0))
    inside = rand <= (1.0 / alpha)
    outside = rand > (1.0 / alpha)
    with np.errstate(invalid="ignore", divide="ignore"):
        near = np.power(rand * alpha, 1.0 / (eta + 1.0))
        far = np.power(1.0 / (2.0 - rand * alpha), 1.0 / (eta + 1.0))
    return np.where(inside, near, np.where(outside, far, 0.0))


def polynomial_mutation(
    values: np.ndarray, upper: np.ndarray, rng: np.random.Generator, *, eta: float = ETA
) -> np.ndarray:
    """pymoo's ``PM(eta=eta, prob=1.0)`` on rows of variables bounded by ``[0, upper]``: each
    variable mutates with probability ``min(0.5, 1 / variables)``."""
    values = np.asarray(values, dtype=np.float64)
    n_rows, n_variables = values.shape
    mutate = rng.random((n_rows, n_variables)) < min(0.5, 1 / n_variables)
    mutate[:, upper == 0] = False
    where = np.flatnonzero(mutate)
    high = upper[where % n_variables]
    low = np.zeros(len(where))
    x = values.ravel()[where]
    rand = rng.random(x.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        # pymoo's two branches, both computed, one kept
        delta1 = (x - low) / (high - low)
        value = 2.0 * rand + (1.0 - 2.0 * rand) * (np.power(1.0 - delta1, (eta + 1.0)))
        below = np.power(value, 1.0 / (eta + 1.0)) - 1.0
        delta2 = (high - x) / (high - low)
        value = 2.0 * (1.0 - rand) + 2.0 * (rand - 0.5) * (np.power(1.0 - delta2, (eta + 1.0)))
        above = 1.0 - (np.power(value, 1.0 / (eta + 1.0)))
    deltaq = np.where(rand <= 0.5, below, above)
    mutated = x + deltaq * (high - low)
    mutated = np.where(mutated < low, low, mutated)
    out = values.copy()
    # pymoo's last clamp of the whole array leaves the values not mutated (inside) alone
    out.ravel()[where] = _clamp(mutated, high)
    return out


def _clamp(values: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Values outside ``[0, upper]`` set to the bound (as pymoo's clamp: comparisons, so an
    in-range value keeps its exact bits); ``upper`` has one bound per value."""
    values = np.where(values < 0, 0.0, values)
    return np.where(values > upper, upper, values)
