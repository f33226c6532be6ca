"""Selection of the batched NSGA-II (:mod:`._batched`), vectorised over grid points.

Populations are arrays indexed ``(points, individual, ...)``. Binary tournament picks parents on
(rank, crowding); survival keeps the best ``population`` of parents and children (2N -> N). With
one objective, rank-and-crowding survival is a sort by the objective, ties broken at random as
pymoo's, so the survivors come out sorted, their rank is their position and their crowding zero;
with several, pymoo's non-dominated sorting and crowding distance, point by point.
"""

from __future__ import annotations

import numpy as np
from pymoo.operators.survival.rank_and_crowding.metrics import get_crowding_function
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting


def survive(
    values: np.ndarray, repeated: np.ndarray, population: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices of survivors per point, with their rank and crowding (2N -> N); copies of an
    earlier individual (``repeated``) never survive twice.

    Args:
        values: objective values (all minimised), ``(points, 2N, objectives)``.
        repeated: which individuals repeat an earlier one of their point, ``(points, 2N)``.
        population: survivors per point (N).
        rng: draws the tie-breaking noise (one objective).
    """
    n_points, merged, n_objectives = values.shape
    penalised = np.where(repeated[..., None], np.inf, values)
    n = population
    if n_objectives == 1:
        # by value, ties broken at random as pymoo's: sorting by the noise, then stably by
        # the value, is the lexicographic order of (value, noise)
        by_noise = np.argsort(rng.random((n_points, merged)), axis=1)
        value = np.take_along_axis(penalised[..., 0], by_noise, axis=1)
        by_value = np.argsort(value, axis=1, kind="stable")[:, :n]
        order = np.take_along_axis(by_noise, by_value, axis=1)
        rank = np.broadcast_to(np.arange(n), (n_points, n)).astype(float)
        return order, rank, np.zeros((n_points, n))
    return survive_fronts(penalised, population)


def survive_fronts(
    penalised: np.ndarray, population: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Several objectives: pymoo's non-dominated sorting and crowding distance per point."""
    n_points, n = len(penalised), population
    survivors = np.empty((n_points, n), dtype=np.int64)
    rank = np.empty((n_points, n))
    crowding = np.empty((n_points, n))
    sorting = NonDominatedSorting()
    crowd = get_crowding_function("cd")
    for point in range(n_points):
        chosen: list[int] = []
        ranks: list[int] = []
        crowds: list[float] = []
        scores = np.nan_to_num(penalised[point], posinf=np.finfo(float).max)
        for k, front in enumerate(sorting.do(scores, n_stop_if_ranked=n)):
            distance = crowd.do(scores[front], n_remove=0)
            if len(chosen) + len(front) > n:
                keep = np.argsort(-distance, kind="stable")[: n - len(chosen)]
                front, distance = front[keep], distance[keep]
            chosen.extend(front)
            ranks.extend([k] * len(front))
            crowds.extend(distance)
            if len(chosen) >= n:
                break
        survivors[point], rank[point], crowding[point] = chosen, ranks, crowds
    return survivors, rank, crowding


def tournament(
    rank: np.ndarray, crowding: np.ndarray, rng: np.random.Generator, *, sorted_by_rank: bool
) -> np.ndarray:
    """Parent indices per point, ``(points, population)``, by binary tournament.

    ``sorted_by_rank``: the survivors are sorted by rank (one objective), so the lower
    position wins and ``rank`` and ``crowding`` are not read.
    """
    n_points, n = rank.shape
    a = rng.integers(n, size=(n_points, n))
    b = rng.integers(n, size=(n_points, n))
    if sorted_by_rank:
        # one objective: survivors are sorted, their rank is their position and their
        # crowding zero, so the lower position wins (ties: a)
        return np.minimum(a, b)
    rank_a, rank_b = np.take_along_axis(rank, a, 1), np.take_along_axis(rank, b, 1)
    crowd_a, crowd_b = np.take_along_axis(crowding, a, 1), np.take_along_axis(crowding, b, 1)
    a_wins = (rank_a < rank_b) | ((rank_a == rank_b) & (crowd_a >= crowd_b))
    return np.where(a_wins, a, b)


def gather(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``take_along_axis(table, index, axis=1)`` (rows of ``index`` pick entries of each point's
    row of ``table``), as one take of whole entries along a flattened first axis."""
    points, width = table.shape[:2]
    flat = (np.arange(points)[:, None] * width + index).ravel()
    picked = np.take(table.reshape(points * width, *table.shape[2:]), flat, axis=0)
    return picked.reshape(*index.shape, *table.shape[2:])
