"""The registry of strategies: name -> factory (keyword arguments are hyperparameters)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from mlkaps_gpu.search._base import Strategy
from mlkaps_gpu.search._bayesian import BayesianOptimization
from mlkaps_gpu.search._differential import DifferentialEvolution
from mlkaps_gpu.search._dual_annealing import DualAnnealing
from mlkaps_gpu.search._firefly import Firefly
from mlkaps_gpu.search._genetic import GeneticAlgorithm
from mlkaps_gpu.search._local_search import IteratedLocalSearch
from mlkaps_gpu.search._particle_swarm import ParticleSwarm
from mlkaps_gpu.search._random_search import RandomSearch
from mlkaps_gpu.search._simulated_annealing import SimulatedAnnealing

StrategyFactory = Callable[..., Strategy]

#: Every strategy by name. ``*_unaware`` are the constraint-unaware forms of the evolutionary
#: ones (static penalty, no repair), for comparison.
STRATEGIES: dict[str, StrategyFactory] = {
    "random_search": RandomSearch,
    "genetic_algorithm": GeneticAlgorithm,
    "genetic_algorithm_unaware": partial(GeneticAlgorithm, constraint_aware=False),
    "differential_evolution": DifferentialEvolution,
    "differential_evolution_unaware": partial(DifferentialEvolution, constraint_aware=False),
    "particle_swarm": ParticleSwarm,
    "particle_swarm_unaware": partial(ParticleSwarm, constraint_aware=False),
    "firefly": Firefly,
    "firefly_unaware": partial(Firefly, constraint_aware=False),
    "dual_annealing": DualAnnealing,
    "simulated_annealing": SimulatedAnnealing,
    "iterated_local_search": IteratedLocalSearch,
    "bo_ei": partial(BayesianOptimization, acquisition="ei"),
    "bo_pi": partial(BayesianOptimization, acquisition="pi"),
    "bo_lcb": partial(BayesianOptimization, acquisition="lcb"),
    "bo_multi": partial(BayesianOptimization, acquisition="multi"),
    "bo_advanced_multi": partial(BayesianOptimization, acquisition="advanced_multi"),
}


def make_strategy(name: str, **hyperparameters: object) -> Strategy:
    """The strategy registered as ``name``, built with ``hyperparameters``."""
    factory = STRATEGIES.get(name)
    if factory is None:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
    return factory(**hyperparameters)
