"""Difficulty of an exhaustive search space: the fitness flow graph and its PageRank centrality
(after Schoonhoven et al., "Benchmarking optimization algorithms for auto-tuning GPU kernels").

The **fitness flow graph** has one node per successfully measured configuration and an edge from
each node to every *better* neighbour (strictly lower objective). Neighbourhoods:

- ``Hamming`` (default): the configurations differing in exactly one parameter, by any number of
  positions in its value list; the neighbourhood of our mutation, simulated annealing and local
  search, and Kernel Tuner's default for local search;
- ``adjacent``: those differing in exactly one parameter by one position in its value list.

Failed and constraint-violating configurations are not nodes. A **local minimum** is a node
without outgoing edge. **PageRank** (damping 0.85, a dangling node's weight spread uniformly;
scipy.sparse power iteration) measures how much of a random descent ends in each node; the
**proportion of centrality** at ``p`` is the share of the minima's total centrality held by the
minima within ``p`` of the optimum (value <= (1 + p) * optimum). The higher it is at small
``p``, the more local searches end near the optimum: the easier the space.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse

from mlkaps_gpu.executors import OK, ReplayTable

Neighbourhood = Literal["Hamming", "adjacent"]
NEIGHBOURHOODS: tuple[str, ...] = ("Hamming", "adjacent")
#: The p values of the study: 0 to 15 % in steps of 1 %.
DEFAULT_PERCENTAGES = np.arange(16) / 100.0


def neighbour_pairs(
    codes: np.ndarray, neighbourhood: Neighbourhood = "Hamming"
) -> tuple[np.ndarray, np.ndarray]:
    """Every unordered pair ``(i, j)``, ``i < j``, of neighbouring rows of integer ``codes``."""
    if neighbourhood not in NEIGHBOURHOODS:
        raise ValueError(f"unknown neighbourhood {neighbourhood!r} (allowed: {NEIGHBOURHOODS})")
    codes = np.asarray(codes, dtype=np.int64)
    n, d = codes.shape
    firsts: list[np.ndarray] = []
    seconds: list[np.ndarray] = []
    for column in range(d):
        # rows equal on every other column form a group; pairs inside a group differ here only
        others = np.delete(codes, column, axis=1)
        _, group = np.unique(others, axis=0, return_inverse=True)
        group = group.reshape(-1)
        order = np.lexsort((codes[:, column], group))
        sorted_group = group[order]
        starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
        sizes = np.diff(np.r_[starts, n])
        for size in np.unique(sizes[sizes > 1]):
            blocks = order[starts[sizes == size][:, None] + np.arange(size)]
            left, right = np.triu_indices(int(size), k=1)
            i, j = blocks[:, left].ravel(), blocks[:, right].ravel()
            if neighbourhood == "adjacent":
                # one position apart in the value list (the rows need not all be present)
                keep = np.abs(codes[i, column] - codes[j, column]) == 1
                i, j = i[keep], j[keep]
            firsts.append(np.minimum(i, j))
            seconds.append(np.maximum(i, j))
    if not firsts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def pagerank(
    adjacency: sparse.spmatrix | sparse.sparray,
    *,
    damping: float = 0.85,
    tolerance: float = 1e-12,
    max_iterations: int = 1000,
) -> np.ndarray:
    """PageRank of a directed graph (``adjacency[i, j] = 1`` for an edge i -> j), by power
    iteration; a node without outgoing edge spreads its weight uniformly. Sums to 1."""
    matrix = sparse.csr_matrix(adjacency, dtype=np.float64)
    n = matrix.shape[0]
    if n == 0:
        return np.zeros(0)
    out_degree = np.asarray(matrix.sum(axis=1)).ravel()
    dangling = out_degree == 0
    inverse = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, out_degree))
    transition_t = (sparse.diags(inverse) @ matrix).T.tocsr()
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iterations):
        spread = rank[dangling].sum() / n
        updated = damping * (transition_t @ rank + spread) + (1.0 - damping) / n
        updated /= updated.sum()
        change = np.abs(updated - rank).sum()
        rank = updated
        if change < tolerance:
            break
    return rank


@dataclass(frozen=True)
class FitnessFlowGraph:
    """A fitness flow graph (see the module docstring).

    Attributes:
        codes: integer codes of the nodes (n x parameters).
        values: objective of each node (finite, minimised).
        adjacency: sparse n x n matrix, 1 for each edge towards a better neighbour.
        neighbourhood: ``Hamming`` or ``adjacent``.
    """

    codes: np.ndarray
    values: np.ndarray
    adjacency: sparse.csr_matrix
    neighbourhood: str

    @property
    def n_nodes(self) -> int:
        """Nodes of the graph: the configurations it was built on."""
        return len(self.values)

    @property
    def n_edges(self) -> int:
        """Edges of the graph, each from a node to a better neighbour."""
        return int(self.adjacency.nnz)

    @property
    def local_minima(self) -> np.ndarray:
        """Indices of the nodes without a better neighbour."""
        return np.flatnonzero(np.diff(self.adjacency.indptr) == 0)

    @property
    def optimum(self) -> float:
        """The best (lowest) objective value of any node."""
        return float(self.values.min())

    def pagerank(self, damping: float = 0.85) -> np.ndarray:
        """PageRank of every node (see :func:`pagerank`): where a walk that moves to better
        neighbours ends up; sums to 1."""
        return pagerank(self.adjacency, damping=damping)

    def proportion_of_centrality(
        self,
        percentages: np.ndarray | Sequence[float] = DEFAULT_PERCENTAGES,
        *,
        damping: float = 0.85,
        centrality: np.ndarray | None = None,
    ) -> np.ndarray:
        """Share of the minima's PageRank held by the minima within each ``p`` (a fraction,
        0.05 for 5 %) of the optimum."""
        rank = self.pagerank(damping) if centrality is None else np.asarray(centrality)
        minima = self.local_minima
        weights = rank[minima]
        values = self.values[minima]
        optimum = self.optimum
        total = weights.sum()
        limits = optimum + np.abs(optimum) * np.asarray(percentages, dtype=np.float64)
        return np.array([weights[values <= limit].sum() / total for limit in limits])


def fitness_flow_graph(
    codes: np.ndarray, values: np.ndarray, *, neighbourhood: Neighbourhood = "Hamming"
) -> FitnessFlowGraph:
    """The fitness flow graph of configurations ``codes`` with finite objective ``values``."""
    codes = np.asarray(codes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if codes.ndim != 2 or len(codes) != len(values):
        raise ValueError("fitness_flow_graph: codes must be 2-D with one row per value")
    if not np.isfinite(values).all():
        raise ValueError("fitness_flow_graph: leave failed configurations out (finite values)")
    if len(np.unique(codes, axis=0)) != len(codes):
        raise ValueError("fitness_flow_graph: a configuration appears twice")
    first, second = neighbour_pairs(codes, neighbourhood)
    downhill = values[second] < values[first]
    uphill = values[first] < values[second]
    sources = np.concatenate([first[downhill], second[uphill]])
    targets = np.concatenate([second[downhill], first[uphill]])
    n = len(values)
    adjacency = sparse.csr_matrix(
        (np.ones(len(sources)), (sources, targets)), shape=(n, n), dtype=np.float64
    )
    return FitnessFlowGraph(codes, values, adjacency, neighbourhood)


def graph_from_table(
    table: ReplayTable, *, neighbourhood: Neighbourhood = "Hamming"
) -> FitnessFlowGraph:
    """The fitness flow graph of a replay table's successful records (codes follow the order
    of each parameter's value list)."""
    records = table.records
    ok = records[(records["status"] == OK) & np.isfinite(records[table.objective])]
    if len(ok) == 0:
        raise ValueError(f"{table.name}: no successful configuration")
    codes = np.empty((len(ok), len(table.keys)), dtype=np.int64)
    for column, key in enumerate(table.keys):
        levels = list(table.tune_params.get(key) or pd.unique(records[key]))
        codes[:, column] = pd.Categorical(ok[key], categories=_unique(levels)).codes
    if (codes < 0).any():
        raise ValueError(f"{table.name}: a value is missing from its parameter's value list")
    values = ok[table.objective].to_numpy(dtype=np.float64)
    return fitness_flow_graph(codes, values, neighbourhood=neighbourhood)


def _unique(values: Sequence[object]) -> list[object]:
    return list(dict.fromkeys(values))
