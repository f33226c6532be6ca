"""Offline analyses on exhaustive data: comparing optimization algorithms (``methodology``) and
search-space difficulty (``difficulty``); figures in ``plots`` (matplotlib loaded lazily)."""

from mlkaps_gpu.analysis._plots import (
    depth_sweep,
    optimum_maps,
    predicted_vs_measured,
    samples_over_time,
    speedup_figures,
)
from mlkaps_gpu.analysis._report_figures import (
    best_so_far,
    parallel_coordinates,
    parameter_importance,
    shipped_map,
)
from mlkaps_gpu.analysis.difficulty import (
    DEFAULT_PERCENTAGES,
    NEIGHBOURHOODS,
    FitnessFlowGraph,
    fitness_flow_graph,
    graph_from_table,
    neighbour_pairs,
    pagerank,
)
from mlkaps_gpu.analysis.methodology import (
    Curves,
    SpaceReference,
    best_at_budgets,
    budget_range,
    curves,
    expected_best_random_search,
    expected_fraction_random_search,
    fraction_of_optimum,
    geometric_mean_fraction,
    performance_score,
    standardised_curve,
)

__all__ = [
    "best_so_far",
    "depth_sweep",
    "parallel_coordinates",
    "parameter_importance",
    "shipped_map",
    "optimum_maps",
    "predicted_vs_measured",
    "samples_over_time",
    "speedup_figures",
    "DEFAULT_PERCENTAGES",
    "NEIGHBOURHOODS",
    "Curves",
    "FitnessFlowGraph",
    "SpaceReference",
    "best_at_budgets",
    "budget_range",
    "curves",
    "expected_best_random_search",
    "expected_fraction_random_search",
    "fitness_flow_graph",
    "fraction_of_optimum",
    "geometric_mean_fraction",
    "graph_from_table",
    "neighbour_pairs",
    "pagerank",
    "performance_score",
    "standardised_curve",
]
