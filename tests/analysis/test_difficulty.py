"""The fitness flow graph on hand-built spaces: neighbours, edges, local minima, PageRank and
the proportion of centrality."""

from __future__ import annotations

import numpy as np
import pytest

from mlkaps_gpu.analysis import fitness_flow_graph, neighbour_pairs, pagerank


def dense_pagerank(adjacency: np.ndarray, damping: float = 0.85) -> np.ndarray:
    """The Google matrix's stationary vector, by a dense eigen-decomposition."""
    n = len(adjacency)
    degree = adjacency.sum(axis=1)
    transition = np.where(degree[:, None] > 0, adjacency / np.maximum(degree, 1)[:, None], 1 / n)
    google = damping * transition + (1 - damping) / n
    values, vectors = np.linalg.eig(google.T)
    stationary = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return stationary / stationary.sum()


def test_line_with_two_basins() -> None:
    """One parameter, five values, f = [2, 1, 3, 0, 4], adjacent neighbours:
    edges 0->1, 2->1, 2->3, 4->3; minima 1 and 3 (the optimum)."""
    codes = np.arange(5)[:, None]
    values = np.array([2.0, 1.0, 3.0, 0.0, 4.0])
    graph = fitness_flow_graph(codes, values, neighbourhood="adjacent")
    expected = np.zeros((5, 5))
    for source, target in [(0, 1), (2, 1), (2, 3), (4, 3)]:
        expected[source, target] = 1
    assert np.array_equal(graph.adjacency.toarray(), expected)
    assert np.array_equal(graph.local_minima, [1, 3])
    rank = graph.pagerank()
    assert np.allclose(rank, dense_pagerank(expected), atol=1e-10)
    assert rank[1] == pytest.approx(rank[3])  # symmetric basins
    # minimum 1 has value 1, i.e. infinitely far (in %) from the optimum 0: never counted
    assert np.allclose(graph.proportion_of_centrality([0.0, 0.15]), [0.5, 0.5])


def test_hamming_grid_and_proportion_of_centrality() -> None:
    """3 x 3 grid; Hamming neighbours are the same row or the same column."""
    codes = np.indices((3, 3)).reshape(2, -1).T
    values = np.array([1.0, 5.0, 6.0, 5.0, 1.05, 7.0, 6.0, 7.0, 8.0])  # minima at (0,0), (1,1)
    graph = fitness_flow_graph(codes, values, neighbourhood="Hamming")
    first, second = neighbour_pairs(codes, "Hamming")
    assert len(first) == 9 * 4 // 2
    assert np.array_equal(graph.local_minima, [0, 4])
    assert np.allclose(graph.pagerank(), dense_pagerank(graph.adjacency.toarray()))
    rank = graph.pagerank()
    share = rank[0] / (rank[0] + rank[4])
    proportion = graph.proportion_of_centrality([0.0, 0.04, 0.05, 0.15])
    assert np.allclose(proportion, [share, share, 1.0, 1.0])
    # adjacent: only one position apart, so (0,0) and (0,2) are no longer neighbours
    first, _ = neighbour_pairs(codes, "adjacent")
    assert len(first) == 12


def test_pagerank_of_a_cycle_is_uniform() -> None:
    cycle = np.roll(np.eye(4), 1, axis=1)
    assert np.allclose(pagerank(cycle), 0.25)


def test_rejects_failures_and_duplicates() -> None:
    with pytest.raises(ValueError, match="finite"):
        fitness_flow_graph(np.arange(3)[:, None], np.array([1.0, np.nan, 2.0]))
    with pytest.raises(ValueError, match="twice"):
        fitness_flow_graph(np.zeros((2, 1)), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="neighbourhood"):
        neighbour_pairs(np.zeros((2, 1)), "Manhattan")  # type: ignore[arg-type]
