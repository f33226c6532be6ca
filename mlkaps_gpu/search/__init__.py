"""Per-input search strategies: optimize the design of ONE input point against an executor (direct
tuning) or a surrogate, within a budget of evaluations.

    from mlkaps_gpu.search import STRATEGIES, ExecutorObjective
    objective = ExecutorObjective(executor, space, {"n": 1024})
    result = STRATEGIES["genetic_algorithm"]().run(objective, space, {"n": 1024}, 200, rng)
    result.best, result.best_value, result.best_so_far()
"""

from mlkaps_gpu.search._base import Result, Strategy
from mlkaps_gpu.search._bayesian import (
    BO_ACQUISITIONS,
    BayesianOptimization,
)
from mlkaps_gpu.search._differential import DE_METHODS, DifferentialEvolution
from mlkaps_gpu.search._dual_annealing import DualAnnealing
from mlkaps_gpu.search._embedding import Embedding
from mlkaps_gpu.search._firefly import Firefly
from mlkaps_gpu.search._genetic import CROSSOVERS, GeneticAlgorithm
from mlkaps_gpu.search._local_search import IteratedLocalSearch
from mlkaps_gpu.search._objectives import (
    ExecutorObjective,
    Objective,
    SurrogateObjective,
    TabulatedObjective,
)
from mlkaps_gpu.search._particle_swarm import ParticleSwarm
from mlkaps_gpu.search._problem import FAILED, SearchProblem, StopSearch
from mlkaps_gpu.search._proposal import propose_rows, unit_features
from mlkaps_gpu.search._random_search import RandomSearch
from mlkaps_gpu.search._registry import STRATEGIES, StrategyFactory, make_strategy
from mlkaps_gpu.search._simulated_annealing import SimulatedAnnealing

__all__ = [
    "BO_ACQUISITIONS",
    "CROSSOVERS",
    "DE_METHODS",
    "FAILED",
    "STRATEGIES",
    "BayesianOptimization",
    "DifferentialEvolution",
    "DualAnnealing",
    "Embedding",
    "ExecutorObjective",
    "Firefly",
    "GeneticAlgorithm",
    "IteratedLocalSearch",
    "Objective",
    "ParticleSwarm",
    "RandomSearch",
    "Result",
    "SearchProblem",
    "SimulatedAnnealing",
    "StopSearch",
    "Strategy",
    "StrategyFactory",
    "SurrogateObjective",
    "TabulatedObjective",
    "make_strategy",
    "propose_rows",
    "unit_features",
]
